//! `query_database` on PostgreSQL: the demo's tables copied into a database of their own on
//! the server named by `BA_AGENT_TEST_DATABASE_URL` (`.ci/postgres.sh` starts one), the same
//! queries answered as on the SQLite file, writes refused by the read-only transaction, and a
//! slow query stopped by the statement timeout. Skipped without the URL; failed under
//! `CI=true`.

use std::time::{Duration, Instant};

use ba_builtins::BuiltinError;
use ba_builtins::demo_data;
use ba_builtins::query_database::{Database, QueryDatabase, QueryDatabaseConfig};
use rusqlite::Connection;
use serde_json::{Value, json};
use tokio_postgres::NoTls;

fn server_url() -> Option<String> {
    ba_testkit::require_env(
        "BA_AGENT_TEST_DATABASE_URL",
        "run `eval \"$(bash .ci/postgres.sh)\"` to start a server",
    )
}

/// A fresh database on the server holding the demo tables, dropped when done.
struct TestDb {
    admin: String,
    name: String,
    url: String,
}

impl TestDb {
    async fn create(admin: &str, sqlite: &std::path::Path) -> Self {
        let name = format!("ba_builtins_{}", std::process::id());
        let (client, conn) = tokio_postgres::connect(admin, NoTls).await.unwrap();
        tokio::spawn(conn);
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
            .await
            .unwrap();
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        let base = admin.rsplit_once('/').map_or(admin, |(b, _)| b);
        let url = format!("{base}/{name}");
        let (db, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(conn);
        db.batch_execute(
            "CREATE TABLE regions (region TEXT PRIMARY KEY, manager TEXT NOT NULL);
             CREATE TABLE products (product TEXT PRIMARY KEY, category TEXT NOT NULL,
                                    unit_price NUMERIC(10, 2) NOT NULL);
             CREATE TABLE sales (id INTEGER PRIMARY KEY, date DATE NOT NULL,
                                 region TEXT NOT NULL REFERENCES regions(region),
                                 product TEXT NOT NULL REFERENCES products(product),
                                 units INTEGER NOT NULL, amount NUMERIC(12, 2) NOT NULL);",
        )
        .await
        .unwrap();
        let lite = Connection::open(sqlite).unwrap();
        let mut copy = String::new();
        let mut stmt = lite.prepare("SELECT region, manager FROM regions").unwrap();
        for row in stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .unwrap()
        {
            let (r, m) = row.unwrap();
            copy.push_str(&format!("INSERT INTO regions VALUES ('{r}', '{m}');\n"));
        }
        let mut stmt = lite
            .prepare("SELECT product, category, unit_price FROM products")
            .unwrap();
        for row in stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, f64>(2)?,
                ))
            })
            .unwrap()
        {
            let (p, c, u) = row.unwrap();
            copy.push_str(&format!(
                "INSERT INTO products VALUES ('{p}', '{c}', {u});\n"
            ));
        }
        let mut stmt = lite
            .prepare("SELECT id, date, region, product, units, amount FROM sales")
            .unwrap();
        let rows: Vec<String> = stmt
            .query_map([], |r| {
                Ok(format!(
                    "({}, '{}', '{}', '{}', {}, {})",
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, f64>(5)?
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        copy.push_str(&format!(
            "INSERT INTO sales VALUES {};\nANALYZE;",
            rows.join(",\n")
        ));
        db.batch_execute(&copy).await.unwrap();
        Self {
            admin: admin.to_owned(),
            name,
            url,
        }
    }

    async fn drop_it(self) {
        let (client, conn) = tokio_postgres::connect(&self.admin, NoTls).await.unwrap();
        tokio::spawn(conn);
        let _ = client
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .await;
    }
}

/// `(SQLite query, PostgreSQL query, params)`: the same question in each dialect.
fn suite() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "SELECT COUNT(*) AS n, ROUND(SUM(amount), 2) AS total FROM sales",
            "SELECT COUNT(*) AS n, ROUND(SUM(amount), 2) AS total FROM sales",
            json!([]),
        ),
        (
            "SELECT region, ROUND(SUM(amount), 0) AS q3 FROM sales WHERE date BETWEEN ? AND ? \
             GROUP BY region ORDER BY region",
            "SELECT region, ROUND(SUM(amount), 0) AS q3 FROM sales WHERE date BETWEEN $1 AND $2 \
             GROUP BY region ORDER BY region",
            json!(["2024-07-01", "2024-09-30"]),
        ),
        (
            "SELECT product, units, amount, date FROM sales WHERE region = ? AND amount > ? \
             ORDER BY amount DESC, id LIMIT 5",
            "SELECT product, units, amount, to_char(date, 'YYYY-MM-DD') AS date FROM sales \
             WHERE region = $1 AND amount > $2 ORDER BY amount DESC, id LIMIT 5",
            json!(["West", 3000]),
        ),
        (
            "SELECT r.manager, COUNT(*) AS orders FROM sales s JOIN regions r USING (region) \
             GROUP BY r.manager ORDER BY orders DESC, r.manager",
            "SELECT r.manager, COUNT(*) AS orders FROM sales s JOIN regions r USING (region) \
             GROUP BY r.manager ORDER BY orders DESC, r.manager",
            json!([]),
        ),
    ]
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Number(_), Value::Number(_)) => {
            let (p, q) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(1.0));
            (p - q).abs() < 0.006
        }
        _ => a == b,
    }
}

#[tokio::test]
async fn the_query_suite_on_postgresql() {
    let Some(admin) = server_url() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    demo_data::generate(dir.path()).unwrap();
    let sqlite_path = dir.path().join(demo_data::DB_FILE);
    let db = TestDb::create(&admin, &sqlite_path).await;
    let lite = QueryDatabase::new(QueryDatabaseConfig::new(&sqlite_path));
    let mut config = QueryDatabaseConfig::for_database(Database::from_location(&db.url));
    config.timeout = Duration::from_secs(2);
    let pg = QueryDatabase::new(config);

    for (lite_sql, pg_sql, params) in suite() {
        let a = lite
            .call_json(json!({"query": lite_sql, "params": params}))
            .await
            .unwrap();
        let b = pg
            .call_json(json!({"query": pg_sql, "params": params}))
            .await
            .unwrap_or_else(|e| panic!("{pg_sql}: {e}"));
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&a), keys(&b), "the same observation format");
        assert_eq!(a["columns"], b["columns"], "{pg_sql}");
        assert!(
            same(&a["rows"], &b["rows"]),
            "{pg_sql}\nsqlite {a}\npostgres {b}"
        );
    }
    let out = pg
        .call_json(json!({"query": "SELECT * FROM sales ORDER BY id", "max_rows": 7}))
        .await
        .unwrap();
    assert_eq!(
        (out["row_count"].as_u64(), out["truncated"].as_bool()),
        (Some(7), Some(true))
    );
    assert_eq!(
        out["rows"][0][1].as_str().map(str::len),
        Some(10),
        "dates as ISO text"
    );

    // Writes: refused by the server, whatever form they take.
    for sql in [
        "DELETE FROM sales",
        "INSERT INTO regions VALUES ('Mars', 'Nobody')",
        "CREATE TABLE t (x int)",
        "WITH gone AS (DELETE FROM sales RETURNING id) SELECT COUNT(*) FROM gone",
        "SELECT set_config('transaction_read_only', 'off', true)",
    ] {
        let err = pg.call_json(json!({"query": sql})).await.unwrap_err();
        assert!(
            matches!(err, BuiltinError::QueryRefused { .. })
                || err.to_string().contains("read-only"),
            "{sql}: {err}"
        );
        assert_eq!(
            err.kind(),
            ba_protocol::ToolErrorKind::PermissionDenied,
            "{sql}: {err}"
        );
    }
    let count = pg
        .call_json(json!({"query": "SELECT COUNT(*) FROM sales"}))
        .await
        .unwrap();
    let lite_count = lite
        .call_json(json!({"query": "SELECT COUNT(*) FROM sales"}))
        .await
        .unwrap();
    assert_eq!(count["rows"], lite_count["rows"]);

    // A slow query is stopped by the statement timeout (2 s here), not waited out: a minute
    // of sleep ends as a timeout, long before the minute is over even on a loaded machine.
    let start = Instant::now();
    let err = pg
        .call_json(json!({"query": "SELECT pg_sleep(60)"}))
        .await
        .unwrap_err();
    assert!(matches!(err, BuiltinError::Timeout { .. }), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );

    // The schema, with the planner's row estimates (the tables were analysed).
    let schema = pg.call_json(json!({"schema": true})).await.unwrap();
    assert_eq!(schema["database"], "postgresql");
    let names: Vec<&str> = schema["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["products", "regions", "sales"]);
    assert_eq!(schema["tables"][2]["rows"], lite_count["rows"][0][0]);
    assert_eq!(
        schema["tables"][2]["columns"][1],
        json!({"name": "date", "type": "date", "nullable": false})
    );
    let lite_schema = lite.call_json(json!({"schema": true})).await.unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&schema), keys(&lite_schema));

    // Named parameters are SQLite's; PostgreSQL says what to do instead.
    let err = pg
        .call_json(json!({"query": "SELECT $1::int", "params": {"x": 1}}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("positional"), "{err}");
    let err = pg
        .call_json(json!({"query": "SELECT * FROM nosuch"}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("nosuch") && !err.to_string().contains(&admin),
        "{err}"
    );
    db.drop_it().await;
}
