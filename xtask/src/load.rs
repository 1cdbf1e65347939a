//! `cargo xtask load [--quick] [--write]`: the HTTP server under load, on loopback only.
//!
//! A server (`ba-server`) runs in this process on 127.0.0.1:0 with a replay model (every
//! conversation asks the same question; each model call is paced so runs overlap) and a tool.
//! N conversations run R rounds each at once; each has an uninterrupted event stream and a
//! second stream that reconnects with `Last-Event-ID` every few frames. Checked: no entry lost
//! or duplicated, every reconnected stream equal to its uninterrupted twin, the time from an
//! entry's append (when the store acknowledged it) to its frame at the client under 50 ms at p99, and
//! the process's peak memory (server and clients together: an upper bound of the server's)
//! under 256 MB. `--write` puts the figures in `docs/BENCHMARKS.md`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ba_agent::Agent;
use ba_model::{DeltaSink, ModelClient, ModelError, ModelRequest, ModelResponse, ReplayClient};
use ba_protocol::LogRole;
use ba_server::{AppState, ServerConfig, Token};
use futures::StreamExt as _;
use serde_json::{Value, json};

const TOKEN: &str = "load-test-token";
const QUESTION: &str = "Summarise the sales of every region.";

struct Plan {
    conversations: usize,
    rounds: usize,
    reconnects: usize,
    pace: Duration,
}

/// Answers by where the request stands: the question opens round 1, the result of `call_k`
/// round k + 1, and the last round gives the final answer.
struct LoadModel {
    rounds: usize,
    pace: Duration,
}

#[async_trait::async_trait]
impl ModelClient for LoadModel {
    fn provider(&self) -> &str {
        "replay"
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        // Pacing spreads the runs over time so streams reconnect while runs go on.
        tokio::time::sleep(self.pace).await;
        let last = request
            .entries
            .iter()
            .rev()
            .find(|e| matches!(e.role, LogRole::User | LogRole::Tool));
        let done = last
            .and_then(|e| e.tool_call_id.as_deref())
            .and_then(|id| id.strip_prefix("call_"))
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        let message = if done + 1 >= self.rounds {
            json!({"role": "assistant", "content": "West led with 41 % of the sales; every region grew."})
        } else {
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "Looking the figures up, region by region."},
                {"type": "tool_use", "id": format!("call_{}", done + 1), "name": "lookup",
                 "input": {"region": format!("r{}", done + 1)}}]})
        };
        let stop = if done + 1 >= self.rounds {
            "end_turn"
        } else {
            "tool_use"
        };
        let turn = json!([{"response": {"message": message, "stop_reason": stop}}]);
        let one = ReplayClient::from_json(&turn.to_string(), "load")?;
        one.complete_streaming(request, on_delta).await
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct LookupArgs {
    region: String,
}

#[derive(Debug, Clone, PartialEq)]
struct Frame {
    id: String,
    event: String,
    data: Value,
}

/// Reads SSE frames from a response body.
struct Reader {
    body: futures::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    buf: String,
}

impl Reader {
    fn new(r: reqwest::Response) -> Self {
        Self {
            body: r.bytes_stream().boxed(),
            buf: String::new(),
        }
    }

    async fn next(&mut self) -> anyhow::Result<Frame> {
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                let (mut id, mut event, mut data) = (String::new(), String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                ensure!(
                    !id.is_empty() && !event.is_empty(),
                    "a frame without id or event: {block}"
                );
                return Ok(Frame {
                    id,
                    event,
                    data: serde_json::from_str(&data)?,
                });
            }
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.body.next())
                .await
                .context("a stream stalled for 60 s")?
                .context("a stream ended early")??;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

struct Outcome {
    entries: usize,
    lost_or_duplicated: usize,
    latencies_ms: Vec<i64>,
    reconnects: usize,
    mismatched: usize,
}

async fn open(
    http: &reqwest::Client,
    base: &str,
    conv: &str,
    after: Option<&str>,
) -> anyhow::Result<Reader> {
    let mut req = http
        .get(format!("{base}/api/v1/conversations/{conv}/events"))
        .bearer_auth(TOKEN);
    if let Some(id) = after {
        req = req.header("Last-Event-ID", id);
    }
    let r = req.send().await?;
    ensure!(r.status() == 200, "events: {}", r.status());
    Ok(Reader::new(r))
}

/// One conversation: a run, its uninterrupted stream and its reconnecting twin.
async fn conversation(
    http: reqwest::Client,
    base: String,
    plan: Arc<Plan>,
    reconnects: usize,
    start_after: Duration,
) -> anyhow::Result<Outcome> {
    // Starts are spread over one model call's time, as people's questions are.
    tokio::time::sleep(start_after).await;
    let created: Value = http
        .post(format!("{base}/api/v1/conversations"))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await?
        .json()
        .await?;
    let conv = created["id"].as_str().context("no id")?.to_owned();
    let mut whole = open(&http, &base, &conv, None).await?;
    let mut twin = open(&http, &base, &conv, None).await?;
    let run = http
        .post(format!("{base}/api/v1/conversations/{conv}/runs"))
        .bearer_auth(TOKEN)
        .json(&json!({"request_id": "load-1", "input": {"type": "message", "text": QUESTION}}))
        .send()
        .await?;
    ensure!(run.status() == 202, "runs: {}", run.status());
    let reference = async {
        let mut frames = Vec::new();
        let mut latencies = Vec::new();
        loop {
            let f = whole.next().await?;
            if f.event == "entry"
                && let Some(at) = f.data["appended_ms"].as_i64()
            {
                latencies.push(now_ms() - at);
            }
            let done = f.event == "finished";
            frames.push(f);
            if done {
                return anyhow::Ok((frames, latencies));
            }
        }
    };
    let reconnecting = async {
        let mut frames: Vec<Frame> = Vec::new();
        let mut done_reconnects = 0;
        loop {
            let f = twin.next().await?;
            let done = f.event == "finished";
            frames.push(f);
            if done {
                return anyhow::Ok((frames, done_reconnects));
            }
            if done_reconnects < reconnects && frames.len().is_multiple_of(6) {
                let last = frames.last().map(|f| f.id.clone());
                twin = open(&http, &base, &conv, last.as_deref()).await?;
                done_reconnects += 1;
            }
        }
    };
    let ((frames, latencies_ms), (twin_frames, reconnects)) =
        tokio::try_join!(reference, reconnecting)?;
    let seqs: Vec<u64> = frames
        .iter()
        .filter(|f| f.event == "entry")
        .filter_map(|f| f.data["seq"].as_u64())
        .collect();
    let expected: Vec<u64> = (1..=(2 * plan.rounds as u64)).collect();
    let lost_or_duplicated = if seqs == expected {
        0
    } else {
        expected.len().abs_diff(seqs.len()).max(1)
    };
    Ok(Outcome {
        entries: seqs.len(),
        lost_or_duplicated,
        latencies_ms,
        reconnects,
        mismatched: usize::from(twin_frames != frames),
    })
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let quick = args.iter().any(|a| a == "--quick");
    let write = args.iter().any(|a| a == "--write");
    let plan = Arc::new(if quick {
        Plan {
            conversations: 8,
            rounds: 3,
            reconnects: 16,
            pace: Duration::from_millis(10),
        }
    } else {
        Plan {
            conversations: 50,
            rounds: 5,
            reconnects: 200,
            pace: Duration::from_millis(40),
        }
    });
    let dir = tempfile_dir()?;
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let store = Arc::new(ba_storage::FileStore::open(dir.join("store"))?);
    let agent = Agent::builder(Arc::new(LoadModel {
        rounds: plan.rounds,
        pace: plan.pace,
    }))
    .store(store)
    .tool(ba_tools::typed_tool(
        "lookup",
        "Sales of a region.",
        |a: LookupArgs, _| async move { Ok(json!({"region": a.region, "sales": 1234.5})) },
    ))
    .configure(|s| s.model = "load-model".into())
    .build()?;
    let state = AppState::new(agent, ServerConfig::new());
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server_rt.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let token = Token::new(TOKEN).context("token")?;
        ba_server::serve(listener, state, ba_server::Auth::Token(token), async {
            let _ = stopped.await;
        })
        .await?;
        anyhow::Ok(())
    });
    let started = Instant::now();
    let outcomes = client_rt.block_on(async {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .build()?;
        let per = plan.reconnects.div_ceil(plan.conversations);
        let tasks: Vec<_> = (0..plan.conversations)
            .map(|i| {
                let start_after = plan.pace * u32::try_from(i).unwrap_or(0)
                    / u32::try_from(plan.conversations).unwrap_or(1);
                tokio::spawn(conversation(
                    http.clone(),
                    base.clone(),
                    Arc::clone(&plan),
                    per,
                    start_after,
                ))
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.context("a client task failed")??);
        }
        anyhow::Ok(out)
    })?;
    let wall = started.elapsed();
    let _ = stop.send(());
    let _ = server_rt.block_on(serving);
    let peak = peak_rss_mb().unwrap_or(f64::NAN);
    let _ = std::fs::remove_dir_all(&dir);

    let mut latencies: Vec<i64> = outcomes
        .iter()
        .flat_map(|o| o.latencies_ms.iter().copied())
        .collect();
    latencies.sort_unstable();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    let entries: usize = outcomes.iter().map(|o| o.entries).sum();
    let lost: usize = outcomes.iter().map(|o| o.lost_or_duplicated).sum();
    let reconnects: usize = outcomes.iter().map(|o| o.reconnects).sum();
    let mismatched: usize = outcomes.iter().map(|o| o.mismatched).sum();
    let mut report = String::new();
    let _ = writeln!(report, "| figure | value | bound |\n|---|---|---|");
    let _ = writeln!(
        report,
        "| conversations × rounds | {} × {} | |",
        plan.conversations, plan.rounds
    );
    let _ = writeln!(report, "| entries streamed | {entries} | |");
    let _ = writeln!(report, "| entries lost or duplicated | {lost} | 0 |");
    let _ = writeln!(
        report,
        "| entry appended → frame at the client, p50 / p99 / max | {} / {} / {} ms | p99 < 50 ms |",
        pct(0.5),
        pct(0.99),
        latencies.last().copied().unwrap_or(0)
    );
    let _ = writeln!(
        report,
        "| reconnects with `Last-Event-ID`, not equal to the uninterrupted stream | {reconnects}, {mismatched} | 0 |"
    );
    let _ = writeln!(
        report,
        "| peak memory of the process (server and clients) | {peak:.0} MB | < 256 MB |"
    );
    let _ = writeln!(report, "| wall time | {:.2} s | |", wall.as_secs_f64());
    println!("{report}");
    ensure!(lost == 0, "{lost} entries lost or duplicated");
    ensure!(
        mismatched == 0,
        "{mismatched} reconnected streams differ from their twins"
    );
    ensure!(
        reconnects >= plan.reconnects,
        "only {reconnects} reconnects happened"
    );
    if quick {
        // CI's short run: a debug build, 48 entries (so p99 is the slowest frame, usually the
        // first connection's) on a shared machine. Exactness is checked; the latency goal is
        // the full run's.
        if pct(0.99) >= 50 {
            eprintln!(
                "note: p99 latency {} ms in the short run (goal < 50 ms in the full run)",
                pct(0.99)
            );
        }
    } else {
        ensure!(pct(0.99) < 50, "p99 latency {} ms", pct(0.99));
    }
    if peak.is_finite() {
        ensure!(peak < 256.0, "peak memory {peak:.0} MB");
    }
    if write {
        write_section(&report)?;
    }
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("ba-agent-load-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Replaces the load section of `docs/BENCHMARKS.md` (kept by `cargo xtask bench`).
fn write_section(report: &str) -> anyhow::Result<()> {
    const HEADING: &str = "## HTTP server under load";
    let path = crate::root().join("docs/BENCHMARKS.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let section = format!(
        "{HEADING}\n\nWritten by `cargo xtask load` (loopback only): 50 conversations of 5 rounds at once\n\
         on a paced replay model (starts spread over one call's time), each with an uninterrupted\n\
         event stream and a twin that reconnects with `Last-Event-ID` every 6 frames. Latency is\n\
         from an entry's append (when the store acknowledged it) to its frame at the client;\n\
         memory is the whole process's peak (server and clients), an upper bound of the\n\
         server's. The machine is shared (two cores, other builds running): the tail varies from\n\
         run to run. `.ci/run` and `cargo xtask ci` run a short version (8 conversations of 3\n\
         rounds, a debug build) that checks exactness and memory and reports its latency.\n\n{report}"
    );
    let text = match old.find(HEADING) {
        Some(start) => {
            let rest = &old[start + HEADING.len()..];
            let end = rest
                .find("\n## ")
                .map_or(old.len(), |i| start + HEADING.len() + i + 1);
            format!("{}{section}{}", &old[..start], &old[end..])
        }
        None => format!(
            "{}\n{section}",
            old.trim_end_matches('\n').to_owned() + "\n"
        ),
    };
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
}
