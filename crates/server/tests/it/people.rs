//! People on one server (`--auth users`): the matrix of every route × caller × whose
//! conversation, on the file store and on PostgreSQL; sharing as a reader sees it; the admin
//! API.

use std::sync::Arc;

use ba_server::Auth;
use ba_storage::{
    Access, ConversationId, ConversationStore, FileStore, NewConversation, PostgresOptions,
    PostgresStore, Role,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{Model, Options, Server, dir, text_turn};

/// A user of the matrix, with the secret of a token of theirs.
#[derive(Debug, Clone)]
struct Person {
    name: &'static str,
    role: Role,
    secret: Option<String>,
}

/// Whose conversation a cell asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The caller's own.
    Own,
    /// Another analyst's, not shared with the caller.
    Another,
    /// Another analyst's, shared with the caller to read.
    Shared,
}

/// What a route needs (mirrors nothing in the server: written from the issue's rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Owner, admin or reader.
    Read,
    /// Owner or admin (who it is shared with).
    Manage,
    /// A reader who may work makes a fork of their own.
    Fork,
    /// Owner or admin, not a viewer.
    Write,
}

/// One route of a conversation: method, path after `/conversations/{id}`, a body, what it
/// needs, and what it answers when allowed (on a fresh, empty conversation).
struct Route {
    method: Method,
    tail: &'static str,
    body: Option<Value>,
    rule: Rule,
    allowed: StatusCode,
}

fn route(
    method: Method,
    tail: &'static str,
    body: Option<Value>,
    rule: Rule,
    allowed: u16,
) -> Route {
    Route {
        method,
        tail,
        body,
        rule,
        allowed: StatusCode::from_u16(allowed).unwrap(),
    }
}

/// Every route of a conversation. Where doing it for real would need a model or data, the
/// request is one the handler refuses after the owner check (a missing `request_id` is 400):
/// the status still says whether the check let it through.
fn conversation_routes() -> Vec<Route> {
    use Method as M;
    use Rule::*;
    vec![
        route(M::GET, "", None, Read, 200),
        route(M::PATCH, "", Some(json!({"title": "renamed"})), Write, 200),
        route(M::DELETE, "", None, Write, 204),
        route(M::GET, "/messages", None, Read, 200),
        route(M::POST, "/fork", Some(json!({})), Fork, 400),
        route(M::POST, "/rewind", Some(json!({})), Write, 400),
        route(M::GET, "/branches", None, Read, 200),
        route(M::POST, "/runs", Some(json!({})), Write, 400),
        route(M::POST, "/runs/run_nope/cancel", None, Write, 404),
        route(M::GET, "/approvals", None, Read, 200),
        route(M::POST, "/approvals/call_nope", Some(json!({})), Write, 400),
        route(M::GET, "/events", None, Read, 200),
        route(M::POST, "/compact", None, Write, 409),
        // The next call's context of a conversation with no question yet cannot be built.
        route(M::GET, "/context", None, Read, 422),
        route(M::GET, "/spend", None, Read, 200),
        route(M::GET, "/report", None, Read, 200),
        route(M::GET, "/report/last", None, Read, 404),
        route(M::GET, "/uploads", None, Read, 200),
        route(M::POST, "/uploads", None, Write, 201),
        route(M::GET, "/uploads/up_nope", None, Read, 404),
        route(M::GET, "/code", None, Read, 200),
        route(M::GET, "/code/code_nope", None, Read, 404),
        route(M::GET, "/code/code_nope/download", None, Read, 404),
        route(M::GET, "/files", None, Read, 200),
        route(M::GET, "/files/nope", None, Read, 404),
        route(M::GET, "/shares", None, Manage, 200),
        route(
            M::POST,
            "/shares",
            Some(json!({"user": "vera"})),
            Write,
            201,
        ),
        route(M::DELETE, "/shares/nobody", None, Write, 404),
    ]
}

/// The status a cell expects, and whether a 404 is the one that hides the conversation.
fn expected(person: &Person, target: Target, route: &Route) -> (StatusCode, bool) {
    let admin = person.role == Role::Admin;
    let viewer = person.role == Role::Viewer;
    let full = target == Target::Own || admin;
    let reads = full || target == Target::Shared;
    if !reads {
        return (StatusCode::NOT_FOUND, true);
    }
    let allowed = match route.rule {
        Rule::Read => true,
        Rule::Manage => full,
        Rule::Fork => !viewer,
        Rule::Write => full && !viewer,
    };
    if allowed {
        (route.allowed, false)
    } else {
        (StatusCode::FORBIDDEN, false)
    }
}

/// A global route: method, path, body, and the status per role (admin, analyst, viewer).
struct Global {
    method: Method,
    path: &'static str,
    body: Option<Value>,
    admin: u16,
    analyst: u16,
    viewer: u16,
}

fn global(
    method: Method,
    path: &'static str,
    body: Option<Value>,
    [admin, analyst, viewer]: [u16; 3],
) -> Global {
    Global {
        method,
        path,
        body,
        admin,
        analyst,
        viewer,
    }
}

fn global_routes() -> Vec<Global> {
    use Method as M;
    vec![
        global(M::GET, "/api/v1/conversations", None, [200, 200, 200]),
        global(
            M::GET,
            "/api/v1/conversations?all=true",
            None,
            [200, 403, 403],
        ),
        global(M::GET, "/api/v1/conversations?q=x", None, [200, 200, 200]),
        global(
            M::POST,
            "/api/v1/conversations",
            Some(json!({})),
            [201, 201, 403],
        ),
        global(M::GET, "/api/v1/me", None, [200, 200, 200]),
        global(M::GET, "/api/v1/users", None, [200, 403, 403]),
        global(
            M::POST,
            "/api/v1/users",
            Some(json!({"name": "NEW", "role": "analyst"})),
            [201, 403, 403],
        ),
        global(
            M::PATCH,
            "/api/v1/users/bob",
            Some(json!({"budget": {"month_usd": 5.0}})),
            [200, 403, 403],
        ),
        global(M::POST, "/api/v1/users/bob/tokens", None, [201, 403, 403]),
        global(M::GET, "/api/v1/users/bob/tokens", None, [200, 403, 403]),
        global(
            M::DELETE,
            "/api/v1/tokens/tok_0000000000000000",
            None,
            [404, 403, 403],
        ),
        global(M::GET, "/api/v1/skills", None, [200, 200, 200]),
        global(M::GET, "/api/v1/workflows", None, [200, 200, 200]),
        global(M::GET, "/api/v1/demo/questions", None, [404, 404, 404]),
    ]
}

/// The users of the matrix, each with a token issued by the store's directory.
async fn people(store: &dyn ConversationStore) -> Vec<Person> {
    let directory = store.directory().expect("the store keeps users");
    let mut out = Vec::new();
    for (name, role) in [
        ("alice", Role::Analyst),
        ("bob", Role::Analyst),
        ("vera", Role::Viewer),
        ("ada", Role::Admin),
    ] {
        directory.add_user(name, role).await.unwrap();
        let issued = directory.issue_token(name).await.unwrap();
        out.push(Person {
            name,
            role,
            secret: Some(issued.secret),
        });
    }
    out
}

/// A fresh conversation for a cell: the caller's own, or another analyst's (shared with the
/// caller to read for `Shared`).
async fn target_for(store: &dyn ConversationStore, person: &Person, target: Target) -> String {
    let other = if person.name == "alice" {
        "bob"
    } else {
        "alice"
    };
    let owner = match target {
        Target::Own => person.name,
        Target::Another | Target::Shared => other,
    };
    let id = ConversationId::random();
    store
        .create(
            &id,
            NewConversation {
                title: Some(format!("{owner}'s")),
                owner: Some(owner.to_owned()),
                ..NewConversation::default()
            },
        )
        .await
        .unwrap();
    if target == Target::Shared {
        store
            .directory()
            .unwrap()
            .share(&id, person.name, Access::Read)
            .await
            .unwrap();
    }
    id.to_string()
}

async fn send(
    http: &reqwest::Client,
    server: &Server,
    person: &Person,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> (StatusCode, String) {
    let mut request = http.request(method, server.url(path));
    if let Some(secret) = &person.secret {
        request = request.bearer_auth(secret);
    }
    if path.ends_with("/uploads") && body.is_none() {
        let (kind, bytes) = ba_testkit::files::multipart_file("notes.txt", b"some notes");
        request = request.header("Content-Type", kind).body(bytes);
    } else if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    // An event stream is open until the client leaves: its status is all the cell needs.
    let text = if path.ends_with("/events") && status.is_success() {
        String::new()
    } else {
        response.text().await.unwrap_or_default()
    };
    (status, text)
}

/// Runs every cell against a server on `store`; returns how many were asserted.
async fn matrix(store: Arc<dyn ConversationStore>, path: &std::path::Path) -> usize {
    let mut people = people(store.as_ref()).await;
    let server = Server::start_with(
        path,
        Model::new(&[], 0),
        Options {
            store: Some(Arc::clone(&store)),
            auth: Some(Auth::Users),
            ..Options::default()
        },
    );
    let http = reqwest::Client::new();
    let mut cells = 0;
    let mut failures = Vec::new();
    people.push(Person {
        name: "anonymous",
        role: Role::Viewer,
        secret: None,
    });
    for person in &people {
        for target in [Target::Own, Target::Another, Target::Shared] {
            if person.secret.is_none() && target != Target::Another {
                continue;
            }
            for route in conversation_routes() {
                let id = target_for(store.as_ref(), person, target).await;
                let path = format!("/api/v1/conversations/{id}{}", route.tail);
                let (status, text) = send(
                    &http,
                    &server,
                    person,
                    route.method.clone(),
                    &path,
                    route.body.as_ref(),
                )
                .await;
                let (want, hidden) = if person.secret.is_none() {
                    (StatusCode::UNAUTHORIZED, false)
                } else {
                    expected(person, target, &route)
                };
                let is_hidden = status == StatusCode::NOT_FOUND
                    && text.contains(&format!("conversation `{id}` does not exist"));
                cells += 1;
                if status != want || (status == StatusCode::NOT_FOUND && is_hidden != hidden) {
                    failures.push(format!(
                        "{} {} …{} ({target:?}): {status} (hidden: {is_hidden}), expected {want} (hidden: {hidden}): {}",
                        person.name,
                        route.method,
                        route.tail,
                        text.chars().take(200).collect::<String>()
                    ));
                }
            }
        }
        for g in global_routes() {
            let want = match (person.secret.is_some(), person.role) {
                (false, _) => 401,
                (true, Role::Admin) => g.admin,
                (true, Role::Analyst) => g.analyst,
                (true, _) => g.viewer,
            };
            let body = g.body.as_ref().map(|b| {
                // A fresh name for each admin that adds one.
                let text = b
                    .to_string()
                    .replace("NEW", &format!("new-{}", person.name));
                serde_json::from_str::<Value>(&text).unwrap()
            });
            let (status, text) = send(
                &http,
                &server,
                person,
                g.method.clone(),
                g.path,
                body.as_ref(),
            )
            .await;
            cells += 1;
            if status.as_u16() != want {
                failures.push(format!(
                    "{} {} {}: {status}, expected {want}: {}",
                    person.name,
                    g.method,
                    g.path,
                    text.chars().take(200).collect::<String>()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cells} cells differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    cells
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_owner_admin_and_reader_only_on_files() {
    let (_d, path) = dir();
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(&path).unwrap());
    let cells = matrix(store, &path).await;
    println!("the access matrix on the file store: {cells} cells");
    assert_eq!(cells, cells_expected());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_owner_admin_and_reader_only_on_postgres() {
    let Some(url) = ba_testkit::require_env(
        "BA_AGENT_TEST_DATABASE_URL",
        "run `eval \"$(bash .ci/postgres.sh)\"` to start a server",
    ) else {
        return;
    };
    let opts = PostgresOptions {
        schema: format!("ba_people_{}", uuid::Uuid::new_v4().simple()),
        ..PostgresOptions::default()
    };
    let store: Arc<dyn ConversationStore> =
        Arc::new(PostgresStore::connect(&url, opts).await.unwrap());
    let (_d, path) = dir();
    let cells = matrix(store, &path).await;
    println!("the access matrix on PostgreSQL: {cells} cells");
    assert_eq!(cells, cells_expected());
}

/// Four users × three targets × every conversation route, the anonymous caller once per
/// route, and five callers × every global route.
fn cells_expected() -> usize {
    let routes = conversation_routes().len();
    4 * 3 * routes + routes + 5 * global_routes().len()
}

/// A server on a file store whose directory has alice, bob, vera and ada; their secrets by
/// name.
async fn team(
    turns: &[Value],
) -> (
    tempfile::TempDir,
    Server,
    Arc<dyn ConversationStore>,
    std::collections::HashMap<&'static str, String>,
) {
    let (d, path) = dir();
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(&path).unwrap());
    let secrets = people(store.as_ref())
        .await
        .into_iter()
        .map(|p| (p.name, p.secret.unwrap_or_default()))
        .collect();
    let server = Server::start_with(
        &path,
        Model::new(turns, 0),
        Options {
            store: Some(Arc::clone(&store)),
            auth: Some(Auth::Users),
            ..Options::default()
        },
    );
    (d, server, store, secrets)
}

/// `method path` as the holder of `secret`, with `body` as JSON.
fn request(
    server: &Server,
    secret: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> impl std::future::Future<Output = reqwest::Result<reqwest::Response>> + use<> {
    let mut r = reqwest::Client::new()
        .request(method, server.url(path))
        .bearer_auth(secret);
    if let Some(body) = body {
        r = r.json(&body);
    }
    r.send()
}

/// The JSON answer of `method path` as the holder of `secret`.
async fn json_of(
    server: &Server,
    secret: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    request(server, secret, method, path, body)
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Shares `conv` as the holder of `secret` (`body`: `{"user", "access"?}`).
async fn share(server: &Server, secret: &str, conv: &str, body: Value) -> reqwest::Response {
    request(
        server,
        secret,
        Method::POST,
        &format!("{conv}/shares"),
        Some(body),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_conversation_is_read_and_exported_by_its_reader_only() {
    let turns = [text_turn(
        "# Sales\n\nThere are 42 rows.",
        json!({"role": "user", "text": "How many rows?"}),
    )];
    let (_d, server, _store, secrets) = team(&turns).await;
    let created: Value = json_of(
        &server,
        &secrets["alice"],
        Method::POST,
        "/api/v1/conversations",
        Some(json!({"title": "Q3"})),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["owner"], "alice");
    assert_eq!(created["access"], "owner");
    let conv = format!("/api/v1/conversations/{id}");
    let run = request(
        &server,
        &secrets["alice"],
        Method::POST,
        &format!("{conv}/runs"),
        Some(json!({"request_id": "r1", "input": {"type": "message", "text": "How many rows?"}})),
    )
    .await
    .unwrap();
    assert_eq!(run.status(), StatusCode::ACCEPTED);
    // The run has ended when the conversation is idle with its answer.
    let deadline = std::time::Instant::now() + crate::harness::LIMIT;
    loop {
        let v: Value = json_of(&server, &secrets["alice"], Method::GET, &conv, None).await;
        if v["status"] == "idle" && v["last_seq"].as_u64().unwrap_or(0) >= 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not end: {v}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The question's entry names who asked.
    let messages = json_of(
        &server,
        &secrets["alice"],
        Method::GET,
        &format!("{conv}/messages"),
        None,
    )
    .await;
    let asked = &messages["entries"][0]["entry"];
    assert_eq!(asked["role"], "user", "{asked}");
    assert!(asked.to_string().contains(r#""actor":"alice""#), "{asked}");
    // Before sharing, vera and bob see nothing of it.
    for who in ["vera", "bob"] {
        let r = request(
            &server,
            &secrets[who],
            Method::GET,
            &format!("{conv}/report/last"),
            None,
        )
        .await
        .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{who}");
        let list: Value = json_of(
            &server,
            &secrets[who],
            Method::GET,
            "/api/v1/conversations",
            None,
        )
        .await;
        assert_eq!(list["items"], json!([]), "{who}");
        assert_eq!(list["shared"], json!([]), "{who}");
    }
    let shared = share(
        &server,
        &secrets["alice"],
        &conv,
        json!({"user": "vera", "access": "read"}),
    )
    .await;
    assert_eq!(shared.status(), StatusCode::CREATED);
    let unknown = share(&server, &secrets["alice"], &conv, json!({"user": "zed"})).await;
    assert_eq!(unknown.status(), StatusCode::BAD_REQUEST);
    let unknown: Value = unknown.json().await.unwrap();
    assert_eq!(unknown["error"]["code"], "unknown_user");
    assert_eq!(
        unknown["error"]["message"],
        "there is no user \"zed\" to share with"
    );
    // vera: in "shared", readable, exportable; not runnable, not deletable.
    let list: Value = json_of(
        &server,
        &secrets["vera"],
        Method::GET,
        "/api/v1/conversations",
        None,
    )
    .await;
    assert_eq!(list["items"], json!([]));
    assert_eq!(list["shared"][0]["id"], id.as_str());
    assert_eq!(list["shared"][0]["access"], "read");
    assert_eq!(list["shared"][0]["owner"], "alice");
    let search: Value = json_of(
        &server,
        &secrets["vera"],
        Method::GET,
        "/api/v1/conversations?q=42%20rows",
        None,
    )
    .await;
    assert_eq!(search["shared"][0]["id"], id.as_str(), "{search}");
    let none: Value = json_of(
        &server,
        &secrets["vera"],
        Method::GET,
        "/api/v1/conversations?q=nothing-like-it",
        None,
    )
    .await;
    assert_eq!(none["shared"], json!([]));
    let html = request(
        &server,
        &secrets["vera"],
        Method::GET,
        &format!("{conv}/report/last?format=html"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(html.status(), StatusCode::OK);
    assert!(html.text().await.unwrap().contains("42 rows"));
    let run = request(
        &server,
        &secrets["vera"],
        Method::POST,
        &format!("{conv}/runs"),
        Some(json!({"request_id": "r2", "input": {"type": "continue"}})),
    )
    .await
    .unwrap();
    assert_eq!(run.status(), StatusCode::FORBIDDEN);
    let delete = request(&server, &secrets["vera"], Method::DELETE, &conv, None)
        .await
        .unwrap();
    assert_eq!(delete.status(), StatusCode::FORBIDDEN);
    // bob still sees nothing; alice's list has it as her own.
    let r = request(&server, &secrets["bob"], Method::GET, &conv, None)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let list: Value = json_of(
        &server,
        &secrets["alice"],
        Method::GET,
        "/api/v1/conversations",
        None,
    )
    .await;
    assert_eq!(list["items"][0]["id"], id.as_str());
    // Unshared: gone for vera again.
    let gone = request(
        &server,
        &secrets["alice"],
        Method::DELETE,
        &format!("{conv}/shares/vera"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(gone.status(), StatusCode::NO_CONTENT);
    let r = request(&server, &secrets["vera"], Method::GET, &conv, None)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // The admin lists everyone's with `all=true`, and only their own without.
    let own: Value = json_of(
        &server,
        &secrets["ada"],
        Method::GET,
        "/api/v1/conversations",
        None,
    )
    .await;
    assert_eq!(own["items"], json!([]));
    let all: Value = json_of(
        &server,
        &secrets["ada"],
        Method::GET,
        "/api/v1/conversations?all=true",
        None,
    )
    .await;
    assert_eq!(all["items"][0]["id"], id.as_str());
    assert_eq!(all["items"][0]["access"], "admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_manages_users_tokens_and_budgets() {
    let (_d, server, _store, secrets) = team(&[]).await;
    let ada = secrets["ada"].clone();
    let me: Value = json_of(&server, &secrets["vera"], Method::GET, "/api/v1/me", None).await;
    assert_eq!(me["name"], "vera");
    assert_eq!(me["role"], "viewer");
    let added = request(
        &server,
        &ada,
        Method::POST,
        "/api/v1/users",
        Some(json!({"name": "carl", "role": "viewer"})),
    )
    .await
    .unwrap();
    assert_eq!(added.status(), StatusCode::CREATED);
    let again = request(
        &server,
        &ada,
        Method::POST,
        "/api/v1/users",
        Some(json!({"name": "carl"})),
    )
    .await
    .unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let bad = request(
        &server,
        &ada,
        Method::POST,
        "/api/v1/users",
        Some(json!({"name": "../x"})),
    )
    .await
    .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let issued: Value = json_of(
        &server,
        &ada,
        Method::POST,
        "/api/v1/users/carl/tokens",
        None,
    )
    .await;
    let secret = issued["secret"].as_str().unwrap().to_owned();
    let token_id = issued["id"].as_str().unwrap().to_owned();
    let me: Value = json_of(&server, &secret, Method::GET, "/api/v1/me", None).await;
    assert_eq!(me["name"], "carl");
    // Promoted, carl may start conversations.
    let denied = request(
        &server,
        &secret,
        Method::POST,
        "/api/v1/conversations",
        None,
    )
    .await
    .unwrap();
    assert_eq!(denied.status(), StatusCode::FORBIDDEN);
    let patched: Value = json_of(
        &server,
        &ada,
        Method::PATCH,
        "/api/v1/users/carl",
        Some(json!({"role": "analyst", "budget": {"month_usd": 2.5, "month_tokens": 1000}})),
    )
    .await;
    assert_eq!(patched["role"], "analyst");
    assert_eq!(patched["budget"]["month_usd"], 2.5);
    let made = request(
        &server,
        &secret,
        Method::POST,
        "/api/v1/conversations",
        None,
    )
    .await
    .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let me: Value = json_of(&server, &secret, Method::GET, "/api/v1/me", None).await;
    assert_eq!(me["budget"]["month_tokens"], 1000);
    assert_eq!(me["spend"]["usd"], 0.0);
    let listed: Value = json_of(
        &server,
        &ada,
        Method::GET,
        "/api/v1/users/carl/tokens",
        None,
    )
    .await;
    assert_eq!(listed["tokens"][0]["id"], token_id.as_str());
    assert!(
        !listed.to_string().contains(&secret),
        "a listing shows no secret"
    );
    let missing = request(
        &server,
        &ada,
        Method::PATCH,
        "/api/v1/users/nobody",
        Some(json!({"role": "admin"})),
    )
    .await
    .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    // Revoked: the token no longer signs carl in.
    let revoked = request(
        &server,
        &ada,
        Method::DELETE,
        &format!("/api/v1/tokens/{token_id}"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    let after = request(&server, &secret, Method::GET, "/api/v1/me", None)
        .await
        .unwrap();
    assert_eq!(after.status(), StatusCode::UNAUTHORIZED);
    let users: Value = json_of(&server, &ada, Method::GET, "/api/v1/users", None).await;
    let names: Vec<&str> = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["name"].as_str())
        .collect();
    assert_eq!(names, ["ada", "alice", "bob", "carl", "vera"]);
}

/// A reader's fork of a shared conversation is the reader's own, with the files at the cut;
/// the owner does not see it among the branches, the reader does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_fork_is_the_readers_own() {
    let (_d, server, store, secrets) = team(&[]).await;
    let id = ConversationId::random();
    store
        .create(
            &id,
            NewConversation {
                owner: Some("alice".into()),
                ..NewConversation::default()
            },
        )
        .await
        .unwrap();
    let conv = format!("/api/v1/conversations/{id}");
    let alice = Person {
        name: "alice",
        role: Role::Analyst,
        secret: Some(secrets["alice"].clone()),
    };
    let (status, _) = send(
        &reqwest::Client::new(),
        &server,
        &alice,
        Method::POST,
        &format!("{conv}/uploads"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let share = share(&server, &secrets["alice"], &conv, json!({"user": "bob"})).await;
    assert_eq!(share.status(), StatusCode::CREATED);
    let forked: Value = json_of(
        &server,
        &secrets["bob"],
        Method::POST,
        &format!("{conv}/fork"),
        Some(json!({"at_seq": 0})),
    )
    .await;
    let fork = forked["id"].as_str().unwrap().to_owned();
    let view: Value = json_of(
        &server,
        &secrets["bob"],
        Method::GET,
        &format!("/api/v1/conversations/{fork}"),
        None,
    )
    .await;
    assert_eq!(view["owner"], "bob", "{view}");
    let files: Value = json_of(
        &server,
        &secrets["bob"],
        Method::GET,
        &format!("/api/v1/conversations/{fork}/uploads"),
        None,
    )
    .await;
    assert_eq!(files[0]["name"], "notes.txt", "{files}");
    let alices = request(
        &server,
        &secrets["alice"],
        Method::GET,
        &format!("/api/v1/conversations/{fork}"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(alices.status(), StatusCode::NOT_FOUND);
    let branches: Value = json_of(
        &server,
        &secrets["alice"],
        Method::GET,
        &format!("{conv}/branches"),
        None,
    )
    .await;
    assert_eq!(branches["forks"], json!([]), "{branches}");
}
