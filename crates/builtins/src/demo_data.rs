//! The demo's sample data: a sales database and a targets file, generated deterministically.
//!
//! The story the data tells, so an analysis has something to find: five regions sell six
//! products through 2024 at a steady pace with a mild Q4 lift, except **West**, which signs a
//! new distributor in July and roughly doubles its orders in Q3, mostly laptops. The targets
//! file was planned before that, so West beats its Q3 target by far while the others land near
//! theirs. Everything comes from a seeded generator, so every run writes the same rows.
//!
//! The same figures are also written as an analyst would receive them: a workbook
//! ([`XLSX_FILE`], feature `excel`: a `targets` sheet and a `sales` sheet with real dates) and
//! the targets exported from a Chinese Excel as GBK ([`GBK_CSV_FILE`], Chinese headers).

use std::io;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, params};

/// The database file name.
pub const DB_FILE: &str = "sales.db";
/// The targets file name.
pub const CSV_FILE: &str = "sales.csv";
/// The targets in GBK, with Chinese headers (地区, 季度, 目标金额, 备注).
pub const GBK_CSV_FILE: &str = "sales_gbk.csv";
/// The workbook: sheets `targets` (as [`CSV_FILE`]) and `sales` (the `sales` table).
#[cfg(feature = "excel")]
pub const XLSX_FILE: &str = "sales.xlsx";

/// The seed of the generator; changing it changes every figure of the demo.
const SEED: u64 = 0x00BA_2024;

/// `(name, manager, base orders a day)`.
const REGIONS: [(&str, &str, f64); 5] = [
    ("North", "Li Wei", 1.00),
    ("South", "Maria Lopez", 0.90),
    ("East", "Chen Jing", 1.10),
    ("West", "Sam Carter", 0.85),
    ("Central", "Aisha Khan", 0.95),
];

/// `(name, category, unit price)`.
const PRODUCTS: [(&str, &str, f64); 6] = [
    ("Laptop Pro", "Hardware", 1200.0),
    ("Tablet Air", "Hardware", 450.0),
    ("Monitor 27", "Hardware", 320.0),
    ("Office Suite", "Software", 150.0),
    ("Cloud Storage", "Services", 80.0),
    ("Support Plan", "Services", 300.0),
];

const DAYS_IN_MONTH_2024: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/// What [`generate`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoData {
    /// The SQLite database (`sales`, `regions`, `products`).
    pub db_path: PathBuf,
    /// The quarterly targets per region, as CSV.
    pub csv_path: PathBuf,
    /// Rows in the `sales` table.
    pub sales_rows: usize,
    /// Total sales amount over the year.
    pub total_amount: f64,
}

/// SplitMix64: tiny, fast and stable across platforms and crate versions, which is what a
/// fixture generator needs more than statistical quality.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize % n.max(1)
    }
}

struct Sale {
    date: String,
    region: &'static str,
    product: &'static str,
    units: i64,
    amount: f64,
}

fn quarter(month: u32) -> usize {
    ((month - 1) / 3) as usize
}

fn sales() -> Vec<Sale> {
    let mut rng = Rng(SEED);
    let mut out = Vec::with_capacity(2100);
    for (m, days) in DAYS_IN_MONTH_2024.iter().enumerate() {
        let month = m as u32 + 1;
        let q = quarter(month);
        for day in 1..=*days {
            let date = format!("2024-{month:02}-{day:02}");
            for &(region, _, base) in &REGIONS {
                let west_boom = region == "West" && q == 2;
                let mut rate = base * if q == 3 { 1.10 } else { 1.0 };
                if west_boom {
                    rate *= 2.1;
                }
                // Up to three orders a day: a binomial draw with the day's expected count.
                let p = (rate / 3.0).min(1.0);
                let orders = (0..3).filter(|_| rng.unit() < p).count();
                for _ in 0..orders {
                    let product = if west_boom && rng.unit() < 0.3 {
                        0
                    } else {
                        rng.below(PRODUCTS.len())
                    };
                    let (name, _, price) = PRODUCTS[product];
                    let units = 1 + rng.below(8) as i64;
                    let discount = [0.0, 0.0, 0.05, 0.10][rng.below(4)];
                    let amount = (units as f64 * price * (1.0 - discount) * 100.0).round() / 100.0;
                    out.push(Sale {
                        date: date.clone(),
                        region,
                        product: name,
                        units,
                        amount,
                    });
                }
            }
        }
    }
    out
}

/// Writes [`DB_FILE`] and [`CSV_FILE`] into `dir` (created if missing), replacing old copies.
pub fn generate(dir: &Path) -> io::Result<DemoData> {
    std::fs::create_dir_all(dir)?;
    let sales = sales();
    let db_path = dir.join(DB_FILE);
    let csv_path = dir.join(CSV_FILE);
    for stale in [db_path.clone(), dir.join(format!("{DB_FILE}-journal"))] {
        match std::fs::remove_file(&stale) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
    }
    write_db(&db_path, &sales)
        .map_err(|err| io::Error::other(format!("writing {}: {err}", db_path.display())))?;
    let targets = targets(&sales);
    std::fs::write(&csv_path, targets_csv(&targets, TARGET_HEADER))?;
    let zh = targets_csv(&targets, TARGET_HEADER_ZH).replace('\n', "\r\n");
    let (gbk, _, unmappable) = encoding_rs::GBK.encode(&zh);
    if unmappable {
        return Err(io::Error::other("the targets do not fit in GBK"));
    }
    std::fs::write(dir.join(GBK_CSV_FILE), gbk)?;
    #[cfg(feature = "excel")]
    {
        let path = dir.join(XLSX_FILE);
        let bytes = workbook(&targets, &sales)
            .map_err(|err| io::Error::other(format!("writing {}: {err}", path.display())))?;
        std::fs::write(&path, bytes)?;
    }
    Ok(DemoData {
        db_path,
        csv_path,
        sales_rows: sales.len(),
        total_amount: (sales.iter().map(|s| s.amount).sum::<f64>() * 100.0).round() / 100.0,
    })
}

fn write_db(path: &Path, sales: &[Sale]) -> rusqlite::Result<()> {
    let mut conn = Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode = DELETE;
         CREATE TABLE regions (
             region  TEXT PRIMARY KEY,
             manager TEXT NOT NULL
         );
         CREATE TABLE products (
             product    TEXT PRIMARY KEY,
             category   TEXT NOT NULL,
             unit_price REAL NOT NULL
         );
         CREATE TABLE sales (
             id      INTEGER PRIMARY KEY,
             date    TEXT NOT NULL,
             region  TEXT NOT NULL REFERENCES regions(region),
             product TEXT NOT NULL REFERENCES products(product),
             units   INTEGER NOT NULL,
             amount  REAL NOT NULL
         );
         CREATE INDEX sales_date ON sales(date);
         CREATE INDEX sales_region ON sales(region);",
    )?;
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare("INSERT INTO regions VALUES (?1, ?2)")?;
        for (region, manager, _) in REGIONS {
            stmt.execute(params![region, manager])?;
        }
        let mut stmt = tx.prepare("INSERT INTO products VALUES (?1, ?2, ?3)")?;
        for (product, category, price) in PRODUCTS {
            stmt.execute(params![product, category, price])?;
        }
        let mut stmt = tx.prepare(
            "INSERT INTO sales (date, region, product, units, amount) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        for s in sales {
            stmt.execute(params![s.date, s.region, s.product, s.units, s.amount])?;
        }
    }
    tx.commit()?;
    conn.execute_batch("VACUUM")?;
    Ok(())
}

/// One row of the targets: region, quarter (`Q1`…), amount, note.
type Target = (&'static str, String, f64, &'static str);

const TARGET_HEADER: [&str; 4] = ["region", "quarter", "target_amount", "note"];
const TARGET_HEADER_ZH: [&str; 4] = ["地区", "季度", "目标金额", "备注"];

fn targets_csv(targets: &[Target], header: [&str; 4]) -> String {
    let mut csv = header.join(",");
    csv.push('\n');
    for (region, quarter, target, note) in targets {
        csv.push_str(&format!(
            "{region},{quarter},{target:.0},{}\n",
            csv_field(note)
        ));
    }
    csv
}

/// The workbook, deterministic to the byte (fixed document dates; the writer's zip entries
/// carry no clock time).
#[cfg(feature = "excel")]
fn workbook(targets: &[Target], sales: &[Sale]) -> Result<Vec<u8>, rust_xlsxwriter::XlsxError> {
    use rust_xlsxwriter::{DocProperties, ExcelDateTime, Format, Workbook};
    let mut book = Workbook::new();
    let created = ExcelDateTime::from_ymd(2024, 12, 31)?;
    book.set_properties(&DocProperties::new().set_creation_datetime(&created));
    let bold = Format::new().set_bold();
    let date = Format::new().set_num_format("yyyy-mm-dd");
    let sheet = book.add_worksheet().set_name("targets")?;
    for (c, h) in (0u16..).zip(TARGET_HEADER) {
        sheet.write_string_with_format(0, c, h, &bold)?;
    }
    for (r, (region, quarter, target, note)) in (1u32..).zip(targets) {
        sheet.write_string(r, 0, *region)?;
        sheet.write_string(r, 1, quarter)?;
        sheet.write_number(r, 2, *target)?;
        if !note.is_empty() {
            sheet.write_string(r, 3, *note)?;
        }
    }
    let sheet = book.add_worksheet().set_name("sales")?;
    for (c, h) in (0u16..).zip(["date", "region", "product", "units", "amount"]) {
        sheet.write_string_with_format(0, c, h, &bold)?;
    }
    for (r, s) in (1u32..).zip(sales) {
        let day = ExcelDateTime::parse_from_str(&s.date)?;
        sheet.write_datetime_with_format(r, 0, &day, &date)?;
        sheet.write_string(r, 1, s.region)?;
        sheet.write_string(r, 2, s.product)?;
        #[allow(clippy::cast_precision_loss)]
        sheet.write_number(r, 3, s.units as f64)?;
        sheet.write_number(r, 4, s.amount)?;
    }
    book.save_to_buffer()
}

/// Quarterly targets: planned near each quarter's actual figure, except West's Q3 target,
/// which was planned from its Q2 before the new distributor arrived.
fn targets(sales: &[Sale]) -> Vec<Target> {
    let mut actual = [[0.0f64; 4]; REGIONS.len()];
    for s in sales {
        let r = REGIONS
            .iter()
            .position(|(n, _, _)| *n == s.region)
            .unwrap_or(0);
        let month: u32 = s.date[5..7].parse().unwrap_or(1);
        actual[r][quarter(month)] += s.amount;
    }
    let mut rng = Rng(SEED ^ 0x007A_46E7);
    let mut out = Vec::new();
    for (r, (region, _, _)) in REGIONS.iter().enumerate() {
        for q in 0..4 {
            let (planned, note) = if *region == "West" && q == 2 {
                (
                    actual[r][1] * 1.05,
                    "Planned on Q2 run rate, before the \"Pacific Partners\" distributor deal \
                     signed in July",
                )
            } else if q == 3 {
                (
                    actual[r][q] * (0.95 + 0.1 * rng.unit()),
                    "Includes holiday season, Nov-Dec",
                )
            } else {
                (actual[r][q] * (0.95 + 0.1 * rng.unit()), "")
            };
            let target = (planned / 1000.0).round() * 1000.0;
            out.push((*region, format!("Q{}", q + 1), target, note));
        }
    }
    out
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quarterly(conn: &Connection, region: &str) -> Vec<f64> {
        let mut stmt = conn
            .prepare(
                "SELECT (CAST(substr(date, 6, 2) AS INTEGER) + 2) / 3 AS q, SUM(amount) \
                 FROM sales WHERE region = ?1 GROUP BY q ORDER BY q",
            )
            .unwrap();
        stmt.query_map([region], |row| row.get::<_, f64>(1))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn data_is_deterministic_and_tells_the_story() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let first = generate(a.path()).unwrap();
        let second = generate(b.path()).unwrap();
        assert_eq!(first.sales_rows, second.sales_rows);
        assert_eq!(first.total_amount, second.total_amount);
        assert_eq!(
            std::fs::read(&first.csv_path).unwrap(),
            std::fs::read(&second.csv_path).unwrap()
        );
        assert!(
            (1800..=2300).contains(&first.sales_rows),
            "{} rows",
            first.sales_rows
        );
        assert!(std::fs::metadata(&first.db_path).unwrap().len() < 1024 * 1024);

        let conn = Connection::open(&first.db_path).unwrap();
        let west = quarterly(&conn, "West");
        let west_growth = west[2] / west[1];
        assert!(west_growth > 1.6, "West Q3/Q2 = {west_growth}");
        for (region, _, _) in REGIONS.iter().filter(|r| r.0 != "West") {
            let q = quarterly(&conn, region);
            let growth = q[2] / q[1];
            assert!((0.7..1.35).contains(&growth), "{region} Q3/Q2 = {growth}");
        }
        let rows: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sales WHERE date LIKE '2024-%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows as usize, first.sales_rows);
        let joined: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sales JOIN regions USING (region) JOIN products USING (product)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(joined as usize, first.sales_rows);
    }

    #[test]
    fn targets_file_parses_and_west_beats_q3() {
        let dir = tempfile::tempdir().unwrap();
        let data = generate(dir.path()).unwrap();
        let records: Vec<Vec<String>> = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_path(&data.csv_path)
            .unwrap()
            .records()
            .map(|r| r.unwrap().iter().map(str::to_owned).collect())
            .collect();
        assert_eq!(records[0], ["region", "quarter", "target_amount", "note"]);
        assert_eq!(records.len(), 1 + REGIONS.len() * 4);
        let west_q3 = records
            .iter()
            .find(|r| r[0] == "West" && r[1] == "Q3")
            .unwrap();
        assert!(west_q3[3].contains("\"Pacific Partners\""));
        let target: f64 = west_q3[2].parse().unwrap();
        let conn = Connection::open(&data.db_path).unwrap();
        let actual = quarterly(&conn, "West")[2];
        assert!(actual > target * 1.4, "West Q3 {actual} vs target {target}");
    }

    #[test]
    fn regenerating_replaces_old_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DB_FILE), b"not a database").unwrap();
        let data = generate(dir.path()).unwrap();
        let conn = Connection::open(&data.db_path).unwrap();
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM regions", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 5);
    }
}
