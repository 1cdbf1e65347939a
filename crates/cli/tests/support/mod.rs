//! What the tests of `ba-agent serve` share: starting the binary on 127.0.0.1:0, a client with
//! its token, reading an event stream to its `finished` frame, and SIGTERM; in [`files`], what
//! the journeys through a conversation's files share.

use std::process::Stdio;
use std::time::Duration;

use ba_testkit::sse::SseParser;
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

#[allow(
    dead_code,
    reason = "used by the test binaries about a conversation's files only"
)]
pub mod files;

/// How long any one step may take before the test fails instead of hanging.
pub const LIMIT: Duration = Duration::from_secs(120);

/// `ba-agent serve --demo` started from `cmd` (the binary, with any environment the test
/// sets) on a free loopback port with `token` and `home`.
pub struct Served {
    pub child: tokio::process::Child,
    /// `http://127.0.0.1:PORT`, from the first line the server prints.
    pub base: String,
    /// That first line.
    #[allow(
        dead_code,
        reason = "read by some of the test binaries that share this module"
    )]
    pub banner: String,
    pub http: reqwest::Client,
    pub token: &'static str,
}

impl Served {
    #[allow(
        dead_code,
        reason = "used by some of the test binaries that share this module"
    )]
    pub async fn start(
        cmd: tokio::process::Command,
        token: &'static str,
        home: &std::path::Path,
    ) -> Self {
        Self::start_with(cmd, token, home, &["--demo"]).await
    }

    /// `ba-agent serve ARGS…` on a free loopback port with `token` and `home`.
    pub async fn start_with(
        mut cmd: tokio::process::Command,
        token: &'static str,
        home: &std::path::Path,
        args: &[&str],
    ) -> Self {
        let mut child = cmd
            .arg("serve")
            .args(args)
            .args(["--bind", "127.0.0.1:0", "--token", token])
            .arg("--home")
            .arg(home)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let (banner, base) = banner(&mut child).await;
        Self {
            child,
            base,
            banner,
            http: reqwest::Client::new(),
            token,
        }
    }

    /// A GET of `path` with the token.
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(self.token)
    }

    /// A POST of `body` as JSON to `path` with the token.
    pub fn post(&self, path: &str, body: &Value) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(self.token)
            .json(body)
    }

    /// Creates a conversation; its id.
    pub async fn create(&self) -> String {
        let created = self
            .post("/api/v1/conversations", &json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
        created.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Starts a run of `question` on conversation `id`: the answer's JSON.
    #[allow(
        dead_code,
        reason = "used by some of the test binaries that share this module"
    )]
    pub async fn ask(&self, id: &str, request_id: &str, question: &str) -> Value {
        let run = self
            .post(
                &format!("/api/v1/conversations/{id}/runs"),
                &json!({"request_id": request_id, "input": {"type": "message", "text": question}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(run.status(), 202);
        run.json().await.unwrap()
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub async fn terminate(mut self) {
        let pid = self.child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = tokio::time::timeout(LIMIT, self.child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{status:?}");
    }
}

/// The first line a started `serve` prints and the `http://…` base URL in it; what it prints
/// after is read and dropped, so that no write of its meets a closed pipe.
pub async fn banner(child: &mut tokio::process::Child) -> (String, String) {
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let banner = tokio::time::timeout(LIMIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let base = banner
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (banner, base)
}

/// Reads SSE frames (`event`, JSON `data`) up to and including `finished`; every frame has an
/// `id`.
pub async fn until_finished(r: reqwest::Response) -> Vec<(String, Value)> {
    let mut body = r.bytes_stream();
    let mut parser = SseParser::default();
    let mut frames = Vec::new();
    loop {
        while let Some(f) = parser.next_frame() {
            assert!(f.id.is_some(), "every frame has an id: {f:?}");
            let event = f.event.unwrap_or_default();
            let done = event == "finished";
            frames.push((event, serde_json::from_str(&f.data).unwrap()));
            if done {
                return frames;
            }
        }
        let chunk = tokio::time::timeout(LIMIT, body.next())
            .await
            .expect("the stream stalled")
            .expect("the stream ended before `finished`")
            .unwrap();
        parser.push(&chunk);
    }
}
