//! SQLite: the file opened read-only, `query_only` on, no attachments; a statement that
//! SQLite's compiler reports as writing is not run. Work runs on tokio's blocking pool and is
//! interrupted at the timeout.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::limits::Limit;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OpenFlags, Statement};
use serde_json::{Value, json};

use super::{NAME, QueryParams, TableInfo, refused, rows_json, schema_json};
use crate::BuiltinError;

/// Runs `work` on a read-only connection to `path`, interrupting it at `timeout`.
async fn with_connection<T: Send + 'static>(
    path: PathBuf,
    timeout: Duration,
    work: impl FnOnce(&Connection, &Path) -> Result<T, BuiltinError> + Send + 'static,
) -> Result<T, BuiltinError> {
    let (handle_tx, handle_rx) = tokio::sync::oneshot::channel();
    let task = tokio::task::spawn_blocking(move || {
        let conn = open_read_only(&path)?;
        // The receiver only disappears when the caller gave up, and then nobody needs it.
        let _ = handle_tx.send(conn.get_interrupt_handle());
        work(&conn, &path)
    });
    let joined = match tokio::time::timeout(timeout, task).await {
        Ok(joined) => joined,
        Err(_) => {
            if let Ok(handle) = handle_rx.await {
                handle.interrupt();
            }
            return Err(BuiltinError::Timeout {
                tool: NAME,
                seconds: timeout.as_secs(),
            });
        }
    };
    joined.map_err(|err| BuiltinError::Environment {
        tool: NAME,
        message: format!("the query worker stopped: {err}"),
    })?
}

/// Runs one query.
pub(super) async fn query(
    path: PathBuf,
    sql: String,
    params: QueryParams,
    max_rows: usize,
    timeout: Duration,
) -> Result<Value, BuiltinError> {
    with_connection(path, timeout, move |conn, path| {
        execute(conn, path, &sql, &params, max_rows)
    })
    .await
}

/// Tables and views with their columns and exact row counts (views uncounted).
pub(super) async fn describe(path: PathBuf, timeout: Duration) -> Result<Value, BuiltinError> {
    with_connection(path, timeout, |conn, path| {
        let err = |e: rusqlite::Error| db_error(path, &e);
        let mut stmt = conn
            .prepare(
                "SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'view') \
                 AND name NOT LIKE 'sqlite_%' ORDER BY name LIMIT 500",
            )
            .map_err(err)?;
        let names: Vec<(String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        let mut tables = Vec::with_capacity(names.len());
        for (name, kind) in names {
            let mut cols = conn
                .prepare("SELECT name, type, \"notnull\" FROM pragma_table_info(?1)")
                .map_err(err)?;
            let columns = cols
                .query_map([&name], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)? == 0,
                    ))
                })
                .map_err(err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(err)?;
            let rows = if kind == "table" {
                let quoted = name.replace('"', "\"\"");
                conn.query_row(&format!("SELECT COUNT(*) FROM \"{quoted}\""), [], |r| {
                    r.get(0)
                })
                .map(Some)
                .map_err(err)?
            } else {
                None
            };
            tables.push(TableInfo {
                name,
                kind: if kind == "table" { "table" } else { "view" },
                rows,
                rows_exact: rows.is_some(),
                columns,
            });
        }
        Ok(schema_json("sqlite", &tables))
    })
    .await
}

fn db_error(path: &Path, err: &rusqlite::Error) -> BuiltinError {
    if matches!(err.sqlite_error_code(), Some(rusqlite::ErrorCode::ReadOnly)) {
        return refused(&format!("the database refused to write: {err}"));
    }
    if err.to_string().contains("too many attached databases") {
        return refused("ATTACH is not allowed: only the configured database may be read");
    }
    BuiltinError::Database {
        path: path.to_owned(),
        message: err.to_string(),
    }
}

fn open_read_only(path: &Path) -> Result<Connection, BuiltinError> {
    if !path.is_file() {
        return Err(BuiltinError::NotFound {
            path: path.display().to_string(),
        });
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| db_error(path, &e))?;
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| db_error(path, &e))?;
    // ATTACH passes SQLite's read-only test but would open other files: allow none.
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)
        .map_err(|e| db_error(path, &e))?;
    Ok(conn)
}

fn execute(
    conn: &Connection,
    path: &Path,
    sql: &str,
    params: &QueryParams,
    max_rows: usize,
) -> Result<Value, BuiltinError> {
    let mut stmt = conn.prepare(sql).map_err(|e| match e {
        rusqlite::Error::MultipleStatement => refused("only one statement may be run at a time"),
        other => db_error(path, &other),
    })?;
    if !stmt.readonly() {
        return Err(refused(
            "SQLite reports that this statement would write; the database is read-only",
        ));
    }
    bind(&mut stmt, params).map_err(|e| match e {
        Bind::Invalid(message) => BuiltinError::InvalidArguments {
            tool: NAME,
            message,
        },
        Bind::Sql(err) => db_error(path, &err),
    })?;
    let columns: Vec<String> = stmt.column_names().map(String::from).collect();
    let mut rows_out = Vec::new();
    let mut truncated = false;
    let mut rows = stmt.raw_query();
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(err)
                if err.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) =>
            {
                return Err(BuiltinError::Timeout {
                    tool: NAME,
                    seconds: 0,
                });
            }
            Err(err) => return Err(db_error(path, &err)),
        };
        if rows_out.len() == max_rows {
            truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(columns.len());
        for i in 0..columns.len() {
            let value = row.get_ref(i).map_err(|e| db_error(path, &e))?;
            values.push(to_json(value));
        }
        rows_out.push(Value::Array(values));
    }
    Ok(rows_json(columns, rows_out, truncated))
}

enum Bind {
    Invalid(String),
    Sql(rusqlite::Error),
}

fn bind(stmt: &mut Statement<'_>, params: &QueryParams) -> Result<(), Bind> {
    let expected = stmt.parameter_count();
    match params {
        QueryParams::Positional(values) => {
            if values.len() != expected {
                return Err(Bind::Invalid(format!(
                    "params: the query has {expected} parameter(s) but {} value(s) were given",
                    values.len()
                )));
            }
            for (i, value) in values.iter().enumerate() {
                let value = to_sql(&format!("params[{i}]"), value)?;
                stmt.raw_bind_parameter(i + 1, value).map_err(Bind::Sql)?;
            }
        }
        QueryParams::Named(map) => {
            if map.is_empty() && expected > 0 {
                return Err(Bind::Invalid(format!(
                    "params: the query has {expected} parameter(s) but none were given"
                )));
            }
            let mut bound = 0;
            for (key, value) in map {
                let index = find_named(stmt, key).map_err(Bind::Sql)?.ok_or_else(|| {
                    Bind::Invalid(format!("params: the query has no parameter named `{key}`"))
                })?;
                let value = to_sql(&format!("params.{key}"), value)?;
                stmt.raw_bind_parameter(index, value).map_err(Bind::Sql)?;
                bound += 1;
            }
            if bound < expected {
                return Err(Bind::Invalid(format!(
                    "params: the query has {expected} parameter(s) but only {bound} were given"
                )));
            }
        }
    }
    Ok(())
}

fn find_named(stmt: &Statement<'_>, key: &str) -> rusqlite::Result<Option<usize>> {
    if key.starts_with([':', '@', '$']) {
        return stmt.parameter_index(key);
    }
    for prefix in [':', '@', '$'] {
        if let Some(index) = stmt.parameter_index(&format!("{prefix}{key}"))? {
            return Ok(Some(index));
        }
    }
    Ok(None)
}

fn to_sql(field: &str, value: &Value) -> Result<SqlValue, Bind> {
    Ok(match value {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => SqlValue::Integer(i),
            (None, Some(f)) => SqlValue::Real(f),
            _ => {
                return Err(Bind::Invalid(format!(
                    "{field}: number {n} is out of range"
                )));
            }
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Array(_) | Value::Object(_) => {
            return Err(Bind::Invalid(format!(
                "{field}: only strings, numbers, booleans and null can be bound"
            )));
        }
    })
}

fn to_json(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => json!(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::String(format!("<blob of {} bytes>", b.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query_database::{QueryDatabase, QueryDatabaseConfig};

    fn db() -> (tempfile::TempDir, QueryDatabase) {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE sales(date TEXT, region TEXT, units INTEGER, amount REAL, note TEXT);
             INSERT INTO sales VALUES ('2024-01-02','West',3,30.5,'delete me'),
                                      ('2024-01-03','East',5,50.0,NULL),
                                      ('2024-02-01','West',7,70.25,'x');",
        )
        .unwrap();
        drop(conn);
        (tmp, QueryDatabase::new(QueryDatabaseConfig::new(path)))
    }

    async fn count(tool: &QueryDatabase) -> i64 {
        let out = tool
            .call_json(json!({"query": "SELECT COUNT(*) FROM sales"}))
            .await
            .unwrap();
        out["rows"][0][0].as_i64().unwrap()
    }

    #[tokio::test]
    async fn selects_with_named_and_positional_params() {
        let (_tmp, tool) = db();
        let out = tool
            .call_json(json!({
                "query": "SELECT region, SUM(amount) AS total FROM sales WHERE region = :region \
                          GROUP BY region",
                "params": {"region": "West"}
            }))
            .await
            .unwrap();
        assert_eq!(out["columns"], json!(["region", "total"]));
        assert_eq!(out["rows"], json!([["West", 100.75]]));
        let out = tool
            .call_json(
                json!({"query": "SELECT note FROM sales WHERE units > ? ORDER BY units",
                         "params": [4]}),
            )
            .await
            .unwrap();
        assert_eq!(out["rows"], json!([[null], ["x"]]));
        let out = tool
            .call_json(
                json!({"query": "WITH t AS (SELECT replace(region, 'W', 'w') r FROM sales) \
                                   SELECT r FROM t LIMIT 1 -- delete"}),
            )
            .await
            .unwrap();
        assert_eq!(out["rows"], json!([["west"]]));
    }

    #[tokio::test]
    async fn max_rows_truncates() {
        let (_tmp, tool) = db();
        let out = tool
            .call_json(json!({"query": "SELECT * FROM sales", "max_rows": 2}))
            .await
            .unwrap();
        assert_eq!(out["row_count"], 2);
        assert_eq!(out["truncated"], true);
        let out = tool
            .call_json(json!({"query": "SELECT * FROM sales"}))
            .await
            .unwrap();
        assert_eq!(out["row_count"], 3);
        assert_eq!(out["truncated"], false);
    }

    #[tokio::test]
    async fn writes_are_refused_by_sqlite_and_nothing_changes() {
        let (tmp, tool) = db();
        let attach_path = tmp.path().join("other.db");
        let writes = [
            "INSERT INTO sales VALUES ('2024-03-01','North',1,1.0,NULL)",
            "UPDATE sales SET units = 0",
            "DELETE FROM sales",
            "delete from sales where 1",
            &format!("ATTACH DATABASE '{}' AS other", attach_path.display()),
            "PRAGMA user_version = 5",
            "PRAGMA journal_mode = DELETE",
            "CREATE TABLE t(x)",
            "DROP TABLE sales",
            "ALTER TABLE sales ADD COLUMN y",
            "VACUUM",
            &format!("VACUUM INTO '{}'", attach_path.display()),
            "REPLACE INTO sales VALUES ('2024-03-01','North',1,1.0,NULL)",
            "WITH x AS (SELECT 1) DELETE FROM sales",
            "/* hi */ UPDATE sales SET units = 1",
            "BEGIN IMMEDIATE",
        ];
        for sql in writes {
            let err = tool.call_json(json!({"query": sql})).await.unwrap_err();
            assert!(
                matches!(err, BuiltinError::QueryRefused { .. }),
                "{sql}: {err}"
            );
            assert_eq!(err.kind(), ba_protocol::ToolErrorKind::PermissionDenied);
        }
        let err = tool
            .call_json(json!({"query": "SELECT 1; DELETE FROM sales"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("one statement"), "{err}");
        assert_eq!(count(&tool).await, 3);
        assert!(!attach_path.exists());
        // Words inside literals are data, not statements.
        let out = tool
            .call_json(json!({"query": "SELECT 'DROP TABLE x' AS \"delete\" -- insert"}))
            .await
            .unwrap();
        assert_eq!(out["rows"], json!([["DROP TABLE x"]]));
    }

    #[tokio::test]
    async fn the_schema_lists_tables_columns_and_counts() {
        let (_tmp, tool) = db();
        let out = tool.call_json(json!({"schema": true})).await.unwrap();
        assert_eq!(out["database"], "sqlite");
        assert_eq!(out["tables"][0]["name"], "sales");
        assert_eq!(out["tables"][0]["rows"], 3);
        assert_eq!(
            out["tables"][0]["columns"][2],
            json!({"name": "units", "type": "INTEGER", "nullable": true})
        );
        let msg = out["message"].as_str().unwrap();
        assert!(
            msg.starts_with("sqlite, 1 tables: sales (3 rows: date TEXT"),
            "{msg}"
        );
    }

    #[test]
    fn readonly_connection_stops_writes() {
        let (tmp, _tool) = db();
        let conn = open_read_only(&tmp.path().join("t.db")).unwrap();
        let err = conn.execute("INSERT INTO sales(units) VALUES (1)", []);
        assert!(err.is_err());
        let stmt = conn.prepare("DELETE FROM sales").unwrap();
        assert!(!stmt.readonly());
    }

    #[tokio::test]
    async fn bad_params_and_sql_errors_are_clear() {
        let (_tmp, tool) = db();
        let err = tool
            .call_json(json!({"query": "SELECT * FROM sales WHERE region = :region"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("none were given"), "{err}");
        let err = tool
            .call_json(
                json!({"query": "SELECT * FROM sales WHERE region = :region",
                         "params": {"regoin": "West"}}),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("regoin"), "{err}");
        let err = tool
            .call_json(json!({"query": "SELECT * FROM nosuch"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("nosuch"), "{err}");
        let missing = QueryDatabase::new(QueryDatabaseConfig::new("/no/such.db"));
        let err = missing
            .call_json(json!({"query": "SELECT 1"}))
            .await
            .unwrap_err();
        assert!(matches!(err, BuiltinError::NotFound { .. }), "{err}");
    }

    #[tokio::test]
    async fn long_queries_are_interrupted_at_the_timeout() {
        let (tmp, _) = db();
        let mut config = QueryDatabaseConfig::new(tmp.path().join("t.db"));
        config.timeout = Duration::from_millis(200);
        let tool = QueryDatabase::new(config);
        let err = tool
            .call_json(
                json!({"query": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                                   SELECT COUNT(*) FROM c"}),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, BuiltinError::Timeout { .. }), "{err}");
    }
}
