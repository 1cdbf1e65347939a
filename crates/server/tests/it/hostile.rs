//! What a probe with hostile input found, each as it was done: a delete racing a fork of the
//! same conversation, a broken fork in the list, a 50 MiB upload description, bodies echoed in
//! errors, a declared `text/html` on a `.png`, control and bidi characters in titles and names,
//! a run held through the store's lease by someone else, and a fork at the first question that
//! lost the uploads.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ba_protocol::{LogEntry, LogRole};
use ba_storage::{
    ConversationId, ConversationStore, FileStore, PostgresOptions, PostgresStore, RunHolder,
};
use serde_json::{Value, json};

use crate::harness::{Api, LIMIT, Model, Options, Server, TOKEN, dir, text_turn};

/// A server on a store of its own in a fresh PostgreSQL schema, and that store (which the
/// test writes to as another process would); `None` (said) without a database server.
async fn on_postgres(
    model: Model,
) -> Option<(tempfile::TempDir, Server, Arc<dyn ConversationStore>)> {
    let url = ba_testkit::require_env(
        "BA_AGENT_TEST_DATABASE_URL",
        "run `eval \"$(bash .ci/postgres.sh)\"` to start a server",
    )?;
    let opts = PostgresOptions {
        schema: format!("ba_hostile_{}", uuid::Uuid::new_v4().simple()),
        ..PostgresOptions::default()
    };
    let store: Arc<dyn ConversationStore> =
        Arc::new(PostgresStore::connect(&url, opts).await.unwrap());
    let (d, path) = dir();
    let options = Options {
        store: Some(Arc::clone(&store)),
        ..Options::default()
    };
    Some((d, Server::start_with(&path, model, options), store))
}

/// A server on a file store, and a store on the same folder: another process's view.
fn on_files(model: Model) -> (tempfile::TempDir, Server, FileStore) {
    let (d, path) = dir();
    let server = Server::start(&path, model);
    let other = FileStore::open(&path).unwrap();
    (d, server, other)
}

fn question(text: &str) -> LogEntry {
    LogEntry::new(
        format!("q-{}", uuid::Uuid::new_v4().simple()),
        LogRole::User,
        "2026-01-01T00:00:00Z",
    )
    .with_text(text)
}

fn cid(id: &str) -> ConversationId {
    ConversationId::new(id).unwrap()
}

async fn delete(api: &Api<'_>, id: &str) -> reqwest::Response {
    api.http
        .delete(api.server.url(&format!("/api/v1/conversations/{id}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
}

/// Every conversation of the list, or a failure naming the status and body.
async fn listed(api: &Api<'_>, query: &str) -> Vec<Value> {
    let r = api
        .get(&format!("/api/v1/conversations{query}"))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body = r.text().await.unwrap();
    assert_eq!(status, 200, "the list{query}: {body}");
    serde_json::from_str::<Value>(&body).unwrap()["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// `DELETE P` and `POST P/fork` sent at once, fifty times: never both succeed, and the list
/// (and a search) answers after every round with no conversation it cannot read.
async fn delete_and_fork_race(api: &Api<'_>, store: &dyn ConversationStore) {
    let mut forks_won = 0;
    for round in 0..50 {
        let parent = api.create().await;
        store
            .append(&cid(&parent), &question("Which region grew?"), None)
            .await
            .unwrap();
        let fork_url = format!("/api/v1/conversations/{parent}/fork");
        let (forked, deleted) = tokio::join!(
            async {
                api.post(&fork_url, json!({"at_seq": 1}))
                    .send()
                    .await
                    .unwrap()
            },
            delete(api, &parent)
        );
        let (fork_status, delete_status) = (forked.status().as_u16(), deleted.status().as_u16());
        match (fork_status, delete_status) {
            (201, 409) => {
                forks_won += 1;
                let body: Value = deleted.json().await.unwrap();
                assert_eq!(body["error"]["code"], "has_forks", "round {round}");
                let child: Value = forked.json().await.unwrap();
                let child = child["id"].as_str().unwrap().to_owned();
                let messages = api
                    .json(&format!("/api/v1/conversations/{child}/messages"))
                    .await;
                assert_eq!(
                    messages["entries"][0]["entry"]["content"],
                    "Which region grew?"
                );
                assert_eq!(delete(api, &child).await.status(), 204);
                assert_eq!(delete(api, &parent).await.status(), 204);
            }
            (404, 204) => {}
            other => panic!(
                "round {round}: fork and delete answered {other:?}: {}",
                forked.text().await.unwrap_or_default()
            ),
        }
        for query in ["", "?q=region"] {
            let items = listed(api, query).await;
            assert!(
                items.iter().all(|c| c["status"] != "broken"),
                "round {round}{query}: {items:#?}"
            );
        }
    }
    // Which one wins is the scheduler's; that both are tried is what matters.
    eprintln!("forks won {forks_won} of 50 rounds");
}

#[tokio::test]
async fn a_delete_and_a_fork_never_both_succeed_on_the_file_store() {
    let (_d, server, other) = on_files(Model::new(&[], 0));
    delete_and_fork_race(&Api::new(&server), &other).await;
}

#[tokio::test]
async fn a_delete_and_a_fork_never_both_succeed_on_postgres() {
    let Some((_d, server, store)) = on_postgres(Model::new(&[], 0)).await else {
        return;
    };
    delete_and_fork_race(&Api::new(&server), store.as_ref()).await;
}

/// A fork whose parent is gone (left by the race before it was closed) is listed as `broken`
/// with why, is found by a search and by id, and can be deleted; the list answers throughout.
#[tokio::test]
async fn an_orphan_fork_is_listed_as_broken_and_can_be_deleted() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let api = Api::new(&server);
    let store = FileStore::open(&path).unwrap();
    let parent = api.create().await;
    store
        .append(&cid(&parent), &question("Which region grew?"), None)
        .await
        .unwrap();
    let r = api
        .post(
            &format!("/api/v1/conversations/{parent}/fork"),
            json!({"at_seq": 1}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let orphan = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let healthy = api.create().await;
    // The parent goes behind the store's back.
    let folder = path.join("conversations");
    for ext in ["jsonl", "meta.json"] {
        std::fs::remove_file(folder.join(format!("{parent}.{ext}"))).unwrap();
    }
    let items = listed(&api, "").await;
    let shown = items.iter().find(|c| c["id"] == orphan.as_str()).unwrap();
    assert_eq!(shown["status"], "broken", "{shown}");
    assert!(
        shown["problem"].as_str().unwrap().contains(&parent),
        "the problem names the missing parent: {shown}"
    );
    assert!(items.iter().any(|c| c["id"] == healthy.as_str()));
    let found = listed(&api, "?q=region").await;
    assert!(found.iter().all(|c| c["id"] != healthy.as_str()));
    let one = api.json(&format!("/api/v1/conversations/{orphan}")).await;
    assert_eq!(one["status"], "broken");
    assert_eq!(delete(&api, &orphan).await.status(), 204);
    let items = listed(&api, "").await;
    assert!(
        items.iter().all(|c| c["id"] != orphan.as_str()),
        "{items:#?}"
    );
    assert_eq!(items.len(), 1);
}

/// One part of a multipart body: its name, file name, content type and bytes.
type Part<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);

/// A multipart body built by hand.
fn multipart(parts: &[Part<'_>]) -> (String, Vec<u8>) {
    let boundary = "XbaHostileX";
    let mut body = Vec::new();
    for (name, file, media, bytes) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        body.extend_from_slice(
            format!("Content-Disposition: form-data; name=\"{name}\"").as_bytes(),
        );
        if let Some(file) = file {
            body.extend_from_slice(format!("; filename=\"{file}\"").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        if let Some(media) = media {
            body.extend_from_slice(format!("Content-Type: {media}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(api: &Api<'_>, id: &str, ct: String, body: Vec<u8>) -> reqwest::Response {
    api.http
        .post(
            api.server
                .url(&format!("/api/v1/conversations/{id}/uploads")),
        )
        .bearer_auth(TOKEN)
        .header("Content-Type", ct)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// A 50 MiB description after the file part, streamed over a plain socket: the server answers
/// 413 naming the limit long before the client could send it all, and keeps nothing.
#[tokio::test]
async fn a_50_mib_description_is_refused_without_being_read() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    const DESCRIPTION: usize = 50 << 20;
    let (_d, path) = dir();
    let options = Options {
        upload_limit: 200 << 20,
        ..Options::default()
    };
    let server = Server::start_with(&path, Model::new(&[], 0), options);
    let api = Api::new(&server);
    let id = api.create().await;
    let boundary = "XbaHostileX";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\n\
         Content-Type: text/csv\r\n\r\nregion,q3\nWest,120\n\r\n--{boundary}\r\n\
         Content-Disposition: form-data; name=\"description\"\r\n\r\n"
    );
    let tail = format!("\r\n--{boundary}--\r\n");
    let length = head.len() + DESCRIPTION + tail.len();
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (mut reader, mut writer) = tcp.into_split();
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&sent);
    let request = format!(
        "POST /api/v1/conversations/{id}/uploads HTTP/1.1\r\nHost: {}\r\n\
         Authorization: Bearer {TOKEN}\r\n\
         Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {length}\r\n\
         Connection: close\r\n\r\n{head}",
        server.addr
    );
    let writing = tokio::spawn(async move {
        writer.write_all(request.as_bytes()).await?;
        let chunk = vec![b'x'; 64 * 1024];
        while counted.load(Ordering::SeqCst) < DESCRIPTION {
            writer.write_all(&chunk).await?;
            counted.fetch_add(chunk.len(), Ordering::SeqCst);
        }
        writer.write_all(tail.as_bytes()).await?;
        // Kept open: a closed side would end the request before its answer.
        Ok::<_, std::io::Error>(writer)
    });
    let mut answer = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let read = tokio::time::timeout(LIMIT, async {
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
            if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer within {LIMIT:?}");
    let written = sent.load(Ordering::SeqCst);
    writing.abort();
    let answer: String = String::from_utf8_lossy(&answer).chars().take(600).collect();
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "{written} bytes sent; the answer began {answer:?}"
    );
    assert!(
        answer.contains("the description is over the limit of 4096 bytes"),
        "{answer}"
    );
    assert!(
        written < DESCRIPTION / 2,
        "the client could send {written} bytes of the description before the answer"
    );
    let uploads = api
        .json(&format!("/api/v1/conversations/{id}/uploads"))
        .await;
    assert_eq!(uploads, json!([]), "nothing is kept");
    // A description within the limit is kept.
    let (ct, body) = multipart(&[
        ("file", Some("a.csv"), Some("text/csv"), b"region,q3\n"),
        ("description", None, None, "d".repeat(4096).as_bytes()),
    ]);
    assert_eq!(upload(&api, &id, ct, body).await.status(), 201);
}

/// An error quotes at most a short, cleaned excerpt of what was sent: a JSON value the parser
/// did not expect, a workflow input, an id in the path.
#[tokio::test]
async fn a_bad_request_is_answered_without_echoing_it() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let big = format!("\u{1b}[2J{}\u{202e}", "A".repeat(800 * 1024));
    let array: Vec<String> = (0..20_000).map(|i| format!("value {i}")).collect();
    let cases = [
        ("/api/v1/conversations".to_owned(), json!({"mode": big})),
        (
            format!("/api/v1/conversations/{id}/fork"),
            json!({"at_seq": big}),
        ),
        (
            format!("/api/v1/conversations/{id}/runs"),
            json!({"request_id": "r1", "input": {"type": "workflow", "name": "x",
                "inputs": {"k": array}}}),
        ),
    ];
    for (url, body) in cases {
        let r = api.post(&url, body).send().await.unwrap();
        assert_eq!(r.status(), 400, "{url}");
        let text = r.text().await.unwrap();
        assert!(text.len() < 2_000, "{url}: {} bytes echoed", text.len());
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}'),
            "{url}: {text}"
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v["error"]["message"].as_str().unwrap().len() > 10, "{text}");
    }
    let long_id = "a".repeat(20_000);
    let r = api
        .get(&format!("/api/v1/conversations/{long_id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(text.len() < 2_000, "{} bytes echoed", text.len());
}

/// A type declared for an upload never makes its download active: a `.png` declared
/// `text/html` is an `image/png`; every download is an attachment, unsniffed, in a sandbox.
#[tokio::test]
async fn a_declared_type_never_makes_a_download_active() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let page = b"<html><script>alert(document.cookie)</script></html>";
    for (name, declared, served) in [
        ("chart.png", "text/html", "image/png"),
        ("notes", "image/svg+xml", "application/octet-stream"),
        ("data.csv", "application/xhtml+xml", "text/csv"),
        ("page.html", "text/html", "text/html"),
        ("figure.svg", "image/svg+xml", "image/svg+xml"),
    ] {
        let (ct, body) = multipart(&[("file", Some(name), Some(declared), page)]);
        let r = upload(&api, &id, ct, body).await;
        assert_eq!(r.status(), 201, "{name}");
        let meta: Value = r.json().await.unwrap();
        assert_eq!(meta["media_type"], served, "{name} as stored");
        let file = meta["id"].as_str().unwrap();
        for route in ["files", "uploads"] {
            let got = api
                .get(&format!("/api/v1/conversations/{id}/{route}/{file}"))
                .send()
                .await
                .unwrap();
            assert_eq!(got.status(), 200);
            let h = got.headers();
            assert_eq!(h["content-type"], served, "{name} served by /{route}");
            assert_eq!(h["x-content-type-options"], "nosniff");
            assert!(
                h["content-disposition"]
                    .to_str()
                    .unwrap()
                    .starts_with("attachment;"),
                "{name}: never inline"
            );
            let csp = h["content-security-policy"].to_str().unwrap();
            assert!(
                csp.contains("sandbox") && csp.contains("default-src 'none'"),
                "{csp}"
            );
        }
    }
}

/// Titles and upload names lose their control and format characters on the way in (the
/// store cleans them; the answers show what was kept).
#[tokio::test]
async fn titles_and_upload_names_keep_no_control_or_bidi_characters() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let api = Api::new(&server);
    let r = api
        .post(
            "/api/v1/conversations",
            json!({"title": "Q3\u{1b}[2J\u{0}review\u{202e}fdp.exe"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let made: Value = r.json().await.unwrap();
    assert_eq!(made["title"], "Q3 [2J review fdp.exe");
    let id = made["id"].as_str().unwrap().to_owned();
    let r = api
        .http
        .patch(server.url(&format!("/api/v1/conversations/{id}")))
        .bearer_auth(TOKEN)
        .json(&json!({"title": "\u{2066}West\u{7}\u{9b}31m sales"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["title"], "West 31m sales");
    let too_long = api
        .post("/api/v1/conversations", json!({"title": "t".repeat(501)}))
        .send()
        .await
        .unwrap();
    assert_eq!(too_long.status(), 400);
    for c in listed(&api, "").await {
        let title = c["title"].as_str().unwrap_or("");
        assert!(!title.chars().any(ba_storage::is_hidden_char), "{title:?}");
    }
    let (ct, body) = multipart(&[(
        "file",
        Some("report\u{202e}vsc.exe"),
        Some("text/csv"),
        b"a,b\n",
    )]);
    let r = upload(&api, &id, ct, body).await;
    assert_eq!(r.status(), 201);
    assert_eq!(r.json::<Value>().await.unwrap()["name"], "report_vsc.exe");
    // An escape sequence in a part's header is refused by the multipart reader, or cleaned.
    let (ct, body) = multipart(&[("file", Some("a\u{1b}[31mb.csv"), Some("text/csv"), b"a,b\n")]);
    let r = upload(&api, &id, ct, body).await;
    let status = r.status().as_u16();
    let answer: Value = r.json().await.unwrap();
    match status {
        400 => assert_eq!(answer["error"]["code"], "bad_upload"),
        201 => assert_eq!(answer["name"], "a_[31mb.csv"),
        other => panic!("{other}: {answer}"),
    }
    let files = api.json(&format!("/api/v1/conversations/{id}/files")).await;
    for f in files["files"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap();
        assert!(!name.chars().any(ba_storage::is_hidden_char), "{name:?}");
    }
}

/// A run held through the store's lease by someone else (`ba-agent run`, another server) is
/// `running` with its run id, in the list and alone; once the lease goes, the log decides.
async fn a_lease_taken_elsewhere_shows_as_running(api: &Api<'_>, store: &dyn ConversationStore) {
    let id = api.create().await;
    store
        .append(&cid(&id), &question("Which region grew?"), None)
        .await
        .unwrap();
    let lease = store
        .lock_run(
            &cid(&id),
            &RunHolder::new("run_cli_1", "ba-agent run, pid 4242 on host"),
        )
        .await
        .unwrap()
        .lease()
        .unwrap();
    let one = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(
        (one["status"].as_str(), one["active_run_id"].as_str()),
        (Some("running"), Some("run_cli_1")),
        "{one}"
    );
    let items = listed(api, "").await;
    let listed_one = items.iter().find(|c| c["id"] == id.as_str()).unwrap();
    assert_eq!(listed_one["status"], "running");
    assert_eq!(listed_one["active_run_id"], "run_cli_1");
    drop(lease);
    let one = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(one["status"], "interrupted", "{one}");
    assert!(one.get("active_run_id").is_none(), "{one}");
}

#[tokio::test]
async fn a_run_held_through_the_file_store_shows_as_running() {
    let (_d, server, other) = on_files(Model::new(&[], 0));
    a_lease_taken_elsewhere_shows_as_running(&Api::new(&server), &other).await;
}

#[tokio::test]
async fn a_run_held_through_postgres_shows_as_running() {
    let Some((_d, server, store)) = on_postgres(Model::new(&[], 0)).await else {
        return;
    };
    a_lease_taken_elsewhere_shows_as_running(&Api::new(&server), store.as_ref()).await;
}

/// The seq of the `n`th user entry (from 1) of a conversation.
async fn user_seq(api: &Api<'_>, id: &str, n: usize) -> u64 {
    let messages = api
        .json(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    messages["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["entry"]["role"] == "user")
        .nth(n - 1)
        .and_then(|e| e["seq"].as_u64())
        .unwrap()
}

async fn file_ids(api: &Api<'_>, id: &str) -> Vec<String> {
    let files = api.json(&format!("/api/v1/conversations/{id}/files")).await;
    files["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn fork_at(api: &Api<'_>, id: &str, at_seq: u64) -> String {
    let r = api
        .post(
            &format!("/api/v1/conversations/{id}/fork"),
            json!({"at_seq": at_seq}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Upload, ask, upload again, ask again; then the page's Edit of each question (a fork at the
/// entry before it): the first question's branch has the upload made before it, the second's
/// both uploads — the one made after the first answer too.
async fn editing_a_question_keeps_the_uploads_it_had(server: &Server) {
    let api = Api::new(server);
    let id = api.create().await;
    let send = |name: &'static str| {
        let (ct, body) = multipart(&[("file", Some(name), Some("text/csv"), b"region,q3\n")]);
        upload(&api, &id, ct, body)
    };
    assert_eq!(send("sales_2024.csv").await.status(), 201);
    for (n, q) in [(1, "Which region grew fastest?"), (2, "And the targets?")] {
        let mut events = api.events(&id, None).await;
        let r = api
            .run(&id, &format!("r{n}"), json!({"type": "message", "text": q}))
            .await;
        assert_eq!(r.status(), 202);
        events.until("finished").await;
        if n == 1 {
            assert_eq!(send("targets.csv").await.status(), 201);
        }
    }
    let first = user_seq(&api, &id, 1).await;
    let second = user_seq(&api, &id, 2).await;
    let edit_first = fork_at(&api, &id, first - 1).await;
    assert_eq!(file_ids(&api, &edit_first).await, ["upload_001"]);
    let edit_second = fork_at(&api, &id, second - 1).await;
    assert_eq!(
        file_ids(&api, &edit_second).await,
        ["upload_001", "upload_002"]
    );
    let answer = api
        .get(&format!(
            "/api/v1/conversations/{edit_first}/files/sales_2024.csv"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap(), "region,q3\n");
}

fn two_answers() -> Vec<Value> {
    vec![
        text_turn(
            "The West grew fastest.",
            json!({"role": "user", "text": "Which region grew fastest?"}),
        ),
        text_turn(
            "Above target.",
            json!({"role": "user", "text": "And the targets?"}),
        ),
    ]
}

#[tokio::test]
async fn editing_the_first_question_keeps_its_uploads_on_the_file_store() {
    let (_d, server, _) = on_files(Model::new(&two_answers(), 0));
    editing_a_question_keeps_the_uploads_it_had(&server).await;
}

#[tokio::test]
async fn editing_the_first_question_keeps_its_uploads_on_postgres() {
    let Some((_d, server, _)) = on_postgres(Model::new(&two_answers(), 0)).await else {
        return;
    };
    editing_a_question_keeps_the_uploads_it_had(&server).await;
}
