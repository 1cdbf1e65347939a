//! Files written by real programs: a workbook written by openpyxl (several sheets, dates,
//! formulas, merged cells, a title row) and the same workbook saved by LibreOffice as
//! `.xlsx`, `.ods` and `.xls` (formulas then carry cached values); CSVs turned into every
//! listed encoding by `iconv`; a password-protected workbook made by msoffcrypto-tool; and the
//! demo's `sales` table exported by Python, read as a CSV, as a LibreOffice workbook and by
//! SQL, giving the same answers.

use std::path::Path;

use ba_builtins::demo_data;
use ba_builtins::file_reader::{FileReader, FileReaderConfig};
use ba_builtins::query_database::{QueryDatabase, QueryDatabaseConfig};
use serde_json::{Value, json};

use crate::{libreoffice, openpyxl, python, read, reader, require, run, soffice_convert};

/// The script that writes `book.xlsx` (kept beside this file so it can be run by hand).
const WORKBOOK_PY: &str = include_str!("workbook.py");

fn summary_rows(cached_formulas: bool, merged_filled: bool, booleans: bool) -> Value {
    let (t, f) = if booleans {
        (json!(true), json!(false))
    } else {
        (json!(1), json!(0))
    };
    let formula = |v: Value| if cached_formulas { v } else { Value::Null };
    json!([
        [
            "West",
            "Q3",
            "2024-07-01",
            139000,
            formula(json!(278000)),
            t,
            formula(json!(139000))
        ],
        [
            if merged_filled {
                json!("West")
            } else {
                Value::Null
            },
            "Q4",
            "2024-10-01",
            150000,
            formula(json!(300000)),
            f,
            formula(json!("#DIV/0!"))
        ],
        [
            "East",
            "Q3",
            "2024-07-01T09:30:00",
            120500.5,
            formula(json!(241001)),
            t,
            formula(json!(60250.25))
        ],
        [
            "North",
            "Q1",
            "2024-01-02",
            90000,
            formula(json!(180000)),
            f,
            formula(json!(22500))
        ],
    ])
}

#[tokio::test]
async fn workbooks_from_openpyxl_and_libreoffice() {
    if !openpyxl() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    python(WORKBOOK_PY, dir.path());
    let reader = reader(dir.path());

    // openpyxl stores formulas without values: they read as empty cells, and say so.
    let out = read(&reader, json!({"path": "book.xlsx"})).await;
    assert_eq!(out["sheets"], json!(["summary", "sales", "notes"]));
    assert_eq!(out["title"], "Quarterly targets 2024");
    assert_eq!(
        out["columns"],
        json!([
            "region", "quarter", "start", "target", "double", "met", "ratio"
        ])
    );
    assert_eq!(out["rows"], summary_rows(false, true, true));
    assert_eq!(out["profile"][4]["type"], "empty");
    let msg = out["message"].as_str().unwrap();
    assert!(
        msg.contains("sheet `summary` (1 of 3: summary, sales, notes), range A3:G8"),
        "{msg}"
    );
    assert!(msg.contains("4 of 4 data rows shown, none left"), "{msg}");

    // A sheet by name, a range, nrows: what is shown and what is left.
    let out = read(
        &reader,
        json!({"path": "book.xlsx", "sheet": "sales", "range": "A1:C11", "nrows": 4}),
    )
    .await;
    assert_eq!(out["rows"][0], json!(["2024-06-01", "East", 10.5]));
    assert_eq!(out["rows_returned"], 4);
    assert_eq!(out["range"], "A1:C5");
    let msg = out["message"].as_str().unwrap();
    assert!(msg.contains("up to 6 sheet rows left, to row 11"), "{msg}");
    let out = read(&reader, json!({"path": "book.xlsx", "sheet": "2"})).await;
    assert_eq!(out["row_count"], 30);
    assert_eq!(out["profile"][0]["min_date"], "2024-06-01");
    assert_eq!(out["profile"][0]["max_date"], "2024-06-30");
    assert_eq!(out["profile"][2]["mean"], 162.75);

    if !libreoffice() {
        return;
    }
    for to in ["xlsx", "ods", "xls"] {
        soffice_convert(dir.path(), "book.xlsx", to, &[]);
    }
    let saved = reader_in(&dir.path().join("out"));
    // LibreOffice recalculates and stores the formulas' values, errors included.
    let out = read(&saved, json!({"path": "book.xlsx"})).await;
    assert_eq!(out["rows"], summary_rows(true, true, true), "{out}");
    assert_eq!(out["merged_regions"], 2);
    assert_eq!(out["profile"][6]["errors"], 1);
    let out = read(&saved, json!({"path": "book.xls"})).await;
    assert_eq!(out["rows"], summary_rows(true, true, true), "{out}");
    // calamine reports no merged regions for .ods and reads its booleans as numbers.
    let out = read(&saved, json!({"path": "book.ods"})).await;
    assert_eq!(out["rows"], summary_rows(true, false, false), "{out}");
    for file in ["book.xlsx", "book.ods", "book.xls"] {
        let out = read(&saved, json!({"path": file, "sheet": "sales", "nrows": 2})).await;
        assert_eq!(out["rows"][1], json!(["2024-06-02", "West", 21]), "{file}");
        let brief = out["message"].as_str().unwrap();
        assert!(brief.contains("sheet `sales` (2 of 3"), "{file}: {brief}");
    }
}

fn reader_in(dir: &Path) -> FileReader {
    reader(dir)
}

/// `(iconv name, file_reader label, text)`: a city name in the encoding's script.
const ENCODINGS: [(&str, &str, &str); 14] = [
    ("GBK", "gbk", "华东区"),
    ("GB18030", "gb18030", "深圳市 €"),
    ("BIG5", "big5", "臺北市"),
    ("SHIFT_JIS", "shift_jis", "東京都"),
    ("EUC-KR", "euc-kr", "서울특별시"),
    ("CP1250", "windows-1250", "Łódź"),
    ("CP1251", "windows-1251", "Москва"),
    ("CP1252", "windows-1252", "Zürich café"),
    ("CP1253", "windows-1253", "Αθήνα"),
    ("CP1254", "windows-1254", "İstanbul"),
    ("CP1255", "windows-1255", "תל אביב"),
    ("CP1256", "windows-1256", "القاهرة"),
    ("CP1257", "windows-1257", "Rīga"),
    ("CP1258", "windows-1258", "Đàn"),
];

#[tokio::test]
async fn csv_in_every_listed_encoding_from_iconv() {
    if !require("iconv (Debian: libc-bin)", "iconv", &["--version"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let reader = reader(dir.path());
    for (iconv, label, city) in ENCODINGS {
        let text = format!("city;amount\n{city};12,5\n\"{city}\n2\";3\n");
        let src = format!("{label}.utf8.csv");
        std::fs::write(dir.path().join(&src), &text).unwrap();
        let out_file = format!("{label}.csv");
        let converted = std::process::Command::new("iconv")
            .args(["-f", "UTF-8", "-t", iconv, &src])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(converted.status.success(), "iconv {iconv}");
        std::fs::write(dir.path().join(&out_file), &converted.stdout).unwrap();
        let out = read(&reader, json!({"path": out_file, "encoding": label})).await;
        assert_eq!(out["columns"], json!(["city", "amount"]), "{label}");
        assert_eq!(
            out["rows"],
            json!([[city, "12,5"], [format!("{city}\n2"), "3"]]),
            "{label}"
        );
        assert_eq!(out["delimiter"], "semicolon", "{label}");
        // Without the label, Chinese text in GBK or GB18030 is read as GBK; in the others the
        // first byte UTF-8 cannot take is named by its offset, with the encodings tried.
        if matches!(label, "gbk" | "gb18030") {
            let out = read(&reader, json!({"path": out_file})).await;
            assert_eq!(out["encoding"], "gbk", "{label}");
            assert_eq!(
                out["rows"],
                json!([[city, "12,5"], [format!("{city}\n2"), "3"]]),
                "{label}"
            );
        } else {
            let err = reader
                .call_json(json!({"path": out_file}))
                .await
                .unwrap_err()
                .to_string();
            let offset = converted
                .stdout
                .iter()
                .zip(text.as_bytes())
                .position(|(a, b)| a != b)
                .unwrap();
            assert!(
                err.contains(&format!("byte offset {offset} "))
                    && err.contains("none of those tried (utf-8, gbk)"),
                "{label}: {err}"
            );
            // Replaced only when asked.
            let out = read(&reader, json!({"path": out_file, "errors": "replace"})).await;
            assert!(out["replaced_sequences"].as_u64().unwrap() > 0, "{label}");
        }
    }
    // UTF-16 with a BOM (iconv writes one) and UTF-8 with a BOM: `auto` reads both.
    std::fs::write(dir.path().join("u.utf8.csv"), "städte\tn\nKöln\t1\n").unwrap();
    let utf16 = std::process::Command::new("iconv")
        .args(["-f", "UTF-8", "-t", "UTF-16", "u.utf8.csv"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    std::fs::write(dir.path().join("utf16.csv"), &utf16.stdout).unwrap();
    let out = read(&reader, json!({"path": "utf16.csv"})).await;
    assert_eq!(out["columns"], json!(["städte", "n"]));
    assert!(out["encoding"].as_str().unwrap().starts_with("utf-16"));
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice("städte,n\nKöln,1\n".as_bytes());
    std::fs::write(dir.path().join("bom.csv"), bom).unwrap();
    let out = read(&reader, json!({"path": "bom.csv"})).await;
    assert_eq!(out["columns"], json!(["städte", "n"]));
    // The deployment's fallback lets `auto` read GBK exports without a label.
    let gbk = FileReader::new(
        FileReaderConfig::new(vec![dir.path().to_owned()])
            .with_fallback_encoding("gbk")
            .unwrap(),
    );
    let out = read(&gbk, json!({"path": "gbk.csv"})).await;
    assert_eq!(out["rows"][0][0], "华东区");
    assert_eq!(out["encoding"], "gbk");
}

#[tokio::test]
async fn bad_workbooks_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader(dir.path());
    let error = |args: Value| {
        let reader = &reader;
        async move { reader.call_json(args).await.unwrap_err().to_string() }
    };
    std::fs::write(dir.path().join("empty.xlsx"), b"").unwrap();
    let err = error(json!({"path": "empty.xlsx"})).await;
    assert!(err.contains("empty (0 bytes), not a workbook"), "{err}");
    std::fs::write(dir.path().join("text.xlsx"), "a,b\n1,2\n").unwrap();
    let err = error(json!({"path": "text.xlsx"})).await;
    assert!(
        err.contains("not a workbook") && err.contains("format \"csv\""),
        "{err}"
    );
    if !openpyxl() {
        return;
    }
    python(
        "import zipfile\n\
         with zipfile.ZipFile('archive.zip', 'w') as z:\n    z.writestr('notes.txt', 'hello')\n",
        dir.path(),
    );
    std::fs::rename(
        dir.path().join("archive.zip"),
        dir.path().join("report.xlsx"),
    )
    .unwrap();
    let err = error(json!({"path": "report.xlsx"})).await;
    assert!(
        err.contains("a zip archive but not a readable Excel workbook"),
        "{err}"
    );
    python(WORKBOOK_PY, dir.path());
    let whole = std::fs::read(dir.path().join("book.xlsx")).unwrap();
    std::fs::write(dir.path().join("cut.xlsx"), &whole[..whole.len() / 2]).unwrap();
    let err = error(json!({"path": "cut.xlsx"})).await;
    assert!(
        err.contains("could not parse `cut.xlsx` as workbook"),
        "{err}"
    );
    let err = error(json!({"path": "book.xlsx", "sheet": "Nope"})).await;
    assert!(
        err.contains("the sheets are: summary, sales, notes"),
        "{err}"
    );
    let err = error(json!({"path": "book.xlsx", "range": "1A:B"})).await;
    assert!(err.contains("not a cell range"), "{err}");
    if !require(
        "msoffcrypto-tool (pip install msoffcrypto-tool)",
        "msoffcrypto-tool",
        &["--help"],
    ) {
        return;
    }
    run(
        "msoffcrypto-tool",
        &["-e", "-p", "s3cret", "book.xlsx", "locked.xlsx"],
        dir.path(),
    );
    let err = error(json!({"path": "locked.xlsx"})).await;
    assert!(err.contains("password-protected"), "{err}");
}

/// The demo's `sales` table exported to CSV by Python's csv module.
const EXPORT_PY: &str = "import csv, sqlite3\n\
con = sqlite3.connect('sales.db')\n\
f = open('sales_export.csv', 'w', newline='')\n\
w = csv.writer(f)\n\
w.writerow(['date', 'region', 'product', 'units', 'amount'])\n\
w.writerows(con.execute('SELECT date, region, product, units, amount FROM sales ORDER BY id'))\n\
f.close()\n";

fn close(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() < 1e-6 * x.abs().max(1.0),
        _ => a == b,
    }
}

#[tokio::test]
async fn the_same_questions_get_the_same_answers_from_csv_workbook_and_sqlite() {
    if !require("Python 3", "python3", &["--version"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    demo_data::generate(dir.path()).unwrap();
    python(EXPORT_PY, dir.path());
    let reader = reader(dir.path());
    let db = QueryDatabase::new(QueryDatabaseConfig::new(dir.path().join("sales.db")));
    let sql = db
        .call_json(
            json!({"query": "SELECT COUNT(*), MIN(amount), MAX(amount), \
            ROUND(AVG(amount), 3), MIN(units), MAX(units), MIN(date), MAX(date) FROM sales"}),
        )
        .await
        .unwrap();
    let [count, min, max, mean, umin, umax, dmin, dmax] =
        [0, 1, 2, 3, 4, 5, 6, 7].map(|i| sql["rows"][0][i].clone());
    let first = db
        .call_json(
            json!({"query": "SELECT date, region, product, units, amount FROM sales \
            ORDER BY id LIMIT 3"}),
        )
        .await
        .unwrap();

    let mut sources = vec![(
        "sales_export.csv".to_owned(),
        read(&reader, json!({"path": "sales_export.csv"})).await,
    )];
    if libreoffice() {
        soffice_convert(
            dir.path(),
            "sales_export.csv",
            "xlsx",
            &["--infilter=CSV:44,34,76,1"],
        );
        let saved = reader_in(&dir.path().join("out"));
        sources.push((
            "out/sales_export.xlsx".to_owned(),
            read(&saved, json!({"path": "sales_export.xlsx"})).await,
        ));
    }
    for (name, out) in &sources {
        assert_eq!(out["row_count"], count, "{name}: row count");
        let amount = &out["profile"][4];
        assert_eq!(amount["type"], "number", "{name}");
        assert!(close(&amount["min"], &min), "{name}: min {amount}");
        assert!(close(&amount["max"], &max), "{name}: max {amount}");
        assert!(
            (amount["mean"].as_f64().unwrap() - mean.as_f64().unwrap()).abs() < 0.001,
            "{name}: mean {amount} vs {mean}"
        );
        let units = &out["profile"][3];
        assert!(
            close(&units["min"], &umin) && close(&units["max"], &umax),
            "{name}"
        );
        assert_eq!(out["profile"][0]["type"], "date", "{name}");
        assert_eq!(out["profile"][0]["min_date"], dmin, "{name}");
        assert_eq!(out["profile"][0]["max_date"], dmax, "{name}");
        for (i, row) in first["rows"].as_array().unwrap().iter().enumerate() {
            let got = &out["rows"][i];
            for (j, want) in row.as_array().unwrap().iter().enumerate() {
                let cell = &got[j];
                let same = match (cell.as_str(), want) {
                    // The CSV keeps the file's text: compare it as the number it is.
                    (Some(text), Value::Number(_)) => {
                        text.parse::<f64>().is_ok_and(|n| close(&json!(n), want))
                    }
                    _ => close(cell, want),
                };
                assert!(same, "{name} row {i} col {j}: {cell} vs {want}");
            }
        }
    }
    if !sources.iter().any(|(n, _)| n.ends_with("xlsx")) {
        eprintln!("skipped: the workbook half of this test needs LibreOffice");
    }
}
