//! Workbooks (`.xlsx`, `.xlsm`, `.xls`, `.ods`) through calamine: the sheet list, one sheet
//! (or a range of it) as typed rows under a detected header, merged cells filled from their
//! top-left value, blank rows skipped and counted, and a summary of what is shown and what is
//! left. `.xlsx` sheets are streamed cell by cell, so `nrows` on a million-row sheet stops
//! after the rows asked for; `.xls` and `.ods` sheets are loaded whole by calamine (their
//! files are bounded by the reader's size limit).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use calamine::{Data, Dimensions, Ods, Reader, Xls, Xlsx};
use serde_json::{Value, json};

mod cells;

#[cfg(test)]
use self::cells::col_name;
pub(crate) use self::cells::parse_range;
use self::cells::{cell_of_data, cell_of_ref, cell_ref};
use crate::BuiltinError;
use crate::table::{self, Cell, TableBuilder};

/// How to read one workbook.
#[derive(Debug, Clone)]
pub(crate) struct WorkbookOptions {
    pub(crate) sheet: Option<String>,
    pub(crate) range: Option<String>,
    pub(crate) nrows: Option<usize>,
    /// Rows kept when `nrows` is not given.
    pub(crate) max_rows: usize,
    pub(crate) header: Option<bool>,
    /// Cells read at most; past it the counts are partial.
    pub(crate) max_cells: u64,
}

/// The kinds of workbook, by content (the extension only separates `.ods` from `.xlsx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Xlsx,
    Xls,
    Ods,
}

/// Excel's column limit (XFD).
const MAX_COLUMNS: u32 = 16_384;

const CFB_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

fn parse_err(reference: &str, message: impl Into<String>) -> BuiltinError {
    BuiltinError::Parse {
        path: reference.to_owned(),
        format: "workbook",
        message: message.into(),
    }
}

fn kind_of(path: &Path, name: &Path, reference: &str) -> Result<Kind, BuiltinError> {
    let mut head = [0u8; 8];
    let mut file = File::open(path).map_err(|source| BuiltinError::Io {
        path: reference.to_owned(),
        source,
    })?;
    let mut n = 0;
    while n < head.len() {
        match file.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(source) => {
                return Err(BuiltinError::Io {
                    path: reference.to_owned(),
                    source,
                });
            }
        }
    }
    let ext = name
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if n == 0 {
        return Err(parse_err(
            reference,
            "the file is empty (0 bytes), not a workbook",
        ));
    }
    if head[..n].starts_with(b"PK\x03\x04") || head[..n].starts_with(b"PK\x05\x06") {
        return Ok(if ext == "ods" { Kind::Ods } else { Kind::Xlsx });
    }
    if n == 8 && head == CFB_MAGIC {
        // An encrypted .xlsx is an OLE container too; calamine's xlsx reader names it.
        return Ok(if matches!(ext.as_str(), "xlsx" | "xlsm") {
            Kind::Xlsx
        } else {
            Kind::Xls
        });
    }
    let shown: Vec<String> = head[..n].iter().map(|b| format!("{b:02X}")).collect();
    Err(parse_err(
        reference,
        format!(
            "not a workbook: it starts with bytes {} (neither a zip nor an OLE container); if it \
             is text, read it with format \"csv\" or \"text\"",
            shown.join(" ")
        ),
    ))
}

fn calamine_err(reference: &str, err: &dyn std::fmt::Display, kind: Kind) -> BuiltinError {
    let text = err.to_string();
    let message = if text.contains("password protected") {
        "the workbook is password-protected (encrypted); save a copy without a password and \
         read that"
            .to_owned()
    } else if kind != Kind::Xls && (text.contains("File not found") || text.contains("Zip")) {
        format!(
            "a zip archive but not a readable {} workbook ({text}); is it another file renamed?",
            if kind == Kind::Ods {
                "OpenDocument"
            } else {
                "Excel"
            }
        )
    } else {
        text
    };
    parse_err(reference, message)
}

/// Reads `path` (shown to the model as `reference`); the extension of `name`, the file's own
/// name, tells `.ods` from `.xlsx` (the local path may have none).
pub(crate) fn read(
    path: &Path,
    name: &Path,
    reference: &str,
    opts: &WorkbookOptions,
) -> Result<Value, BuiltinError> {
    let kind = kind_of(path, name, reference)?;
    let open = || {
        File::open(path)
            .map(BufReader::new)
            .map_err(|source| BuiltinError::Io {
                path: reference.to_owned(),
                source,
            })
    };
    let range = opts
        .range
        .as_deref()
        .map(|r| parse_range(r).ok_or_else(|| bad_range(r)))
        .transpose()?;
    match kind {
        Kind::Xlsx => {
            let mut book: Xlsx<_> =
                Xlsx::new(open()?).map_err(|e| calamine_err(reference, &e, kind))?;
            let names = book.sheet_names();
            let name = pick_sheet(&names, opts.sheet.as_deref())?;
            let merged = book
                .merge_cells_by_sheet_name(&name)
                .map_err(|e| calamine_err(reference, &e, kind))?;
            let mut cells = book
                .worksheet_cells_reader(&name)
                .map_err(|e| calamine_err(reference, &e, kind))?;
            let dims = cells.dimensions();
            let mut walker = Walker::new(&names, &name, dims, range, merged, opts);
            while let Some(cell) = cells
                .next_cell()
                .map_err(|e| calamine_err(reference, &e, kind))?
            {
                let (row, col) = cell.get_position();
                if !walker.feed(row, col, cell_of_ref(cell.get_value())) {
                    break;
                }
            }
            Ok(walker.finish(reference, "xlsx"))
        }
        Kind::Xls => {
            let mut book: Xls<_> =
                Xls::new(open()?).map_err(|e| calamine_err(reference, &e, kind))?;
            let names = book.sheet_names();
            let name = pick_sheet(&names, opts.sheet.as_deref())?;
            let merged = book
                .merge_cells_by_sheet_name(&name)
                .map_err(|e| calamine_err(reference, &e, kind))?;
            let data = book
                .worksheet_range(&name)
                .map_err(|e| calamine_err(reference, &e, kind))?;
            Ok(walk_range(&names, &name, &data, range, merged, opts).finish(reference, "xls"))
        }
        Kind::Ods => {
            let mut book: Ods<_> =
                Ods::new(open()?).map_err(|e| calamine_err(reference, &e, kind))?;
            let names = book.sheet_names();
            let name = pick_sheet(&names, opts.sheet.as_deref())?;
            let data = book
                .worksheet_range(&name)
                .map_err(|e| calamine_err(reference, &e, kind))?;
            Ok(walk_range(&names, &name, &data, range, Vec::new(), opts).finish(reference, "ods"))
        }
    }
}

/// The text of a title row: one distinct value in a row (a merged title fills several cells
/// with it) above a row with at least two values.
fn title_of(first: &[Cell], next: &[Cell]) -> Option<String> {
    let values: Vec<&Cell> = first.iter().filter(|c| !matches!(c, Cell::Null)).collect();
    let Cell::Text(text) = values.first()? else {
        return None;
    };
    let one_value = values
        .iter()
        .all(|c| matches!(c, Cell::Text(t) if t == text));
    let next_values = next.iter().filter(|c| !matches!(c, Cell::Null)).count();
    (one_value && next_values >= 2).then(|| text.clone())
}

fn walk_range<'a>(
    names: &'a [String],
    name: &str,
    data: &calamine::Range<Data>,
    range: Option<Dimensions>,
    merged: Vec<Dimensions>,
    opts: &'a WorkbookOptions,
) -> Walker<'a> {
    let dims = match (data.start(), data.end()) {
        (Some(start), Some(end)) => Dimensions { start, end },
        _ => Dimensions {
            start: (0, 0),
            end: (0, 0),
        },
    };
    let mut walker = Walker::new(names, name, dims, range, merged, opts);
    let (r0, c0) = data.start().unwrap_or((0, 0));
    for (r, c, value) in data.used_cells() {
        #[allow(clippy::cast_possible_truncation)]
        let (row, col) = (r0 + r as u32, c0 + c as u32);
        if !walker.feed(row, col, cell_of_data(value)) {
            break;
        }
    }
    walker
}

fn bad_range(r: &str) -> BuiltinError {
    BuiltinError::InvalidArguments {
        tool: crate::file_reader::NAME,
        message: format!("range `{r}` is not a cell range like \"A1:D20\" or \"B3\""),
    }
}

/// The sheet named `wanted` (case-insensitive), or the n-th (1-based) when `wanted` is a
/// number no sheet is named; the first sheet when `None`.
fn pick_sheet(names: &[String], wanted: Option<&str>) -> Result<String, BuiltinError> {
    let Some(wanted) = wanted else {
        return names
            .first()
            .cloned()
            .ok_or_else(|| BuiltinError::InvalidArguments {
                tool: crate::file_reader::NAME,
                message: "the workbook has no sheets".into(),
            });
    };
    if let Some(n) = names.iter().find(|n| n.eq_ignore_ascii_case(wanted.trim())) {
        return Ok(n.clone());
    }
    if let Ok(i) = wanted.trim().parse::<usize>()
        && let Some(n) = i.checked_sub(1).and_then(|i| names.get(i))
    {
        return Ok(n.clone());
    }
    Err(BuiltinError::InvalidArguments {
        tool: crate::file_reader::NAME,
        message: format!(
            "sheet `{wanted}` not found; the sheets are: {}",
            names.join(", ")
        ),
    })
}

/// Assembles rows from cells given in row-major order.
struct Walker<'a> {
    names: &'a [String],
    sheet: String,
    /// The sheet's size as declared by the file (a hint) or found by calamine.
    dims: Dimensions,
    declared: bool,
    /// Columns seen so far in the area (rows grow to it).
    width: usize,
    /// The area read: the requested range clipped to the sheet, or the sheet's used area.
    area: Dimensions,
    merged: Vec<Dimensions>,
    merged_values: Vec<Option<Cell>>,
    opts: &'a WorkbookOptions,
    row: Option<u32>,
    current: Vec<Cell>,
    /// Rows before the header decision: (row index, cells).
    pending: Vec<(u32, Vec<Cell>)>,
    table: Option<TableBuilder>,
    header_row: Option<u32>,
    /// A title row above the table (one value across a row, often merged), not data.
    title: Option<(u32, String)>,
    first_shown: Option<u32>,
    last_shown: Option<u32>,
    last_data_row: Option<u32>,
    blank_rows: u64,
    cells_read: u64,
    /// Stopped early: `nrows` reached with more data after, or the cell budget spent.
    more: bool,
    budget_hit: bool,
    stopped_at: Option<u32>,
}

impl<'a> Walker<'a> {
    fn new(
        names: &'a [String],
        sheet: &str,
        dims: Dimensions,
        range: Option<Dimensions>,
        merged: Vec<Dimensions>,
        opts: &'a WorkbookOptions,
    ) -> Self {
        // The declared size is a hint (writers such as openpyxl's write-only mode declare none,
        // which reads as A1): the area read is the requested range, or the whole sheet.
        let declared = dims.end != (0, 0);
        let area = match range {
            Some(r) => Dimensions {
                start: r.start,
                end: (
                    r.end.0,
                    r.end.1.min(r.start.1.saturating_add(MAX_COLUMNS - 1)),
                ),
            },
            None => Dimensions {
                start: (0, 0),
                end: (u32::MAX, MAX_COLUMNS - 1),
            },
        };
        let merged: Vec<Dimensions> = merged
            .into_iter()
            .filter(|m| {
                m.end.0 >= area.start.0
                    && m.start.0 <= area.end.0
                    && m.end.1 >= area.start.1
                    && m.start.1 <= area.end.1
            })
            .collect();
        let merged_values = vec![None; merged.len()];
        Self {
            names,
            sheet: sheet.to_owned(),
            dims,
            declared,
            area,
            width: 0,
            merged,
            merged_values,
            opts,
            row: None,
            current: Vec::new(),
            pending: Vec::new(),
            table: None,
            header_row: None,
            title: None,
            first_shown: None,
            last_shown: None,
            last_data_row: None,
            blank_rows: 0,
            cells_read: 0,
            more: false,
            budget_hit: false,
            stopped_at: None,
        }
    }

    fn width(&self) -> usize {
        self.width.max(1)
    }

    /// Takes one cell; `false` when reading can stop.
    fn feed(&mut self, row: u32, col: u32, cell: Cell) -> bool {
        self.cells_read += 1;
        if self.cells_read > self.opts.max_cells {
            self.budget_hit = true;
            self.more = true;
            self.stopped_at = Some(row);
            return false;
        }
        for (i, m) in self.merged.iter().enumerate() {
            if m.start == (row, col) {
                self.merged_values[i] = Some(cell.clone());
            }
        }
        if row < self.area.start.0 || col < self.area.start.1 || col > self.area.end.1 {
            return true;
        }
        if row > self.area.end.0 {
            self.flush_row();
            return false;
        }
        if self.row != Some(row) {
            if !self.flush_row() {
                return false;
            }
            self.row = Some(row);
            self.current = vec![Cell::Null; self.width];
        }
        let i = (col - self.area.start.1) as usize;
        if matches!(cell, Cell::Null) {
            return true;
        }
        if i >= self.current.len() {
            self.current.resize(i + 1, Cell::Null);
        }
        self.width = self.width.max(i + 1);
        self.current[i] = cell;
        true
    }

    /// Ends the current row; `false` when reading can stop.
    fn flush_row(&mut self) -> bool {
        let Some(row) = self.row.take() else {
            return true;
        };
        let mut cells = std::mem::take(&mut self.current);
        for (m, value) in self.merged.iter().zip(&self.merged_values) {
            if row < m.start.0 || row > m.end.0 {
                continue;
            }
            let Some(value) = value else { continue };
            for col in m.start.1..=m.end.1.min(self.area.end.1) {
                if col < self.area.start.1 {
                    continue;
                }
                let i = (col - self.area.start.1) as usize;
                if i >= cells.len() {
                    cells.resize(i + 1, Cell::Null);
                    self.width = self.width.max(i + 1);
                }
                if matches!(cells[i], Cell::Null) {
                    cells[i] = value.clone();
                }
            }
        }
        self.take_row(row, cells)
    }

    fn take_row(&mut self, row: u32, cells: Vec<Cell>) -> bool {
        if TableBuilder::is_blank(&cells) {
            return true;
        }
        if let Some(last) = self.last_data_row {
            self.blank_rows += u64::from(row.saturating_sub(last + 1));
        }
        self.last_data_row = Some(row);
        if self.table.is_none() {
            self.pending.push((row, cells));
            if self.pending.len() < 3 {
                return true;
            }
            return self.decide_header();
        }
        self.add_data(row, cells)
    }

    fn decide_header(&mut self) -> bool {
        let mut pending = std::mem::take(&mut self.pending);
        if self.opts.header.is_none()
            && pending.len() >= 2
            && let Some(title) = title_of(&pending[0].1, &pending[1].1)
        {
            self.title = Some((pending[0].0, title));
            pending.remove(0);
        }
        let header = match (&self.opts.header, pending.first()) {
            (Some(h), _) => *h,
            (None, Some((_, first))) => {
                table::looks_like_header(first, pending.get(1).map(|(_, c)| c.as_slice()))
            }
            (None, None) => false,
        };
        let width = self.width();
        let mut rows = pending.into_iter();
        let columns = if header {
            let (row, cells) = rows.next().unwrap_or_default();
            self.header_row = Some(row);
            table::column_names(&cells, width)
        } else {
            table::positional_names(width)
        };
        self.table = Some(TableBuilder::new(columns));
        for (row, cells) in rows {
            if !self.add_data(row, cells) {
                return false;
            }
        }
        true
    }

    fn add_data(&mut self, row: u32, cells: Vec<Cell>) -> bool {
        let Some(table) = self.table.as_mut() else {
            return true;
        };
        if self.opts.nrows.is_some_and(|n| table.seen >= n as u64) {
            self.more = true;
            self.stopped_at = Some(row);
            return false;
        }
        let keep_at_most = self.opts.nrows.unwrap_or(self.opts.max_rows);
        let mut cells = cells;
        if cells.len() < table.columns.len() {
            cells.resize(table.columns.len(), Cell::Null);
        }
        let keep = (table.rows.len() < keep_at_most)
            .then(|| Value::Array(cells.iter().map(Cell::to_json).collect()));
        if keep.is_some() {
            self.first_shown.get_or_insert(row);
            self.last_shown = Some(row);
        }
        table.push(&cells, keep);
        true
    }

    fn finish(mut self, reference: &str, format: &str) -> Value {
        if !self.more {
            self.flush_row();
            if self.table.is_none() {
                self.decide_header();
            }
        }
        let table = self.table.take().unwrap_or_default();
        let mut out_title: Option<String> = None;
        let shown = table.rows.len() as u64;
        let seen = table.seen;
        let index = self
            .names
            .iter()
            .position(|n| *n == self.sheet)
            .map_or(1, |i| i + 1);
        let last_col = self.area.start.1 + u32::try_from(self.width()).unwrap_or(1) - 1;
        if let Some((_, title)) = &self.title {
            out_title = Some(title.clone());
        }
        let shown_range = match (self.header_row.or(self.first_shown), self.last_shown) {
            (Some(a), Some(b)) => format!(
                "{}:{}",
                cell_ref(a, self.area.start.1),
                cell_ref(b, last_col)
            ),
            (Some(a), None) => cell_ref(a, self.area.start.1),
            _ => "nothing".to_owned(),
        };
        let sheet_range = if self.declared {
            format!(
                "{}:{}",
                cell_ref(self.dims.start.0, self.dims.start.1),
                cell_ref(self.dims.end.0, self.dims.end.1)
            )
        } else {
            "undeclared".to_owned()
        };
        let mut out = json!({
            "sheet": self.sheet,
            "sheets": self.names,
            "range": shown_range,
            "sheet_range": sheet_range,
            "columns": table.columns,
            "rows": table.rows,
            "rows_returned": shown,
            "has_header": self.header_row.is_some(),
            "profile": table.profile_json(),
            "success": true,
        });
        if !self.merged.is_empty() {
            out["merged_regions"] = json!(self.merged.len());
        }
        if let Some(title) = &out_title {
            out["title"] = json!(title);
        }
        if self.blank_rows > 0 {
            out["blank_rows_skipped"] = json!(self.blank_rows);
        }
        let left = if self.more {
            let from = self.stopped_at.unwrap_or(0);
            out["truncated"] = json!(true);
            out["rows_scanned"] = json!(seen);
            let why = if self.budget_hit {
                format!(
                    "the cell budget of {} ran out at row {}",
                    self.opts.max_cells,
                    u64::from(from) + 1
                )
            } else {
                format!("from row {}", u64::from(from) + 1)
            };
            let last = if self.declared {
                Some(self.area.end.0.min(self.dims.end.0))
            } else {
                (self.area.end.0 != u32::MAX).then_some(self.area.end.0)
            };
            match last.filter(|l| *l >= from) {
                Some(last) => {
                    let remaining = u64::from(last - from) + 1;
                    out["rows_left_at_most"] = json!(remaining);
                    format!(
                        "more rows follow ({why}; up to {remaining} sheet rows left, to row {})",
                        u64::from(last) + 1
                    )
                }
                None => format!("more rows follow ({why}; the sheet does not declare its size)"),
            }
        } else {
            out["row_count"] = json!(seen);
            out["rows_left"] = json!(seen - shown);
            out["truncated"] = json!(seen > shown);
            if seen > shown {
                format!("{} rows left", seen - shown)
            } else {
                "none left".to_owned()
            }
        };
        let of_total = if self.more {
            String::new()
        } else {
            format!(" of {seen}")
        };
        let mut notes = Vec::new();
        if !self.merged.is_empty() {
            notes.push(format!(
                "{} merged regions filled from their top-left cell",
                self.merged.len()
            ));
        }
        if self.blank_rows > 0 {
            notes.push(format!("{} blank rows skipped", self.blank_rows));
        }
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!("; {}", notes.join("; "))
        };
        let mut header = match self.header_row {
            Some(r) => format!("header row {}", u64::from(r) + 1),
            None => "no header row".to_owned(),
        };
        if let Some((row, title)) = &self.title {
            header = format!("title \"{title}\" in row {}, {header}", u64::from(*row) + 1);
        }
        out["message"] = json!(format!(
            "{reference} ({format}), sheet `{}` ({index} of {}: {}), range {shown_range} ({header}): \
             {shown}{of_total} data rows shown, {left}{notes}. {}",
            self.sheet,
            self.names.len(),
            self.names.join(", "),
            table.columns_line()
        ));
        if let Some(n) = self.opts.nrows {
            out["nrows"] = json!(n);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undeclared_size_does_not_stop_reading() {
        let names = vec!["S".to_owned()];
        let opts = WorkbookOptions {
            sheet: None,
            range: None,
            nrows: None,
            max_rows: 100,
            header: None,
            max_cells: 1000,
        };
        let nowhere = Dimensions {
            start: (0, 0),
            end: (0, 0),
        };
        let mut w = Walker::new(&names, "S", nowhere, None, Vec::new(), &opts);
        for r in 0..5u32 {
            let first = if r == 0 {
                Cell::Text("id".into())
            } else {
                Cell::Number(f64::from(r))
            };
            let third = if r == 0 {
                Cell::Text("flag".into())
            } else {
                Cell::Bool(r % 2 == 0)
            };
            assert!(w.feed(r, 0, first));
            assert!(w.feed(r, 2, third));
        }
        let out = w.finish("t.xlsx", "xlsx");
        assert_eq!(out["columns"], json!(["id", "column_2", "flag"]));
        assert_eq!(out["rows"][3], json!([4, null, true]));
        assert_eq!(out["row_count"], 4);
        assert_eq!(out["sheet_range"], "undeclared");
    }

    #[test]
    fn ranges_parse() {
        let r = parse_range("B3:$D$20").unwrap();
        assert_eq!((r.start, r.end), ((2, 1), (19, 3)));
        let r = parse_range("aa10").unwrap();
        assert_eq!(r.start, (9, 26));
        assert!(parse_range("3B").is_none());
        assert!(parse_range("A0").is_none());
        assert_eq!(col_name(0), "A");
        assert_eq!(col_name(26), "AA");
        assert_eq!(col_name(701), "ZZ");
        assert_eq!(cell_ref(0, 27), "AB1");
    }

    #[test]
    fn sheets_are_picked_by_name_or_number() {
        let names = vec!["Targets".to_owned(), "Sales".to_owned()];
        assert_eq!(pick_sheet(&names, Some("sales")).unwrap(), "Sales");
        assert_eq!(pick_sheet(&names, Some("2")).unwrap(), "Sales");
        assert_eq!(pick_sheet(&names, None).unwrap(), "Targets");
        let err = pick_sheet(&names, Some("Nope")).unwrap_err().to_string();
        assert!(err.contains("Targets, Sales"), "{err}");
    }

    #[test]
    fn walker_fills_merges_skips_blanks_and_stops_at_nrows() {
        let names = vec!["S".to_owned()];
        let opts = WorkbookOptions {
            sheet: None,
            range: None,
            nrows: Some(2),
            max_rows: 100,
            header: None,
            max_cells: 1000,
        };
        let dims = Dimensions {
            start: (0, 0),
            end: (9, 1),
        };
        let merged = vec![Dimensions {
            start: (1, 0),
            end: (3, 0),
        }];
        let mut w = Walker::new(&names, "S", dims, None, merged, &opts);
        let text = |s: &str| Cell::Text(s.into());
        let cells = [
            (0, 0, text("region")),
            (0, 1, text("amount")),
            (1, 0, text("West")),
            (1, 1, Cell::Number(1.0)),
            (2, 1, Cell::Number(2.0)),
            (5, 1, Cell::Number(3.0)),
            (6, 1, Cell::Number(4.0)),
        ];
        for (r, c, v) in cells {
            if !w.feed(r, c, v) {
                break;
            }
        }
        let out = w.finish("t.xlsx", "xlsx");
        assert_eq!(out["rows"], json!([["West", 1], ["West", 2]]));
        assert_eq!(out["range"], "A1:B3");
        assert_eq!(out["truncated"], true);
        let msg = out["message"].as_str().unwrap();
        assert!(msg.contains("sheet `S` (1 of 1: S), range A1:B3"), "{msg}");
        assert!(msg.contains("to row 10"), "{msg}");
    }
}
