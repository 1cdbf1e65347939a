//! Two servers on one store: a run on one is seen through the other's event stream (from
//! the log), and a second run on the same conversation is refused by either — with the file
//! store (an `flock` per conversation) and with PostgreSQL (an advisory lock), the server
//! holding nothing the store does not. A cancel sent to either server stops the run, through a
//! request in the store the running server looks for.

use std::sync::Arc;

use ba_storage::{ConversationStore, PostgresOptions, PostgresStore};
use serde_json::{Value, json};

use crate::harness::{Api, Model, Options, Server, dir, text_turn, two_rounds};

const Q: &str = "How many rows has the sales table?";

async fn two_servers_share_the_conversations(a: &Server, b: &Server) {
    let (api_a, api_b) = (Api::new(a), Api::new(b));
    let id = api_a.create().await;
    // B follows the conversation it did not create, A runs it.
    let mut seen_by_b = api_b.events(&id, None).await;
    let run = api_a
        .run(&id, "r1", json!({"type": "message", "text": Q}))
        .await;
    assert_eq!(run.status(), 202);
    let run_id = run.json::<Value>().await.unwrap()["run_id"].clone();
    // The run waits at A's model gate: B refuses a second run, and finds the first by its
    // request id in the log.
    let first = seen_by_b.next().await.unwrap();
    assert_eq!(
        (first.event.as_str(), first.data["seq"].as_u64()),
        ("entry", Some(1))
    );
    let refused = api_b
        .run(&id, "r2", json!({"type": "message", "text": "another"}))
        .await;
    assert_eq!(refused.status(), 409);
    assert_eq!(
        refused.json::<Value>().await.unwrap()["active_run_id"],
        run_id
    );
    let retried: Value = api_b
        .run(&id, "r1", json!({"type": "message", "text": Q}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(retried["run_id"], run_id);
    a.model.release(2);
    let mut seqs = vec![1];
    while seqs.len() < 4 {
        let f = seen_by_b.next().await.unwrap();
        assert_eq!(f.event, "entry");
        seqs.push(f.data["seq"].as_u64().unwrap());
    }
    assert_eq!(seqs, [1, 2, 3, 4]);
    // The lock is free once A's run is over (its last entry is written before it lets the
    // lease go, so B may read the entry first): B runs the next question after A's end.
    let mut seen_by_a = api_a.events(&id, Some("4")).await;
    seen_by_a.until("finished").await;
    let next = api_b
        .run(&id, "r3", json!({"type": "message", "text": "Thanks"}))
        .await;
    assert_eq!(next.status(), 202);
    // A's stream goes on after its own run's end, then sees B's entry.
    let f = loop {
        let f = seen_by_a.next().await.unwrap();
        if f.event == "entry" {
            break f;
        }
    };
    assert_eq!(f.data["seq"].as_u64(), Some(5));
}

/// B is asked to cancel A's run: B records the request in the store, A finds it and cancels
/// its run as if asked itself (the partial answer kept); afterwards neither runs it.
async fn a_cancel_sent_to_the_other_server_stops_the_run(a: &Server, b: &Server) {
    let (api_a, api_b) = (Api::new(a), Api::new(b));
    let id = api_a.create().await;
    let mut seen_by_a = api_a.events(&id, None).await;
    let run: Value = api_a
        .run(&id, "r1", json!({"type": "message", "text": Q}))
        .await
        .json()
        .await
        .unwrap();
    let run_id = run["run_id"].as_str().unwrap();
    // A's model has sent part of its answer and hangs.
    seen_by_a.until("text_delta").await;
    let other = api_b
        .post(
            &format!("/api/v1/conversations/{id}/runs/run_other/cancel"),
            json!({}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        other.status(),
        404,
        "a run id that is not one of the conversation's runs"
    );
    let url = format!("/api/v1/conversations/{id}/runs/{run_id}/cancel");
    let c = api_b.post(&url, json!({})).send().await.unwrap();
    assert_eq!(c.status(), 202);
    assert_eq!(c.json::<Value>().await.unwrap()["state"], "cancelling");
    let frames = seen_by_a.until("finished").await;
    assert_eq!(frames.last().unwrap().data["status"], "cancelled");
    let entry = frames.iter().rev().find(|f| f.event == "entry").unwrap();
    assert_eq!(entry.data["entry"]["llm_error"]["kind"], "cancelled");
    for api in [&api_a, &api_b] {
        let again = api.post(&url, json!({})).send().await.unwrap();
        assert_eq!(again.json::<Value>().await.unwrap()["state"], "not_running");
    }
    let conv = api_b.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "interrupted");
}

fn hanging_turns() -> Vec<Value> {
    vec![text_turn(
        "Resumed: 42 rows.",
        json!({"role": "user", "text": "continue"}),
    )]
}

fn b_turns() -> Vec<Value> {
    vec![text_turn(
        "You are welcome.",
        json!({"role": "user", "text": "Thanks"}),
    )]
}

#[tokio::test]
async fn two_servers_on_one_file_store() {
    let (_d, path) = dir();
    let a = Server::start(&path, Model::new(&two_rounds(Q), 0).gated());
    let b = Server::start(&path, Model::new(&b_turns(), 0));
    two_servers_share_the_conversations(&a, &b).await;
}

#[tokio::test]
async fn a_cancel_through_the_other_server_on_one_file_store() {
    let (_d, path) = dir();
    let a = Server::start(&path, Model::new(&hanging_turns(), 0).hanging(0));
    let b = Server::start(&path, Model::new(&b_turns(), 0));
    a_cancel_sent_to_the_other_server_stops_the_run(&a, &b).await;
}

/// A PostgreSQL schema of its own for one test; `None` (said) without a server.
pub(crate) struct Pg {
    url: String,
    schema: String,
}

impl Pg {
    pub(crate) fn new() -> Option<Self> {
        let url = ba_testkit::require_env(
            "BA_AGENT_TEST_DATABASE_URL",
            "run `eval \"$(bash .ci/postgres.sh)\"` to start a server",
        )?;
        let schema = format!("ba_server_{}", uuid::Uuid::new_v4().simple());
        Some(Self { url, schema })
    }

    pub(crate) async fn store(&self) -> PostgresStore {
        let opts = PostgresOptions {
            schema: self.schema.clone(),
            ..PostgresOptions::default()
        };
        PostgresStore::connect(&self.url, opts).await.unwrap()
    }

    /// A store in this schema on `clock`.
    pub(crate) async fn store_on(&self, clock: Arc<dyn ba_storage::Clock>) -> PostgresStore {
        let opts = PostgresOptions {
            schema: self.schema.clone(),
            clock,
            ..PostgresOptions::default()
        };
        PostgresStore::connect(&self.url, opts).await.unwrap()
    }

    /// A server on a store of its own in this schema.
    async fn server(&self, dir: &std::path::Path, model: Model) -> Server {
        let store: Arc<dyn ConversationStore> = Arc::new(self.store().await);
        let options = Options {
            store: Some(store),
            ..Options::default()
        };
        Server::start_with(dir, model, options)
    }
}

#[tokio::test]
async fn two_servers_on_one_postgres_database() {
    let Some(pg) = Pg::new() else { return };
    let (_da, path_a) = dir();
    let (_db, path_b) = dir();
    let a = pg
        .server(&path_a, Model::new(&two_rounds(Q), 0).gated())
        .await;
    let b = pg.server(&path_b, Model::new(&b_turns(), 0)).await;
    two_servers_share_the_conversations(&a, &b).await;
    let c = pg
        .server(&path_a, Model::new(&hanging_turns(), 0).hanging(0))
        .await;
    a_cancel_sent_to_the_other_server_stops_the_run(&c, &b).await;
}

/// What of the database a test cuts mid-run.
#[derive(Clone, Copy)]
enum Cut {
    /// The session holding the run's lease.
    Lease,
    /// Every session of the schema: the pools of both servers and the lease (a restart).
    All,
}

/// The database session holding a run's lease is cut while the run waits on its model (the
/// rest of the store's pool is fine): the run finds its lease lost, stops without writing
/// another entry, says why (`lease_lost`, resumable), and the conversation is free for the
/// other server, whose entries follow the question with nothing of the cut run between.
#[tokio::test]
async fn a_run_whose_lease_session_is_cut_stops_writing() {
    cut_mid_run(Cut::Lease).await;
}

/// Every session of the store is cut mid-run, as a database restart does: the run stops as
/// above, and both servers' next operations get new sessions (the next run answers).
#[tokio::test]
async fn a_run_whose_database_sessions_are_all_cut_stops_and_the_next_goes_on() {
    cut_mid_run(Cut::All).await;
}

async fn cut_mid_run(cut: Cut) {
    let Some(pg) = Pg::new() else { return };
    let (_da, path_a) = dir();
    let (_db, path_b) = dir();
    let a = pg
        .server(&path_a, Model::new(&hanging_turns(), 0).hanging(0))
        .await;
    let b = pg.server(&path_b, Model::new(&b_turns(), 0)).await;
    let admin = pg.store().await;
    let (api_a, api_b) = (Api::new(&a), Api::new(&b));
    let id = api_a.create().await;
    let mut seen_by_a = api_a.events(&id, None).await;
    let run = api_a
        .run(&id, "r1", json!({"type": "message", "text": Q}))
        .await;
    assert_eq!(run.status(), 202);
    seen_by_a.until("text_delta").await;
    let conv = ba_storage::ConversationId::new(id.clone()).unwrap();
    match cut {
        Cut::Lease => assert_eq!(admin.cut_run_lock_session(&conv).await.unwrap(), 1),
        // At least the lease's and each server's event follower or pool.
        Cut::All => assert!(admin.cut_all_sessions().await.unwrap() >= 3),
    }
    let frames = seen_by_a.until("finished").await;
    let error = frames
        .iter()
        .find(|f| f.event == "error")
        .expect("no error event");
    assert_eq!(error.data["kind"], "lease_lost", "{:?}", error.data);
    assert_eq!(error.data["resumable"], true);
    assert_eq!(frames.last().unwrap().data["status"], "failed");
    assert!(
        frames.iter().all(|f| f.event != "entry"),
        "the cut run wrote after its lease was lost: {frames:?}"
    );
    // The conversation is free: the other server runs the next question at once.
    let next = api_b
        .run(&id, "r2", json!({"type": "message", "text": "Thanks"}))
        .await;
    assert_eq!(next.status(), 202);
    let mut seen_by_b = api_b.events(&id, Some("1")).await;
    let frames = seen_by_b.until("finished").await;
    assert_eq!(frames.last().unwrap().data["status"], "answered");
    let log = api_b
        .json(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    let entries: Vec<(&str, String)> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let text = match &e["entry"]["content"] {
                Value::String(s) => s.clone(),
                blocks => blocks[0]["text"].as_str().unwrap_or_default().to_owned(),
            };
            (e["entry"]["role"].as_str().unwrap(), text)
        })
        .collect();
    let expected = [
        ("user", Q.to_owned()),
        ("user", "Thanks".to_owned()),
        ("assistant", "You are welcome.".to_owned()),
    ];
    assert_eq!(entries, expected, "{log}");
}
