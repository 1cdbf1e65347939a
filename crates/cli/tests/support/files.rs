//! What the journeys through a conversation's files share: a configuration of `serve` against
//! the scripted model of `ba-testkit`, `serve --config`, uploads (from memory, or streamed from a
//! file so that a large one is never held whole by the test), runs read to `finished`, and
//! downloads (whole, or streamed into a SHA-256).

use std::path::{Path, PathBuf};

use ba_testkit::model::{ScriptedModel, Turn};
use futures::StreamExt as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncReadExt as _;

use super::{LIMIT, Served, until_finished};

/// The token of the servers these helpers start.
pub const TOKEN: &str = "files-journey-token";

/// The boundary of the multipart bodies sent here.
const BOUNDARY: &str = "ba-journey-boundary-7d1f";

/// A configuration for `serve` against `model`, with answers in the structured form;
/// `extra` is more YAML (`max_rounds`, `database_url`, …).
pub fn config(dir: &Path, model: &ScriptedModel, extra: &str) -> PathBuf {
    let path = dir.join("ba-agent.yaml");
    std::fs::write(
        &path,
        format!(
            "provider: anthropic\nmodel: claude-journey\nbase_url: {}\nresponse_mode: structured\n\
             encoding: gbk\nsub_agents: false\n{extra}",
            model.anthropic_base_url()
        ),
    )
    .unwrap();
    path
}

/// `ba-agent serve --config CONFIG` with a key for the scripted model.
pub async fn serve(home: &Path, config: &Path) -> Served {
    serve_in(home, config, None).await
}

/// [`serve`], with `TMPDIR` set to `tmp` when given: the server's temporary files (spooled
/// uploads, the PostgreSQL workspace's cache of files) are then its own, as on another machine.
pub async fn serve_in(home: &Path, config: &Path, tmp: Option<&Path>) -> Served {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"));
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    if let Some(tmp) = tmp {
        std::fs::create_dir_all(tmp).unwrap();
        cmd.env("TMPDIR", tmp);
    }
    let config = config.to_str().unwrap();
    Served::start_with(cmd, TOKEN, home, &["--config", config]).await
}

/// The `Content-Type` of the multipart bodies sent here.
fn multipart_type() -> String {
    format!("multipart/form-data; boundary={BOUNDARY}")
}

/// What comes before the content of the `file` part.
fn multipart_head(name: &str, media: &str) -> Vec<u8> {
    format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
         Content-Type: {media}\r\n\r\n"
    )
    .into_bytes()
}

/// What comes after it: the `description` part and the end.
fn multipart_tail(description: &str) -> Vec<u8> {
    format!(
        "\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"description\"\r\n\r\n\
         {description}\r\n--{BOUNDARY}--\r\n"
    )
    .into_bytes()
}

/// A multipart body of one `file` part and a `description`: its `Content-Type` and bytes.
pub fn multipart(name: &str, media: &str, bytes: &[u8], description: &str) -> (String, Vec<u8>) {
    let mut body = multipart_head(name, media);
    body.extend_from_slice(bytes);
    body.extend_from_slice(&multipart_tail(description));
    (multipart_type(), body)
}

/// The final answer in the structured form, with `content` and `links`.
pub fn complete(content: &str, links: &[String]) -> Turn {
    Turn::text(
        json!({
            "task_analysis": "The analyst wants the uploads read and charted.",
            "execution_plan": "R1: read the uploads; R2: chart them; R3: report.",
            "current_round": 3,
            "action": {"type": "complete", "content": content, "download_links": links,
                       "recommended_questions": ["Which region grew fastest?"]}
        })
        .to_string(),
    )
}

/// Every `output_NNN` a text names, in order, once each.
pub fn output_ids(text: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("output_") {
        let digits: String = rest[at + 7..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if digits.len() >= 3 {
            let id = format!("output_{digits}");
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        rest = &rest[at + 7..];
    }
    ids
}

/// A download read to its end as it arrives: status, bytes received and their SHA-256 (hex).
#[derive(Debug, PartialEq, Eq)]
pub struct Digest {
    pub status: u16,
    pub size: u64,
    pub sha256: String,
}

/// The lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Served {
    /// Uploads `bytes` as `name` to conversation `id`: the upload's metadata.
    pub async fn upload(&self, id: &str, name: &str, media: &str, bytes: &[u8]) -> Value {
        let (content_type, body) = multipart(name, media, bytes, "from the journey");
        self.send_upload(id, content_type, reqwest::Body::from(body), None)
            .await
    }

    /// Uploads the file at `path` as `name`, streaming it from the disk as it is sent (with its
    /// `Content-Length`, as curl sends it): the upload's metadata.
    pub async fn upload_file(&self, id: &str, name: &str, media: &str, path: &Path) -> Value {
        let head = multipart_head(name, media);
        let tail = multipart_tail("streamed from a file");
        let size = std::fs::metadata(path).unwrap().len();
        let length = head.len() as u64 + size + tail.len() as u64;
        let file = tokio::fs::File::open(path).await.unwrap();
        let content = futures::stream::unfold(file, |mut file| async move {
            let mut buf = vec![0u8; 64 << 10];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok::<_, std::io::Error>(buf), file))
                }
                Err(e) => Some((Err(e), file)),
            }
        });
        let body = futures::stream::iter([Ok(head)])
            .chain(content)
            .chain(futures::stream::iter([Ok(tail)]));
        self.send_upload(
            id,
            multipart_type(),
            reqwest::Body::wrap_stream(body),
            Some(length),
        )
        .await
    }

    async fn send_upload(
        &self,
        id: &str,
        content_type: String,
        body: reqwest::Body,
        length: Option<u64>,
    ) -> Value {
        let mut request = self
            .http
            .post(format!("{}/api/v1/conversations/{id}/uploads", self.base))
            .bearer_auth(self.token)
            .header("content-type", content_type);
        if let Some(length) = length {
            request = request.header("content-length", length);
        }
        let r = request.body(body).send().await.unwrap();
        assert_eq!(r.status(), 201, "{:?}", r.text().await);
        r.json().await.unwrap()
    }

    /// Sends `text` with `uploads` and reads the run's events to `finished`.
    pub async fn run(
        &self,
        id: &str,
        request: &str,
        text: &str,
        uploads: &[&str],
    ) -> Vec<(String, Value)> {
        let events = self
            .get(&format!("/api/v1/conversations/{id}/events"))
            .send()
            .await
            .unwrap();
        let r = self
            .post(
                &format!("/api/v1/conversations/{id}/runs"),
                &json!({"request_id": request, "input": {"type": "message", "text": text, "upload_ids": uploads}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "{:?}", r.text().await);
        tokio::time::timeout(LIMIT, until_finished(events))
            .await
            .unwrap()
    }

    /// A GET of `path` that must succeed: its JSON.
    pub async fn json(&self, path: &str) -> Value {
        let r = self.get(path).send().await.unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }

    /// A GET of `path`: status, `Content-Type` and body.
    pub async fn bytes(&self, path: &str) -> (u16, String, Vec<u8>) {
        let r = self.get(path).send().await.unwrap();
        let status = r.status().as_u16();
        let media = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, media, r.bytes().await.unwrap().to_vec())
    }

    /// A GET of `path` read as it arrives into a SHA-256, never held whole.
    pub async fn digest(&self, path: &str) -> Digest {
        let r = self.get(path).send().await.unwrap();
        let status = r.status().as_u16();
        let mut body = r.bytes_stream();
        let (mut hasher, mut size) = (Sha256::new(), 0u64);
        loop {
            let chunk = tokio::time::timeout(LIMIT, body.next())
                .await
                .expect("the download stalled");
            let Some(chunk) = chunk else { break };
            let chunk = chunk.unwrap();
            size += chunk.len() as u64;
            hasher.update(&chunk);
        }
        Digest {
            status,
            size,
            sha256: hex(&hasher.finalize()),
        }
    }
}
