//! Reading input values by type, and resolving the inputs of a run.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{InputType, WorkflowInput};

/// Days in `month` (1–12) of `year`, leap years counted.
fn days_in(year: u32, month: u32) -> u32 {
    match month {
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `YYYY-MM` → (year, month) when well formed.
fn year_month(text: &str) -> Option<(u32, u32)> {
    let (y, m) = text.split_once('-')?;
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(y, 4) || !digits(m, 2) {
        return None;
    }
    let month: u32 = m.parse().ok()?;
    (1..=12)
        .contains(&month)
        .then_some((y.parse().ok()?, month))
}

pub(super) fn read(ty: InputType, text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    match ty {
        InputType::String => Ok(Value::String(text.to_owned())),
        InputType::Integer => trimmed
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("`{text}` is not a whole number")),
        InputType::Number => trimmed
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("`{text}` is not a finite number")),
        InputType::Boolean => match trimmed.to_ascii_lowercase().as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!("`{text}` is not `true` or `false`")),
        },
        InputType::Month => year_month(trimmed)
            .filter(|_| trimmed.len() == 7)
            .map(|_| Value::String(trimmed.to_owned()))
            .ok_or_else(|| format!("`{text}` is not a month written YYYY-MM")),
        InputType::Date => {
            let ok = trimmed.len() == 10
                && trimmed.is_char_boundary(7)
                && trimmed.get(7..8) == Some("-")
                && trimmed
                    .get(8..)
                    .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|d| d.parse::<u32>().ok())
                    .zip(trimmed.get(..7).and_then(year_month))
                    .is_some_and(|(day, (y, m))| (1..=days_in(y, m)).contains(&day));
            if ok {
                Ok(Value::String(trimmed.to_owned()))
            } else {
                Err(format!("`{text}` is not a date written YYYY-MM-DD"))
            }
        }
    }
}

pub(super) fn resolve(
    inputs: &[WorkflowInput],
    given: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, Vec<String>> {
    let mut values = Map::new();
    let mut problems = Vec::new();
    for key in given.keys() {
        if !inputs.iter().any(|i| &i.name == key) {
            let known: Vec<String> = inputs.iter().map(|i| format!("`{}`", i.name)).collect();
            problems.push(format!(
                "unknown input `{key}`; the workflow takes {}",
                if known.is_empty() {
                    "no inputs".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    for input in inputs {
        match (given.get(&input.name), &input.default) {
            (Some(text), _) => match read(input.ty, text) {
                Ok(value) => {
                    values.insert(input.name.clone(), value);
                }
                Err(why) => problems.push(format!(
                    "input `{}` ({}): {why}",
                    input.name,
                    input.ty.as_str()
                )),
            },
            (None, Some(default)) => {
                values.insert(input.name.clone(), default.clone());
            }
            (None, None) if input.required => problems.push(format!(
                "input `{}` ({}) is required and has no default",
                input.name,
                input.ty.as_str()
            )),
            (None, None) => {}
        }
    }
    if problems.is_empty() {
        Ok(values)
    } else {
        Err(problems)
    }
}
