//! `query_database`: one read-only query on a SQLite database (seed 003).
//!
//! Three independent locks keep it read-only: a keyword check that refuses anything but a single
//! SELECT/WITH/EXPLAIN statement (so the model gets a clear reason), `Statement::readonly()`
//! from SQLite's own compiler, and a connection opened read-only with `query_only` on.

use ba_protocol::tool::PermissionLevel;
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use std::path::PathBuf;
use std::time::Duration;

use ba_protocol::OutputLevel;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OpenFlags, Statement};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::BuiltinError;

/// The tool name.
pub const NAME: &str = "query_database";

/// The description shown to the model.
pub const DESCRIPTION: &str = "Run one read-only SQL query (SELECT, WITH or EXPLAIN) on the \
    business SQLite database. Pass values through params (named :name or positional ?).";

fn default_max_rows() -> usize {
    1000
}

/// Query parameters: an object for named parameters (`:region`, `@region`, `$region`; the key
/// may omit the prefix) or an array for positional `?` parameters.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum QueryParams {
    /// Named parameters.
    Named(Map<String, Value>),
    /// Positional parameters, in order.
    Positional(Vec<Value>),
}

impl Default for QueryParams {
    fn default() -> Self {
        Self::Named(Map::new())
    }
}

/// Arguments of `query_database` (seed 003).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryDatabaseArgs {
    /// The SQL query: a single SELECT, WITH or EXPLAIN statement.
    pub query: String,
    /// The most rows returned (default 1000).
    #[serde(default = "default_max_rows")]
    pub max_rows: usize,
    /// Query parameters (parameterised query).
    #[serde(default)]
    pub params: QueryParams,
    /// How detailed the answer should be: brief, standard or full.
    #[serde(default)]
    pub response_format: OutputLevel,
}

/// Which database and how far a query may go.
#[derive(Debug, Clone)]
pub struct QueryDatabaseConfig {
    /// The SQLite file.
    pub path: PathBuf,
    /// The ceiling on `max_rows`, whatever the model asks.
    pub max_rows_cap: usize,
    /// A query still running after this is interrupted.
    pub timeout: Duration,
}

impl QueryDatabaseConfig {
    /// The database at `path`, at most 10 000 rows, 30 s per query.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            max_rows_cap: 10_000,
            timeout: Duration::from_secs(30),
        }
    }
}

/// The `query_database` tool.
#[derive(Debug, Clone)]
pub struct QueryDatabase {
    config: QueryDatabaseConfig,
}

impl QueryDatabase {
    /// A tool over `config.path`.
    pub fn new(config: QueryDatabaseConfig) -> Self {
        Self { config }
    }

    /// The JSON Schema of the arguments.
    pub fn schema() -> Value {
        super::args_schema::<QueryDatabaseArgs>()
    }

    /// Parses `args` and runs.
    pub async fn call_json(&self, args: Value) -> Result<Value, BuiltinError> {
        self.run(super::parse_args(NAME, args)?).await
    }

    /// Runs the query on tokio's blocking pool and returns `columns`, `rows` (arrays of values
    /// in column order), `row_count` and `truncated`.
    pub async fn run(&self, args: QueryDatabaseArgs) -> Result<Value, BuiltinError> {
        check_read_only(&args.query)?;
        let max_rows = args.max_rows.min(self.config.max_rows_cap);
        let path = self.config.path.clone();
        let (handle_tx, handle_rx) = tokio::sync::oneshot::channel();
        let task = tokio::task::spawn_blocking(move || {
            let conn = open_read_only(&path)?;
            // The receiver only disappears when the caller gave up, and then nobody needs it.
            let _ = handle_tx.send(conn.get_interrupt_handle());
            execute(&conn, &path, &args, max_rows)
        });
        let timed = tokio::time::timeout(self.config.timeout, task).await;
        let joined = match timed {
            Ok(joined) => joined,
            Err(_) => {
                if let Ok(handle) = handle_rx.await {
                    handle.interrupt();
                }
                return Err(BuiltinError::Timeout {
                    tool: NAME,
                    seconds: self.config.timeout.as_secs(),
                });
            }
        };
        joined.map_err(|err| BuiltinError::Environment {
            tool: NAME,
            message: format!("the query worker stopped: {err}"),
        })?
    }
}

fn db_error(path: &std::path::Path, err: &rusqlite::Error) -> BuiltinError {
    BuiltinError::Database {
        path: path.to_owned(),
        message: err.to_string(),
    }
}

fn open_read_only(path: &std::path::Path) -> Result<Connection, BuiltinError> {
    if !path.is_file() {
        return Err(BuiltinError::NotFound {
            path: path.display().to_string(),
        });
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| db_error(path, &e))?;
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| db_error(path, &e))?;
    Ok(conn)
}

fn execute(
    conn: &Connection,
    path: &std::path::Path,
    args: &QueryDatabaseArgs,
    max_rows: usize,
) -> Result<Value, BuiltinError> {
    let mut stmt = conn.prepare(&args.query).map_err(|e| match e {
        rusqlite::Error::MultipleStatement => refused("only one statement may be run at a time"),
        other => db_error(path, &other),
    })?;
    if !stmt.readonly() {
        return Err(refused("SQLite reports that this statement would write"));
    }
    bind(&mut stmt, &args.params).map_err(|e| match e {
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
    Ok(json!({
        "columns": columns,
        "row_count": rows_out.len(),
        "truncated": truncated,
        "rows": rows_out,
    }))
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

fn refused(reason: &str) -> BuiltinError {
    BuiltinError::QueryRefused {
        reason: reason.to_owned(),
    }
}

/// Statement keywords that change data, schema or connection state. `REPLACE` is listed too,
/// but followed by `(` it is the string function and allowed.
const FORBIDDEN: [&str; 17] = [
    "INSERT",
    "UPDATE",
    "DELETE",
    "REPLACE",
    "UPSERT",
    "ATTACH",
    "DETACH",
    "PRAGMA",
    "CREATE",
    "DROP",
    "ALTER",
    "VACUUM",
    "REINDEX",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
];

/// Refuses anything but one SELECT / WITH / EXPLAIN statement. Words inside string literals,
/// quoted identifiers and comments are ignored, so `WHERE note = 'delete me'` passes.
pub fn check_read_only(sql: &str) -> Result<(), BuiltinError> {
    let tokens = tokenize(sql);
    let mut words = tokens.iter().filter_map(|t| match t {
        Token::Word(w) => Some(w.as_str()),
        Token::Semicolon | Token::OpenParen => None,
    });
    match words.next() {
        None => return Err(refused("the query is empty")),
        Some("SELECT" | "WITH" | "EXPLAIN") => {}
        Some(first) => {
            return Err(refused(&format!(
                "only SELECT, WITH and EXPLAIN queries are allowed, not {first}"
            )));
        }
    }
    let mut seen_semicolon = false;
    for (i, token) in tokens.iter().enumerate() {
        match token {
            Token::Semicolon => seen_semicolon = true,
            _ if seen_semicolon => {
                return Err(refused("only one statement may be run at a time"));
            }
            Token::Word(w) if FORBIDDEN.contains(&w.as_str()) => {
                let is_function = w == "REPLACE" && tokens.get(i + 1) == Some(&Token::OpenParen);
                if !is_function {
                    let hint = if w == "PRAGMA" {
                        " (read settings with the pragma_* table functions, e.g. \
                         SELECT * FROM pragma_table_info('sales'))"
                    } else {
                        ""
                    };
                    return Err(refused(&format!(
                        "{w} is not allowed: the database is read-only{hint}"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    /// A bare word, upper-cased.
    Word(String),
    Semicolon,
    OpenParen,
}

fn tokenize(sql: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' | '`' | '[' => {
                let close = if c == '[' { ']' } else { c };
                // SQL doubles the quote to escape it; skipping to each close and carrying on
                // when the next char is the quote again handles that.
                while let Some(d) = chars.next() {
                    if d == close {
                        if close != ']' && chars.peek() == Some(&close) {
                            chars.next();
                            continue;
                        }
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for d in chars.by_ref() {
                    if prev == '*' && d == '/' {
                        break;
                    }
                    prev = d;
                }
            }
            ';' => tokens.push(Token::Semicolon),
            '(' => tokens.push(Token::OpenParen),
            c if c.is_alphabetic() || c == '_' => {
                let mut word = String::from(c);
                while let Some(&d) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' || d == '$' {
                        word.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Word(word.to_ascii_uppercase()));
            }
            _ => {}
        }
    }
    tokens
}

#[async_trait::async_trait]
impl Tool for QueryDatabase {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        Self::schema()
    }

    async fn call(&self, input: Value, _ctx: &CallContext) -> Result<Value, ToolError> {
        Ok(self.call_json(input).await?)
    }

    fn capabilities(&self) -> ToolCapabilities {
        // A read-only query gives the same answer for the same arguments and changes nothing, so it
        // is idempotent and safe at the restricted level; a query that ran out of time would run
        // out again.
        ToolCapabilities::default()
            .with_idempotent(true)
            .with_required_permission(PermissionLevel::Restricted)
            .with_deterministic_timeouts(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    async fn writes_are_refused_and_nothing_changes() {
        let (tmp, tool) = db();
        let attach_path = tmp.path().join("other.db");
        let writes = [
            "INSERT INTO sales VALUES ('2024-03-01','North',1,1.0,NULL)",
            "UPDATE sales SET units = 0",
            "DELETE FROM sales",
            "delete from sales where 1",
            &format!("ATTACH DATABASE '{}' AS other", attach_path.display()),
            "DETACH DATABASE main",
            "PRAGMA user_version = 5",
            "PRAGMA journal_mode = DELETE",
            "CREATE TABLE t(x)",
            "DROP TABLE sales",
            "ALTER TABLE sales ADD COLUMN y",
            "VACUUM",
            "REPLACE INTO sales VALUES ('2024-03-01','North',1,1.0,NULL)",
            "SELECT 1; DELETE FROM sales",
            "WITH x AS (SELECT 1) DELETE FROM sales",
            "EXPLAIN DELETE FROM sales",
            "/* hi */ UPDATE sales SET units = 1",
        ];
        for sql in writes {
            let err = tool.call_json(json!({"query": sql})).await.unwrap_err();
            assert!(
                matches!(err, BuiltinError::QueryRefused { .. }),
                "{sql}: {err}"
            );
            assert_eq!(err.kind(), ba_protocol::ToolErrorKind::PermissionDenied);
        }
        assert_eq!(count(&tool).await, 3);
        assert!(!attach_path.exists());
    }

    #[test]
    fn keyword_check_ignores_literals_and_comments() {
        check_read_only("SELECT 'DROP TABLE x' AS \"delete\" FROM [update] -- insert").unwrap();
        check_read_only("SELECT 1;").unwrap();
        check_read_only("select * from pragma_table_info('sales')").unwrap();
        let err = check_read_only("SELECT 1; ").map(|_| ());
        assert!(err.is_ok());
        assert!(check_read_only("   ").is_err());
        assert!(check_read_only("SELECT 'a'';DROP' ; DROP TABLE x").is_err());
    }

    #[test]
    fn readonly_connection_stops_writes_the_keyword_check_misses() {
        let (_tmp, tool) = db();
        let conn = open_read_only(&tool.config.path).unwrap();
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
        let (_tmp, mut tool) = db();
        tool.config.timeout = Duration::from_millis(200);
        let err = tool
            .call_json(
                json!({"query": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                                   SELECT COUNT(*) FROM c"}),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, BuiltinError::Timeout { .. }), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn keyword_check_never_panics(sql in "[A-Za-z ;'\"`\\[\\]()*/é-]{0,60}") {
            let _ = check_read_only(&sql);
        }

        #[test]
        fn no_forbidden_statement_passes(
            word in proptest::sample::select(FORBIDDEN.to_vec()),
            tail in "[a-z ]{0,20}"
        ) {
            let sql = format!("SELECT 1; {word} {tail}");
            proptest::prop_assert!(check_read_only(&sql).is_err());
            let sql = format!("WITH x AS (SELECT 1) {word} {tail}");
            proptest::prop_assert!(check_read_only(&sql).is_err());
        }
    }
}
