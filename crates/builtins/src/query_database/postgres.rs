//! PostgreSQL through `tokio-postgres`: one connection per call, started with
//! `default_transaction_read_only=on`; the query runs in a `READ ONLY` transaction with a
//! `statement_timeout` and is rolled back. Parameters are sent as text and typed by the
//! server, so `$1` may be a number, a date or a string without the model naming types; values
//! come back decoded from the binary format into the same JSON as SQLite's.
//!
//! Connections are plain TCP or Unix sockets (no TLS): the server is expected on the same
//! host or network as the agent.

use std::error::Error as StdError;
use std::time::Duration;

use bytes::BytesMut;
use futures::{StreamExt, pin_mut};
use serde_json::{Value, json};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{Format, FromSql, IsNull, Kind, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, NoTls};

use super::{DatabaseUrl, NAME, QueryParams, TableInfo, refused, rows_json, schema_json};
use crate::BuiltinError;

type BoxError = Box<dyn StdError + Sync + Send>;

/// Extra time past the statement timeout for connecting and the round trips around it.
const SLACK: Duration = Duration::from_secs(10);

fn db_error(url: &DatabaseUrl, err: &tokio_postgres::Error, timeout: Duration) -> BuiltinError {
    if let Some(db) = err.as_db_error() {
        // Class 25 (invalid transaction state): a write in the read-only transaction (25006)
        // or an attempt to make it read-write (25001).
        if *db.code() == SqlState::READ_ONLY_SQL_TRANSACTION || db.code().code().starts_with("25") {
            return refused(&format!(
                "the database refused to write: {} (the transaction is read-only)",
                db.message()
            ));
        }
        if *db.code() == SqlState::QUERY_CANCELED {
            return BuiltinError::Timeout {
                tool: NAME,
                seconds: timeout.as_secs(),
            };
        }
        let mut message = format!("{} (SQLSTATE {})", db.message(), db.code().code());
        if let Some(hint) = db.hint() {
            message.push_str(&format!("; hint: {hint}"));
        }
        return BuiltinError::Database {
            path: url.redacted().into(),
            message,
        };
    }
    BuiltinError::Database {
        path: url.redacted().into(),
        // The driver's own text never holds the password.
        message: err.to_string(),
    }
}

async fn connect(url: &DatabaseUrl, timeout: Duration) -> Result<Client, BuiltinError> {
    let mut config: tokio_postgres::Config =
        url.expose()
            .parse()
            .map_err(|e: tokio_postgres::Error| BuiltinError::Database {
                path: url.redacted().into(),
                message: format!("not a valid connection string: {e}"),
            })?;
    let ms = timeout.as_millis().max(1);
    config
        .options(format!(
            "-c default_transaction_read_only=on -c statement_timeout={ms}"
        ))
        .application_name("ba-agent query_database")
        .connect_timeout(SLACK);
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| db_error(url, &e, timeout))?;
    tokio::spawn(async move {
        // The connection ends with the client; its error, if any, reached the client.
        let _ = connection.await;
    });
    Ok(client)
}

async fn bounded<T>(
    timeout: Duration,
    work: impl Future<Output = Result<T, BuiltinError>>,
) -> Result<T, BuiltinError> {
    tokio::time::timeout(timeout + SLACK, work)
        .await
        .unwrap_or(Err(BuiltinError::Timeout {
            tool: NAME,
            seconds: timeout.as_secs(),
        }))
}

/// Runs one query in a read-only transaction.
pub(super) async fn query(
    url: &DatabaseUrl,
    sql: &str,
    params: &QueryParams,
    max_rows: usize,
    timeout: Duration,
) -> Result<Value, BuiltinError> {
    bounded(timeout, async {
        let mut client = connect(url, timeout).await?;
        let err = |e: tokio_postgres::Error| db_error(url, &e, timeout);
        let tx = client
            .build_transaction()
            .read_only(true)
            .start()
            .await
            .map_err(err)?;
        tx.batch_execute(&format!(
            "SET LOCAL statement_timeout = {}",
            timeout.as_millis().max(1)
        ))
        .await
        .map_err(err)?;
        let stmt = tx.prepare(sql).await.map_err(err)?;
        let values = text_params(params, stmt.params().len())?;
        let columns: Vec<String> = stmt.columns().iter().map(|c| c.name().to_owned()).collect();
        let mut rows = Vec::new();
        let mut truncated = false;
        {
            // The stream is dropped before the rollback, so its unread rows are discarded
            // instead of queued ahead of it.
            let stream = tx
                .query_raw(&stmt, values.iter().map(|v| v as &dyn ToSql))
                .await
                .map_err(err)?;
            pin_mut!(stream);
            while let Some(row) = stream.next().await {
                let row = row.map_err(err)?;
                if rows.len() == max_rows {
                    truncated = true;
                    break;
                }
                let mut values = Vec::with_capacity(columns.len());
                for i in 0..columns.len() {
                    let PgValue(v) = row.try_get(i).map_err(err)?;
                    values.push(v);
                }
                rows.push(Value::Array(values));
            }
        }
        tx.rollback().await.map_err(err)?;
        Ok(rows_json(columns, rows, truncated))
    })
    .await
}

/// Tables, views and their columns, with the planner's row estimates.
pub(super) async fn describe(url: &DatabaseUrl, timeout: Duration) -> Result<Value, BuiltinError> {
    bounded(timeout, async {
        let mut client = connect(url, timeout).await?;
        let err = |e: tokio_postgres::Error| db_error(url, &e, timeout);
        let tx = client
            .build_transaction()
            .read_only(true)
            .start()
            .await
            .map_err(err)?;
        let columns = tx
            .query(
                "SELECT c.table_schema::text, c.table_name::text, t.table_type::text, \
                        c.column_name::text, c.data_type::text, c.is_nullable::text = 'YES' \
                 FROM information_schema.columns c \
                 JOIN information_schema.tables t \
                   ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
                 WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') \
                   AND c.table_schema NOT LIKE 'pg\\_%' \
                 ORDER BY 1, 2, c.ordinal_position LIMIT 20000",
                &[],
            )
            .await
            .map_err(err)?;
        let estimates = tx
            .query(
                "SELECT n.nspname::text, c.relname::text, c.reltuples::float8 \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.relkind IN ('r', 'p', 'm') \
                   AND n.nspname NOT IN ('pg_catalog', 'information_schema')",
                &[],
            )
            .await
            .map_err(err)?;
        tx.rollback().await.map_err(err)?;
        let mut tables: Vec<TableInfo> = Vec::new();
        let mut keys: Vec<(String, String)> = Vec::new();
        for row in &columns {
            let (schema, table): (String, String) = (row.get(0), row.get(1));
            if keys.last() != Some(&(schema.clone(), table.clone())) {
                let kind: String = row.get(2);
                let name = if schema == "public" {
                    table.clone()
                } else {
                    format!("{schema}.{table}")
                };
                // reltuples is -1 for a table never vacuumed or analysed: unknown.
                let rows = estimates
                    .iter()
                    .find(|e| e.get::<_, String>(0) == schema && e.get::<_, String>(1) == table)
                    .map(|e| e.get::<_, f64>(2))
                    .filter(|n| *n >= 0.0);
                #[allow(clippy::cast_possible_truncation)]
                tables.push(TableInfo {
                    name,
                    kind: if kind == "VIEW" { "view" } else { "table" },
                    rows: rows.map(|n| n.round() as i64),
                    rows_exact: false,
                    columns: Vec::new(),
                });
                keys.push((schema, table));
            }
            if let Some(t) = tables.last_mut() {
                t.columns.push((row.get(3), row.get(4), row.get(5)));
            }
        }
        Ok(schema_json("postgresql", &tables))
    })
    .await
}

/// A parameter sent in PostgreSQL's text format, for the server to parse as the type it
/// inferred for `$n`.
#[derive(Debug)]
struct TextParam(Option<String>);

impl ToSql for TextParam {
    fn to_sql(&self, _ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match &self.0 {
            Some(text) => {
                out.extend_from_slice(text.as_bytes());
                Ok(IsNull::No)
            }
            None => Ok(IsNull::Yes),
        }
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    fn encode_format(&self, _ty: &Type) -> Format {
        Format::Text
    }

    to_sql_checked!();
}

fn text_params(params: &QueryParams, expected: usize) -> Result<Vec<TextParam>, BuiltinError> {
    let invalid = |message: String| BuiltinError::InvalidArguments {
        tool: NAME,
        message,
    };
    let values = match params {
        QueryParams::Positional(values) => values.as_slice(),
        QueryParams::Named(map) if map.is_empty() => &[],
        QueryParams::Named(_) => {
            return Err(invalid(
                "params: PostgreSQL takes positional parameters ($1, $2, …); pass params as an \
                 array"
                    .into(),
            ));
        }
    };
    if values.len() != expected {
        return Err(invalid(format!(
            "params: the query has {expected} parameter(s) but {} value(s) were given",
            values.len()
        )));
    }
    values
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Null => Ok(TextParam(None)),
            Value::Bool(b) => Ok(TextParam(Some(b.to_string()))),
            Value::Number(n) => Ok(TextParam(Some(n.to_string()))),
            Value::String(s) => Ok(TextParam(Some(s.clone()))),
            Value::Array(_) | Value::Object(_) => Err(invalid(format!(
                "params[{i}]: only strings, numbers, booleans and null can be bound"
            ))),
        })
        .collect()
}

/// Any column value, as the JSON the observation shows.
struct PgValue(Value);

impl<'a> FromSql<'a> for PgValue {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        decode(ty, raw).map(PgValue)
    }

    fn from_sql_null(_ty: &Type) -> Result<Self, BoxError> {
        Ok(Self(Value::Null))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or_else(|| json!(f.to_string()), Value::Number)
}

fn decode(ty: &Type, raw: &[u8]) -> Result<Value, BoxError> {
    Ok(match *ty {
        Type::BOOL => json!(bool::from_sql(ty, raw)?),
        Type::INT2 => json!(i16::from_sql(ty, raw)?),
        Type::INT4 => json!(i32::from_sql(ty, raw)?),
        Type::INT8 => json!(i64::from_sql(ty, raw)?),
        Type::OID => json!(u32::from_sql(ty, raw)?),
        Type::FLOAT4 => float(f64::from(f32::from_sql(ty, raw)?)),
        Type::FLOAT8 => float(f64::from_sql(ty, raw)?),
        Type::NUMERIC => {
            let text = numeric_text(raw).ok_or("malformed numeric value")?;
            match text.parse::<f64>() {
                Ok(f) if f.is_finite() => float(f),
                _ => json!(text),
            }
        }
        Type::JSON => serde_json::from_slice(raw)?,
        Type::JSONB => serde_json::from_slice(raw.get(1..).unwrap_or_default())?,
        Type::DATE => json!(date_text(i32::from_sql(ty, raw)?)?),
        Type::TIMESTAMP => json!(timestamp_text(i64::from_sql(ty, raw)?)?),
        Type::TIMESTAMPTZ => json!(format!("{}Z", timestamp_text(i64::from_sql(ty, raw)?)?)),
        Type::TIME => json!(time_text(i64::from_sql(ty, raw)?)),
        Type::UUID => {
            let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
            if hex.len() == 32 {
                json!(format!(
                    "{}-{}-{}-{}-{}",
                    &hex[..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..]
                ))
            } else {
                json!(hex)
            }
        }
        Type::BYTEA => json!(format!("<blob of {} bytes>", raw.len())),
        // Text-like types (text, varchar, char, name, citext, enums) are UTF-8 in binary too.
        _ if matches!(ty.kind(), Kind::Enum(_))
            || matches!(
                *ty,
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
            )
            || ty.name() == "citext" =>
        {
            json!(std::str::from_utf8(raw)?)
        }
        _ => json!(format!("<{} value of {} bytes>", ty.name(), raw.len())),
    })
}

/// The decimal text of a binary `numeric`: ndigits, weight, sign, dscale, then base-10000
/// digits.
fn numeric_text(raw: &[u8]) -> Option<String> {
    let word = |i: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*raw.get(2 * i)?, *raw.get(2 * i + 1)?]))
    };
    let ndigits = usize::from(word(0)?);
    #[allow(clippy::cast_possible_wrap)]
    let weight = i32::from(word(1)? as i16);
    let sign = word(2)?;
    let dscale = usize::from(word(3)?);
    match sign {
        0xC000 => return Some("NaN".into()),
        0xD000 => return Some("Infinity".into()),
        0xF000 => return Some("-Infinity".into()),
        _ => {}
    }
    let digits: Vec<u16> = (0..ndigits).map(|i| word(4 + i)).collect::<Option<_>>()?;
    let digit = |i: i32| -> u16 {
        usize::try_from(i)
            .ok()
            .and_then(|i| digits.get(i))
            .copied()
            .unwrap_or(0)
    };
    let mut int = String::new();
    for k in (0..=weight.max(0)).rev() {
        let d = if weight >= 0 { digit(weight - k) } else { 0 };
        if int.is_empty() {
            int.push_str(&d.to_string());
        } else {
            int.push_str(&format!("{d:04}"));
        }
    }
    let mut frac = String::new();
    let groups = i32::try_from(dscale.div_ceil(4)).ok()?;
    for k in 1..=groups {
        frac.push_str(&format!("{:04}", digit(weight + k)));
    }
    frac.truncate(dscale);
    let sign = if sign == 0x4000 { "-" } else { "" };
    Some(if frac.is_empty() {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    })
}

/// PostgreSQL dates count days from 2000-01-01 (Julian day 2 451 545).
fn date_text(days: i32) -> Result<String, BoxError> {
    let date = time::Date::from_julian_day(2_451_545 + days)?;
    Ok(format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    ))
}

fn timestamp_text(micros: i64) -> Result<String, BoxError> {
    let days = micros.div_euclid(86_400_000_000);
    let rest = micros.rem_euclid(86_400_000_000);
    Ok(format!(
        "{}T{}",
        date_text(i32::try_from(days)?)?,
        time_text(rest)
    ))
}

fn time_text(micros: i64) -> String {
    let (s, us) = (micros / 1_000_000, micros % 1_000_000);
    let base = format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    if us == 0 {
        base
    } else {
        format!("{base}.{us:06}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(ndigits: u16, weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut out = Vec::new();
        #[allow(clippy::cast_sign_loss)]
        for w in [ndigits, weight as u16, sign, dscale]
            .into_iter()
            .chain(digits.iter().copied())
        {
            out.extend(w.to_be_bytes());
        }
        out
    }

    #[test]
    fn numerics_dates_and_times_decode() {
        // 444645.50
        let raw = numeric(3, 1, 0, 2, &[44, 4645, 5000]);
        assert_eq!(numeric_text(&raw).unwrap(), "444645.50");
        // -0.0012
        let raw = numeric(1, -1, 0x4000, 4, &[12]);
        assert_eq!(numeric_text(&raw).unwrap(), "-0.0012");
        // 120000 (trailing zero groups omitted by the server)
        let raw = numeric(1, 1, 0, 0, &[12]);
        assert_eq!(numeric_text(&raw).unwrap(), "120000");
        assert_eq!(numeric_text(&numeric(0, 0, 0, 0, &[])).unwrap(), "0");
        assert_eq!(numeric_text(&numeric(0, 0, 0xC000, 0, &[])).unwrap(), "NaN");
        assert!(numeric_text(&[0, 1]).is_none());
        assert_eq!(date_text(0).unwrap(), "2000-01-01");
        assert_eq!(date_text(8948).unwrap(), "2024-07-01");
        assert_eq!(
            timestamp_text(86_400_000_000 + 3_723_000_001).unwrap(),
            "2000-01-02T01:02:03.000001"
        );
        assert_eq!(timestamp_text(-1).unwrap(), "1999-12-31T23:59:59.999999");
    }

    #[test]
    fn params_go_as_text_and_named_ones_are_refused() {
        let p = QueryParams::Positional(vec![json!("West"), json!(2.5), json!(true), json!(null)]);
        let values = text_params(&p, 4).unwrap();
        let texts: Vec<Option<&str>> = values.iter().map(|v| v.0.as_deref()).collect();
        assert_eq!(texts, [Some("West"), Some("2.5"), Some("true"), None]);
        assert!(text_params(&p, 3).is_err());
        let mut named = serde_json::Map::new();
        named.insert("region".into(), json!("West"));
        let err = text_params(&QueryParams::Named(named), 1).unwrap_err();
        assert!(err.to_string().contains("positional"), "{err}");
    }
}
