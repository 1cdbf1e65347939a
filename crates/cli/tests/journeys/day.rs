//! An analyst's day, as the journeys walk it: `ba-agent serve` processes on one home (a
//! restart is a new process, a second server another one beside the first), a model that
//! decides ([`analyst`]) and the steps a person takes through the API, each waiting for what
//! the person would wait for.
//!
//! The model answers by what the question asks, so one script serves every journey:
//! - `[files]` says which of the journeys' files `run_python` finds in its working folder,
//! - `[read]` reads every upload the message names with `file_reader`, then answers with
//!   what it read,
//! - `[chart]` writes a chart with `run_python` and answers with the output,
//! - `[hold]` never answers (a model call under way for as long as the test needs),
//! - `[seen]` answers with every question the history shows it,
//! - anything else is answered with its own words;
//!
//! and a workflow's active node is completed with outputs it names.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ba_testkit::model::{Builder, Request, ScriptedModel, Turn};
use serde_json::{Value, json};

pub use crate::support::Served;
use crate::support::files::{TOKEN, serve};
use crate::support::{LIMIT, until_finished};

/// The code of `[files]`: which of the journeys' file names the working folder holds.
pub const LIST_FILES: &str = "found = []\nfor name in ['sales.csv', 'targets.csv', 'chart.png']:\n    try:\n        open(name, 'rb').close()\n        found.append(name)\n    except OSError:\n        pass\nprint('FILES:', found)\n";

/// The code of `[chart]`: a chart written to `outputs/` (matplotlib, as an analyst's code
/// draws one).
pub const CHART: &str = "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.bar(['West', 'East'], [120, 80])\nplt.savefig('outputs/chart.png')\nprint('wrote outputs/chart.png')\n";

/// The questions the history of `r` shows, in order (the person's words only: each user
/// message's first line).
pub fn questions(r: &Request) -> Vec<String> {
    r.messages()
        .iter()
        .filter(|m| m.role == ba_testkit::model::Role::User)
        .map(|m| m.text.lines().next().unwrap_or_default().to_owned())
        .filter(|q| q.starts_with('['))
        .collect()
}

/// The node a workflow request is at: the id in the `complete_node` example its brief gives.
pub fn active_node(r: &Request) -> Option<String> {
    let text = r.body().to_string();
    let marker = "{\\\"node\\\": \\\"";
    let at = text.find(marker)? + marker.len();
    let end = text[at..].find("\\\"")?;
    Some(text[at..at + end].to_owned())
}

/// Whether a workflow node waits to be completed in this request.
fn in_workflow(r: &Request) -> bool {
    r.offers("complete_node") && active_node(r).is_some()
}

/// The outputs `[workflow]` nodes give: every node declares `note` (text).
fn node_outputs(node: &str) -> Value {
    json!({"note": format!("{node} done")})
}

/// The model of the journeys (see the module's documentation).
pub async fn analyst() -> ScriptedModel {
    analyst_with(ScriptedModel::builder()).await
}

/// [`analyst`], after the rules of `builder` (which are tried first).
pub async fn analyst_with(builder: Builder) -> ScriptedModel {
    builder
        .rule(
            "hold",
            |r| r.last_user_text().starts_with("[hold]"),
            |_| Turn::hold(),
        )
        .rule(
            "workflow: run the node's python",
            |r| {
                in_workflow(r)
                    && r.round() == 0
                    && r.offers("run_python")
                    && r.shows("[python-node]")
            },
            |_| Turn::call("run_python", json!({"code": LIST_FILES})),
        )
        .rule("workflow: complete the active node", in_workflow, |r| {
            let node = active_node(r).unwrap();
            Turn::call(
                "complete_node",
                json!({"node": node, "outputs": node_outputs(&node)}),
            )
        })
        .rule(
            "files: list the working folder",
            |r| r.last_user_text().starts_with("[files]") && r.round() == 0,
            |_| Turn::call("run_python", json!({"code": LIST_FILES})),
        )
        .rule(
            "chart: write a chart",
            |r| r.last_user_text().starts_with("[chart]") && r.round() == 0,
            |_| Turn::call("run_python", json!({"code": CHART})),
        )
        .rule(
            "read: every upload named",
            |r| r.last_user_text().starts_with("[read]") && r.round() == 0,
            |r| {
                Turn::calls(
                    r.uploads()
                        .into_iter()
                        .map(|u| ("file_reader", json!({"path": u}))),
                )
            },
        )
        .rule(
            "answer with the tool's result",
            |r| r.last_result().is_some(),
            |r| {
                let results: Vec<String> = r
                    .tool_results()
                    .iter()
                    .map(|t| {
                        format!(
                            "{}{}: {}",
                            t.name,
                            if t.is_error { " failed" } else { "" },
                            t.text
                        )
                    })
                    .collect();
                // The outputs the code wrote are shown in the answer, as an analyst's are.
                let shown: String = r
                    .tool_results()
                    .iter()
                    .flat_map(|t| crate::support::files::output_ids(&t.text))
                    .map(|id| format!("\n\n<file_ref>{id}</file_ref>"))
                    .collect();
                Turn::text(format!("RESULT {}{shown}", results.join("\n")))
            },
        )
        .rule(
            "seen: the questions in the history",
            |r| r.last_user_text().starts_with("[seen]"),
            |r| Turn::text(format!("SEEN {}", questions(r).join(" | "))),
        )
        .rule(
            "echo",
            |_| true,
            |r| {
                let q = r
                    .last_user_text()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                Turn::text(format!("ANSWER to {q}"))
            },
        )
        .start()
        .await
}

/// A day's setting: a home, a configuration naming `model`, and the servers started on them.
pub struct Day {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub config: PathBuf,
}

impl Day {
    /// A day against `model`, with `extra` configuration (YAML lines).
    pub fn new(model: &ScriptedModel, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let config = dir.path().join("ba-agent.yaml");
        std::fs::write(
            &config,
            format!(
                "provider: anthropic\nmodel: claude-journey\nbase_url: {}\nsub_agents: false\n\
                 max_rounds: 8\n{extra}",
                model.anthropic_base_url()
            ),
        )
        .unwrap();
        Self { dir, home, config }
    }

    /// A folder of the day's, made.
    pub fn folder(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// A server on the day's home (a second call: a second server beside the first, or the
    /// next one after a restart).
    pub async fn serve(&self) -> Served {
        serve(&self.home, &self.config).await
    }
}

/// A workflow folder under `root`: `nodes` (`id`) in order, each producing `note`; with
/// `python`, the model lists the working folder with `run_python` at the first node.
pub fn workflow(root: &Path, name: &str, nodes: &[&str], python: bool) -> PathBuf {
    let marker = if python { " [python-node]" } else { "" };
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = format!(
        "---\nname: {name}\ndescription: A review in {} steps.\ninputs:\n  month: {{type: month, default: 2024-09}}\nnodes:\n",
        nodes.len()
    );
    for id in nodes {
        text.push_str(&format!(
            "  - id: {id}\n    title: Step {id}\n    brief: Do {id}.{marker}\n    outputs:\n      - {{name: note, kind: text}}\n"
        ));
    }
    text.push_str("---\nKeep it short.\n");
    std::fs::write(dir.join("WORKFLOW.md"), text).unwrap();
    dir
}

/// What a person does and sees, through one server.
pub trait Person {
    /// Asks `text` with `uploads` and reads the events to `finished`.
    async fn question(&self, id: &str, text: &str, uploads: &[&str]) -> Vec<(String, Value)>;
    /// Starts a run of `input` (202 expected); the run id.
    async fn start(&self, id: &str, input: Value) -> String;
    /// Waits until the conversation is not running; its view.
    async fn settled(&self, id: &str) -> Value;
    /// Waits until the conversation is `running` (a run of this or another server holds it).
    async fn running(&self, id: &str) -> Value;
    /// The transcript's entries.
    async fn entries(&self, id: &str) -> Vec<Value>;
    /// The calls waiting for a person.
    async fn pending(&self, id: &str) -> Vec<Value>;
    /// A decision on `call` (202 expected).
    async fn decide(&self, id: &str, call: &str, decision: Value);
    /// A fork at `at_seq` (201 expected): its id.
    async fn fork(&self, id: &str, at_seq: u64) -> String;
    /// A POST of `body` to `path`: status and JSON body.
    async fn send(&self, path: &str, body: Value) -> (u16, Value);
    /// The ids and names of the conversation's files.
    async fn files(&self, id: &str) -> Vec<(String, String)>;
    /// A GET of `path`: status and body.
    async fn fetch(&self, path: &str) -> (u16, Vec<u8>);
}

impl Person for Served {
    async fn question(&self, id: &str, text: &str, uploads: &[&str]) -> Vec<(String, Value)> {
        let events = self
            .get(&format!("/api/v1/conversations/{id}/events"))
            .send()
            .await
            .unwrap();
        let request = format!("q-{}", uuid_like());
        self.start(
            id,
            json!({"request_id": request, "input": {"type": "message", "text": text, "upload_ids": uploads}}),
        )
        .await;
        tokio::time::timeout(LIMIT, until_finished(events))
            .await
            .unwrap()
    }

    async fn start(&self, id: &str, body: Value) -> String {
        let r = self
            .post(&format!("/api/v1/conversations/{id}/runs"), &body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, 202, "{body}");
        body["run_id"].as_str().unwrap().to_owned()
    }

    async fn settled(&self, id: &str) -> Value {
        tokio::time::timeout(LIMIT, async {
            loop {
                let c = json_of(self, &format!("/api/v1/conversations/{id}")).await;
                if c["status"] != "running" {
                    return c;
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        })
        .await
        .expect("the conversation stayed running")
    }

    async fn running(&self, id: &str) -> Value {
        tokio::time::timeout(LIMIT, async {
            loop {
                let c = json_of(self, &format!("/api/v1/conversations/{id}")).await;
                if c["status"] == "running" {
                    return c;
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        })
        .await
        .expect("the conversation never ran")
    }

    async fn entries(&self, id: &str) -> Vec<Value> {
        json_of(self, &format!("/api/v1/conversations/{id}/messages")).await["entries"]
            .as_array()
            .unwrap()
            .clone()
    }

    async fn pending(&self, id: &str) -> Vec<Value> {
        json_of(self, &format!("/api/v1/conversations/{id}/approvals")).await["pending"]
            .as_array()
            .unwrap()
            .clone()
    }

    async fn decide(&self, id: &str, call: &str, decision: Value) {
        let (status, body) = self
            .send(
                &format!("/api/v1/conversations/{id}/approvals/{call}"),
                decision,
            )
            .await;
        assert_eq!(status, 202, "{body}");
    }

    async fn fork(&self, id: &str, at_seq: u64) -> String {
        let (status, body) = self
            .send(
                &format!("/api/v1/conversations/{id}/fork"),
                json!({"at_seq": at_seq}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    async fn send(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self.post(path, &body).send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn files(&self, id: &str) -> Vec<(String, String)> {
        json_of(self, &format!("/api/v1/conversations/{id}/files")).await["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["id"].as_str().unwrap().to_owned(),
                    f["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    async fn fetch(&self, path: &str) -> (u16, Vec<u8>) {
        let r = self.get(path).send().await.unwrap();
        (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
    }
}

/// A GET of `path` that must succeed: its JSON.
pub async fn json_of(server: &Served, path: &str) -> Value {
    let r = server.get(path).send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "GET {path}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

/// A request id no other request of the process has.
fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// The text of the final answer among `frames` (empty when there is none).
pub fn answer(frames: &[(String, Value)]) -> String {
    frames
        .iter()
        .find(|(e, _)| e == "final_answer")
        .map(|(_, d)| d["text"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// The status the run's `finished` frame gives.
pub fn finished(frames: &[(String, Value)]) -> String {
    frames
        .iter()
        .rev()
        .find(|(e, _)| e == "finished")
        .map(|(_, d)| d["status"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// The `seq` of the first entry whose role is `role` and whose text starts with `prefix`.
pub fn seq_of(entries: &[Value], role: &str, prefix: &str) -> u64 {
    entries
        .iter()
        .find(|e| e["entry"]["role"] == role && entry_text(e).starts_with(prefix))
        .unwrap_or_else(|| panic!("no {role} entry starting {prefix:?} in {entries:#?}"))["seq"]
        .as_u64()
        .unwrap()
}

/// The `seq` of the first entry whose role is `role` and whose text starts with `prefix`, once
/// `server` lists it: a run holds the conversation before its question is appended.
pub async fn seq_when(server: &Served, id: &str, role: &str, prefix: &str) -> u64 {
    tokio::time::timeout(LIMIT, async {
        loop {
            let entries = server.entries(id).await;
            let found = entries
                .iter()
                .any(|e| e["entry"]["role"] == role && entry_text(e).starts_with(prefix));
            if found {
                return seq_of(&entries, role, prefix);
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {role} entry starting {prefix:?} appeared"))
}

/// The text blocks of a transcript entry, joined.
pub fn entry_text(e: &Value) -> String {
    match &e["entry"]["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The token the servers of the journeys take.
#[allow(
    dead_code,
    reason = "named by the journeys that build URLs for a person"
)]
pub const SERVER_TOKEN: &str = TOKEN;
