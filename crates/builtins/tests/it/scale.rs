//! Scale: `nrows: 100` on a large sheet and a large CSV returns at once with bounded memory.
//! Every run reads a 64 MiB CSV and a 50 000-row sheet; `BA_AGENT_SCALE=full` reads a gigabyte
//! CSV and a million-row sheet (minutes of setup and a gigabyte of disk):
//! `BA_AGENT_SCALE=full cargo test -p ba-builtins --release --test it scale -- --nocapture`.
//! The bounds on time are loose (a loaded machine meets them); the figures are printed.
//!
//! Each read runs in a child process of its own (this test binary, running only
//! [`scale_child`]), so its peak memory is the read's, not that of the other tests this binary
//! runs beside it; a child that reports no figure fails the test.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

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

/// The child's side: reads with the arguments in `BA_AGENT_SCALE_ARGS` over the folder in
/// `BA_AGENT_SCALE_DIR`, then prints one line of figures for [`read_in_child`]. Run alone
/// (without those variables) it does nothing.
#[tokio::test]
#[ignore = "the child process of the scale tests, which run it"]
async fn scale_child() {
    let (Ok(dir), Ok(args)) = (
        std::env::var("BA_AGENT_SCALE_DIR"),
        std::env::var("BA_AGENT_SCALE_ARGS"),
    ) else {
        return;
    };
    let args: Value = serde_json::from_str(&args).unwrap();
    let reader = reader(Path::new(&dir));
    let start = Instant::now();
    let out = read(&reader, args).await;
    let seconds = start.elapsed().as_secs_f64();
    let figures = json!({"out": out, "seconds": seconds, "peak_rss_mib": peak_rss_mib()});
    println!("SCALE_FIGURES {figures}");
}

/// What `file_reader` answers to `args` over `dir`, the seconds the read took and the peak
/// resident memory of the process that made it (a child of this one, doing only that), in MiB.
fn read_in_child(dir: &Path, args: Value) -> (Value, f64, u64) {
    let run = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "scale::scale_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BA_AGENT_SCALE_DIR", dir)
        .env("BA_AGENT_SCALE_ARGS", args.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let figures: Value = stdout
        .lines()
        .find_map(|l| l.split_once("SCALE_FIGURES ").map(|(_, figures)| figures))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or_else(|| {
            panic!(
                "the child read printed no figures ({}): {stdout}\n{}",
                run.status,
                String::from_utf8_lossy(&run.stderr)
            )
        });
    let peak = figures["peak_rss_mib"]
        .as_u64()
        .unwrap_or_else(|| panic!("the child could not measure its peak memory: {figures}"));
    (
        figures["out"].clone(),
        figures["seconds"].as_f64().unwrap(),
        peak,
    )
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
    let (out, took, peak) = read_in_child(dir.path(), json!({"path": "big.csv", "nrows": 100}));
    println!(
        "{} MiB CSV ({i} rows), nrows 100: {took:.2} s, peak RSS {peak} MiB; {}",
        bytes >> 20,
        out["message"]
    );
    assert_eq!(out["rows_returned"], 100);
    assert!(took < 60.0, "{took} s");
    assert!(peak < 1024, "{peak} MiB");
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
    let (out, took, peak) =
        read_in_child(dir.path(), json!({"path": "million.xlsx", "nrows": 100}));
    println!(
        "{rows}-row sheet ({} bytes), nrows 100: {took:.2} s, peak RSS {peak} MiB; {}",
        std::fs::metadata(dir.path().join("million.xlsx"))
            .unwrap()
            .len(),
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
    assert!(took < 60.0, "{took} s");
    assert!(peak < 1024, "{peak} MiB");
}
