//! Runs over HTTP and their event streams: a whole conversation, idempotent retries, 409 when
//! busy, reconnects with `Last-Event-ID`, cancel then continue, a kill mid-run then resume.

use serde_json::{Value, json};

use crate::harness::{Api, Frame, Model, Server, dir, text_turn, tool_turn, two_rounds};

const Q: &str = "How many rows has the sales table?";

fn message(text: &str) -> Value {
    json!({"type": "message", "text": text})
}

/// Checks the frames of one run: ids grow, entries are gap-free from `first_seq`, the run ends
/// with `finished`.
fn check_run(frames: &[Frame], first_seq: u64) {
    let mut last: Option<(u64, u64)> = None;
    let mut seq = first_seq;
    for f in frames {
        let cursor = match f.id.split_once('.') {
            Some((s, k)) => (s.parse().unwrap(), k.parse().unwrap()),
            None => (f.id.parse().unwrap(), 0),
        };
        assert!(
            last.is_none_or(|l| cursor > l),
            "ids grow: {f:?} after {last:?}"
        );
        last = Some(cursor);
        if f.event == "entry" {
            assert_eq!(f.data["seq"], seq, "entries are gap-free: {f:?}");
            assert_eq!(f.id, seq.to_string());
            seq += 1;
        }
    }
    assert_eq!(frames.last().map(|f| f.event.as_str()), Some("finished"));
}

fn events(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.event.as_str()).collect()
}

#[tokio::test]
async fn a_whole_conversation_over_http() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&two_rounds(Q), 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let mut stream = api.events(&id, None).await;
    let r = api.run(&id, "req-1", message(Q)).await;
    assert_eq!(r.status(), 202);
    let run_id = r.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let frames = stream.until("finished").await;
    check_run(&frames, 1);
    let names = events(&frames);
    for e in [
        "run_started",
        "round_started",
        "context_status",
        "text_delta",
        "model_answered",
        "tool_call_started",
        "tool_result",
        "final_answer",
        "finished",
    ] {
        assert!(names.contains(&e), "{e} missing from {names:?}");
    }
    assert!(frames.iter().all(|f| f.data["run_id"] == run_id.as_str()));
    let status = frames.iter().find(|f| f.event == "context_status").unwrap();
    assert!(status.data["used"].as_u64().unwrap() > 0);
    assert_eq!(status.data["status"], "normal");
    let fin = frames.iter().find(|f| f.event == "final_answer").unwrap();
    assert_eq!(fin.data["text"], "There are 42 rows.");
    assert_eq!(frames.last().unwrap().data["status"], "answered");
    // The transcript: 4 entries (question, call, result, answer), the answer processed.
    let messages = api
        .json(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    let entries = messages["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 4);
    assert!(
        entries[0]["entry"]
            .to_string()
            .contains(r#""request_id":"req-1""#),
        "{entries:#?}"
    );
    assert!(entries[3]["api_response"].is_object());
    assert!(entries[1]["usage"].is_object());
    assert!(
        entries.iter().all(|e| e["in_window"] == true),
        "a short conversation is seen whole: {entries:#?}"
    );
    let tail = api
        .json(&format!("/api/v1/conversations/{id}/messages?from_seq=3"))
        .await;
    assert_eq!(tail["entries"].as_array().unwrap().len(), 2);
    let conv = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "idle");
    let report = api
        .json(&format!("/api/v1/conversations/{id}/report"))
        .await;
    assert_eq!(report["model_calls"], 2);
    let context = api
        .json(&format!("/api/v1/conversations/{id}/context"))
        .await;
    assert!(context["usage"]["used"].as_u64().unwrap() > 0);
    assert_eq!(context["next_call"]["kept"].as_array().unwrap().len(), 4);
    assert_eq!(context["last_call"]["seq"], 4);
    assert_eq!(
        server.tool_calls.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[tokio::test]
async fn a_retried_post_returns_the_same_run_and_runs_the_tools_once() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&two_rounds(Q), 0).gated());
    let api = Api::new(&server);
    let id = api.create().await;
    let mut stream = api.events(&id, None).await;
    let (a, b) = tokio::join!(
        api.run(&id, "same", message(Q)),
        api.run(&id, "same", message(Q))
    );
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (202, 202));
    let a: Value = a.json().await.unwrap();
    let b: Value = b.json().await.unwrap();
    assert_eq!(a["run_id"], b["run_id"]);
    server.model.release(2);
    stream.until("finished").await;
    let again: Value = api.run(&id, "same", message(Q)).await.json().await.unwrap();
    assert_eq!(again["run_id"], a["run_id"]);
    assert_eq!(
        server.tool_calls.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    let messages = api
        .json(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    assert_eq!(
        messages["entries"].as_array().unwrap().len(),
        4,
        "one question, one run"
    );
}

#[tokio::test]
async fn a_busy_conversation_answers_409_with_the_active_run() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&two_rounds(Q), 0).gated());
    let api = Api::new(&server);
    let id = api.create().await;
    let mut stream = api.events(&id, None).await;
    let first: Value = api.run(&id, "r1", message(Q)).await.json().await.unwrap();
    let second = api.run(&id, "r2", message("another")).await;
    assert_eq!(second.status(), 409);
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["active_run_id"], first["run_id"]);
    assert_eq!(body["error"]["code"], "busy");
    let conv = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "running");
    assert_eq!(conv["active_run_id"], first["run_id"]);
    server.model.release(2);
    stream.until("finished").await;
    // Free again as soon as `finished` was sent.
    let third = api.run(&id, "r3", message("again")).await;
    assert_eq!(third.status(), 202);
}

#[tokio::test]
async fn a_reconnect_with_last_event_id_loses_and_repeats_nothing() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&two_rounds(Q), 0).gated());
    let api = Api::new(&server);
    let id = api.create().await;
    let mut whole = api.events(&id, None).await;
    let mut first = api.events(&id, None).await;
    let r = api.run(&id, "r1", message(Q)).await;
    assert_eq!(r.status(), 202);
    server.model.release(1);
    // Read until the tool's result is in; the second model call waits at the gate.
    let mut seen = Vec::new();
    loop {
        let f = first.next().await.unwrap();
        let done = f.event == "tool_result";
        seen.push(f);
        if done {
            break;
        }
    }
    drop(first);
    let last_id = seen.last().unwrap().id.clone();
    let mut resumed = api.events(&id, Some(&last_id)).await;
    server.model.release(1);
    seen.extend(resumed.until("finished").await);
    let reference = whole.until("finished").await;
    assert_eq!(
        seen, reference,
        "the reconnected stream is the uninterrupted one"
    );
    check_run(&seen, 1);

    // From the log, when memory does not hold the cursor (another process's id): every entry
    // after it, nothing before.
    let mut from_log = api.events(&id, Some("2.5")).await;
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(from_log.next().await.unwrap());
    }
    assert_eq!(events(&got), ["entry", "entry"]);
    assert_eq!(
        (got[0].data["seq"].as_u64(), got[1].data["seq"].as_u64()),
        (Some(3), Some(4))
    );
    // A cursor past the end of the log asks the client to reload.
    let mut reset = api.events(&id, Some("99")).await;
    assert_eq!(reset.next().await.unwrap().event, "reset");
}

#[tokio::test]
async fn cancel_mid_stream_keeps_the_partial_answer_and_continue_goes_on() {
    let (_d, path) = dir();
    let turns = vec![text_turn(
        "Resumed: 42 rows.",
        json!({"role": "user", "text": "continue"}),
    )];
    let server = Server::start(&path, Model::new(&turns, 0).hanging(0));
    let api = Api::new(&server);
    let id = api.create().await;
    let mut stream = api.events(&id, None).await;
    let run: Value = api.run(&id, "r1", message(Q)).await.json().await.unwrap();
    let run_id = run["run_id"].as_str().unwrap();
    stream.until("text_delta").await;
    let cancel_url = format!("/api/v1/conversations/{id}/runs/{run_id}/cancel");
    let c = api.post(&cancel_url, json!({})).send().await.unwrap();
    assert_eq!(c.status(), 202);
    assert_eq!(c.json::<Value>().await.unwrap()["state"], "cancelling");
    let frames = stream.until("finished").await;
    let names = events(&frames);
    assert_eq!(
        &names[names.len() - 3..],
        ["entry", "cancelled", "finished"],
        "{frames:#?}"
    );
    let entry = &frames[names.len() - 3].data["entry"];
    assert_eq!(entry["llm_error"]["kind"], "cancelled");
    assert_eq!(entry["llm_error"]["partial_output"], "partial ");
    assert_eq!(frames.last().unwrap().data["status"], "cancelled");
    // Idempotent.
    let again = api.post(&cancel_url, json!({})).send().await.unwrap();
    assert_eq!(again.status(), 202);
    assert_eq!(again.json::<Value>().await.unwrap()["state"], "not_running");
    let conv = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "interrupted");
    let r = api.run(&id, "r2", json!({"type": "continue"})).await;
    assert_eq!(r.status(), 202);
    let frames = stream.until("finished").await;
    let fin = frames.iter().find(|f| f.event == "final_answer").unwrap();
    assert_eq!(fin.data["text"], "Resumed: 42 rows.");
    assert_eq!(frames.last().unwrap().data["status"], "answered");
}

#[tokio::test]
async fn a_server_killed_mid_run_resumes_to_the_same_answer() {
    let (_d, path) = dir();
    let turns = two_rounds(Q);
    // The uninterrupted answer, for comparison.
    let (_d2, path2) = dir();
    let reference = {
        let server = Server::start(&path2, Model::new(&turns, 0));
        let api = Api::new(&server);
        let id = api.create().await;
        let mut s = api.events(&id, None).await;
        api.run(&id, "r1", message(Q)).await;
        let frames = s.until("finished").await;
        frames
            .iter()
            .find(|f| f.event == "final_answer")
            .unwrap()
            .data["response"]
            .clone()
    };
    let server = Server::start(&path, Model::new(&turns, 0).gated());
    let id = {
        let api = Api::new(&server);
        let id = api.create().await;
        let mut s = api.events(&id, None).await;
        api.run(&id, "r1", message(Q)).await;
        server.model.release(1);
        s.until("tool_result").await;
        id
    };
    server.kill();
    // The second model call never happened; the log ends with the tool's result.
    let server = Server::start(&path, Model::new(&turns, 1));
    let api = Api::new(&server);
    let conv = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "interrupted");
    let mut s = api.events(&id, Some("3")).await;
    assert_eq!(
        api.run(&id, "r2", json!({"type": "resume"})).await.status(),
        202
    );
    let frames = s.until("finished").await;
    check_run(&frames, 4);
    let fin = frames.iter().find(|f| f.event == "final_answer").unwrap();
    assert_eq!(fin.data["response"], reference);
    let conv = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "idle");
    assert!(
        server.shutdown(),
        "graceful shutdown returns with a stream open"
    );
}

#[tokio::test]
async fn a_tool_turn_then_a_second_question_in_the_same_stream() {
    let (_d, path) = dir();
    let mut turns = two_rounds(Q);
    turns.push(tool_turn(
        "call_2",
        json!({"role": "user", "text": "And again?"}),
    ));
    turns.push(text_turn(
        "Still 42.",
        json!({"role": "tool", "tool_call_id": "call_2"}),
    ));
    let server = Server::start(&path, Model::new(&turns, 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let mut s = api.events(&id, None).await;
    api.run(&id, "a", message(Q)).await;
    let mut frames = s.until("finished").await;
    api.run(&id, "b", message("And again?")).await;
    frames.extend(s.until("finished").await);
    let entries: Vec<u64> = frames
        .iter()
        .filter(|f| f.event == "entry")
        .map(|f| f.data["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(entries, (1..=8).collect::<Vec<_>>());
}

#[tokio::test]
async fn shutdown_drains_within_its_bound_and_cancels_what_is_left() {
    let (_d, path) = dir();
    let options = crate::harness::Options {
        drain: std::time::Duration::from_millis(200),
        ..Default::default()
    };
    let server = Server::start_with(&path, Model::new(&two_rounds(Q), 0).gated(), options);
    let id = {
        let api = Api::new(&server);
        let id = api.create().await;
        let mut s = api.events(&id, None).await;
        api.run(&id, "r1", message(Q)).await;
        s.until("round_started").await;
        id
    };
    // The gated run never ends by itself: shutdown waits the drain (200 ms, never less), then
    // cancels it and returns — long before the run would have (a slow machine stays far below
    // the upper bound).
    let start = std::time::Instant::now();
    assert!(server.shutdown(), "serve returned");
    let took = start.elapsed();
    assert!(
        took >= std::time::Duration::from_millis(200),
        "shutdown did not wait the drain: {took:?}"
    );
    assert!(took < crate::harness::LIMIT, "shutdown waited {took:?}");
    // The run waited at the model's gate: it was cancelled, and the log says so.
    let server = Server::start(&path, Model::new(&two_rounds(Q), 0));
    let api = Api::new(&server);
    let messages = api
        .json(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    let last = messages["entries"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last["entry"]["llm_error"]["kind"], "cancelled",
        "{messages:#}"
    );
    let conv = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "interrupted");
}

#[tokio::test]
async fn keep_alive_comments_flow_on_an_idle_stream() {
    let (_d, path) = dir();
    let options = crate::harness::Options {
        keep_alive: std::time::Duration::from_millis(20),
        ..Default::default()
    };
    let server = Server::start_with(&path, Model::new(&[], 0), options);
    let api = Api::new(&server);
    let id = api.create().await;
    let r = api.raw_events(&id).await;
    let mut body = futures::StreamExt::boxed(r.bytes_stream());
    let mut seen = String::new();
    while !seen.contains(":ping") && !seen.contains(": ping") {
        let chunk =
            tokio::time::timeout(crate::harness::LIMIT, futures::StreamExt::next(&mut body))
                .await
                .unwrap()
                .unwrap()
                .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test]
async fn a_message_names_its_uploads_as_file_refs() {
    let (_d, path) = dir();
    let turns = vec![text_turn(
        "Read <file_ref>upload_001</file_ref> and <file_ref>upload_404</file_ref>.",
        json!({"role": "user"}),
    )];
    let server = Server::start(&path, Model::new(&turns, 0));
    let api = Api::new(&server);
    let id = api.create().await;
    let up = api.upload(&id, "targets.csv", b"region,target").await;
    assert_eq!(up.status(), 201);
    let mut s = api.events(&id, None).await;
    let input =
        json!({"type": "message", "text": "Check the targets.", "upload_ids": ["upload_001"]});
    assert_eq!(api.run(&id, "r1", input).await.status(), 202);
    s.until("finished").await;
    let messages = api
        .json(&format!("/api/v1/conversations/{id}/messages"))
        .await;
    let text = messages["entries"][0]["entry"].to_string();
    assert!(
        text.contains("<file_ref>upload_001</file_ref> targets.csv"),
        "{text}"
    );
    // The run was given this conversation's uploads (the agent has no store of its own here):
    // the answer's references are named from them when the answer is logged; one to no upload
    // keeps its id only, and only it is logged as a warning.
    let last = messages["entries"].as_array().unwrap().last().unwrap();
    let refs = &last["api_response"]["metadata"]["file_refs"];
    assert_eq!(refs[0]["file_id"], "upload_001", "{refs}");
    assert_eq!(refs[0]["filename"], "targets.csv", "{refs}");
    assert_eq!(refs[0]["size_bytes"], "region,target".len(), "{refs}");
    assert_eq!(refs[1]["filename"], "", "{refs}");
    let warnings = last["entry"]["warnings"].to_string();
    assert!(
        warnings.contains("upload_404") && !warnings.contains("upload_001"),
        "{warnings}"
    );
    let unknown = json!({"type": "message", "text": "x", "upload_ids": ["upload_009"]});
    assert_eq!(api.run(&id, "r2", unknown).await.status(), 400);
}

#[tokio::test]
async fn compact_appends_its_summary_and_streams_it() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&two_rounds(Q), 0).gated());
    let api = Api::new(&server);
    let id = api.create().await;
    let mut s = api.events(&id, None).await;
    api.run(&id, "r1", message(Q)).await;
    let url = format!("/api/v1/conversations/{id}/compact");
    let busy = api.post(&url, json!({})).send().await.unwrap();
    assert_eq!(busy.status(), 409, "no compaction during a run");
    server.model.release(2);
    s.until("finished").await;
    let done = api.post(&url, json!({})).send().await.unwrap();
    assert_eq!(done.status(), 200);
    let v: Value = done.json().await.unwrap();
    assert_eq!(v["entries"], 4);
    let f = s.next().await.unwrap();
    assert_eq!(
        (f.event.as_str(), f.data["seq"].as_u64()),
        ("entry", Some(5))
    );
    assert_eq!(f.data["entry"]["role"], "system");
}

#[tokio::test]
async fn cancel_during_tool_calls_leaves_them_to_resume() {
    let (_d, path) = dir();
    let options = crate::harness::Options {
        tool_gated: true,
        ..Default::default()
    };
    let server = Server::start_with(&path, Model::new(&two_rounds(Q), 0), options);
    let api = Api::new(&server);
    let id = api.create().await;
    let mut s = api.events(&id, None).await;
    let run: Value = api.run(&id, "r1", message(Q)).await.json().await.unwrap();
    s.until("tool_call_started").await;
    let run_id = run["run_id"].as_str().unwrap();
    let url = format!("/api/v1/conversations/{id}/runs/{run_id}/cancel");
    assert_eq!(
        api.post(&url, json!({})).send().await.unwrap().status(),
        202
    );
    let frames = s.until("finished").await;
    let cancelled = frames.iter().find(|f| f.event == "cancelled").unwrap();
    assert_eq!(cancelled.data["partial_saved"], false);
    assert_eq!(frames.last().unwrap().data["status"], "cancelled");
    assert_eq!(
        server.tool_calls.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    let conv = api.json(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(conv["status"], "interrupted", "a call without its result");
    server.tool_gate.add_permits(1);
    assert_eq!(
        api.run(&id, "r2", json!({"type": "resume"})).await.status(),
        202
    );
    let frames = s.until("finished").await;
    assert!(frames.iter().any(|f| f.event == "tool_result"));
    let fin = frames.iter().find(|f| f.event == "final_answer").unwrap();
    assert_eq!(fin.data["text"], "There are 42 rows.");
    assert_eq!(
        server.tool_calls.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[tokio::test]
async fn a_client_joining_mid_round_gets_a_sync_frame_and_catches_up_from_the_log() {
    let (_d, path) = dir();
    let turns = vec![text_turn(
        "Resumed: 42 rows.",
        json!({"role": "user", "text": "continue"}),
    )];
    let server = Server::start(&path, Model::new(&turns, 0).hanging(0));
    let api = Api::new(&server);
    let id = api.create().await;
    let mut first = api.events(&id, None).await;
    let run: Value = api.run(&id, "r1", message(Q)).await.json().await.unwrap();
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    first.until("text_delta").await;
    // A second page opens now (it read the history from /messages): the round so far first.
    let mut second = api.events(&id, None).await;
    let frames = second.until("sync").await;
    assert_eq!(events(&frames), ["sync"], "{frames:#?}");
    let sync = &frames[0].data;
    assert_eq!(sync["run_id"], run_id.as_str());
    assert_eq!(sync["text_so_far"], "partial ");
    // A page that read nothing yet (cursor 0) catches up from the log while the run goes
    // on: the user's message, then the same round so far.
    let mut third = api.events(&id, Some("0")).await;
    let caught = third.until("sync").await;
    let entries: Vec<&Value> = caught
        .iter()
        .filter(|f| f.event == "entry")
        .map(|f| &f.data["entry"])
        .collect();
    assert!(entries.iter().any(|e| e["role"] == "user"), "{caught:#?}");
    assert_eq!(caught.last().unwrap().data["text_so_far"], "partial ");
    // From the last entry it read, a reconnect sends no entry again, and the round so far
    // again — replayed from the server's ring of recent frames, or as a sync frame.
    let last_entry = caught.iter().rev().find(|f| f.event == "entry").unwrap();
    let mut fourth = api.events(&id, Some(&last_entry.id)).await;
    let again = tokio::time::timeout(crate::harness::LIMIT, async {
        let mut out = Vec::new();
        while let Some(f) = fourth.next().await {
            let done = f.event == "sync" || f.event == "text_delta";
            out.push(f);
            if done {
                break;
            }
        }
        out
    })
    .await
    .expect("the round so far never came");
    assert!(again.iter().all(|f| f.event != "entry"), "{again:#?}");
    assert!(
        again.last().unwrap().data.to_string().contains("partial "),
        "{again:#?}"
    );
    // Then all four follow the run live to its end.
    let cancel_url = format!("/api/v1/conversations/{id}/runs/{run_id}/cancel");
    api.post(&cancel_url, json!({})).send().await.unwrap();
    for stream in [&mut first, &mut second, &mut third, &mut fourth] {
        let frames = tokio::time::timeout(crate::harness::LIMIT, stream.until("finished"))
            .await
            .expect("the run never finished on this stream");
        assert_eq!(frames.last().unwrap().data["status"], "cancelled");
    }
}

#[tokio::test]
async fn a_run_is_cancelled_only_through_its_own_conversation() {
    let (_d, path) = dir();
    let turns = vec![text_turn(
        "There are 42 rows.",
        json!({"role": "user", "text": Q}),
    )];
    let server = Server::start(&path, Model::new(&turns, 0).gated());
    let api = Api::new(&server);
    let (a, b) = (api.create().await, api.create().await);
    let mut stream = api.events(&a, None).await;
    let run: Value = api.run(&a, "r1", message(Q)).await.json().await.unwrap();
    let run_id = run["run_id"].as_str().unwrap();
    // A's model call has started and waits at the gate.
    stream.until("round_started").await;
    let mut started = server.model.started.subscribe();
    started.wait_for(|n| *n >= 1).await.unwrap();
    let through_b = format!("/api/v1/conversations/{b}/runs/{run_id}/cancel");
    let c = api.post(&through_b, json!({})).send().await.unwrap();
    assert_eq!(c.status(), 404, "the run is not one of B's");
    let body: Value = c.json().await.unwrap();
    assert!(body.to_string().contains(run_id), "{body}");
    server.model.release(1);
    let frames = stream.until("finished").await;
    assert_eq!(
        frames.last().unwrap().data["status"],
        "answered",
        "A went on"
    );
    assert!(!events(&frames).contains(&"cancelled"), "{frames:#?}");
    // Through its own conversation it is found (finished by now: not running).
    let own = format!("/api/v1/conversations/{a}/runs/{run_id}/cancel");
    let c = api.post(&own, json!({})).send().await.unwrap();
    assert_eq!(c.status(), 202);
    assert_eq!(c.json::<Value>().await.unwrap()["state"], "not_running");
}
