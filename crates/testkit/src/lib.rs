//! Test support shared by the workspace's suites (a dev-dependency only): a tiny HTTP/1.1
//! server on 127.0.0.1 that answers requests with scripted replies, one per connection, and
//! records what it received; plus the one skip helper of the workspace: [`fixtures`],
//! [`fixture`] and [`require_tool`] skip with a message when something is missing, and fail
//! naming it when `CI=true`; [`sse`], server-sent events cut into frames as a client reads
//! them; and [`model`], a model server speaking the Anthropic Messages, OpenAI Chat
//! Completions and OpenAI Responses wires that answers by rules over the request it receives (a
//! model that decides, for journey tests); [`files`], an upload's multipart body and a zip's
//! entries.

// Test scaffolding: a failure here should stop the test loudly.
#![allow(
    missing_docs,
    missing_debug_implementations,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub mod files;
pub mod model;
pub mod sse;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a reply's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The body is complete (sent with its `content-length`).
    Complete,
    /// No `content-length`: the body runs until the server closes the connection.
    Close,
    /// A `content-length` longer than what is sent, then the connection closes: the client
    /// sees the body break.
    CutShort,
    /// The pieces are sent, then nothing more, with the connection held open.
    Hang,
    /// Not even the status line is sent; the connection is held open.
    Silent,
    /// No `content-length`: after the pieces, the last piece is sent again and again (every
    /// `pause_ms` milliseconds, 0 for as fast as the client reads) until the client goes away.
    Endless {
        /// The pause between two repeats.
        pause_ms: u64,
    },
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body, in the pieces it is written in.
    pub pieces: Vec<Vec<u8>>,
    pub end: End,
}

impl Reply {
    pub fn json(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            pieces: vec![body.as_bytes().to_vec()],
            end: End::Complete,
        }
    }

    /// An SSE body written in pieces of `piece` bytes (splitting lines, events and UTF-8
    /// characters wherever the cut falls).
    pub fn sse(text: &str, piece: usize, end: End) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            pieces: text
                .as_bytes()
                .chunks(piece.max(1))
                .map(<[u8]>::to_vec)
                .collect(),
            end,
        }
    }

    /// The same reply, ended another way.
    pub fn with_end(mut self, end: End) -> Self {
        self.end = end;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct MockServer {
    pub base_url: String,
    received: Arc<Mutex<Vec<Received>>>,
    arrived: Arc<tokio::sync::Notify>,
}

impl MockServer {
    /// Serves `replies` in order, one per connection; past the end it answers 418.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        let arrived = Arc::new(tokio::sync::Notify::new());
        let notify = Arc::clone(&arrived);
        tokio::spawn(async move {
            let mut replies = replies.into_iter();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let reply = replies
                    .next()
                    .unwrap_or_else(|| Reply::json(418, r#"{"error":"no more replies"}"#));
                let log = Arc::clone(&log);
                let notify = Arc::clone(&notify);
                tokio::spawn(async move { serve(stream, reply, log, notify).await });
            }
        });
        Self {
            base_url: format!("http://{addr}"),
            received,
            arrived,
        }
    }

    /// Waits until at least `n` requests have arrived.
    pub async fn wait_for_requests(&self, n: usize) {
        loop {
            let notified = self.arrived.notified();
            if self.received.lock().unwrap().len() >= n {
                return;
            }
            notified.await;
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    reply: Reply,
    log: Arc<Mutex<Vec<Received>>>,
    arrived: Arc<tokio::sync::Notify>,
) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    log.lock().unwrap().push(request);
    arrived.notify_waiters();
    if reply.end == End::Silent {
        std::future::pending::<()>().await;
    }
    let total: usize = reply.pieces.iter().map(Vec::len).sum();
    let mut head = format!("HTTP/1.1 {} Mock\r\n", reply.status);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match reply.end {
        End::Complete => head.push_str(&format!("content-length: {total}\r\n")),
        End::CutShort | End::Hang => {
            head.push_str(&format!("content-length: {}\r\n", total + 1000))
        }
        End::Close | End::Silent | End::Endless { .. } => {}
    }
    head.push_str("connection: close\r\n\r\n");
    if stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for piece in &reply.pieces {
        if stream.write_all(piece).await.is_err() {
            return;
        }
        let _ = stream.flush().await;
        // Let the client read each piece on its own.
        tokio::task::yield_now().await;
    }
    if reply.end == End::Hang {
        // The declared length is not reached, so the client keeps waiting for more.
        std::future::pending::<()>().await;
    }
    if let (End::Endless { pause_ms }, Some(last)) = (reply.end, reply.pieces.last()) {
        loop {
            if stream.write_all(last).await.is_err() {
                return;
            }
            if pause_ms > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
            } else {
                tokio::task::yield_now().await;
            }
        }
    }
    let _ = stream.shutdown().await;
}

async fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = find(&buf, b"\r\n\r\n") {
            break pos;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Some(Received {
        method,
        path,
        headers,
        body,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The variable that points the shared fixtures at another folder (a check that a missing
/// fixture fails under CI can point it at a folder that does not exist).
pub const FIXTURES_ENV: &str = "BA_AGENT_SHARED_FIXTURES";

/// Whether the tests run under CI (`CI=true` or `CI=1`, as CI services set it). Under CI a
/// missing fixture or tool is a failure, never a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Where the shared fixtures are expected: `$BA_AGENT_SHARED_FIXTURES` when set, else
/// `shared/fixtures` beside the repository (`../shared/fixtures` from the workspace root).
pub fn fixtures_root() -> PathBuf {
    if let Some(dir) = std::env::var_os(FIXTURES_ENV).filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let testkit = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/testkit → the workspace root → the folder beside it.
    let beside = testkit
        .parent()
        .and_then(std::path::Path::parent)
        .and_then(std::path::Path::parent)
        .unwrap_or(testkit);
    beside.join("shared/fixtures")
}

/// Skips (prints why and returns) or, under CI, fails naming what is missing: the one place
/// that decides, for tests whose requirement the helpers here do not cover.
pub fn missing(what: &str) {
    if in_ci() {
        panic!("{what} (CI is set: a missing fixture, tool or service is a failure, not a skip)");
    }
    eprintln!("skipping: {what}");
}

/// The shared fixtures folder; `None` (after a "skipping" message) when it is absent, and a
/// panic naming it when it is absent under CI.
pub fn fixtures() -> Option<PathBuf> {
    let dir = fixtures_root();
    if dir.is_dir() {
        Some(dir)
    } else {
        missing(&format!(
            "fixtures folder {} not found (set {FIXTURES_ENV} or put shared/ beside the repository)",
            dir.display()
        ));
        None
    }
}

/// A file or folder inside the shared fixtures, by its path relative to their root; `None`
/// (after a "skipping" message) when it is absent, a panic naming it under CI.
pub fn fixture(relative: &str) -> Option<PathBuf> {
    let path = fixtures_root().join(relative);
    if path.exists() {
        Some(path)
    } else {
        missing(&format!(
            "fixture {} not found (set {FIXTURES_ENV} or put shared/ beside the repository)",
            path.display()
        ));
        None
    }
}

/// One of OpenAI's published JSON Schemas of the Responses API in the shared fixtures
/// (`CreateResponse`, `Response`, `ResponseStreamEvent`); `None` (after a "skipping" message)
/// when absent, a panic under CI.
///
/// The documents declare draft 2020-12 but keep one recursion in draft 2019-09's words
/// (`$recursiveAnchor` on `CompoundFilter`, `$recursiveRef` in its filters), which a 2020-12
/// validator refuses to compile; it is rewritten as the plain reference it stands for, so the
/// nested filters are checked rather than waved through.
pub fn openai_responses_schema(name: &str) -> Option<Value> {
    let path = fixture(&format!("wire/openai/schemas-responses/{name}.schema.json"))?;
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut schema: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    recursion_as_references(&mut schema, None);
    Some(schema)
}

/// Drops `$recursiveAnchor` and points each `$recursiveRef: "#"` at the definition holding
/// the nearest anchor above it.
fn recursion_as_references(value: &mut Value, anchor: Option<&str>) {
    match value {
        Value::Object(map) => {
            if map.get("$recursiveRef").is_some_and(|r| r == "#") {
                map.remove("$recursiveRef");
                let target = anchor.map_or_else(|| "#".to_owned(), |a| format!("#/$defs/{a}"));
                map.insert("$ref".to_owned(), Value::String(target));
            }
            map.remove("$recursiveAnchor");
            for (key, child) in map.iter_mut() {
                if key == "$defs" {
                    if let Value::Object(defs) = child {
                        for (name, def) in defs.iter_mut() {
                            let anchored = def.get("$recursiveAnchor") == Some(&Value::Bool(true));
                            let inner = if anchored {
                                Some(name.as_str())
                            } else {
                                anchor
                            };
                            recursion_as_references(def, inner);
                        }
                    }
                } else {
                    recursion_as_references(child, anchor);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                recursion_as_references(item, anchor);
            }
        }
        _ => {}
    }
}

/// Whether `program` runs (`program --version` succeeds); when it does not, `false` after a
/// "skipping" message, or a panic naming it under CI.
pub fn require_tool(program: &str) -> bool {
    let runs = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        missing(&format!(
            "`{program} --version` does not run: {program} is not installed"
        ));
    }
    runs
}

/// Whether `python3` imports every module of `modules`; when it does not, `false` after a
/// "skipping" message, or a panic naming them under CI (`.ci/tools.sh` installs them).
pub fn require_python_modules(modules: &[&str]) -> bool {
    let list = modules.join(", ");
    let imports = std::process::Command::new("python3")
        .args(["-c", &format!("import {list}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        missing(&format!("python3 cannot import {list}"));
    }
    imports
}

/// The value of the environment variable `var` that points a test at a service (a database
/// server, say); when it is unset or empty, `None` after a "skipping" message saying `how` to
/// set it, or a panic naming it under CI.
pub fn require_env(var: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            missing(&format!("{var} is not set ({how})"));
            None
        }
    }
}

/// Leaves a note on a benchmark group beside criterion's results of it
/// (`<target>/criterion/<group>/note.md`), which `cargo xtask bench` prints under its table:
/// what the group compares, or what it ran on. `target_tmpdir` is the bench's
/// `env!("CARGO_TARGET_TMPDIR")` (`<target>/tmp`).
pub fn bench_note(target_tmpdir: &str, group: &str, text: &str) {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::path::Path::new(target_tmpdir)
                .parent()
                .map(PathBuf::from)
        })
        .unwrap_or_default();
    let dir = target.join("criterion").join(group);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("note.md"), text.trim()).unwrap();
}

/// Reads a fixture file as text.
pub fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One SSE event of the Messages API.
pub fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A block of an answer: text, or a tool call whose input streams in `pieces`.
pub enum Block<'a> {
    Text(&'a str),
    Tool(&'a str, &'a str, Vec<&'a str>),
}

/// The SSE body of an answer made of `blocks`; `complete: false` stops before the last
/// piece of the last block (and before the message's end), as a connection cut would.
pub fn answer(id: &str, blocks: &[Block<'_>], stop: &str, complete: bool) -> String {
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 120, "output_tokens": 1}}}),
    );
    for (index, block) in blocks.iter().enumerate() {
        let last = index + 1 == blocks.len();
        match block {
            Block::Text(text) => {
                out += &event(
                    "content_block_start",
                    json!({"type": "content_block_start",
                    "index": index, "content_block": {"type": "text", "text": ""}}),
                );
                out += &event(
                    "content_block_delta",
                    json!({"type": "content_block_delta",
                    "index": index, "delta": {"type": "text_delta", "text": text}}),
                );
            }
            Block::Tool(call, name, pieces) => {
                out += &event(
                    "content_block_start",
                    json!({"type": "content_block_start",
                    "index": index, "content_block": {"type": "tool_use", "id": call,
                    "name": name, "input": {}}}),
                );
                let n = if complete || !last {
                    pieces.len()
                } else {
                    pieces.len() - 1
                };
                for piece in &pieces[..n] {
                    out += &event(
                        "content_block_delta",
                        json!({"type": "content_block_delta",
                        "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    );
                }
            }
        }
        if complete || !last {
            out += &event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            );
        }
    }
    if complete {
        out += &event(
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 42}}),
        );
        out += &event("message_stop", json!({"type": "message_stop"}));
    }
    out
}

/// Asserts that every variant of `T` is written by serde as `name(variant)` and read back as
/// itself: the names a wire enum gives (`as_str`) are the ones its JSON carries, for variants
/// added later too (`T` derives `strum::EnumIter`, in tests only if it likes).
pub fn assert_wire_names<T>(name: impl Fn(T) -> &'static str)
where
    T: strum::IntoEnumIterator + serde::Serialize + serde::de::DeserializeOwned,
    T: Copy + PartialEq + std::fmt::Debug,
{
    for v in T::iter() {
        let wire = serde_json::to_value(v).unwrap();
        assert_eq!(wire, Value::from(name(v)), "{v:?}");
        assert_eq!(serde_json::from_value::<T>(wire).unwrap(), v, "{v:?}");
    }
}

/// Parser fuzzing without nightly: byte and structure mutations of valid inputs, driven by
/// proptest, so a failure shrinks to a small input. `cargo xtask fuzz [--cases N]` runs the
/// fuzz tests of every crate with `BA_AGENT_FUZZ_CASES` set; without it they run a short pass.
pub mod fuzz {
    use proptest::prelude::*;

    /// Cases per fuzz test: `BA_AGENT_FUZZ_CASES`, or 256.
    pub fn cases() -> u32 {
        std::env::var("BA_AGENT_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256)
    }

    /// One edit of a byte string.
    #[derive(Debug, Clone)]
    pub enum Mutation {
        /// Flip some bits of the byte at a position.
        Flip(usize, u8),
        /// Insert bytes at a position.
        Insert(usize, Vec<u8>),
        /// Delete a span.
        Delete(usize, usize),
        /// Copy a span to another position (repeats structure: a line, a brace).
        Duplicate(usize, usize, usize),
        /// Cut everything from a position.
        Truncate(usize),
        /// Insert a token that means something to the formats parsed here.
        Token(usize, &'static str),
    }

    const TOKENS: &[&str] = &[
        "\n",
        "\r\n",
        "\n\n",
        "{",
        "}",
        "[",
        "]",
        "\"",
        ":",
        ",",
        "---\n",
        "data: ",
        "event: ",
        "null",
        "-1",
        "1e309",
        "\u{feff}",
        "\\u0000",
        "\\ud800",
        "💥",
        "\u{0}",
        "9999999999999999999",
    ];

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), 1u8..=255).prop_map(|(at, bits)| Mutation::Flip(at, bits)),
            (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..8))
                .prop_map(|(at, b)| Mutation::Insert(at, b)),
            (any::<usize>(), 1usize..64).prop_map(|(at, n)| Mutation::Delete(at, n)),
            (any::<usize>(), 1usize..64, any::<usize>())
                .prop_map(|(at, n, to)| Mutation::Duplicate(at, n, to)),
            any::<usize>().prop_map(Mutation::Truncate),
            (any::<usize>(), proptest::sample::select(TOKENS))
                .prop_map(|(at, t)| Mutation::Token(at, t)),
        ]
    }

    /// Applies `m` to `bytes`; positions wrap around the length.
    pub fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
        let len = bytes.len().max(1);
        match m {
            Mutation::Flip(at, bits) => {
                if !bytes.is_empty() {
                    let i = at % bytes.len();
                    bytes[i] ^= bits;
                }
            }
            Mutation::Insert(at, b) => {
                let i = at % (bytes.len() + 1);
                bytes.splice(i..i, b.iter().copied());
            }
            Mutation::Delete(at, n) => {
                if !bytes.is_empty() {
                    let i = at % bytes.len();
                    let end = (i + n).min(bytes.len());
                    bytes.drain(i..end);
                }
            }
            Mutation::Duplicate(at, n, to) => {
                if !bytes.is_empty() {
                    let i = at % bytes.len();
                    let end = (i + n).min(bytes.len());
                    let span: Vec<u8> = bytes[i..end].to_vec();
                    let j = to % (bytes.len() + 1);
                    bytes.splice(j..j, span);
                }
            }
            Mutation::Truncate(at) => bytes.truncate(at % len),
            Mutation::Token(at, t) => {
                let i = at % (bytes.len() + 1);
                bytes.splice(i..i, t.bytes());
            }
        }
    }

    /// A seed picked from `seeds`, with 1 to 8 mutations applied.
    pub fn mutated(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
        (
            proptest::sample::select(seeds),
            proptest::collection::vec(mutation(), 1..8),
        )
            .prop_map(|(seed, ms)| {
                let mut bytes = seed;
                for m in &ms {
                    apply(&mut bytes, m);
                }
                bytes
            })
    }

    /// Text that is mostly valid UTF-8: the mutated bytes, lossily decoded.
    pub fn mutated_text(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = String> {
        mutated(seeds).prop_map(|b| String::from_utf8_lossy(&b).into_owned())
    }
}
