//! Scale: `nrows: 100` on a large sheet and a large CSV returns at once with bounded memory.
//! Every run reads a 64 MiB CSV and a 50 000-row sheet; `BA_AGENT_SCALE=full` reads a gigabyte
//! CSV and a million-row sheet (minutes of setup and a gigabyte of disk):
//! `BA_AGENT_SCALE=full cargo test -p ba-builtins --release --test it scale -- --nocapture`.
//! The bounds on time are loose (a loaded machine meets them); the figures are printed.

use std::io::Write as _;
use std::time::Instant;

use serde_json::json;

use crate::{openpyxl, python, read, reader};

/// Bytes of the CSV and rows of the sheet: small by default, the sizes with
/// `BA_AGENT_SCALE=full`.
fn sizes() -> (u64, usize) {
    if std::env::var("BA_AGENT_SCALE").is_ok_and(|v| v == "full") {
        (1 << 30, 1_000_000)
    } else {
        (64 << 20, 50_000)
    }
}

/// The peak resident set of this process, in MiB (Linux `VmHWM`).
fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

#[tokio::test]
async fn a_large_csv_with_nrows_100() {
    let (bytes, _) = sizes();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.csv");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(file, "id,date,region,product,units,amount,note").unwrap();
    let mut written = 0u64;
    let mut i = 0u64;
    while written < bytes {
        let line = format!(
            "{i},2024-{:02}-{:02},Region {},Product {},{},{}.{:02},\"note, with comma {i}\"\n",
            i % 12 + 1,
            i % 28 + 1,
            i % 5,
            i % 6,
            i % 9 + 1,
            i % 5000,
            i % 100
        );
        file.write_all(line.as_bytes()).unwrap();
        written += line.len() as u64;
        i += 1;
    }
    file.flush().unwrap();
    drop(file);
    let reader = reader(dir.path());
    let start = Instant::now();
    let out = read(&reader, json!({"path": "big.csv", "nrows": 100})).await;
    let took = start.elapsed();
    println!(
        "{} MiB CSV ({i} rows), nrows 100: {took:?}, peak RSS {:?} MiB; {}",
        bytes >> 20,
        peak_rss_mib(),
        out["message"]
    );
    assert_eq!(out["rows_returned"], 100);
    assert!(took.as_secs() < 60, "{took:?}");
    assert!(peak_rss_mib().unwrap_or(0) < 1024);
    let est = out["row_count_estimate"].as_u64().unwrap();
    assert!(est > i / 2 && est < i * 2, "estimate {est} of {i}");
}

#[tokio::test]
async fn a_large_sheet_with_nrows_100() {
    if !openpyxl() {
        return;
    }
    let (_, rows) = sizes();
    let dir = tempfile::tempdir().unwrap();
    python(
        &format!(
            "import datetime, openpyxl\n\
             wb = openpyxl.Workbook(write_only=True)\n\
             ws = wb.create_sheet('sales')\n\
             ws.append(['id', 'date', 'region', 'units', 'amount'])\n\
             start = datetime.date(2024, 1, 1)\n\
             for i in range({rows}):\n\
             \x20   ws.append([i, start + datetime.timedelta(days=i % 366), 'R%d' % (i % 5), i % 9, i * 0.5])\n\
             wb.save('million.xlsx')\n"
        ),
        dir.path(),
    );
    let reader = reader(dir.path());
    let start = Instant::now();
    let out = read(&reader, json!({"path": "million.xlsx", "nrows": 100})).await;
    let took = start.elapsed();
    println!(
        "{rows}-row sheet ({} bytes), nrows 100: {took:?}, peak RSS {:?} MiB; {}",
        std::fs::metadata(dir.path().join("million.xlsx"))
            .unwrap()
            .len(),
        peak_rss_mib(),
        out["message"]
    );
    assert_eq!(out["rows_returned"], 100);
    assert_eq!(out["truncated"], true);
    // openpyxl's write-only mode declares no sheet size: reading does not trust one.
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .contains("more rows follow")
    );
    assert!(took.as_secs() < 60, "{took:?}");
    assert!(peak_rss_mib().unwrap_or(0) < 1024);
}
