//! Spending caps seen through the server: alice's month, capped by an admin through the API,
//! is spent past its cap by a run on one server; a run of another conversation of hers on a
//! second server sharing the store ends `budget_reached` without calling its model, its event
//! stream naming the cap and the spend; bob is not held; once the admin raises her cap,
//! `continue` answers. On PostgreSQL with two servers, and on the file store with one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ba_agent::{Budgets, ModelPrice, Prices};
use ba_server::Auth;
use ba_storage::{ConversationStore, FileStore, Role};
use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Frame, LIMIT, Model, Options, Server, Sse, dir};
use crate::scale_out::Pg;

/// 600,000 input tokens of model `m`: $0.60 at a dollar per million.
fn usage() -> Value {
    json!({"input_tokens": 600_000, "output_tokens": 0, "cache_read_tokens": 0,
           "cache_write_tokens": 0})
}

fn tool_turn(call: &str) -> Value {
    json!({"response": {"message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": call, "name": "count_rows", "input": {"table": "sales"}}]},
        "stop_reason": "tool_use", "usage": usage(), "id": call, "model": "m"}})
}

fn answer_turn(text: &str) -> Value {
    json!({"response": {"message": {"role": "assistant", "content": text},
        "stop_reason": "end_turn", "usage": usage(), "id": "a", "model": "m"}})
}

fn prices() -> Prices {
    let mut m = BTreeMap::new();
    m.insert(
        "m".to_owned(),
        ModelPrice {
            input: 1.0,
            output: 1.0,
            cache_read: None,
            cache_write: None,
        },
    );
    Prices::new(m).unwrap()
}

/// alice's first run, on the first server: one call (then the cap holds the next).
fn a_turns() -> Vec<Value> {
    vec![tool_turn("call_1")]
}

/// bob's answer, then alice's once her cap is raised.
fn b_turns() -> Vec<Value> {
    vec![answer_turn("bob: 42 rows."), answer_turn("alice: 42 rows.")]
}

/// A server signing in the store's users, with prices and a configured month cap of $100
/// (alice's own cap takes its place).
fn server(path: &std::path::Path, store: Arc<dyn ConversationStore>, turns: &[Value]) -> Server {
    Server::start_with(
        path,
        Model::new(turns, 0),
        Options {
            store: Some(store),
            auth: Some(Auth::Users),
            prices: prices(),
            budgets: Budgets {
                user_month_usd: Some(100.0),
                ..Budgets::default()
            },
            ..Options::default()
        },
    )
}

/// alice, bob (analysts) and ada (admin) with a token each.
async fn users(store: &dyn ConversationStore) -> HashMap<&'static str, String> {
    let directory = store.directory().expect("the store keeps users");
    let mut out = HashMap::new();
    for (name, role) in [
        ("alice", Role::Analyst),
        ("bob", Role::Analyst),
        ("ada", Role::Admin),
    ] {
        directory.add_user(name, role).await.unwrap();
        out.insert(name, directory.issue_token(name).await.unwrap().secret);
    }
    out
}

async fn call(server: &Server, secret: &str, method: Method, path: &str, body: Value) -> Value {
    let r = reqwest::Client::new()
        .request(method.clone(), server.url(path))
        .bearer_auth(secret)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{method} {path}: {}", r.status());
    r.json().await.unwrap()
}

async fn get(server: &Server, secret: &str, path: &str) -> Value {
    let r = reqwest::Client::new()
        .get(server.url(path))
        .bearer_auth(secret)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "GET {path}: {}", r.status());
    r.json().await.unwrap()
}

async fn create(server: &Server, secret: &str) -> String {
    let v = call(
        server,
        secret,
        Method::POST,
        "/api/v1/conversations",
        json!({}),
    )
    .await;
    v["id"].as_str().unwrap().to_owned()
}

/// Runs `input` in `conv` as the holder of `secret`; the frames up to `finished`.
async fn run(
    server: &Server,
    secret: &str,
    conv: &str,
    request_id: &str,
    input: Value,
) -> Vec<Frame> {
    let r = reqwest::Client::new()
        .get(server.url(&format!("/api/v1/conversations/{conv}/events")))
        .bearer_auth(secret)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut events = Sse::new(r);
    call(
        server,
        secret,
        Method::POST,
        &format!("/api/v1/conversations/{conv}/runs"),
        json!({"request_id": request_id, "input": input}),
    )
    .await;
    let mut frames = events.until("finished").await;
    // The stream replays the entries of earlier runs first: keep this run's frames.
    let start = frames
        .iter()
        .rposition(|f| f.event == "run_started")
        .unwrap();
    frames.drain(..start);
    frames
}

fn calls_of(server: &Server) -> usize {
    *server.model.started.borrow()
}

fn status_of(frames: &[Frame]) -> &str {
    frames.last().unwrap().data["status"].as_str().unwrap()
}

/// `a` and `b` share one store (they may be the same server).
async fn the_month_cap_holds_across_servers(
    a: &Server,
    b: &Server,
    secrets: &HashMap<&'static str, String>,
) {
    let (alice, bob, ada) = (&secrets["alice"], &secrets["bob"], &secrets["ada"]);
    let patched = call(
        a,
        ada,
        Method::PATCH,
        "/api/v1/users/alice",
        json!({"budget": {"month_usd": 0.5}}),
    )
    .await;
    assert_eq!(patched["budget"]["month_usd"], 0.5, "{patched}");
    // On A the first call spends $0.60: the call finishes, the tool it asked for runs, and the
    // next call is not made.
    let first = create(a, alice).await;
    let q = json!({"type": "message", "text": "How many rows has the sales table?"});
    let frames = run(a, alice, &first, "r1", q.clone()).await;
    assert_eq!(status_of(&frames), "budget_reached", "{frames:#?}");
    assert_eq!(calls_of(a), 1);
    assert_eq!(a.tool_calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    // On B another conversation of hers ends before its model is called.
    let second = create(b, alice).await;
    let before = calls_of(b);
    let frames = run(b, alice, &second, "r1", q.clone()).await;
    assert_eq!(status_of(&frames), "budget_reached", "{frames:#?}");
    assert_eq!(calls_of(b), before, "B's model was called past the cap");
    let error = frames.iter().find(|f| f.event == "error").unwrap();
    assert_eq!(error.data["kind"], "budget_reached");
    assert_eq!(error.data["resumable"], true);
    let message = error.data["message"].as_str().unwrap();
    assert!(
        message.contains("alice") && message.contains("$0.50") && message.contains("$0.60"),
        "the message names the cap and the spend: {message}"
    );
    // Her question is kept; the spend route and the conversation say where she stands.
    let log = get(
        b,
        alice,
        &format!("/api/v1/conversations/{second}/messages"),
    )
    .await;
    assert_eq!(log["entries"].as_array().unwrap().len(), 1, "{log}");
    let spend = get(b, alice, &format!("/api/v1/conversations/{second}/spend")).await;
    assert_eq!(spend["owner"], "alice");
    assert_eq!(spend["month_usd_cap"], 0.5);
    assert!(
        (spend["owner_month"]["usd"].as_f64().unwrap() - 0.6).abs() < 1e-9,
        "{spend}"
    );
    assert_eq!(spend["conversation"]["usd"], 0.0, "{spend}");
    assert_eq!(spend["reached"].as_str(), Some(message));
    let first_spend = get(a, ada, &format!("/api/v1/conversations/{first}/spend")).await;
    assert!((first_spend["conversation"]["usd"].as_f64().unwrap() - 0.6).abs() < 1e-9);
    for server in [a, b] {
        let conv = get(server, alice, &format!("/api/v1/conversations/{second}")).await;
        assert_eq!(conv["status"], "budget_reached", "{conv}");
        let list = get(server, alice, "/api/v1/conversations").await;
        let listed: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["status"].as_str().unwrap())
            .collect();
        assert_eq!(listed, ["budget_reached", "budget_reached"], "{list}");
    }
    // bob is not held by alice's cap.
    let bobs = create(b, bob).await;
    let frames = run(b, bob, &bobs, "r1", q.clone()).await;
    assert_eq!(status_of(&frames), "answered", "{frames:#?}");
    let me = get(b, bob, "/api/v1/me").await;
    assert!(
        (me["spend"]["usd"].as_f64().unwrap() - 0.6).abs() < 1e-9,
        "{me}"
    );
    // The admin raises her cap: `continue` answers on B, and her month counts the call.
    call(
        b,
        ada,
        Method::PATCH,
        "/api/v1/users/alice",
        json!({"budget": {"month_usd": 5.0}}),
    )
    .await;
    let conv = get(a, alice, &format!("/api/v1/conversations/{second}")).await;
    assert_eq!(conv["status"], "interrupted", "{conv}");
    let frames = run(b, alice, &second, "r2", json!({"type": "continue"})).await;
    assert_eq!(status_of(&frames), "answered", "{frames:#?}");
    let log = get(
        a,
        alice,
        &format!("/api/v1/conversations/{second}/messages"),
    )
    .await;
    let last = log["entries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["entry"]["content"][0]["text"], "alice: 42 rows.",
        "{log}"
    );
    let me = get(a, alice, "/api/v1/me").await;
    assert!(
        (me["spend"]["usd"].as_f64().unwrap() - 1.2).abs() < 1e-9,
        "{me}"
    );
    let conv = get(b, alice, &format!("/api/v1/conversations/{second}")).await;
    assert_eq!(conv["status"], "idle", "{conv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_cap_holds_across_two_servers_on_one_postgres_database() {
    let Some(pg) = Pg::new() else { return };
    let (_da, path_a) = dir();
    let (_db, path_b) = dir();
    let store_a: Arc<dyn ConversationStore> = Arc::new(pg.store().await);
    let store_b: Arc<dyn ConversationStore> = Arc::new(pg.store().await);
    let secrets = users(store_a.as_ref()).await;
    let a = server(&path_a, store_a, &a_turns());
    let b = server(&path_b, store_b, &b_turns());
    tokio::time::timeout(
        LIMIT * 2,
        the_month_cap_holds_across_servers(&a, &b, &secrets),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_cap_holds_across_conversations_on_the_file_store() {
    let (_d, path) = dir();
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(&path).unwrap());
    let secrets = users(store.as_ref()).await;
    let mut turns = a_turns();
    turns.extend(b_turns());
    let one = server(&path, store, &turns);
    tokio::time::timeout(
        LIMIT * 2,
        the_month_cap_holds_across_servers(&one, &one, &secrets),
    )
    .await
    .unwrap();
}
