//! `query_database`: one read-only query on the business database, SQLite or
//! PostgreSQL, with the same observation for both; or, with `schema: true`, the database's
//! tables, columns, types and row counts.
//!
//! Writes are refused by the database engine, never by reading the SQL text:
//! - SQLite: the file is opened read-only with `query_only` on and no room for `ATTACH`, and a
//!   statement SQLite's own compiler reports as writing is not run.
//! - PostgreSQL: the connection starts with `default_transaction_read_only=on` and each query
//!   runs in a `READ ONLY` transaction with a `statement_timeout`, rolled back at the end; the
//!   server refuses anything that would write (SQLSTATE 25006), and the model is told so.

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

use ba_protocol::PermissionLevel;
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use ba_protocol::OutputLevel;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::BuiltinError;

/// The tool name.
pub const NAME: &str = "query_database";

/// The description shown to the model.
pub const DESCRIPTION: &str = "Run one read-only SQL query on the business database (SQLite \
    or PostgreSQL; writes are refused by the database). Pass values through params: named \
    (:name) or positional (?) on SQLite, positional ($1, $2) on PostgreSQL. Call with \
    {\"schema\": true} to list the tables, columns, types and row counts first.";

fn default_max_rows() -> usize {
    1000
}

/// Query parameters: an object for named parameters (`:region`, `@region`, `$region`; the key
/// may omit the prefix; SQLite only) or an array for positional `?` / `$1` parameters.
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

/// Arguments of `query_database` (with `schema`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryDatabaseArgs {
    /// The SQL query: one statement. Required unless `schema` is true.
    #[serde(default)]
    pub query: Option<String>,
    /// The most rows returned (default 1000).
    #[serde(default = "default_max_rows")]
    pub max_rows: usize,
    /// Query parameters (parameterised query).
    #[serde(default)]
    pub params: QueryParams,
    /// Instead of a query: describe the database (tables, columns, types, row counts).
    #[serde(default)]
    pub schema: bool,
    /// How detailed the answer should be: brief, standard or full.
    #[serde(default)]
    pub response_format: OutputLevel,
}

/// A PostgreSQL connection string; its password never appears in `Debug` or messages.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// Wraps a `postgres://` or `postgresql://` URL (or a key=value connection string).
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The connection string, password included: for connecting only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        let s = &self.0;
        let Some(scheme_end) = s.find("://") else {
            return "the configured PostgreSQL database".to_owned();
        };
        let rest = &s[scheme_end + 3..];
        let auth_end = rest.find('/').unwrap_or(rest.len());
        match rest[..auth_end].rfind('@') {
            Some(at) => {
                let user = rest[..at].split(':').next().unwrap_or("");
                format!(
                    "{}{user}:***@{}",
                    &s[..scheme_end + 3],
                    rest[at + 1..].split('?').next().unwrap_or("")
                )
            }
            None => s.split('?').next().unwrap_or(s).to_owned(),
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// The database a [`QueryDatabase`] queries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Database {
    /// A SQLite file, opened read-only.
    Sqlite(PathBuf),
    /// A PostgreSQL server (feature `postgres`).
    Postgres(DatabaseUrl),
}

impl Database {
    /// `postgres://…` / `postgresql://…` is a server; anything else a SQLite file path.
    pub fn from_location(location: &str) -> Self {
        let lower = location.trim().to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            Self::Postgres(DatabaseUrl::new(location.trim()))
        } else {
            Self::Sqlite(PathBuf::from(location))
        }
    }

    /// What error messages call it: the path, or the URL without its password.
    pub fn display_name(&self) -> String {
        match self {
            Self::Sqlite(p) => p.display().to_string(),
            Self::Postgres(u) => u.redacted(),
        }
    }
}

/// Which database and how far a query may go.
#[derive(Debug, Clone)]
pub struct QueryDatabaseConfig {
    /// The database.
    pub database: Database,
    /// The ceiling on `max_rows`, whatever the model asks.
    pub max_rows_cap: usize,
    /// A query still running after this is interrupted (SQLite) or cancelled by the server's
    /// `statement_timeout` (PostgreSQL).
    pub timeout: Duration,
}

impl QueryDatabaseConfig {
    /// The SQLite database at `path`, at most 10 000 rows, 30 s per query.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::for_database(Database::Sqlite(path.into()))
    }

    /// `database`, at most 10 000 rows, 30 s per query.
    pub fn for_database(database: Database) -> Self {
        Self {
            database,
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
    /// A tool over `config.database`.
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

    /// Runs the query and returns `columns`, `rows` (arrays of values in column order),
    /// `row_count` and `truncated`; with `schema: true`, the description of the database.
    pub async fn run(&self, args: QueryDatabaseArgs) -> Result<Value, BuiltinError> {
        let max_rows = args.max_rows.min(self.config.max_rows_cap);
        let query = match (&args.query, args.schema) {
            (_, true) => None,
            (Some(q), false) if !q.trim().is_empty() => Some(q.clone()),
            _ => {
                return Err(BuiltinError::InvalidArguments {
                    tool: NAME,
                    message: "query is required (one SQL statement), unless schema is true".into(),
                });
            }
        };
        match &self.config.database {
            #[cfg(feature = "sqlite")]
            Database::Sqlite(path) => {
                let (path, timeout) = (path.clone(), self.config.timeout);
                match query {
                    Some(q) => sqlite::query(path, q, args.params, max_rows, timeout).await,
                    None => sqlite::describe(path, timeout).await,
                }
            }
            #[cfg(feature = "postgres")]
            Database::Postgres(url) => {
                let timeout = self.config.timeout;
                match query {
                    Some(q) => postgres::query(url, &q, &args.params, max_rows, timeout).await,
                    None => postgres::describe(url, timeout).await,
                }
            }
            #[allow(unreachable_patterns)]
            other => Err(BuiltinError::Environment {
                tool: NAME,
                message: format!(
                    "this build cannot open {} (the `sqlite` or `postgres` feature is off)",
                    other.display_name()
                ),
            }),
        }
    }
}

/// The observation of a query, the same for every engine.
fn rows_json(columns: Vec<String>, rows: Vec<Value>, truncated: bool) -> Value {
    json!({
        "columns": columns,
        "row_count": rows.len(),
        "truncated": truncated,
        "rows": rows,
    })
}

/// One table of a schema description.
#[derive(Debug, Clone)]
struct TableInfo {
    name: String,
    kind: &'static str,
    /// Exact (SQLite) or the planner's estimate (PostgreSQL); `None` when unknown.
    rows: Option<i64>,
    rows_exact: bool,
    /// `(name, type, nullable)`.
    columns: Vec<(String, String, bool)>,
}

/// The schema observation, the same for every engine.
fn schema_json(engine: &str, tables: &[TableInfo]) -> Value {
    let list: Vec<Value> = tables
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "kind": t.kind,
                "rows": t.rows,
                "rows_exact": t.rows_exact,
                "columns": t.columns.iter().map(|(n, ty, nullable)| json!({
                    "name": n, "type": ty, "nullable": nullable
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let summary: Vec<String> = tables
        .iter()
        .map(|t| {
            let rows = match (t.rows, t.rows_exact) {
                (Some(n), true) => format!("{n} rows"),
                (Some(n), false) => format!("~{n} rows"),
                (None, _) => "rows unknown".to_owned(),
            };
            let cols: Vec<String> = t
                .columns
                .iter()
                .map(|(n, ty, _)| format!("{n} {ty}"))
                .collect();
            format!("{} ({rows}: {})", t.name, cols.join(", "))
        })
        .collect();
    json!({
        "database": engine,
        "table_count": tables.len(),
        "tables": list,
        "success": true,
        "message": format!("{engine}, {} tables: {}", tables.len(), summary.join("; ")),
    })
}

fn refused(reason: &str) -> BuiltinError {
    BuiltinError::QueryRefused {
        reason: reason.to_owned(),
    }
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

    #[test]
    fn locations_and_redaction() {
        assert!(matches!(
            Database::from_location("data/sales.db"),
            Database::Sqlite(_)
        ));
        let Database::Postgres(url) =
            Database::from_location("postgres://ba:s3cret@db.local:5432/sales?sslmode=disable")
        else {
            panic!("not postgres");
        };
        assert_eq!(url.redacted(), "postgres://ba:***@db.local:5432/sales");
        assert!(!format!("{url:?}").contains("s3cret"));
        assert_eq!(
            DatabaseUrl::new("postgresql://localhost/x").redacted(),
            "postgresql://localhost/x"
        );
    }

    #[tokio::test]
    async fn a_query_or_the_schema_is_required() {
        let tool = QueryDatabase::new(QueryDatabaseConfig::new("/no/such.db"));
        let err = tool.call_json(json!({})).await.unwrap_err();
        assert!(err.to_string().contains("query is required"), "{err}");
        let err = tool.call_json(json!({"query": "  "})).await.unwrap_err();
        assert_eq!(err.kind(), ba_protocol::ToolErrorKind::InvalidParameters);
    }
}
