//! CSV through the `csv` crate, streamed: the file is decoded as it is read (see
//! [`crate::encoding`]), the delimiter is sniffed from the first lines, and reading stops as
//! soon as the rows asked for are in, so `nrows: 100` on a gigabyte file reads a few
//! kilobytes. Without `nrows` the file is scanned up to a byte budget to count rows and profile
//! the columns, keeping at most a capped number of rows.

use std::fs::File;
use std::io::{BufReader, Cursor, Read};
use std::path::Path;

use serde_json::{Value, json};

use crate::BuiltinError;
use crate::encoding::{self, DecodeReader, Detected, EncodingRequest, OnError};
use crate::table::{self, Cell, TableBuilder, human_bytes};

/// How to read one CSV file.
#[derive(Debug, Clone)]
pub(crate) struct CsvOptions {
    pub(crate) nrows: Option<usize>,
    /// Rows kept when `nrows` is not given.
    pub(crate) max_rows: usize,
    /// Bytes scanned at most (counting, profiling); past it the counts are partial.
    pub(crate) max_scan_bytes: u64,
    pub(crate) header: Option<bool>,
    pub(crate) delimiter: Option<u8>,
    pub(crate) encoding: EncodingRequest,
    pub(crate) fallback: Option<&'static encoding_rs::Encoding>,
    pub(crate) on_error: OnError,
}

const SNIFF_BYTES: usize = 64 * 1024;
const CANDIDATES: [u8; 4] = [b',', b';', b'\t', b'|'];
/// Ragged rows listed by line; the rest are only counted.
const RAGGED_EXAMPLES: usize = 5;

fn delimiter_name(d: u8) -> String {
    match d {
        b',' => "comma".into(),
        b';' => "semicolon".into(),
        b'\t' => "tab".into(),
        b'|' => "pipe".into(),
        other => format!("{:?}", char::from(other)),
    }
}

/// Picks the delimiter whose per-line count (outside quotes) is the same, and not zero, on
/// the most sample lines; ties go to the one seen more often per line, then to the comma.
pub(crate) fn sniff_delimiter(sample: &str) -> u8 {
    let lines = logical_lines(sample, 50);
    let mut best = (b',', 0usize, 0usize);
    for &d in &CANDIDATES {
        let counts: Vec<usize> = lines
            .iter()
            .map(|l| l.bytes().filter(|&b| b == d).count())
            .collect();
        let Some(&first) = counts.first() else {
            continue;
        };
        if first == 0 {
            continue;
        }
        let agreeing = counts.iter().filter(|&&c| c == first).count();
        if (agreeing, first) > (best.1, best.2) {
            best = (d, agreeing, first);
        }
    }
    best.0
}

/// The first `max` lines of `text` with quoted parts removed (quoted newlines do not end a
/// line); the last line is dropped when the sample may have cut it.
fn logical_lines(text: &str, max: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '"' => quoted = !quoted,
            '\n' if !quoted => {
                let line = std::mem::take(&mut current);
                if !line.trim().is_empty() {
                    lines.push(line);
                }
                if lines.len() == max {
                    return lines;
                }
            }
            _ if !quoted => current.push(c),
            _ => {}
        }
    }
    if lines.is_empty() && !current.trim().is_empty() {
        lines.push(current);
    }
    lines
}

/// Reads `path` (shown to the model as `reference`).
pub(crate) fn read(
    path: &Path,
    reference: &str,
    size: u64,
    opts: &CsvOptions,
) -> Result<Value, BuiltinError> {
    let io = |source| BuiltinError::Io {
        path: reference.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let mut head = vec![0; SNIFF_BYTES];
    let n = read_up_to(&mut file, &mut head).map_err(io)?;
    head.truncate(n);
    let detected = encoding::detect(&head, opts.encoding, opts.fallback);
    let raw = Cursor::new(head)
        .chain(file)
        .take(opts.max_scan_bytes.saturating_add(SNIFF_BYTES as u64));
    let mut raw = BufReader::new(raw);
    // The BOM belongs to the encoding, not the text.
    std::io::copy(
        &mut (&mut raw).take(detected.bom_len as u64),
        &mut std::io::sink(),
    )
    .map_err(io)?;
    let mut decoder = DecodeReader::new(raw, detected, opts.on_error);
    let mut sample = vec![0; SNIFF_BYTES];
    let n = read_up_to(&mut decoder, &mut sample).map_err(|e| decode_error(reference, &e))?;
    sample.truncate(n);
    let delimiter = opts
        .delimiter
        .unwrap_or_else(|| sniff_delimiter(&String::from_utf8_lossy(&sample)));
    let input = Cursor::new(sample).chain(decoder);
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .from_reader(input);
    let scan = Scan::run(&mut reader, reference, opts)?;
    let decoder = reader.get_ref().get_ref().1;
    let replaced = decoder.replaced();
    let consumed = decoder.consumed();
    Ok(scan.into_json(&Facts {
        reference,
        size,
        detected,
        delimiter,
        replaced,
        consumed,
        budget_hit: consumed >= opts.max_scan_bytes && consumed < size,
        nrows: opts.nrows,
    }))
}

pub(crate) fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

fn decode_error(reference: &str, err: &std::io::Error) -> BuiltinError {
    match encoding::malformed_of(err) {
        Some(m) => BuiltinError::Encoding {
            path: reference.to_owned(),
            message: m.to_string(),
        },
        None => BuiltinError::Io {
            path: reference.to_owned(),
            source: std::io::Error::new(err.kind(), err.to_string()),
        },
    }
}

struct Scan {
    table: TableBuilder,
    header: bool,
    header_width: usize,
    ragged: u64,
    ragged_examples: Vec<Value>,
    /// Whether the reader stopped with more records after the last one read.
    more: bool,
    /// Byte position (in decoded text) after the last record read.
    text_pos: u64,
}

struct Facts<'a> {
    reference: &'a str,
    size: u64,
    detected: Detected,
    delimiter: u8,
    replaced: u64,
    consumed: u64,
    budget_hit: bool,
    nrows: Option<usize>,
}

impl Scan {
    fn run<R: Read>(
        reader: &mut csv::Reader<R>,
        reference: &str,
        opts: &CsvOptions,
    ) -> Result<Self, BuiltinError> {
        let mut record = csv::StringRecord::new();
        let mut next = |record: &mut csv::StringRecord| -> Result<bool, BuiltinError> {
            reader
                .read_record(record)
                .map_err(|e| csv_error(reference, e))
        };
        let mut first: Vec<String> = Vec::new();
        let mut second: Option<csv::StringRecord> = None;
        if next(&mut record)? {
            first = record.iter().map(str::to_owned).collect();
            let mut r2 = csv::StringRecord::new();
            if next(&mut r2)? {
                second = Some(r2);
            }
        }
        let first_cells: Vec<Cell> = first.iter().map(|f| table::classify(f)).collect();
        let second_cells: Option<Vec<Cell>> = second
            .as_ref()
            .map(|r| r.iter().map(table::classify).collect());
        let header = opts.header.unwrap_or_else(|| {
            !first.is_empty() && table::looks_like_header(&first_cells, second_cells.as_deref())
        });
        let width = first.len();
        let columns = if header {
            let raw: Vec<Cell> = first.iter().map(|f| Cell::Text(f.clone())).collect();
            table::column_names(&raw, width)
        } else {
            table::positional_names(width)
        };
        let mut scan = Self {
            table: TableBuilder::new(columns),
            header,
            header_width: width,
            ragged: 0,
            ragged_examples: Vec::new(),
            more: false,
            text_pos: 0,
        };
        let keep_at_most = opts.nrows.unwrap_or(opts.max_rows);
        let mut pending: Vec<csv::StringRecord> = Vec::new();
        if !header && !first.is_empty() {
            let mut r = csv::StringRecord::from(first);
            r.set_position(None);
            pending.push(r);
        }
        pending.extend(second);
        for r in pending {
            if scan.stop_before(opts) {
                scan.more = true;
                break;
            }
            scan.add(&r, keep_at_most);
        }
        while !scan.more {
            if !next(&mut record)? {
                break;
            }
            if scan.stop_before(opts) {
                scan.more = true;
                break;
            }
            scan.add(&record, keep_at_most);
            scan.text_pos = record.position().map_or(scan.text_pos, csv::Position::byte);
        }
        Ok(scan)
    }

    fn stop_before(&self, opts: &CsvOptions) -> bool {
        opts.nrows.is_some_and(|n| self.table.seen >= n as u64)
    }

    fn add(&mut self, record: &csv::StringRecord, keep_at_most: usize) {
        if record.len() != self.header_width {
            self.ragged += 1;
            if self.ragged_examples.len() < RAGGED_EXAMPLES {
                let line = record.position().map(csv::Position::line);
                self.ragged_examples.push(json!({
                    "line": line,
                    "fields": record.len(),
                }));
            }
        }
        let cells: Vec<Cell> = record.iter().map(table::classify).collect();
        let keep = (self.table.rows.len() < keep_at_most)
            .then(|| Value::Array(record.iter().map(|f| json!(f)).collect()));
        self.table.push(&cells, keep);
    }

    fn into_json(self, facts: &Facts<'_>) -> Value {
        let shown = self.table.rows.len() as u64;
        let seen = self.table.seen;
        let complete = !self.more && !facts.budget_hit;
        let mut out = json!({
            "columns": self.table.columns,
            "rows": self.table.rows,
            "rows_returned": shown,
            "has_header": self.header,
            "delimiter": delimiter_name(facts.delimiter),
            "encoding": facts.detected.label(),
            "profile": self.table.profile_json(),
            "success": true,
        });
        let (counted, left) = if complete {
            out["row_count"] = json!(seen);
            out["rows_left"] = json!(seen - shown);
            out["truncated"] = json!(seen > shown);
            (
                format!("rows 1–{shown} of {seen} shown"),
                if seen > shown {
                    format!("{} rows left", seen - shown)
                } else {
                    "none left".to_owned()
                },
            )
        } else {
            out["truncated"] = json!(true);
            out["rows_scanned"] = json!(seen);
            // Rows per decoded byte so far, applied to the file's size: an estimate.
            let estimate = (self.text_pos > 0 && facts.consumed > 0).then(|| {
                #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
                let est = (seen as f64 * facts.size as f64 / self.text_pos.max(1) as f64) as u64;
                est.max(seen)
            });
            if let Some(est) = estimate {
                out["row_count_estimate"] = json!(est);
            }
            let stopped = if facts.budget_hit {
                format!(
                    "the scan stopped after {} of {}",
                    human_bytes(facts.consumed),
                    human_bytes(facts.size)
                )
            } else {
                format!(
                    "read {} of {}",
                    human_bytes(facts.consumed.min(facts.size)),
                    human_bytes(facts.size)
                )
            };
            (
                format!("rows 1–{shown} shown"),
                match estimate {
                    Some(est) => format!(
                        "more rows follow (about {est} in all, estimated; {stopped}; profile of \
                         the {seen} rows read)"
                    ),
                    None => format!("more rows follow ({stopped})"),
                },
            )
        };
        let mut notes = Vec::new();
        if self.ragged > 0 {
            out["ragged_rows"] = json!({
                "count": self.ragged,
                "expected_fields": self.header_width,
                "examples": self.ragged_examples,
            });
            notes.push(format!(
                "{} ragged rows (not {} fields)",
                self.ragged, self.header_width
            ));
        }
        if facts.replaced > 0 {
            out["replaced_sequences"] = json!(facts.replaced);
            notes.push(format!(
                "{} undecodable sequences replaced by U+FFFD",
                facts.replaced
            ));
        }
        let header = if self.header {
            "header row"
        } else {
            "no header row"
        };
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!("; {}", notes.join("; "))
        };
        out["message"] = json!(format!(
            "{} (csv, {}, {} delimited, {header}): {counted}, {left}{notes}. {}",
            facts.reference,
            facts.detected.label(),
            delimiter_name(facts.delimiter),
            self.table.columns_line()
        ));
        if let Some(n) = facts.nrows {
            out["nrows"] = json!(n);
        }
        out
    }
}

fn csv_error(reference: &str, err: csv::Error) -> BuiltinError {
    let line = err.position().map(csv::Position::line);
    match err.into_kind() {
        csv::ErrorKind::Io(e) => decode_error(reference, &e),
        other => BuiltinError::Parse {
            path: reference.to_owned(),
            format: "csv",
            message: match line {
                Some(l) => format!("line {l}: {other:?}"),
                None => format!("{other:?}"),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> CsvOptions {
        CsvOptions {
            nrows: None,
            max_rows: 1000,
            max_scan_bytes: 1 << 30,
            header: None,
            delimiter: None,
            encoding: EncodingRequest::Auto,
            fallback: None,
            on_error: OnError::Strict,
        }
    }

    fn read_text(bytes: &[u8], opts: &CsvOptions) -> Result<Value, BuiltinError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, bytes).unwrap();
        read(&path, "t.csv", bytes.len() as u64, opts)
    }

    #[test]
    fn delimiters_are_sniffed() {
        assert_eq!(sniff_delimiter("a;b;c\n1;2,5;3\n"), b';');
        assert_eq!(sniff_delimiter("a\tb\n1\t2\n"), b'\t');
        assert_eq!(sniff_delimiter("a|b|c\n1|2|3\n"), b'|');
        assert_eq!(sniff_delimiter("a,b\n\"x;y;z\",2\n"), b',');
        assert_eq!(sniff_delimiter("single\nvalue\n"), b',');
    }

    #[test]
    fn quoted_newlines_boms_and_ragged_rows() {
        let text =
            "\u{feff}region;note;amount\nWest;\"grew;\nfast\";1,5\nEast;x\nNorth;y;3;extra\n";
        let out = read_text(text.as_bytes(), &opts()).unwrap();
        assert_eq!(out["columns"], json!(["region", "note", "amount"]));
        assert_eq!(out["delimiter"], "semicolon");
        assert_eq!(out["rows"][0], json!(["West", "grew;\nfast", "1,5"]));
        assert_eq!(out["row_count"], 3);
        assert_eq!(out["ragged_rows"]["count"], 2);
        assert_eq!(out["ragged_rows"]["examples"][0]["line"], 4);
        let msg = out["message"].as_str().unwrap();
        assert!(msg.contains("2 ragged rows"), "{msg}");
        assert!(msg.contains("rows 1–3 of 3 shown, none left"), "{msg}");
    }

    #[test]
    fn nrows_stops_early_and_estimates() {
        let mut text = String::from("id,amount\n");
        for i in 0..10_000 {
            text.push_str(&format!("{i},{}.5\n", i % 7));
        }
        let out = read_text(
            text.as_bytes(),
            &CsvOptions {
                nrows: Some(10),
                ..opts()
            },
        )
        .unwrap();
        assert_eq!(out["rows_returned"], 10);
        assert_eq!(out["truncated"], true);
        assert!(out.get("row_count").is_none());
        let est = out["row_count_estimate"].as_u64().unwrap();
        assert!((5_000..20_000).contains(&est), "{est}");
        assert_eq!(out["profile"][1]["type"], "number");
        let all = read_text(text.as_bytes(), &opts()).unwrap();
        assert_eq!(all["row_count"], 10_000);
        assert_eq!(all["rows_returned"], 1000);
        assert_eq!(all["rows_left"], 9000);
        assert_eq!(all["profile"][0]["max"], 9999);
    }

    #[test]
    fn headerless_files_get_positional_names() {
        let out = read_text(b"1,2\n3,4\n", &opts()).unwrap();
        assert_eq!(out["has_header"], false);
        assert_eq!(out["columns"], json!(["column_1", "column_2"]));
        assert_eq!(out["row_count"], 2);
    }

    #[test]
    fn encodings_and_bad_bytes() {
        let (gbk, _, _) = encoding_rs::GBK.encode("地区,金额\n华东,12\n");
        // Chinese text in GBK is read as GBK without a label, and with one.
        for encoding in [
            EncodingRequest::Auto,
            EncodingRequest::Exact(encoding_rs::GBK),
        ] {
            let out = read_text(&gbk, &CsvOptions { encoding, ..opts() }).unwrap();
            assert_eq!(out["columns"], json!(["地区", "金额"]));
            assert_eq!(out["encoding"], "gbk");
        }
        // Latin text in windows-1252 is neither: its first bad byte is named.
        let (latin, _, _) = encoding_rs::WINDOWS_1252.encode("city,n\nZoë,1\n");
        let err = read_text(&latin, &opts()).unwrap_err();
        assert!(err.to_string().contains("offset 9"), "{err}");
        let out = read_text(
            &latin,
            &CsvOptions {
                on_error: OnError::Replace,
                ..opts()
            },
        )
        .unwrap();
        assert!(out["replaced_sequences"].as_u64().unwrap() > 0);
        let mut utf16 = vec![0xFF, 0xFE];
        for u in "a\tb\n1\t2\n".encode_utf16() {
            utf16.extend(u.to_le_bytes());
        }
        let out = read_text(&utf16, &opts()).unwrap();
        assert_eq!(out["encoding"], "utf-16le");
        assert_eq!(out["rows"], json!([["1", "2"]]));
    }

    #[test]
    fn scan_budget_makes_counts_partial() {
        let mut text = String::from("id\n");
        for i in 0..50_000 {
            text.push_str(&format!("{i}\n"));
        }
        let out = read_text(
            text.as_bytes(),
            &CsvOptions {
                max_scan_bytes: 100_000,
                max_rows: 5,
                ..opts()
            },
        )
        .unwrap();
        assert_eq!(out["truncated"], true);
        assert!(out.get("row_count").is_none());
        assert!(out["message"].as_str().unwrap().contains("scan stopped"));
    }
}
