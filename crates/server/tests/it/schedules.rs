//! Scheduled workflows with a moved clock: a monthly schedule fires once a month for twelve
//! months (each run a conversation of the owner titled with the schedule and the date, its
//! dated input filled in); `catch_up: one` after a month and a half of downtime runs one
//! occurrence, `none` runs none; a run's budget stops it `budget_reached` and the next
//! occurrence starts afresh; the webhook is signed and retried without holding the run up;
//! the API lists, pauses, resumes and runs now, and hides another person's schedules.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ba_server::{Auth, WebhookSender};
use ba_storage::{Clock as _, ConversationId, ConversationStore, FileStore, ManualClock, Role};
use hmac::{KeyInit as _, Mac as _};
use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Model, Options, Server, dir};

const TALLY: &str = "---\nname: tally\ndescription: Count a table.\ninputs:\n  table: {type: string, default: sales}\n  limit: {type: integer, default: 10}\nnodes:\n  - id: count\n    title: Count the rows\n    brief: Count the rows of the table.\n    outputs: {rows: value}\n---\n";

/// 2026-01-01T00:00:00Z.
const JAN_1: i64 = 1_767_225_600_000;
const MINUTE: i64 = 60_000;
const DAY: i64 = 86_400_000;

fn workflows() -> ba_skills::WorkflowSet {
    let mut set = ba_skills::WorkflowSet::default();
    set.add_text(TALLY, std::path::Path::new("tally/WORKFLOW.md"));
    set
}

fn usage(tokens: u64) -> Value {
    json!({"input_tokens": tokens, "output_tokens": 0, "cache_read_tokens": 0,
           "cache_write_tokens": 0})
}

/// A run of `tally`: the node completed, then the answer.
fn run_turns(tokens: u64) -> [Value; 2] {
    [
        json!({"response": {"message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "complete_node",
             "input": {"node": "count", "outputs": {"rows": 42}}}]},
            "stop_reason": "tool_use", "usage": usage(tokens), "id": "t", "model": "m"}}),
        json!({"response": {"message": {"role": "assistant", "content": "42 rows."},
            "stop_reason": "end_turn", "usage": usage(tokens), "id": "a", "model": "m"}}),
    ]
}

/// A file store on the test's clock (schedules are due from when it says they were added).
fn file_store(path: &std::path::Path, clock: &Arc<ManualClock>) -> Arc<dyn ConversationStore> {
    let opts = ba_storage::FileStoreOptions::default().with_clock(clock.clone());
    Arc::new(FileStore::open_with(path, opts).unwrap())
}

struct Setup {
    server: Server,
    clock: Arc<ManualClock>,
    store: Arc<dyn ConversationStore>,
    _dir: tempfile::TempDir,
}

fn setup(turns: &[Value], webhooks: Option<WebhookSender>) -> Setup {
    let (d, path) = dir();
    let clock = Arc::new(ManualClock::new(JAN_1));
    let store = file_store(&path, &clock);
    let server = Server::start_with(
        &path,
        Model::new(turns, 0),
        Options {
            store: Some(Arc::clone(&store)),
            workflows: workflows(),
            clock: Some(clock.clone()),
            webhooks,
            ..Options::default()
        },
    );
    Setup {
        server,
        clock,
        store,
        _dir: d,
    }
}

async fn call(server: &Server, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = reqwest::Client::new()
        .request(method, server.url(path))
        .bearer_auth(crate::harness::TOKEN);
    if let Some(body) = body {
        r = r.json(&body);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Adds a monthly schedule (06:00 Berlin on the first) through the API.
async fn add_monthly(server: &Server, extra: Value) -> String {
    let mut body = json!({
        "name": "Monthly review",
        "cron": "0 6 1 * *",
        "time_zone": "Europe/Berlin",
        "workflow": "tally",
        "inputs": {"table": "sales_{{previous_month}}"},
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (status, added) = call(server, Method::POST, "/api/v1/schedules", Some(body)).await;
    assert_eq!(status, 201, "{added}");
    added["id"].as_str().unwrap().to_owned()
}

fn schedule_of(store: &Arc<dyn ConversationStore>) -> Arc<dyn ba_storage::Schedules> {
    store.schedules().unwrap()
}

/// Moves the clock to one minute past the schedule's next occurrence; gives the occurrence.
async fn to_next(s: &Setup, id: &str) -> i64 {
    let schedule = schedule_of(&s.store).schedule(id).await.unwrap().unwrap();
    let next = schedule.next_after(s.clock.now_ms()).unwrap();
    s.clock.advance(next + MINUTE - s.clock.now_ms());
    next
}

#[tokio::test]
async fn a_monthly_schedule_fires_once_a_month_for_twelve_months() {
    let turns: Vec<Value> = (0..12).flat_map(|_| run_turns(10)).collect();
    let s = setup(&turns, None);
    let id = add_monthly(&s.server, json!({})).await;
    let mut months = Vec::new();
    for _ in 0..12 {
        // A minute before the occurrence nothing is due.
        let schedule = schedule_of(&s.store).schedule(&id).await.unwrap().unwrap();
        let next = schedule.next_after(s.clock.now_ms()).unwrap();
        s.clock.advance(next - MINUTE - s.clock.now_ms());
        assert!(s.server.tick().await.is_empty());
        assert_eq!(to_next(&s, &id).await, next);
        let fired = s.server.tick().await;
        assert_eq!(fired.len(), 1, "one run at {next}");
        // Ticks after it, on this server, start nothing more.
        assert!(s.server.tick().await.is_empty());
        let fired = fired.into_iter().next().unwrap();
        assert_eq!(fired.occurrence_ms, next);
        let run = fired.done.await.unwrap().unwrap();
        assert_eq!(run.status.as_deref(), Some("answered"), "{run:?}");
        let conversation = ConversationId::new(run.conversation_id.clone()).unwrap();
        let meta = s.store.metadata(&conversation).await.unwrap();
        assert_eq!(meta.owner, "owner");
        months.push((
            meta.title.unwrap(),
            workflow_input(&s.store, &conversation).await,
        ));
    }
    let titles: Vec<&str> = months.iter().map(|(t, _)| t.as_str()).collect();
    let expected: Vec<String> = (1..=12)
        .map(|m| format!("Monthly review — 2026-{m:02}-01"))
        .collect();
    assert_eq!(titles, expected);
    // The dated input is the month before each occurrence.
    assert_eq!(months[0].1, "sales_2025-12");
    assert_eq!(months[11].1, "sales_2026-11");
    let runs = schedule_of(&s.store).runs(&id, 100).await.unwrap();
    assert_eq!(runs.len(), 12);
    assert_eq!(s.server.model.calls(), 24);
    // The list shows the last run with the link to its report, and the next.
    let (_, listed) = call(&s.server, Method::GET, "/api/v1/schedules", None).await;
    let listed = &listed["schedules"][0];
    assert_eq!(listed["last_run"]["status"], "answered");
    let report = listed["last_run"]["report"].as_str().unwrap();
    assert_eq!(
        report,
        format!(
            "/api/v1/conversations/{}/report/last?format=html",
            runs[0].conversation_id
        )
    );
    assert_eq!(listed["next_run"], "2027-01-01T05:00:00Z");
    let (status, _) = call(&s.server, Method::GET, report, None).await;
    assert_eq!(status, 200, "the report of the last run is served");
}

/// The `table` input the workflow started with, from the log.
async fn workflow_input(store: &Arc<dyn ConversationStore>, id: &ConversationId) -> String {
    let loaded = store.load(id).await.unwrap();
    let start = loaded
        .entries
        .iter()
        .find_map(|e| {
            let v = serde_json::to_value(&e.entry).unwrap();
            (v["workflow"]["event"] == "started").then_some(v)
        })
        .expect("the workflow's start is logged");
    let text = start.to_string();
    let at = text
        .find("sales_")
        .expect("the input is in the start entry");
    text[at..at + 13].to_owned()
}

#[tokio::test]
async fn after_a_month_and_a_half_down_catch_up_one_runs_one_and_none_runs_none() {
    let s = setup(&run_turns(10), None);
    let one = add_monthly(&s.server, json!({"name": "One", "catch_up": "one"})).await;
    let none = add_monthly(&s.server, json!({"name": "None", "catch_up": "none"})).await;
    // Down over 1 January, 1 February and 1 March, back on 15 March.
    s.clock.advance(73 * DAY);
    let fired = s.server.tick().await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    let fired = fired.into_iter().next().unwrap();
    assert_eq!(fired.schedule_id, one);
    assert_eq!(
        ba_storage::rfc3339(fired.occurrence_ms),
        "2026-03-01T05:00:00Z",
        "the latest missed occurrence"
    );
    let run = fired.done.await.unwrap().unwrap();
    assert_eq!(run.status.as_deref(), Some("answered"));
    assert!(s.server.tick().await.is_empty());
    assert!(
        schedule_of(&s.store)
            .runs(&none, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.server.model.calls(), 2);
}

#[tokio::test]
async fn the_budget_stops_a_run_and_the_next_occurrence_starts_afresh() {
    // The first run's first call uses 1500 tokens, over the run's 1000; the next run's calls
    // use 10 each.
    let mut turns = vec![run_turns(1500)[0].clone()];
    turns.extend(run_turns(10));
    let s = setup(&turns, None);
    let id = add_monthly(&s.server, json!({"budget": {"tokens": 1000}})).await;
    to_next(&s, &id).await;
    let first = s.server.tick().await.into_iter().next().unwrap();
    let run = first.done.await.unwrap().unwrap();
    assert_eq!(run.status.as_deref(), Some("budget_reached"), "{run:?}");
    assert_eq!(s.server.model.calls(), 1, "the cap held the second call");
    to_next(&s, &id).await;
    let second = s.server.tick().await.into_iter().next().unwrap();
    let run = second.done.await.unwrap().unwrap();
    assert_eq!(run.status.as_deref(), Some("answered"), "{run:?}");
    assert_eq!(s.server.model.calls(), 3);
    let (_, listed) = call(&s.server, Method::GET, "/api/v1/schedules", None).await;
    assert_eq!(listed["schedules"][0]["last_run"]["status"], "answered");
}

/// A receiver that fails its first `fail` posts (500), then takes them; it keeps each body
/// with the signature it came with.
/// Each post a receiver got: its body and its signature header.
type Posts = Arc<Mutex<Vec<(Vec<u8>, String)>>>;

async fn receiver(fail: usize) -> (String, Posts) {
    let got: Posts = Arc::default();
    let kept = Arc::clone(&got);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let kept = Arc::clone(&kept);
                async move {
                    let sig = headers
                        .get("x-ba-signature")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let mut all = kept.lock().unwrap();
                    all.push((body.to_vec(), sig));
                    if all.len() <= fail {
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        axum::http::StatusCode::NO_CONTENT
                    }
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), got)
}

/// Webhooks over reqwest, as the program's would be.
#[derive(Debug)]
struct Http;

impl ba_server::WebhookTransport for Http {
    fn post(&self, url: &str, signature: &str, body: Vec<u8>) -> ba_server::Posted {
        let request = reqwest::Client::new()
            .post(url)
            .header(ba_server::SIGNATURE_HEADER, signature)
            .body(body);
        Box::pin(async move {
            request
                .send()
                .await
                .map(|r| r.status().as_u16())
                .map_err(|e| e.to_string())
        })
    }
}

fn hmac_hex(key: &str, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2_hmac::Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    tag.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn the_webhook_is_signed_and_retried_and_the_run_does_not_wait_for_it() {
    let (url, got) = receiver(2).await;
    let s = setup(
        &run_turns(10),
        Some(WebhookSender::new(
            Arc::new(Http),
            4,
            Duration::from_millis(50),
        )),
    );
    let id = add_monthly(&s.server, json!({"webhook": {"url": url, "secret": "k3y"}})).await;
    // The secret is never shown.
    let (_, listed) = call(&s.server, Method::GET, "/api/v1/schedules", None).await;
    assert_eq!(listed["schedules"][0]["webhook"], url);
    assert!(!listed.to_string().contains("k3y"));
    to_next(&s, &id).await;
    let fired = s.server.tick().await.into_iter().next().unwrap();
    let run = fired.done.await.unwrap().unwrap();
    assert_eq!(run.status.as_deref(), Some("answered"));
    // Three posts: two refused, the third taken; each the same body, correctly signed.
    let deadline = tokio::time::Instant::now() + crate::harness::LIMIT;
    while got.lock().unwrap().len() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the posts never came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let posts = got.lock().unwrap().clone();
    assert_eq!(posts.len(), 3);
    for (body, sig) in &posts {
        assert_eq!(sig, &format!("sha256={}", hmac_hex("k3y", body)));
        assert_eq!(body, &posts[0].0);
        assert_ne!(sig, &format!("sha256={}", hmac_hex("other", body)));
    }
    let payload: Value = serde_json::from_slice(&posts[0].0).unwrap();
    assert_eq!(payload["schedule_id"], id);
    assert_eq!(payload["status"], "answered");
    assert_eq!(payload["conversation_id"], run.conversation_id);
    assert_eq!(
        payload["report"],
        format!(
            "/api/v1/conversations/{}/report/last?format=html",
            run.conversation_id
        )
    );
}

#[tokio::test]
async fn the_api_pauses_resumes_runs_now_and_hides_others_schedules() {
    let (d, path) = dir();
    let clock = Arc::new(ManualClock::new(JAN_1));
    let store = file_store(&path, &clock);
    let directory = store.directory().unwrap();
    let mut secrets = std::collections::HashMap::new();
    for (name, role) in [("alice", Role::Analyst), ("bob", Role::Analyst)] {
        directory.add_user(name, role).await.unwrap();
        secrets.insert(name, directory.issue_token(name).await.unwrap().secret);
    }
    let server = Server::start_with(
        &path,
        Model::new(&run_turns(10), 0),
        Options {
            store: Some(Arc::clone(&store)),
            workflows: workflows(),
            clock: Some(clock.clone()),
            auth: Some(Auth::Users),
            ..Options::default()
        },
    );
    let as_user = |who: &'static str, method: Method, path: String, body: Option<Value>| {
        let mut r = reqwest::Client::new()
            .request(method, server.url(&path))
            .bearer_auth(&secrets[who]);
        if let Some(body) = body {
            r = r.json(&body);
        }
        async move {
            let r = r.send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    for (body, says) in [
        (
            json!({"name": "x", "cron": "often", "workflow": "tally"}),
            "cron",
        ),
        (
            json!({"name": "x", "cron": "0 6 1 * *", "time_zone": "Mars/Base", "workflow": "tally"}),
            "time zone",
        ),
        (
            json!({"name": "x", "cron": "0 6 1 * *", "workflow": "nope"}),
            "nope",
        ),
        (
            json!({"name": "x", "cron": "0 6 1 * *", "workflow": "tally",
                   "inputs": {"table": "{{someday}}"}}),
            "placeholder",
        ),
    ] {
        let (status, err) = as_user(
            "alice",
            Method::POST,
            "/api/v1/schedules".into(),
            Some(body),
        )
        .await;
        assert!(status == 400 || status == 404, "{status} {err}");
        assert!(err.to_string().contains(says), "{says}: {err}");
    }
    let (status, added) = as_user(
        "alice",
        Method::POST,
        "/api/v1/schedules".into(),
        Some(json!({"name": "Review", "cron": "0 6 1 * *", "workflow": "tally"})),
    )
    .await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["owner"], "alice");
    assert_eq!(added["next_run"], "2026-01-01T06:00:00Z");
    let id = added["id"].as_str().unwrap().to_owned();
    // bob sees none of it.
    let (_, bobs) = as_user("bob", Method::GET, "/api/v1/schedules".into(), None).await;
    assert_eq!(bobs["schedules"], json!([]));
    for (method, p) in [
        (Method::PATCH, format!("/api/v1/schedules/{id}")),
        (Method::DELETE, format!("/api/v1/schedules/{id}")),
        (Method::POST, format!("/api/v1/schedules/{id}/run")),
    ] {
        let (status, _) = as_user(
            "bob",
            method.clone(),
            p.clone(),
            Some(json!({"paused": true})),
        )
        .await;
        assert_eq!(status, 404, "bob: {method} {p}");
    }
    let (status, paused) = as_user(
        "alice",
        Method::PATCH,
        format!("/api/v1/schedules/{id}"),
        Some(json!({"paused": true})),
    )
    .await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["paused"], true);
    assert_eq!(paused["next_run"], Value::Null);
    clock.advance(40 * DAY);
    assert!(server.tick().await.is_empty(), "a paused schedule fired");
    let (status, resumed) = as_user(
        "alice",
        Method::PATCH,
        format!("/api/v1/schedules/{id}"),
        Some(json!({"paused": false})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(resumed["next_run"], "2026-03-01T06:00:00Z");
    assert!(
        server.tick().await.is_empty(),
        "what fell due while paused was caught up"
    );
    let (status, started) = as_user(
        "alice",
        Method::POST,
        format!("/api/v1/schedules/{id}/run"),
        None,
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let conversation = started["conversation_id"].as_str().unwrap().to_owned();
    let meta = store
        .metadata(&ConversationId::new(conversation.clone()).unwrap())
        .await
        .unwrap();
    assert_eq!(meta.owner, "alice");
    let deadline = tokio::time::Instant::now() + crate::harness::LIMIT;
    loop {
        let (_, listed) = as_user("alice", Method::GET, "/api/v1/schedules".into(), None).await;
        let last = &listed["schedules"][0]["last_run"];
        if last["status"] == "answered" {
            assert_eq!(last["conversation_id"], conversation.as_str());
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{listed}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, _) = as_user(
        "alice",
        Method::DELETE,
        format!("/api/v1/schedules/{id}"),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let (_, mine) = as_user("alice", Method::GET, "/api/v1/schedules".into(), None).await;
    assert_eq!(mine["schedules"], json!([]));
    drop(d);
}

/// Servers B and C run every occurrence between them; server A claims one and is killed
/// while its run waits on the model.
struct Cluster {
    a: Server,
    b: Server,
    c: Server,
    clock: Arc<ManualClock>,
    store: Arc<dyn ConversationStore>,
    _dirs: Vec<tempfile::TempDir>,
}

async fn cluster(pg: &crate::scale_out::Pg) -> Cluster {
    let clock = Arc::new(ManualClock::new(JAN_1));
    let mut dirs = Vec::new();
    let mut start = |model: Model, store: Arc<dyn ConversationStore>| {
        let (d, path) = dir();
        dirs.push(d);
        Server::start_with(
            &path,
            model,
            Options {
                store: Some(store),
                workflows: workflows(),
                clock: Some(clock.clone()),
                ..Options::default()
            },
        )
    };
    let plenty: Vec<Value> = (0..6).flat_map(|_| run_turns(10)).collect();
    let a = start(
        Model::new(&run_turns(10), 0).hanging(0),
        Arc::new(pg.store_on(clock.clone()).await),
    );
    let b = start(
        Model::new(&plenty, 0),
        Arc::new(pg.store_on(clock.clone()).await),
    );
    let c = start(
        Model::new(&plenty, 0),
        Arc::new(pg.store_on(clock.clone()).await),
    );
    let store: Arc<dyn ConversationStore> = Arc::new(pg.store_on(clock.clone()).await);
    Cluster {
        a,
        b,
        c,
        clock,
        store,
        _dirs: dirs,
    }
}

/// B and C tick at once; gives the runs that ended (a tick that found the run held by the
/// other gives none).
async fn tick_both(b: &Server, c: &Server) -> Vec<ba_storage::ScheduledRun> {
    let (x, y) = tokio::join!(b.tick(), c.tick());
    let mut done = Vec::new();
    for fired in x.into_iter().chain(y) {
        if let Some(run) = fired.done.await.unwrap() {
            done.push(run);
        }
    }
    done
}

/// How many times a workflow started in the conversation.
async fn starts(store: &Arc<dyn ConversationStore>, id: &str) -> usize {
    let loaded = store
        .load(&ConversationId::new(id.to_owned()).unwrap())
        .await
        .unwrap();
    loaded
        .entries
        .iter()
        .filter(|e| serde_json::to_value(&e.entry).unwrap()["workflow"]["event"] == "started")
        .count()
}

#[tokio::test]
async fn servers_on_one_postgres_run_each_occurrence_once_and_resume_a_killed_ones() {
    let Some(pg) = crate::scale_out::Pg::new() else {
        return;
    };
    let cl = cluster(&pg).await;
    let id = add_monthly(&cl.b, json!({})).await;
    let schedules = cl.store.schedules().unwrap();
    let next = |clock: &ManualClock| {
        let schedules = Arc::clone(&schedules);
        let id = id.clone();
        let now = clock.now_ms();
        async move {
            let s = schedules.schedule(&id).await.unwrap().unwrap();
            s.next_after(now).unwrap()
        }
    };
    // Three months on B and C ticking at once: one run each.
    for _ in 0..3 {
        let at = next(&cl.clock).await;
        cl.clock.advance(at + MINUTE - cl.clock.now_ms());
        let done = tick_both(&cl.b, &cl.c).await;
        assert_eq!(done.len(), 1, "{done:?}");
        assert_eq!(done[0].status.as_deref(), Some("answered"));
        assert_eq!(done[0].occurrence_ms, at);
    }
    // The fourth: A claims it, its run waits on the model, and A is killed.
    let at = next(&cl.clock).await;
    cl.clock.advance(at + MINUTE - cl.clock.now_ms());
    let mut started = cl.a.model.started.subscribe();
    let fired = cl.a.tick().await;
    assert_eq!(fired.len(), 1);
    let left = fired[0].conversation_id.clone();
    started.wait_for(|n| *n >= 1).await.unwrap();
    cl.a.kill();
    drop(fired);
    // Right after, the claim is A's still: nobody starts a second run.
    assert!(tick_both(&cl.b, &cl.c).await.is_empty());
    // A minute on, one of B and C resumes it in A's conversation.
    cl.clock.advance(2 * MINUTE);
    let done = tick_both(&cl.b, &cl.c).await;
    assert!(!done.is_empty(), "the killed run was not resumed");
    assert!(
        done.iter().all(|r| r.conversation_id == left
            && r.occurrence_ms == at
            && r.status.as_deref() == Some("answered")),
        "{done:?}"
    );
    assert_eq!(
        starts(&cl.store, &left).await,
        1,
        "the workflow started twice"
    );
    // And the fifth runs on as before.
    let at5 = next(&cl.clock).await;
    cl.clock.advance(at5 + MINUTE - cl.clock.now_ms());
    assert_eq!(tick_both(&cl.b, &cl.c).await.len(), 1);
    let runs = schedules.runs(&id, 100).await.unwrap();
    assert_eq!(runs.len(), 5, "one run per occurrence: {runs:?}");
    assert!(runs.iter().all(|r| r.status.as_deref() == Some("answered")));
    for r in &runs {
        assert_eq!(starts(&cl.store, &r.conversation_id).await, 1);
    }
    // Five runs of two calls each, on B and C.
    assert_eq!(cl.b.model.calls() + cl.c.model.calls(), 10);
}
