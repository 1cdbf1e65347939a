//! Schedules: a workflow started on a cron expression in a time zone, for an owner, within a
//! budget, behind one [`Schedules`] trait with a backend in each store.
//!
//! Every occurrence that runs is a [`ScheduledRun`] claimed once: the claim of an occurrence
//! is the store's, atomic across processes (a row inserted unless it exists in PostgreSQL, a
//! change under a lock file in the file store), so servers sharing a store never start an
//! occurrence twice. The claim names the conversation the occurrence runs in; a server that
//! dies mid-run leaves the claim unfinished for the next to resume.
//!
//! # Dated inputs
//! An input's text may hold placeholders, replaced with dates of the occurrence in the
//! schedule's time zone ([`expand_input`]):
//!
//! | placeholder | for an occurrence on 2026-12-01 |
//! |---|---|
//! | `{{date}}` | `2026-12-01` |
//! | `{{month}}` | `2026-12` |
//! | `{{year}}` | `2026` |
//! | `{{previous_month}}` | `2026-11` |
//! | `{{previous_month_start}}` | `2026-11-01` |
//! | `{{previous_month_end}}` | `2026-11-30` |
//! | `{{date:%d.%m.%Y}}` | `01.12.2026` (a `strftime` format) |

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr as _;

use async_trait::async_trait;
use chrono::{Datelike as _, TimeZone as _};
use rand::RngCore as _;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StorageError};
use crate::people::check_user_name;

/// The longest schedule name, in characters.
pub const MAX_SCHEDULE_NAME: usize = 100;
/// The most inputs a schedule gives its workflow.
const MAX_INPUTS: usize = 64;
/// The longest input name or value, in bytes.
const MAX_INPUT_BYTES: usize = 4096;
/// The longest cron expression, time zone, workflow name or webhook address, in bytes.
const MAX_FIELD_BYTES: usize = 2048;
/// How late an occurrence may be seen and still count as on time (not caught up): a tick of
/// the scheduler that came a little late, or a server that started a minute after it.
pub const ON_TIME_MS: i64 = 5 * 60 * 1000;

/// What a schedule does with occurrences it missed (the servers were down, or the schedule
/// was created or resumed after them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Runs the latest missed occurrence once, however many were missed.
    #[default]
    One,
    /// Runs none of them; the next occurrence on time runs.
    None,
}

impl CatchUp {
    /// `one` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::One => "one",
            Self::None => "none",
        }
    }

    /// The catch-up of this name.
    ///
    /// # Errors
    /// [`StorageError::Invalid`] for another name.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "one" => Ok(Self::One),
            "none" => Ok(Self::None),
            _ => Err(StorageError::invalid(
                format!("catch_up `{}`", s.chars().take(20).collect::<String>()),
                "catch_up is one or none",
            )),
        }
    }
}

/// What each run of a schedule may spend; a cap left out is no cap (the owner's month caps
/// hold as for any of their runs).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ScheduleBudget {
    /// US dollars one run may spend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Model tokens one run may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

/// Where a schedule's results are posted, and the key they are signed with.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Webhook {
    /// An `http://` or `https://` address.
    pub url: String,
    /// The HMAC-SHA256 key of the `X-BA-Signature` header.
    pub secret: String,
}

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &self.url)
            .field("secret", &"…")
            .finish()
    }
}

/// A schedule as given to [`Schedules::add_schedule`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewSchedule {
    /// A name for lists and conversation titles.
    pub name: String,
    /// A cron expression: minute, hour, day of month, month, day of week (seconds first,
    /// optionally).
    pub cron: String,
    /// An IANA time zone (`Europe/Berlin`, `UTC`) the expression is read in.
    pub time_zone: String,
    /// The workflow each occurrence starts.
    pub workflow: String,
    /// Its inputs, with dated placeholders.
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Whose runs they are (who owns the conversations and whose month they count in).
    pub owner: String,
    /// What each run may spend.
    #[serde(default)]
    pub budget: ScheduleBudget,
    /// What missed occurrences do.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// Paused schedules start nothing.
    #[serde(default)]
    pub paused: bool,
    /// Where results are posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
}

/// A schedule kept by a store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// `sch_` and 16 hex characters.
    pub id: String,
    /// What it was given.
    #[serde(flatten)]
    pub spec: NewSchedule,
    /// When it was added (ms since the Unix epoch).
    pub created_ms: i64,
    /// Occurrences at or before this time are never run: when it was added, or last resumed
    /// or its cron expression or time zone changed.
    pub since_ms: i64,
}

/// Changes to a schedule; `None` fields stay as they are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScheduleUpdate {
    /// New name.
    pub name: Option<String>,
    /// New cron expression.
    pub cron: Option<String>,
    /// New time zone.
    pub time_zone: Option<String>,
    /// New inputs.
    pub inputs: Option<BTreeMap<String, String>>,
    /// New budget.
    pub budget: Option<ScheduleBudget>,
    /// New catch-up.
    pub catch_up: Option<CatchUp>,
    /// Pause (`true`) or resume (`false`).
    pub paused: Option<bool>,
    /// A new webhook, or `Some(None)` for none.
    pub webhook: Option<Option<Webhook>>,
}

/// One occurrence of a schedule, claimed by the server that runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledRun {
    /// The schedule.
    pub schedule_id: String,
    /// The occurrence (ms since the Unix epoch).
    pub occurrence_ms: i64,
    /// The conversation it runs in.
    pub conversation_id: String,
    /// When it was claimed.
    pub claimed_ms: i64,
    /// When it ended; `None` while it runs (or its server died).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// How it ended (`answered`, `budget_reached`, `failed`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What [`Schedules::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This caller claimed the occurrence: it runs it.
    Claimed(ScheduledRun),
    /// Another caller claimed it first.
    Taken(ScheduledRun),
}

/// The schedules of a store and their runs.
///
/// Every backend claims an occurrence once however many callers try at once, in this process
/// or others sharing the store, and drops a schedule's runs with it. The conformance suite
/// ([`crate::conformance`]) checks this.
#[async_trait]
pub trait Schedules: Send + Sync + fmt::Debug {
    /// Adds a schedule (checked, [`check_schedule`]).
    async fn add_schedule(&self, new: NewSchedule) -> Result<Schedule>;
    /// The schedule of this id, if any.
    async fn schedule(&self, id: &str) -> Result<Option<Schedule>>;
    /// Every schedule, by id.
    async fn schedules(&self) -> Result<Vec<Schedule>>;
    /// Changes a schedule; [`StorageError::NoSchedule`] for an unknown id.
    async fn update_schedule(&self, id: &str, update: ScheduleUpdate) -> Result<Schedule>;
    /// Removes a schedule and its runs; `false` when there was none.
    async fn remove_schedule(&self, id: &str) -> Result<bool>;
    /// Claims occurrence `occurrence_ms` of schedule `id` to run in `conversation_id`, or
    /// gives the claim made first; [`StorageError::NoSchedule`] for an unknown schedule.
    async fn claim(&self, id: &str, occurrence_ms: i64, conversation_id: &str) -> Result<Claim>;
    /// Records how a claimed run ended; `None` when there is no such run.
    async fn finish_run(
        &self,
        id: &str,
        occurrence_ms: i64,
        status: &str,
        error: Option<&str>,
    ) -> Result<Option<ScheduledRun>>;
    /// A schedule's runs, latest occurrence first, at most `limit`.
    async fn runs(&self, id: &str, limit: usize) -> Result<Vec<ScheduledRun>>;
    /// Every run not finished, of every schedule, oldest claim first.
    async fn unfinished_runs(&self) -> Result<Vec<ScheduledRun>>;
}

fn _object_safe(_: &dyn Schedules) {}

/// A new schedule id: `sch_` and 16 random hex characters.
pub(crate) fn new_schedule_id() -> String {
    let mut id = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut id);
    format!("sch_{}", crate::workspace::hex(&id))
}

/// Whether `id` can be a schedule id (so anything else is never looked up).
pub(crate) fn is_schedule_id(id: &str) -> bool {
    id.len() == 20
        && id.starts_with("sch_")
        && id[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn parse_cron(cron: &str) -> Result<croner::Cron> {
    if cron.len() > MAX_FIELD_BYTES {
        return Err(StorageError::invalid(
            "cron expression",
            "longer than 2048 bytes",
        ));
    }
    croner::Cron::from_str(cron).map_err(|e| {
        StorageError::invalid(
            format!("cron expression `{}`", cut(cron, 100)),
            format!("it is not one: {e}"),
        )
    })
}

fn parse_zone(zone: &str) -> Result<chrono_tz::Tz> {
    zone.parse::<chrono_tz::Tz>().map_err(|_| {
        StorageError::invalid(
            format!("time zone `{}`", cut(zone, 100)),
            "a time zone is an IANA name such as Europe/Berlin or UTC",
        )
    })
}

/// Checks everything a schedule is given: a name of 1 to 100 printable characters, a cron
/// expression and time zone that parse, a workflow name, an owner's name, inputs within
/// bounds whose placeholders are known, caps of zero or more, a webhook on `http(s)://`.
///
/// # Errors
/// [`StorageError::Invalid`] naming the first thing wrong.
pub fn check_schedule(new: &NewSchedule) -> Result<()> {
    let name = new.name.trim();
    if name.is_empty()
        || new.name.chars().count() > MAX_SCHEDULE_NAME
        || new.name.chars().any(char::is_control)
    {
        return Err(StorageError::invalid(
            format!("schedule name `{}`", cut(&new.name, MAX_SCHEDULE_NAME)),
            "a schedule name is 1 to 100 characters, none a control character",
        ));
    }
    parse_cron(&new.cron)?;
    parse_zone(&new.time_zone)?;
    if new.workflow.trim().is_empty() || new.workflow.len() > MAX_FIELD_BYTES {
        return Err(StorageError::invalid(
            "workflow",
            "a schedule names the workflow it starts",
        ));
    }
    check_user_name(&new.owner)?;
    check_inputs(&new.inputs)?;
    if new.budget.usd.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
        return Err(StorageError::invalid(
            "budget",
            "a run's dollars must be a number of at least 0",
        ));
    }
    if let Some(hook) = &new.webhook {
        let scheme_ok = hook.url.starts_with("http://") || hook.url.starts_with("https://");
        if !scheme_ok || hook.url.len() > MAX_FIELD_BYTES || hook.url.chars().any(char::is_control)
        {
            return Err(StorageError::invalid(
                format!("webhook `{}`", cut(&hook.url, 100)),
                "a webhook is an http:// or https:// address",
            ));
        }
        if hook.secret.is_empty() || hook.secret.len() > MAX_FIELD_BYTES {
            return Err(StorageError::invalid(
                "webhook secret",
                "a webhook's secret is 1 to 2048 bytes",
            ));
        }
    }
    Ok(())
}

fn check_inputs(inputs: &BTreeMap<String, String>) -> Result<()> {
    if inputs.len() > MAX_INPUTS {
        return Err(StorageError::invalid(
            "inputs",
            format!("a schedule gives at most {MAX_INPUTS} inputs"),
        ));
    }
    for (key, value) in inputs {
        if key.is_empty() || key.len() > MAX_INPUT_BYTES || value.len() > MAX_INPUT_BYTES {
            return Err(StorageError::invalid(
                format!("input `{}`", cut(key, 64)),
                "an input's name and value are at most 4096 bytes, the name not empty",
            ));
        }
        expand_input(value, 0, chrono_tz::Tz::UTC).map_err(|e| match e {
            StorageError::Invalid { what, message } => StorageError::Invalid {
                what: format!("input `{}`: {what}", cut(key, 64)),
                message,
            },
            other => other,
        })?;
    }
    Ok(())
}

/// `text` with its placeholders replaced by dates of the occurrence at `occurrence_ms` in
/// `zone` (the table in this module's documentation).
///
/// # Errors
/// [`StorageError::Invalid`] naming an unknown placeholder, an unclosed one or a bad format.
pub fn expand_input(text: &str, occurrence_ms: i64, zone: chrono_tz::Tz) -> Result<String> {
    let at = zone
        .timestamp_millis_opt(occurrence_ms)
        .single()
        .ok_or_else(|| StorageError::invalid("occurrence", "a time no calendar shows"))?;
    let first = at.date_naive().with_day(1).unwrap_or(at.date_naive());
    let previous_end = first.pred_opt().unwrap_or(first);
    let previous_start = previous_end.with_day(1).unwrap_or(previous_end);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or_else(|| {
            StorageError::invalid(
                format!("placeholder `{{{{{}`", cut(after, 40)),
                "a placeholder is closed with }}",
            )
        })?;
        let name = after[..close].trim();
        let value = match name {
            "date" => at.format("%Y-%m-%d").to_string(),
            "month" => at.format("%Y-%m").to_string(),
            "year" => at.format("%Y").to_string(),
            "previous_month" => previous_start.format("%Y-%m").to_string(),
            "previous_month_start" => previous_start.format("%Y-%m-%d").to_string(),
            "previous_month_end" => previous_end.format("%Y-%m-%d").to_string(),
            _ => match name.strip_prefix("date:") {
                Some(format) => date_format(&at, format)?,
                None => {
                    return Err(StorageError::invalid(
                        format!("placeholder `{{{{{}}}}}`", cut(name, 40)),
                        "the placeholders are date, month, year, previous_month, \
                         previous_month_start, previous_month_end and date:FORMAT",
                    ));
                }
            },
        };
        out.push_str(&value);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn date_format(at: &chrono::DateTime<chrono_tz::Tz>, format: &str) -> Result<String> {
    use chrono::format::{Item, StrftimeItems};
    let items: Vec<Item<'_>> = StrftimeItems::new(format).collect();
    if format.is_empty() || items.iter().any(|i| matches!(i, Item::Error)) {
        return Err(StorageError::invalid(
            format!("date format `{}`", cut(format, 40)),
            "a date format is a strftime format such as %Y-%m",
        ));
    }
    let mut out = String::new();
    fmt::write(
        &mut out,
        format_args!("{}", at.format_with_items(items.into_iter())),
    )
    .map_err(|_| {
        StorageError::invalid(
            format!("date format `{}`", cut(format, 40)),
            "it asks for a field a date does not have",
        )
    })?;
    Ok(out)
}

/// Which occurrence a scheduler should run now, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Nothing is due.
    Nothing,
    /// This occurrence, on time.
    OnTime(i64),
    /// This occurrence, the latest of those missed, caught up (`catch_up: one`).
    CaughtUp(i64),
    /// Occurrences were missed and are left (`catch_up: none`); the latest was this.
    Skipped(i64),
}

impl Schedule {
    /// The first occurrence after `ms`; `None` when the expression has no more (or the time
    /// is out of the calendar's range).
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        let cron = parse_cron(&self.spec.cron).ok()?;
        let zone = parse_zone(&self.spec.time_zone).ok()?;
        let at = zone.timestamp_millis_opt(ms).single()?;
        cron.find_next_occurrence(&at, false)
            .ok()
            .map(|t| t.timestamp_millis())
    }

    /// The latest occurrence at or before `ms`.
    pub fn latest_at(&self, ms: i64) -> Option<i64> {
        let cron = parse_cron(&self.spec.cron).ok()?;
        let zone = parse_zone(&self.spec.time_zone).ok()?;
        let at = zone.timestamp_millis_opt(ms).single()?;
        cron.find_previous_occurrence(&at, true)
            .ok()
            .map(|t| t.timestamp_millis())
    }

    /// What is due at `now_ms` when the latest occurrence claimed was `last_claimed` (none
    /// yet: `None`). An occurrence at or before [`Schedule::since_ms`] or the last claim is
    /// never due; of those after, only the latest is: on time within [`ON_TIME_MS`] of it,
    /// later as `catch_up` says. A paused schedule has nothing due.
    pub fn due(&self, last_claimed: Option<i64>, now_ms: i64) -> Due {
        if self.spec.paused {
            return Due::Nothing;
        }
        let from = last_claimed.map_or(self.since_ms, |c| c.max(self.since_ms));
        match self.latest_at(now_ms) {
            Some(at) if at > from => {
                if now_ms - at <= ON_TIME_MS {
                    Due::OnTime(at)
                } else if self.spec.catch_up == CatchUp::One {
                    Due::CaughtUp(at)
                } else {
                    Due::Skipped(at)
                }
            }
            _ => Due::Nothing,
        }
    }

    /// The schedule's inputs for the occurrence at `occurrence_ms`, placeholders replaced.
    ///
    /// # Errors
    /// [`StorageError::Invalid`] for a placeholder or time zone that is not one.
    pub fn inputs_at(&self, occurrence_ms: i64) -> Result<BTreeMap<String, String>> {
        let zone = parse_zone(&self.spec.time_zone)?;
        self.spec
            .inputs
            .iter()
            .map(|(k, v)| Ok((k.clone(), expand_input(v, occurrence_ms, zone)?)))
            .collect()
    }

    /// The occurrence's date in the schedule's time zone, `2026-12-01` (for titles).
    pub fn date_of(&self, occurrence_ms: i64) -> String {
        parse_zone(&self.spec.time_zone)
            .ok()
            .and_then(|z| z.timestamp_millis_opt(occurrence_ms).single())
            .map_or_else(
                || crate::store::rfc3339(occurrence_ms),
                |t| t.format("%Y-%m-%d").to_string(),
            )
    }

    /// The schedule with `update` applied and checked; `now_ms` becomes
    /// [`Schedule::since_ms`] when it is resumed or its timing changes, so what fell due
    /// while it was paused (or on another timing) is not caught up.
    pub(crate) fn updated(&self, update: ScheduleUpdate, now_ms: i64) -> Result<Self> {
        let mut next = self.clone();
        let spec = &mut next.spec;
        let retimed = update.cron.as_ref().is_some_and(|c| *c != spec.cron)
            || update
                .time_zone
                .as_ref()
                .is_some_and(|z| *z != spec.time_zone)
            || (update.paused == Some(false) && spec.paused);
        if let Some(v) = update.name {
            spec.name = v;
        }
        if let Some(v) = update.cron {
            spec.cron = v;
        }
        if let Some(v) = update.time_zone {
            spec.time_zone = v;
        }
        if let Some(v) = update.inputs {
            spec.inputs = v;
        }
        if let Some(v) = update.budget {
            spec.budget = v;
        }
        if let Some(v) = update.catch_up {
            spec.catch_up = v;
        }
        if let Some(v) = update.paused {
            spec.paused = v;
        }
        if let Some(v) = update.webhook {
            spec.webhook = v;
        }
        check_schedule(spec)?;
        if retimed {
            next.since_ms = now_ms;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// 2026-01-01T00:00:00Z.
    const JAN_1: i64 = 1_767_225_600_000;
    const DAY: i64 = 86_400_000;

    fn monthly(catch_up: CatchUp) -> Schedule {
        Schedule {
            id: new_schedule_id(),
            spec: NewSchedule {
                name: "Monthly review".into(),
                cron: "0 6 1 * *".into(),
                time_zone: "Europe/Berlin".into(),
                workflow: "monthly-review".into(),
                inputs: BTreeMap::from([("month".into(), "{{previous_month}}".into())]),
                owner: "ann".into(),
                budget: ScheduleBudget::default(),
                catch_up,
                paused: false,
                webhook: None,
            },
            created_ms: JAN_1,
            since_ms: JAN_1,
        }
    }

    #[test]
    fn placeholders_give_dates_of_the_occurrence_in_its_zone() {
        let berlin = chrono_tz::Europe::Berlin;
        // 2026-02-28T23:30:00Z is already 1 March in Berlin.
        let at = 1_772_321_400_000;
        let got = expand_input(
            "{{date}} {{month}} {{year}} {{previous_month}} {{previous_month_start}} \
             {{previous_month_end}} {{date:%d.%m.%Y}}",
            at,
            berlin,
        )
        .unwrap();
        assert_eq!(
            got,
            "2026-03-01 2026-03 2026 2026-02 2026-02-01 2026-02-28 01.03.2026"
        );
        assert_eq!(
            expand_input("{{previous_month}}", JAN_1, chrono_tz::UTC).unwrap(),
            "2025-12"
        );
        assert_eq!(
            expand_input("no placeholder", 0, berlin).unwrap(),
            "no placeholder"
        );
        for bad in ["{{tomorrow}}", "{{date", "{{date:%Q}}", "{{date:}}"] {
            assert!(expand_input(bad, 0, berlin).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_occurrence_is_on_time_caught_up_or_skipped() {
        let one = monthly(CatchUp::One);
        // 1 January 06:00 in Berlin is 05:00 UTC, after the schedule was added at midnight.
        let jan_1 = one.next_after(JAN_1).unwrap();
        assert_eq!(crate::store::rfc3339(jan_1), "2026-01-01T05:00:00Z");
        let feb_1 = one.next_after(jan_1).unwrap();
        assert_eq!(crate::store::rfc3339(feb_1), "2026-02-01T05:00:00Z");
        // January was missed: caught up on 1 February before February's time.
        assert_eq!(one.due(None, feb_1 - 1), Due::CaughtUp(jan_1));
        assert_eq!(one.due(Some(jan_1), feb_1 - 1), Due::Nothing);
        assert_eq!(one.due(Some(jan_1), feb_1), Due::OnTime(feb_1));
        assert_eq!(one.due(Some(feb_1), feb_1 + 1000), Due::Nothing);
        // A month and a half of downtime: one occurrence, the latest.
        let mar_1 = one.next_after(feb_1).unwrap();
        let mid_march = mar_1 + 14 * DAY;
        assert_eq!(one.due(Some(feb_1), mid_march), Due::CaughtUp(mar_1));
        assert_eq!(
            monthly(CatchUp::None).due(Some(feb_1), mid_march),
            Due::Skipped(mar_1)
        );
        let mut paused = monthly(CatchUp::One);
        paused.spec.paused = true;
        assert_eq!(paused.due(None, feb_1), Due::Nothing);
    }

    #[test]
    fn resuming_forgets_what_fell_due_while_paused() {
        let mut s = monthly(CatchUp::One);
        s.spec.paused = true;
        let later = JAN_1 + 60 * DAY;
        let resumed = s
            .updated(
                ScheduleUpdate {
                    paused: Some(false),
                    ..ScheduleUpdate::default()
                },
                later,
            )
            .unwrap();
        assert_eq!(resumed.since_ms, later);
        assert_eq!(resumed.due(None, later + 1), Due::Nothing);
    }

    #[test]
    fn bad_schedules_are_refused_naming_the_field() {
        let good = monthly(CatchUp::One).spec;
        check_schedule(&good).unwrap();
        type Break = fn(&mut NewSchedule);
        let cases: [(&str, Break); 7] = [
            ("cron expression", |s| s.cron = "61 * * * *".into()),
            ("time zone", |s| s.time_zone = "Mars/Olympus".into()),
            ("schedule name", |s| s.name = " ".into()),
            ("user name", |s| s.owner = "a b".into()),
            ("placeholder", |s| {
                s.inputs.insert("x".into(), "{{nope}}".into());
            }),
            ("webhook", |s| {
                s.webhook = Some(Webhook {
                    url: "file:///etc/passwd".into(),
                    secret: "k".into(),
                });
            }),
            ("budget", |s| s.budget.usd = Some(f64::NAN)),
        ];
        for (field, change) in cases {
            let mut bad = good.clone();
            change(&mut bad);
            let err = check_schedule(&bad).unwrap_err().to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn a_monthly_schedule_has_one_occurrence_a_month(start in 0i64..(40 * 365 * DAY)) {
            let s = monthly(CatchUp::One);
            let first = s.next_after(start).unwrap();
            let second = s.next_after(first).unwrap();
            proptest::prop_assert!(first > start);
            let days = (second - first) / DAY;
            proptest::prop_assert!((27..=31).contains(&days), "{days}");
            proptest::prop_assert_eq!(s.latest_at(second), Some(second));
            proptest::prop_assert_eq!(s.latest_at(second - 1), Some(first));
        }
    }
}
