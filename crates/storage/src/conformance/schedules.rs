//! The conformance checks of the schedules of a store ([`crate::Schedules`]): keeping them,
//! claiming each occurrence once however many claim it at once, and what is due after a
//! pause or a downtime.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{CheckResult, err};
use crate::error::StorageError;
use crate::schedule::{
    CatchUp, Claim, Due, NewSchedule, ScheduleBudget, ScheduleUpdate, Schedules, Webhook,
};
use crate::store::{Clock as _, ConversationStore, ManualClock};

const DAY: i64 = 86_400_000;

fn schedules<S: ConversationStore>(store: &S) -> std::result::Result<Arc<dyn Schedules>, String> {
    store
        .schedules()
        .ok_or_else(|| "the store keeps no schedules".to_owned())
}

fn monthly(name: &str, catch_up: CatchUp) -> NewSchedule {
    NewSchedule {
        name: name.to_owned(),
        cron: "0 6 1 * *".to_owned(),
        time_zone: "Europe/Berlin".to_owned(),
        workflow: "monthly-review".to_owned(),
        inputs: BTreeMap::from([("month".to_owned(), "{{previous_month}}".to_owned())]),
        owner: "ann".to_owned(),
        budget: ScheduleBudget {
            usd: Some(2.5),
            tokens: None,
        },
        catch_up,
        paused: false,
        webhook: Some(Webhook {
            url: "https://hooks.example.com/ba".to_owned(),
            secret: "s3cret".to_owned(),
        }),
    }
}

/// A schedule is kept as given (with its id, creation time and webhook), listed by id,
/// changed field by field, refused when bad, and removed with its runs.
pub(super) async fn schedules_kept<S: ConversationStore>(
    store: &S,
    clock: &ManualClock,
) -> CheckResult {
    let s = schedules(store)?;
    ensure!(
        s.schedules().await.map_err(err)?.is_empty(),
        "a new store has schedules"
    );
    let a = s
        .add_schedule(monthly("Monthly review", CatchUp::One))
        .await
        .map_err(err)?;
    let b = s
        .add_schedule(monthly("Weekly numbers", CatchUp::None))
        .await
        .map_err(err)?;
    ensure!(a.id != b.id, "two schedules got the id {}", a.id);
    ensure!(
        a.created_ms == clock.now_ms() && a.since_ms == a.created_ms,
        "a schedule added at {} reads created {} since {}",
        clock.now_ms(),
        a.created_ms,
        a.since_ms
    );
    let read = s.schedule(&a.id).await.map_err(err)?;
    ensure!(read.as_ref() == Some(&a), "read back {read:?}, added {a:?}");
    let mut ids = vec![a.id.clone(), b.id.clone()];
    ids.sort();
    let listed: Vec<String> = s
        .schedules()
        .await
        .map_err(err)?
        .into_iter()
        .map(|x| x.id)
        .collect();
    ensure!(listed == ids, "listed {listed:?}, expected {ids:?}");
    let mut bad = monthly("Bad", CatchUp::One);
    bad.cron = "every month".to_owned();
    let refused = s.add_schedule(bad).await;
    ensure!(
        matches!(refused, Err(StorageError::Invalid { .. })),
        "a schedule of cron `every month` was kept: {refused:?}"
    );

    clock.advance(DAY);
    let paused = s
        .update_schedule(
            &a.id,
            ScheduleUpdate {
                paused: Some(true),
                name: Some("Monthly sales review".to_owned()),
                ..ScheduleUpdate::default()
            },
        )
        .await
        .map_err(err)?;
    let renamed = "Monthly sales review";
    ensure!(
        paused.spec.paused && paused.spec.name == renamed,
        "the update gave {paused:?}"
    );
    ensure!(
        paused.since_ms == a.since_ms,
        "pausing moved since to {}",
        paused.since_ms
    );
    clock.advance(DAY);
    let resumed = s
        .update_schedule(
            &a.id,
            ScheduleUpdate {
                paused: Some(false),
                ..ScheduleUpdate::default()
            },
        )
        .await
        .map_err(err)?;
    ensure!(
        resumed.since_ms == clock.now_ms(),
        "a schedule resumed at {} is due from {}",
        clock.now_ms(),
        resumed.since_ms
    );
    let stored = s.schedule(&a.id).await.map_err(err)?;
    ensure!(
        stored.as_ref() == Some(&resumed),
        "stored {stored:?}, updated {resumed:?}"
    );
    let bad_update = s
        .update_schedule(
            &a.id,
            ScheduleUpdate {
                time_zone: Some("Nowhere/Land".to_owned()),
                ..ScheduleUpdate::default()
            },
        )
        .await;
    ensure!(
        matches!(bad_update, Err(StorageError::Invalid { .. })),
        "time zone `Nowhere/Land` was taken: {bad_update:?}"
    );
    let unknown = s
        .update_schedule("sch_0000000000000000", ScheduleUpdate::default())
        .await;
    ensure!(
        matches!(unknown, Err(StorageError::NoSchedule { .. })),
        "updating an unknown schedule gave {unknown:?}"
    );

    s.claim(&a.id, 1, "conv-a-1").await.map_err(err)?;
    ensure!(
        s.remove_schedule(&a.id).await.map_err(err)?,
        "removing a schedule said there was none"
    );
    ensure!(
        !s.remove_schedule(&a.id).await.map_err(err)?,
        "a schedule was removed twice"
    );
    ensure!(
        s.schedule(&a.id).await.map_err(err)?.is_none(),
        "a removed schedule is still read"
    );
    ensure!(
        s.runs(&a.id, 10).await.map_err(err)?.is_empty()
            && s.unfinished_runs().await.map_err(err)?.is_empty(),
        "a removed schedule's runs are left"
    );
    let orphan = s.claim(&a.id, 2, "conv-a-2").await;
    ensure!(
        matches!(orphan, Err(StorageError::NoSchedule { .. })),
        "a removed schedule's occurrence was claimed: {orphan:?}"
    );
    ensure!(
        s.schedule("../../etc/passwd").await.map_err(err)?.is_none(),
        "an id that cannot be a schedule's was found"
    );
    Ok(())
}

/// Forty tasks claim one occurrence at once: one claims it, every other reads that claim
/// (the same conversation); occurrences are claimed apart; a finished run leaves the
/// unfinished ones; runs list latest first.
pub(super) async fn schedule_claims<S: ConversationStore>(store: &S) -> CheckResult {
    const CLAIMERS: usize = 40;
    let s = schedules(store)?;
    let schedule = s
        .add_schedule(monthly("Monthly review", CatchUp::One))
        .await
        .map_err(err)?;
    let occurrence = schedule
        .next_after(schedule.since_ms)
        .ok_or("a monthly schedule has no next occurrence")?;
    let mut tasks = Vec::new();
    for i in 0..CLAIMERS {
        let (s, id) = (s.clone(), schedule.id.clone());
        tasks.push(tokio::spawn(async move {
            s.claim(&id, occurrence, &format!("conv-{i}")).await
        }));
    }
    let mut claimed = Vec::new();
    let mut taken = Vec::new();
    for task in tasks {
        match task.await.map_err(|e| e.to_string())?.map_err(err)? {
            Claim::Claimed(run) => claimed.push(run),
            Claim::Taken(run) => taken.push(run),
        }
    }
    ensure!(
        claimed.len() == 1,
        "{CLAIMERS} claims of one occurrence at once: {} claimed it",
        claimed.len()
    );
    let winner = &claimed[0];
    ensure!(
        taken.iter().all(|t| t == winner),
        "a refused claim reads another run than the one claimed: {taken:?} vs {winner:?}"
    );
    let next = schedule
        .next_after(occurrence)
        .ok_or("a monthly schedule ends")?;
    let second = s
        .claim(&schedule.id, next, "conv-next")
        .await
        .map_err(err)?;
    ensure!(
        matches!(second, Claim::Claimed(_)),
        "the next occurrence was not claimed: {second:?}"
    );
    let unfinished = s.unfinished_runs().await.map_err(err)?;
    ensure!(unfinished.len() == 2, "unfinished runs: {unfinished:?}");
    let done = s
        .finish_run(&schedule.id, occurrence, "budget_reached", None)
        .await
        .map_err(err)?
        .ok_or("finishing a claimed run found none")?;
    ensure!(
        done.status.as_deref() == Some("budget_reached") && done.finished_ms.is_some(),
        "the finished run reads {done:?}"
    );
    let unfinished = s.unfinished_runs().await.map_err(err)?;
    ensure!(
        unfinished.len() == 1 && unfinished[0].occurrence_ms == next,
        "after one finished, unfinished runs: {unfinished:?}"
    );
    let runs = s.runs(&schedule.id, 10).await.map_err(err)?;
    let order: Vec<i64> = runs.iter().map(|r| r.occurrence_ms).collect();
    ensure!(
        order == [next, occurrence],
        "runs are listed latest first: {order:?}"
    );
    ensure!(
        s.runs(&schedule.id, 1).await.map_err(err)?.len() == 1,
        "a limit of 1 gave more runs"
    );
    let missing = s
        .finish_run(&schedule.id, occurrence + 1, "answered", None)
        .await
        .map_err(err)?;
    ensure!(
        missing.is_none(),
        "finished a run never claimed: {missing:?}"
    );
    Ok(())
}

/// A month of downtime: `catch_up: one` has the latest missed occurrence due, `none` has
/// none; after the caught-up claim nothing more is; the next occurrence is due on time.
pub(super) async fn catch_up<S: ConversationStore>(store: &S, clock: &ManualClock) -> CheckResult {
    let s = schedules(store)?;
    let one = s
        .add_schedule(monthly("Catch one up", CatchUp::One))
        .await
        .map_err(err)?;
    let none = s
        .add_schedule(monthly("Catch none up", CatchUp::None))
        .await
        .map_err(err)?;
    let first = one.next_after(one.since_ms).ok_or("no first occurrence")?;
    let second = one.next_after(first).ok_or("no second occurrence")?;
    // Down from before the first occurrence until ten days after the second.
    clock.advance(second + 10 * DAY - clock.now_ms());
    let now = clock.now_ms();
    ensure!(
        one.due(None, now) == Due::CaughtUp(second),
        "catch_up one after downtime: {:?}",
        one.due(None, now)
    );
    ensure!(
        none.due(None, now) == Due::Skipped(second),
        "catch_up none after downtime: {:?}",
        none.due(None, now)
    );
    s.claim(&one.id, second, "caught-up").await.map_err(err)?;
    let last = s.runs(&one.id, 1).await.map_err(err)?;
    let last = last.first().map(|r| r.occurrence_ms);
    ensure!(
        one.due(last, now) == Due::Nothing,
        "after catching up, still due: {:?}",
        one.due(last, now)
    );
    let third = one.next_after(now).ok_or("no third occurrence")?;
    clock.advance(third - now);
    for schedule in [&one, &none] {
        let last = s.runs(&schedule.id, 1).await.map_err(err)?;
        let last = last.first().map(|r| r.occurrence_ms);
        let due = schedule.due(last, clock.now_ms());
        ensure!(
            due == Due::OnTime(third),
            "{:?}: the next occurrence is {due:?}",
            schedule.spec.catch_up
        );
    }
    Ok(())
}
