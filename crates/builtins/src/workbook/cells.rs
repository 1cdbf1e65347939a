//! Cell addresses (`B3`, `A1:D20`, column names) and calamine's cell values as typed table
//! cells (numbers, ISO dates, booleans, named errors).

use calamine::{Data, DataRef, Dimensions};

use crate::table::Cell;

/// `B3` → (row 2, col 1), 0-based.
fn parse_cell(s: &str) -> Option<(u32, u32)> {
    let s = s.trim().replace('$', "");
    let split = s.find(|c: char| c.is_ascii_digit())?;
    let (letters, digits) = s.split_at(split);
    if letters.is_empty() || letters.len() > 3 || !letters.chars().all(|c| c.is_ascii_alphabetic())
    {
        return None;
    }
    let mut col: u32 = 0;
    for c in letters.to_ascii_uppercase().bytes() {
        col = col * 26 + u32::from(c - b'A' + 1);
    }
    let row: u32 = digits.parse().ok()?;
    (row >= 1).then(|| (row - 1, col - 1))
}

/// `A1:D20` or `B3` (from there to the end of the sheet).
pub(crate) fn parse_range(s: &str) -> Option<Dimensions> {
    match s.split_once(':') {
        Some((a, b)) => {
            let (start, end) = (parse_cell(a)?, parse_cell(b)?);
            Some(Dimensions {
                start: (start.0.min(end.0), start.1.min(end.1)),
                end: (start.0.max(end.0), start.1.max(end.1)),
            })
        }
        None => Some(Dimensions {
            start: parse_cell(s)?,
            end: (u32::MAX, u32::MAX),
        }),
    }
}

pub(super) fn col_name(mut col: u32) -> String {
    let mut name = Vec::new();
    loop {
        #[allow(clippy::cast_possible_truncation)]
        name.push(b'A' + (col % 26) as u8);
        if col < 26 {
            break;
        }
        col = col / 26 - 1;
    }
    name.reverse();
    String::from_utf8_lossy(&name).into_owned()
}

pub(super) fn cell_ref(row: u32, col: u32) -> String {
    format!("{}{}", col_name(col), u64::from(row) + 1)
}

fn excel_date(dt: &calamine::ExcelDateTime) -> Cell {
    if dt.is_duration() {
        return Cell::Text(format!("{} days", dt.as_f64()));
    }
    let (y, mo, d, h, mi, s, ms) = dt.to_ymd_hms_milli();
    if dt.as_f64() < 1.0 {
        return Cell::Text(format!("{h:02}:{mi:02}:{s:02}"));
    }
    if (h, mi, s, ms) == (0, 0, 0, 0) {
        Cell::Date(format!("{y:04}-{mo:02}-{d:02}"))
    } else {
        Cell::Date(format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}"))
    }
}

fn text_cell(s: &str) -> Cell {
    if s.trim().is_empty() {
        Cell::Null
    } else {
        Cell::Text(s.to_owned())
    }
}

pub(super) fn cell_of_data(d: &Data) -> Cell {
    match d {
        Data::Int(i) => {
            #[allow(clippy::cast_precision_loss)]
            let f = *i as f64;
            Cell::Number(f)
        }
        Data::Float(f) => Cell::Number(*f),
        Data::String(s) => text_cell(s),
        Data::Bool(b) => Cell::Bool(*b),
        Data::DateTime(dt) => excel_date(dt),
        Data::DateTimeIso(s) => Cell::Date(s.clone()),
        Data::DurationIso(s) => Cell::Text(s.clone()),
        Data::Error(e) => Cell::Error(e.to_string()),
        Data::Empty => Cell::Null,
    }
}

pub(super) fn cell_of_ref(d: &DataRef<'_>) -> Cell {
    match d {
        DataRef::Int(i) => {
            #[allow(clippy::cast_precision_loss)]
            let f = *i as f64;
            Cell::Number(f)
        }
        DataRef::Float(f) => Cell::Number(*f),
        DataRef::String(s) => text_cell(s),
        DataRef::SharedString(s) => text_cell(s),
        DataRef::Bool(b) => Cell::Bool(*b),
        DataRef::DateTime(dt) => excel_date(dt),
        DataRef::DateTimeIso(s) => Cell::Date(s.clone()),
        DataRef::DurationIso(s) => Cell::Text(s.clone()),
        DataRef::Error(e) => Cell::Error(e.to_string()),
        DataRef::Empty => Cell::Null,
    }
}
