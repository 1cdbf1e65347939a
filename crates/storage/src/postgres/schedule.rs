//! The schedules of a [`PostgresStore`](super::PostgresStore): `ba_schedules` (what each was
//! given, as JSON text) and `ba_schedule_runs`, one row per claimed occurrence, inserted
//! `ON CONFLICT DO NOTHING`: of every server claiming an occurrence at once, one inserts the
//! row and the others read it.

use async_trait::async_trait;
use deadpool_postgres::Pool;
use tokio_postgres::Row;

use super::db;
use crate::error::{Result, StorageError};
use crate::schedule::{
    Claim, NewSchedule, Schedule, ScheduleUpdate, ScheduledRun, Schedules, check_schedule,
    is_schedule_id, new_schedule_id,
};
use crate::store::SharedClock;

const RUN_COLUMNS: &str =
    "schedule_id, occurrence_ms, conversation_id, claimed_ms, finished_ms, status, error";

/// The [`Schedules`] of a [`PostgresStore`](super::PostgresStore). Cheap to clone.
#[derive(Clone)]
pub(super) struct PgSchedules {
    pool: Pool,
    clock: SharedClock,
}

impl std::fmt::Debug for PgSchedules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSchedules").finish_non_exhaustive()
    }
}

fn schedule_of(row: &Row) -> Result<Schedule> {
    let id: String = row.get("id");
    let spec: NewSchedule =
        serde_json::from_str(row.get("spec")).map_err(|e| StorageError::Format {
            what: format!("schedule `{id}`"),
            message: e.to_string(),
        })?;
    Ok(Schedule {
        id,
        spec,
        created_ms: row.get("created_ms"),
        since_ms: row.get("since_ms"),
    })
}

fn run_of(row: &Row) -> ScheduledRun {
    ScheduledRun {
        schedule_id: row.get("schedule_id"),
        occurrence_ms: row.get("occurrence_ms"),
        conversation_id: row.get("conversation_id"),
        claimed_ms: row.get("claimed_ms"),
        finished_ms: row.get("finished_ms"),
        status: row.get("status"),
        error: row.get("error"),
    }
}

fn spec_text(spec: &NewSchedule) -> Result<String> {
    serde_json::to_string(spec).map_err(|e| StorageError::Format {
        what: "schedule".into(),
        message: e.to_string(),
    })
}

impl PgSchedules {
    pub(super) fn new(pool: Pool, clock: SharedClock) -> Self {
        Self { pool, clock }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(db)
    }
}

#[async_trait]
impl Schedules for PgSchedules {
    async fn add_schedule(&self, new: NewSchedule) -> Result<Schedule> {
        check_schedule(&new)?;
        let now = self.clock.now_ms();
        let schedule = Schedule {
            id: new_schedule_id(),
            spec: new,
            created_ms: now,
            since_ms: now,
        };
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO ba_schedules (id, spec, created_ms, since_ms) VALUES ($1, $2, $3, $4)",
                &[
                    &schedule.id,
                    &spec_text(&schedule.spec)?,
                    &schedule.created_ms,
                    &schedule.since_ms,
                ],
            )
            .await
            .map_err(db)?;
        Ok(schedule)
    }

    async fn schedule(&self, id: &str) -> Result<Option<Schedule>> {
        if !is_schedule_id(id) {
            return Ok(None);
        }
        let client = self.client().await?;
        client
            .query_opt(
                "SELECT id, spec, created_ms, since_ms FROM ba_schedules WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(db)?
            .as_ref()
            .map(schedule_of)
            .transpose()
    }

    async fn schedules(&self) -> Result<Vec<Schedule>> {
        let client = self.client().await?;
        client
            .query(
                "SELECT id, spec, created_ms, since_ms FROM ba_schedules ORDER BY id",
                &[],
            )
            .await
            .map_err(db)?
            .iter()
            .map(schedule_of)
            .collect()
    }

    async fn update_schedule(&self, id: &str, update: ScheduleUpdate) -> Result<Schedule> {
        let no_schedule = || StorageError::NoSchedule { id: id.to_owned() };
        if !is_schedule_id(id) {
            return Err(no_schedule());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db)?;
        let row = tx
            .query_opt(
                "SELECT id, spec, created_ms, since_ms FROM ba_schedules WHERE id = $1 FOR UPDATE",
                &[&id],
            )
            .await
            .map_err(db)?
            .ok_or_else(no_schedule)?;
        let changed = schedule_of(&row)?.updated(update, self.clock.now_ms())?;
        tx.execute(
            "UPDATE ba_schedules SET spec = $2, since_ms = $3 WHERE id = $1",
            &[&id, &spec_text(&changed.spec)?, &changed.since_ms],
        )
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(changed)
    }

    async fn remove_schedule(&self, id: &str) -> Result<bool> {
        let client = self.client().await?;
        let n = client
            .execute("DELETE FROM ba_schedules WHERE id = $1", &[&id])
            .await
            .map_err(db)?;
        Ok(n > 0)
    }

    async fn claim(&self, id: &str, occurrence_ms: i64, conversation_id: &str) -> Result<Claim> {
        let client = self.client().await?;
        let now = self.clock.now_ms();
        let inserted = client
            .query_opt(
                &format!(
                    "INSERT INTO ba_schedule_runs
                         (schedule_id, occurrence_ms, conversation_id, claimed_ms)
                     SELECT id, $2, $3, $4 FROM ba_schedules WHERE id = $1
                     ON CONFLICT (schedule_id, occurrence_ms) DO NOTHING
                     RETURNING {RUN_COLUMNS}"
                ),
                &[&id, &occurrence_ms, &conversation_id, &now],
            )
            .await
            .map_err(db)?;
        if let Some(row) = inserted {
            return Ok(Claim::Claimed(run_of(&row)));
        }
        let first = client
            .query_opt(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM ba_schedule_runs
                     WHERE schedule_id = $1 AND occurrence_ms = $2"
                ),
                &[&id, &occurrence_ms],
            )
            .await
            .map_err(db)?;
        match first {
            Some(row) => Ok(Claim::Taken(run_of(&row))),
            None => Err(StorageError::NoSchedule { id: id.to_owned() }),
        }
    }

    async fn finish_run(
        &self,
        id: &str,
        occurrence_ms: i64,
        status: &str,
        error: Option<&str>,
    ) -> Result<Option<ScheduledRun>> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!(
                    "UPDATE ba_schedule_runs SET finished_ms = $3, status = $4, error = $5
                     WHERE schedule_id = $1 AND occurrence_ms = $2 RETURNING {RUN_COLUMNS}"
                ),
                &[&id, &occurrence_ms, &self.clock.now_ms(), &status, &error],
            )
            .await
            .map_err(db)?;
        Ok(row.as_ref().map(run_of))
    }

    async fn runs(&self, id: &str, limit: usize) -> Result<Vec<ScheduledRun>> {
        let client = self.client().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = client
            .query(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM ba_schedule_runs WHERE schedule_id = $1
                     ORDER BY occurrence_ms DESC LIMIT $2"
                ),
                &[&id, &limit],
            )
            .await
            .map_err(db)?;
        Ok(rows.iter().map(run_of).collect())
    }

    async fn unfinished_runs(&self) -> Result<Vec<ScheduledRun>> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM ba_schedule_runs WHERE finished_ms IS NULL
                     ORDER BY claimed_ms"
                ),
                &[],
            )
            .await
            .map_err(db)?;
        Ok(rows.iter().map(run_of).collect())
    }
}
