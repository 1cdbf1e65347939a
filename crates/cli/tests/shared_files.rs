#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
//! A conversation's files where servers share a store, through `ba-agent serve` and the
//! scripted model of `ba-testkit`: two servers on one PostgreSQL database (each with its own
//! home and temporary folder, as on two machines) share every upload and output; and uploads
//! and downloads stream, the server's peak memory growing by far less than the file, on
//! PostgreSQL and on the file store.
//!
//! The PostgreSQL tests need `BA_AGENT_TEST_DATABASE_URL` (`eval "$(bash .ci/postgres.sh)"`);
//! without it they say they are skipped, and fail under `CI=true`. Each uses a fresh schema.

mod support;

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use ba_testkit::model::{ScriptedModel, Turn};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use support::Served;
use support::files::{Digest, complete, config, hex, output_ids, serve, serve_in};

const MIB: u64 = 1 << 20;

/// The database of the PostgreSQL tests, or `None` after a "skipping" message (a failure
/// under CI).
fn database_url() -> Option<String> {
    ba_testkit::require_env(
        "BA_AGENT_TEST_DATABASE_URL",
        "run `eval \"$(bash .ci/postgres.sh)\"` to start a server",
    )
}

/// The configuration lines of a fresh schema of `url`, so that tests never see each other's
/// conversations.
fn database_lines(url: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("ba_shared_files_{}_{nanos}", std::process::id());
    format!("database_url: {url}\ndatabase_schema: {schema}\n")
}

/// The code `run_python` runs on the second server: it reads the upload under its own name
/// and writes an output.
const SUMMARY_CODE: &str = "\
rows = open('regions.csv').read().splitlines()
open('outputs/summary.txt', 'w').write('rows: %d, last: %s\\n' % (len(rows) - 1, rows[-1]))
print('summary written')
";

const REGIONS: &str = "region,amount\nNorth,120\nSouth,340\nKowloon,77\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_uploaded_to_one_server_is_read_by_a_run_on_another_and_its_output_comes_back() {
    let Some(url) = database_url() else { return };
    if !ba_testkit::require_tool("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedModel::builder()
        .rule(
            "read the upload by its id",
            |r| r.offers("file_reader") && r.round() == 0 && !r.uploads().is_empty(),
            |r| {
                Turn::calls(
                    r.uploads()
                        .iter()
                        .map(|u| ("file_reader", json!({"path": u}))),
                )
            },
        )
        .rule(
            "summarise it in an output",
            |r| {
                r.last_result()
                    .is_some_and(|t| t.name == "file_reader" && !t.is_error)
            },
            |_| Turn::call("run_python", json!({"code": SUMMARY_CODE})),
        )
        .rule(
            "report with the output",
            |r| r.last_result().is_some_and(|t| t.name == "run_python"),
            |r| {
                let ids = output_ids(&r.last_result().unwrap().text);
                complete("The summary is attached.", &ids)
            },
        )
        .start()
        .await;
    let extra = format!("max_rounds: 6\n{}", database_lines(&url));
    let config = config(dir.path(), &model, &extra);
    let one = serve_in(
        &dir.path().join("home-1"),
        &config,
        Some(&dir.path().join("tmp-1")),
    )
    .await;
    let two = serve_in(
        &dir.path().join("home-2"),
        &config,
        Some(&dir.path().join("tmp-2")),
    )
    .await;

    // Uploaded to the first server…
    let id = one.create().await;
    let meta = one
        .upload(&id, "regions.csv", "text/csv", REGIONS.as_bytes())
        .await;
    assert_eq!(meta["id"], "upload_001");
    assert_eq!(meta["size"], REGIONS.len());

    // …read by a run on the second.
    let frames = two
        .run(&id, "r1", "Summarise the regions.", &["upload_001"])
        .await;
    assert!(
        frames.iter().any(|(e, _)| e == "final_answer"),
        "{frames:#?}"
    );
    let requests = model.requests();
    assert!(
        requests[0]
            .last_user_text()
            .contains("<file_ref>upload_001</file_ref>"),
        "the message names the upload: {}",
        requests[0].last_user_text()
    );
    let read = requests
        .iter()
        .flat_map(|r| r.tool_results())
        .find(|t| t.name == "file_reader")
        .expect("the model saw file_reader's result");
    assert!(!read.is_error, "{read:#?}");
    for shown in ["region", "amount", "Kowloon", "340"] {
        assert!(read.text.contains(shown), "{shown} in {read:#?}");
    }
    let python = requests
        .iter()
        .flat_map(|r| r.tool_results())
        .find(|t| t.name == "run_python")
        .expect("the model saw run_python's result");
    assert!(!python.is_error, "{python:#?}");
    assert_eq!(output_ids(&python.text), ["output_001"], "{}", python.text);

    // The upload downloads byte for byte from either server.
    for server in [&one, &two] {
        let (status, _, back) = server
            .bytes(&format!("/api/v1/conversations/{id}/files/upload_001"))
            .await;
        assert_eq!(status, 200);
        assert_eq!(back, REGIONS.as_bytes(), "from {}", server.base);
    }
    // What run_python wrote on the second server downloads from the first.
    let (status, media, summary) = one
        .bytes(&format!("/api/v1/conversations/{id}/files/output_001"))
        .await;
    assert_eq!(status, 200);
    assert!(media.starts_with("text/plain"), "{media}");
    assert_eq!(
        String::from_utf8(summary).unwrap(),
        "rows: 3, last: Kowloon,77\n"
    );
    let listed = one.json(&format!("/api/v1/conversations/{id}/files")).await;
    let kinds: Vec<(&str, &str)> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["id"].as_str().unwrap(), f["kind"].as_str().unwrap()))
        .collect();
    assert!(kinds.contains(&("upload_001", "upload")), "{listed}");
    assert!(kinds.contains(&("output_001", "output")), "{listed}");
    // Neither server kept the files on its disk: they are in the database.
    for home in ["home-1", "home-2"] {
        let files = dir.path().join(home).join("conversations").join(&id);
        assert!(!files.exists(), "{} exists", files.display());
    }
    one.terminate().await;
    two.terminate().await;
}

/// A field of `/proc/<pid>/status` in KiB (`VmHWM`: the peak resident memory; `VmRSS`: the
/// resident memory now).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Resets the peak resident memory of `pid` to what it holds now (`clear_refs` 5); whether the
/// kernel allowed it.
fn reset_peak(pid: u32) -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/clear_refs"))
        .and_then(|mut f| f.write_all(b"5"))
        .is_ok()
}

/// Writes `size` bytes of a pseudo-random pattern (which no layer can compress) to `path`, a
/// MiB at a time; their SHA-256.
fn write_pattern(path: &Path, size: u64, seed: u64) -> String {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let (mut hasher, mut state, mut left) = (Sha256::new(), seed | 1, size);
    let mut block = vec![0u8; MIB as usize];
    while left > 0 {
        for word in block.chunks_exact_mut(8) {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        let n = usize::try_from(left.min(MIB)).unwrap();
        hasher.update(&block[..n]);
        file.write_all(&block[..n]).unwrap();
        left -= n as u64;
    }
    file.flush().unwrap();
    hex(&hasher.finalize())
}

/// What one upload and download of a file cost the server, in KiB.
#[derive(Debug)]
struct Cost {
    size: u64,
    rss_before: u64,
    peak_before: u64,
    peak_after: u64,
}

impl Cost {
    fn growth(&self) -> u64 {
        self.peak_after.saturating_sub(self.peak_before)
    }
}

/// Uploads `size` bytes to a new conversation of `server` streamed from a file, downloads the
/// file whole, checks its size and SHA-256, and measures the server's peak memory around both.
async fn upload_and_download(server: &Served, dir: &Path, size: u64, seed: u64) -> Cost {
    let path = dir.join(format!("pattern-{size}.bin"));
    let sha256 = write_pattern(&path, size, seed);
    let id = server.create().await;
    let pid = server.child.id().unwrap();
    reset_peak(pid);
    let rss_before = status_kib(pid, "VmRSS");
    let peak_before = status_kib(pid, "VmHWM");
    let meta = server
        .upload_file(&id, "pattern.bin", "application/octet-stream", &path)
        .await;
    assert_eq!(meta["size"], size, "{meta}");
    let upload = meta["id"].as_str().unwrap();
    let got = server
        .digest(&format!("/api/v1/conversations/{id}/files/{upload}"))
        .await;
    assert_eq!(
        got,
        Digest {
            status: 200,
            size,
            sha256
        },
        "the download is the upload"
    );
    let peak_after = status_kib(pid, "VmHWM");
    std::fs::remove_file(&path).unwrap();
    Cost {
        size,
        rss_before,
        peak_before,
        peak_after,
    }
}

/// The largest upload the server takes by default: a file of 50 MiB.
const LARGE: u64 = 50 * MIB;

/// A small upload and download first (so that what the first request of all sets up is not
/// counted), then 5 MiB, then [`LARGE`], each measured; the large one must grow the peak by
/// far less than the file.
async fn streams(server: &Served, backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let pid = server.child.id().unwrap();
    if !reset_peak(pid) {
        eprintln!("{backend}: /proc/{pid}/clear_refs refused: each peak is measured from the last");
    }
    upload_and_download(server, dir.path(), 256 * 1024, 1).await;
    let small = upload_and_download(server, dir.path(), 5 * MIB, 2).await;
    let large = upload_and_download(server, dir.path(), LARGE, 3).await;
    for cost in [&small, &large] {
        eprintln!(
            "{backend}: {:.2} MiB up and down: VmRSS before {} KiB, VmHWM before {} KiB, \
             after {} KiB: the peak grew by {} KiB ({:.1}% of the file)",
            cost.size as f64 / MIB as f64,
            cost.rss_before,
            cost.peak_before,
            cost.peak_after,
            cost.growth(),
            cost.growth() as f64 * 1024.0 * 100.0 / cost.size as f64,
        );
    }
    assert!(
        large.growth() < 25 * 1024,
        "{backend}: the peak memory grew by {} KiB for a {} byte file: {large:?}",
        large.growth(),
        large.size
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_and_downloads_stream_through_postgres() {
    let Some(url) = database_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedModel::builder().start().await;
    let config = config(dir.path(), &model, &database_lines(&url));
    let server = serve_in(
        &dir.path().join("home"),
        &config,
        Some(&dir.path().join("tmp")),
    )
    .await;
    streams(&server, "postgres").await;
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_and_downloads_stream_through_the_file_store() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedModel::builder().start().await;
    let config = config(dir.path(), &model, "");
    let server = serve(&dir.path().join("home"), &config).await;
    streams(&server, "file store").await;
    server.terminate().await;
}

/// `ba-agent run --config CONFIG --home HOME --conversation ID --task TASK`, started.
fn cli_run(config: &Path, home: &Path, id: &str, task: &str) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .arg("run")
        .arg("--config")
        .arg(config)
        .arg("--home")
        .arg(home)
        .args(["--conversation", id, "--task", task])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// One run per conversation across front ends sharing PostgreSQL: a `ba-agent run` holding a
/// conversation makes `serve` refuse a run there with a 409 that names it; `ba-agent cancel`
/// stops it through the store; once its process is gone, the server runs the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_run_and_a_server_share_one_lease_on_postgres() {
    let Some(url) = database_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedModel::builder()
        .rule(
            "hold the slow question open",
            |r| r.last_user_text().contains("slow"),
            |_| Turn::hold(),
        )
        .rule(
            "answer the quick one",
            |r| r.last_user_text().contains("quick"),
            |_| complete("Quick answer.", &[]),
        )
        .start()
        .await;
    let config = config(dir.path(), &model, &database_lines(&url));
    let home = dir.path().join("home-cli");
    let server = serve(&dir.path().join("home-serve"), &config).await;
    let id = server.create().await;

    let mut cli = cli_run(&config, &home, &id, "A slow question.");
    let cli_pid = cli.id().unwrap();
    tokio::time::timeout(Duration::from_secs(120), model.wait_for_requests(1))
        .await
        .expect("the CLI run never called the model");

    let refused = server
        .post(
            &format!("/api/v1/conversations/{id}/runs"),
            &json!({"request_id": "r-busy", "input": {"type": "message", "text": "A quick one."}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 409);
    let body: Value = refused.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("ba-agent run, pid {cli_pid} on ")),
        "the refusal names the CLI run: {body}"
    );
    let holder_run = body["active_run_id"].as_str().unwrap().to_owned();
    assert!(holder_run.starts_with("run_"), "{body}");

    // Cancelled through the store, from a third process.
    let cancel = tokio::process::Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .env_remove("BA_AGENT_CONFIG")
        .env_remove("BA_AGENT_HOME")
        .arg("cancel")
        .arg(&id)
        .arg("--config")
        .arg(&config)
        .arg("--home")
        .arg(&home)
        .args(["--run", &holder_run])
        .output()
        .await
        .unwrap();
    assert!(
        cancel.status.success(),
        "{}{}",
        String::from_utf8_lossy(&cancel.stdout),
        String::from_utf8_lossy(&cancel.stderr)
    );
    let status = tokio::time::timeout(Duration::from_secs(120), cli.wait())
        .await
        .expect("the CLI run did not stop")
        .unwrap();
    assert_eq!(status.code(), Some(1), "a cancelled run is not a success");

    // Free: the server's run goes through.
    let frames = server.run(&id, "r-after", "A quick one.", &[]).await;
    assert!(
        frames.iter().any(|(e, _)| e == "final_answer"),
        "{frames:#?}"
    );

    // A CLI run killed while it holds the conversation: PostgreSQL ends its session with the
    // process, and with it the lease, so the server runs the conversation next.
    let seen = model.requests().len();
    let mut killed = cli_run(&config, &home, &id, "Another slow question.");
    tokio::time::timeout(Duration::from_secs(120), model.wait_for_requests(seen + 1))
        .await
        .expect("the second CLI run never called the model");
    killed.start_kill().unwrap();
    killed.wait().await.unwrap();
    // The server learns of the dead session when its socket closes; the run is refused only
    // until then (a 409 names the dead run, and the retry uses a fresh request id).
    let mut attempt = 0;
    let frames = loop {
        attempt += 1;
        let events = server
            .get(&format!("/api/v1/conversations/{id}/events"))
            .send()
            .await
            .unwrap();
        let start = server
            .post(
                &format!("/api/v1/conversations/{id}/runs"),
                &json!({"request_id": format!("r-takeover-{attempt}"),
                        "input": {"type": "message", "text": "A quick one again."}}),
            )
            .send()
            .await
            .unwrap();
        if start.status() == 202 {
            break tokio::time::timeout(Duration::from_secs(120), support::until_finished(events))
                .await
                .expect("the run after the takeover did not finish");
        }
        assert_eq!(start.status(), 409, "{}", start.text().await.unwrap());
        assert!(attempt < 600, "the killed run's lease was never released");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        frames.iter().any(|(e, _)| e == "final_answer"),
        "{frames:#?}"
    );
}
