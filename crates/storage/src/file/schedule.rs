//! The schedules of a [`FileStore`](super::FileStore): `schedules.json` and `runs.json` under
//! `<root>/schedules/`, each replaced atomically. Every change — a claim above all — reads,
//! changes and writes under an exclusive `flock` on `schedules/schedules.lock`, so of two
//! claims of one occurrence (two tasks, or a command beside a server) one finds the other's.

use std::path::PathBuf;

use async_trait::async_trait;

use super::blocking;
use super::people::{locked_in, read_rows, write_rows};
use crate::error::{Result, StorageError};
use crate::schedule::{
    Claim, NewSchedule, Schedule, ScheduleUpdate, ScheduledRun, Schedules, check_schedule,
    is_schedule_id, new_schedule_id,
};
use crate::store::SharedClock;

const SCHEDULES: &str = "schedules.json";
const RUNS: &str = "runs.json";
const LOCK: &str = "schedules.lock";

/// The [`Schedules`] of a [`FileStore`](super::FileStore). Cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct FileSchedules {
    /// `<root>/schedules`, created on the first change.
    dir: PathBuf,
    clock: SharedClock,
}

impl FileSchedules {
    pub(super) fn new(root: &std::path::Path, clock: SharedClock) -> Self {
        Self {
            dir: root.join("schedules"),
            clock,
        }
    }

    fn schedules_now(&self) -> Result<Vec<Schedule>> {
        read_rows(&self.dir.join(SCHEDULES))
    }

    fn runs_now(&self) -> Result<Vec<ScheduledRun>> {
        read_rows(&self.dir.join(RUNS))
    }

    async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Self) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let this = self.clone();
        blocking(move || f(&this)).await
    }

    async fn locked<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Self) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        self.run(move |s| locked_in(&s.dir, LOCK, || f(s))).await
    }
}

#[async_trait]
impl Schedules for FileSchedules {
    async fn add_schedule(&self, new: NewSchedule) -> Result<Schedule> {
        check_schedule(&new)?;
        let now = self.clock.now_ms();
        self.locked(move |s| {
            let mut all = s.schedules_now()?;
            let schedule = Schedule {
                id: new_schedule_id(),
                spec: new,
                created_ms: now,
                since_ms: now,
            };
            all.push(schedule.clone());
            all.sort_by(|a, b| a.id.cmp(&b.id));
            write_rows(&s.dir.join(SCHEDULES), &all)?;
            Ok(schedule)
        })
        .await
    }

    async fn schedule(&self, id: &str) -> Result<Option<Schedule>> {
        if !is_schedule_id(id) {
            return Ok(None);
        }
        let id = id.to_owned();
        self.run(move |s| Ok(s.schedules_now()?.into_iter().find(|x| x.id == id)))
            .await
    }

    async fn schedules(&self) -> Result<Vec<Schedule>> {
        self.run(Self::schedules_now).await
    }

    async fn update_schedule(&self, id: &str, update: ScheduleUpdate) -> Result<Schedule> {
        let id = id.to_owned();
        let now = self.clock.now_ms();
        self.locked(move |s| {
            let mut all = s.schedules_now()?;
            let slot = all
                .iter_mut()
                .find(|x| x.id == id)
                .ok_or(StorageError::NoSchedule { id })?;
            *slot = slot.updated(update, now)?;
            let changed = slot.clone();
            write_rows(&s.dir.join(SCHEDULES), &all)?;
            Ok(changed)
        })
        .await
    }

    async fn remove_schedule(&self, id: &str) -> Result<bool> {
        if !is_schedule_id(id) {
            return Ok(false);
        }
        let id = id.to_owned();
        self.locked(move |s| {
            let mut all = s.schedules_now()?;
            let before = all.len();
            all.retain(|x| x.id != id);
            if all.len() == before {
                return Ok(false);
            }
            write_rows(&s.dir.join(SCHEDULES), &all)?;
            let mut runs = s.runs_now()?;
            runs.retain(|r| r.schedule_id != id);
            write_rows(&s.dir.join(RUNS), &runs)?;
            Ok(true)
        })
        .await
    }

    async fn claim(&self, id: &str, occurrence_ms: i64, conversation_id: &str) -> Result<Claim> {
        let (id, conversation_id) = (id.to_owned(), conversation_id.to_owned());
        let now = self.clock.now_ms();
        self.locked(move |s| {
            if !s.schedules_now()?.iter().any(|x| x.id == id) {
                return Err(StorageError::NoSchedule { id });
            }
            let mut runs = s.runs_now()?;
            if let Some(first) = runs
                .iter()
                .find(|r| r.schedule_id == id && r.occurrence_ms == occurrence_ms)
            {
                return Ok(Claim::Taken(first.clone()));
            }
            let run = ScheduledRun {
                schedule_id: id,
                occurrence_ms,
                conversation_id,
                claimed_ms: now,
                finished_ms: None,
                status: None,
                error: None,
            };
            runs.push(run.clone());
            write_rows(&s.dir.join(RUNS), &runs)?;
            Ok(Claim::Claimed(run))
        })
        .await
    }

    async fn finish_run(
        &self,
        id: &str,
        occurrence_ms: i64,
        status: &str,
        error: Option<&str>,
    ) -> Result<Option<ScheduledRun>> {
        let (id, status, error) = (id.to_owned(), status.to_owned(), error.map(str::to_owned));
        let now = self.clock.now_ms();
        self.locked(move |s| {
            let mut runs = s.runs_now()?;
            let Some(run) = runs
                .iter_mut()
                .find(|r| r.schedule_id == id && r.occurrence_ms == occurrence_ms)
            else {
                return Ok(None);
            };
            run.finished_ms = Some(now);
            run.status = Some(status);
            run.error = error;
            let done = run.clone();
            write_rows(&s.dir.join(RUNS), &runs)?;
            Ok(Some(done))
        })
        .await
    }

    async fn runs(&self, id: &str, limit: usize) -> Result<Vec<ScheduledRun>> {
        let id = id.to_owned();
        self.run(move |s| {
            let mut runs: Vec<ScheduledRun> = s
                .runs_now()?
                .into_iter()
                .filter(|r| r.schedule_id == id)
                .collect();
            runs.sort_by_key(|r| std::cmp::Reverse(r.occurrence_ms));
            runs.truncate(limit);
            Ok(runs)
        })
        .await
    }

    async fn unfinished_runs(&self) -> Result<Vec<ScheduledRun>> {
        self.run(|s| {
            let mut runs: Vec<ScheduledRun> = s
                .runs_now()?
                .into_iter()
                .filter(|r| r.finished_ms.is_none())
                .collect();
            runs.sort_by_key(|r| r.claimed_ms);
            Ok(runs)
        })
        .await
    }
}
