//! Who may talk to the server and what a request may reach: the token, the Host and Origin
//! checks, body limits, traversal; and the conversation endpoints.

use serde_json::{Value, json};

use crate::harness::{Api, Model, Options, Server, TOKEN, client, dir, two_rounds};

#[tokio::test]
async fn health_is_open_and_the_api_needs_the_token() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let http = client();
    let health = http.get(server.url("/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    for path in [
        "/api/v1/conversations",
        "/api/v1/skills",
        "/api/v1/conversations/x/events",
    ] {
        let r = http.get(server.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized");
        let wrong = http
            .get(server.url(path))
            .bearer_auth("nope")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401, "{path}");
    }
    let posted = http
        .post(server.url("/api/v1/conversations"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 401);
    let ok = http
        .get(server.url("/api/v1/conversations"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    // Every route of the API, every method it answers: no token, no answer.
    let c = "/api/v1/conversations/x";
    for (method, path) in [
        ("GET", "/api/v1/conversations".to_owned()),
        ("POST", "/api/v1/conversations".to_owned()),
        ("GET", c.to_owned()),
        ("PATCH", c.to_owned()),
        ("DELETE", c.to_owned()),
        ("GET", format!("{c}/messages")),
        ("POST", format!("{c}/fork")),
        ("POST", format!("{c}/rewind")),
        ("GET", format!("{c}/branches")),
        ("POST", format!("{c}/runs")),
        ("POST", format!("{c}/runs/r1/cancel")),
        ("GET", format!("{c}/approvals")),
        ("POST", format!("{c}/approvals/call_1")),
        ("GET", format!("{c}/events")),
        ("POST", format!("{c}/compact")),
        ("GET", format!("{c}/context")),
        ("GET", format!("{c}/report")),
        ("GET", format!("{c}/report/1?format=md")),
        ("GET", format!("{c}/uploads")),
        ("POST", format!("{c}/uploads")),
        ("GET", format!("{c}/uploads/u1")),
        ("GET", format!("{c}/code")),
        ("GET", format!("{c}/code/k1")),
        ("GET", format!("{c}/code/k1/download")),
        ("GET", format!("{c}/files")),
        ("GET", format!("{c}/files/f1")),
        ("GET", "/api/v1/skills".to_owned()),
        ("GET", "/api/v1/workflows".to_owned()),
        ("GET", "/api/v1/demo/questions".to_owned()),
    ] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let r = http
            .request(method.clone(), server.url(&path))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{method} {path}");
        assert_eq!(
            r.headers().get("www-authenticate").unwrap(),
            "Bearer",
            "{method} {path}"
        );
    }
    // The scheme is case-insensitive; the token is not.
    for auth in [
        format!("bearer {TOKEN}"),
        format!("BEARER {TOKEN}"),
        format!("Bearer  {TOKEN}"),
    ] {
        let r = http
            .get(server.url("/api/v1/conversations"))
            .header("authorization", &auth)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{auth}");
    }
    for auth in [
        format!("Bearer {}", TOKEN.to_uppercase()),
        format!("Bearer{TOKEN}"),
        format!("Basic {TOKEN}"),
        "Bearer ".to_owned(),
    ] {
        let r = http
            .get(server.url("/api/v1/conversations"))
            .header("authorization", &auth)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{auth}");
    }
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let http = client();
    let port = server.addr.port();
    for (host, origin) in [
        ("evil.example", None),
        (&*format!("evil.example:{port}"), None),
        (&*format!("127.0.0.1:{port}"), Some("http://evil.example")),
        (&*format!("127.0.0.1:{port}"), Some("null")),
    ] {
        let mut req = http
            .get(server.url("/api/v1/conversations"))
            .bearer_auth(TOKEN)
            .header("Host", host);
        if let Some(o) = origin {
            req = req.header("Origin", o);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 403, "{host} {origin:?}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "forbidden");
    }
    let health = http
        .get(server.url("/health"))
        .header("Host", "rebound.example")
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 403, "DNS rebinding reaches no route");
    let same = http
        .get(server.url("/api/v1/conversations"))
        .bearer_auth(TOKEN)
        .header("Host", format!("localhost:{port}"))
        .header("Origin", format!("http://localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(same.status(), 200);
}

#[tokio::test]
async fn conversations_are_created_read_renamed_switched_and_deleted() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let read = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(read["status"], "idle");
    assert_eq!(read["last_seq"], 0);
    let patched = api
        .http
        .patch(server.url(&format!("/api/v1/conversations/{id}")))
        .bearer_auth(TOKEN)
        .json(&json!({"title": "Q3 sales", "mode": "chat"}))
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), 200);
    let v: Value = patched.json().await.unwrap();
    assert_eq!(
        (v["title"].as_str(), v["mode"].as_str()),
        (Some("Q3 sales"), Some("chat"))
    );
    let bad_mode = api
        .http
        .patch(server.url(&format!("/api/v1/conversations/{id}")))
        .bearer_auth(TOKEN)
        .json(&json!({"mode": "nonsense"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad_mode.status(), 400);
    let list = api.json("/api/v1/conversations").await;
    assert_eq!(list["items"][0]["id"], id.as_str());
    assert_eq!(list["items"][0]["status"], "idle");
    let deleted = api
        .http
        .delete(server.url(&format!("/api/v1/conversations/{id}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let gone = api
        .get(&format!("/api/v1/conversations/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
    let body: Value = gone.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_found");
    let unknown = api.get("/api/v1/nothing-here").send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    assert!(unknown.json::<Value>().await.unwrap()["error"]["message"].is_string());
}

#[tokio::test]
async fn traversal_attempts_are_refused() {
    let (_d, path) = dir();
    std::fs::write(path.join("secret.txt"), "do not serve").unwrap();
    let server = Server::start(&path, Model::new(&[], 0));
    let api = Api::new(&server);
    let id = api.create().await;
    for p in [
        "/api/v1/conversations/..%2Fsecret.txt".to_owned(),
        "/api/v1/conversations/..%2F..%2Fetc%2Fpasswd/messages".to_owned(),
        "/api/v1/conversations/%2E%2E/messages".to_owned(),
        format!("/api/v1/conversations/{id}/uploads/..%2F..%2Fsecret.txt"),
        format!("/api/v1/conversations/{id}/uploads/%2E%2E"),
        format!("/api/v1/conversations/{id}/code/..%2F..%2Fsecret.txt"),
        format!("/api/v1/conversations/{id}/code/..%2F..%2Fsecret/download"),
        format!("/api/v1/conversations/{id}/files/..%2F..%2Fsecret.txt"),
        format!("/api/v1/conversations/{id}/files/secret.txt"),
    ] {
        let r = api.get(&p).send().await.unwrap();
        assert!(
            matches!(r.status().as_u16(), 400 | 404),
            "{p}: {}",
            r.status()
        );
        let text = r.text().await.unwrap();
        assert!(!text.contains("do not serve"), "{p}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v["error"]["code"].is_string(), "{p}: {text}");
    }
}

fn multipart(name: &str, bytes: &[u8], description: &str) -> (String, Vec<u8>) {
    let boundary = "XbaBoundaryX";
    let mut body = Vec::new();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"description\"\r\n\r\n{description}\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: text/csv\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[tokio::test]
async fn uploads_get_file_ref_ids_and_oversized_ones_get_413() {
    let (_d, path) = dir();
    let options = Options {
        upload_limit: 4096,
        json_limit: 8192,
        ..Options::default()
    };
    let server = Server::start_with(&path, Model::new(&[], 0), options);
    let api = Api::new(&server);
    let id = api.create().await;
    let url = server.url(&format!("/api/v1/conversations/{id}/uploads"));
    let (ct, body) = multipart("../../sales.csv", b"region,q3\nWest,120\n", "Q3 sales");
    let r = api
        .http
        .post(&url)
        .bearer_auth(TOKEN)
        .header("Content-Type", ct)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let meta: Value = r.json().await.unwrap();
    assert_eq!(meta["id"], "upload_001");
    assert_eq!(
        meta["name"], "sales.csv",
        "the name is shown without its folders"
    );
    let list = api
        .json(&format!("/api/v1/conversations/{id}/uploads"))
        .await;
    assert_eq!(list[0]["description"], "Q3 sales");
    let got = api
        .get(&format!("/api/v1/conversations/{id}/uploads/upload_001"))
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200);
    assert!(
        got.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .contains("sales.csv")
    );
    assert_eq!(got.text().await.unwrap(), "region,q3\nWest,120\n");
    let by_name = api
        .get(&format!("/api/v1/conversations/{id}/files/sales.csv"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_name.status(), 200);

    let (ct, big) = multipart("big.csv", &vec![b'x'; 12 * 1024], "too big");
    let r = api
        .http
        .post(&url)
        .bearer_auth(TOKEN)
        .header("Content-Type", ct)
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "too_large");
    // The limit is the file's: one of exactly the limit is taken, its envelope besides.
    let (ct, exact) = multipart("exact.csv", &vec![b'y'; 4096], "just fits");
    let r = api
        .http
        .post(&url)
        .bearer_auth(TOKEN)
        .header("Content-Type", ct)
        .body(exact)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(r.json::<Value>().await.unwrap()["size"], 4096);
    // A JSON body over its limit is refused the same way (bodies small enough that the
    // client has written them all before the answer comes).
    let huge = "x".repeat(12 * 1024);
    let r = api
        .post("/api/v1/conversations", json!({"title": huge}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "too_large"
    );
}

#[tokio::test]
async fn demo_questions_are_served_when_the_demo_runs() {
    let (_d, path) = dir();
    let options = Options {
        demo_questions: Some(vec!["Why did West jump?".into()]),
        ..Options::default()
    };
    let server = Server::start_with(&path, Model::new(&two_rounds("q"), 0), options);
    let api = Api::new(&server);
    let v = api.json("/api/v1/demo/questions").await;
    assert_eq!(v, json!(["Why did West jump?"]));
    let skills = api.json("/api/v1/skills").await;
    assert!(skills["skills"].is_array());
}

#[tokio::test]
async fn a_malformed_last_event_id_is_refused_naming_it() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let url = server.url(&format!("/api/v1/conversations/{id}/events"));
    for bad in ["nope", "-1", "3.x", "1.2.3", "99999999999999999999999"] {
        let r = client()
            .get(&url)
            .bearer_auth(TOKEN)
            .header("Last-Event-ID", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let body: Value = r.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(bad), "{bad}: {body}");
        // The same cursor in the query.
        let r = client()
            .get(&url)
            .query(&[("last_event_id", bad)])
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "?last_event_id={bad}");
    }
}

#[tokio::test]
async fn a_request_without_a_host_is_refused() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let mut tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(
        format!(
            "GET /api/v1/conversations HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(crate::harness::LIMIT, tcp.read_to_string(&mut answer))
        .await
        .unwrap()
        .unwrap();
    let status = answer.lines().next().unwrap_or("");
    assert!(
        status.starts_with("HTTP/1.1 403") || status.starts_with("HTTP/1.1 400"),
        "{answer}"
    );
    assert!(!answer.contains("\"conversations\""), "{answer}");
}
