//! The provider clients against the scripted model of the test kit: a two-round journey (tool
//! calls, then a final answer after the tool results) on each wire, streaming and not, checking
//! what the client parsed and what the rules saw.

// Test code: a broken expectation should stop the test loudly.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use ba_model::{
    AnthropicClient, ApiKey, HttpConfig, ModelClient, ModelError, ModelRequest, RetryPolicy,
    StopReason, StreamDelta,
};
use ba_protocol::ToolSpec;
use ba_protocol::convert::SequentialStamp;
use ba_protocol::{ContentBlock, LogEntry, LogRole};
use ba_testkit::model::{Role, ScriptedModel, Turn, Wire};
use serde_json::json;

const KEY: &str = "sk-test-key-0123";
const T: &str = "2025-01-01T00:00:00Z";

/// Quick retries, so a test that meets one does not wait.
fn config() -> HttpConfig {
    HttpConfig::default().with_retry(
        RetryPolicy::default()
            .with_base_delay(Duration::from_millis(10))
            .with_jitter(0.0),
    )
}

fn client(model: &ScriptedModel, wire: Wire) -> Box<dyn ModelClient> {
    match wire {
        Wire::Anthropic => Box::new(
            AnthropicClient::new(ApiKey::new(KEY))
                .unwrap()
                .with_base_url(model.anthropic_base_url())
                .unwrap()
                .with_http(config()),
        ),
        Wire::OpenAi => Box::new(
            ba_model::OpenAiClient::new(Some(ApiKey::new(KEY)))
                .unwrap()
                .with_base_url(model.openai_base_url())
                .unwrap()
                .with_http(config()),
        ),
        Wire::Responses => Box::new(
            ba_model::ResponsesClient::new(Some(ApiKey::new(KEY)))
                .unwrap()
                .with_base_url(model.responses_base_url())
                .unwrap()
                .with_http(config()),
        ),
    }
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "file_reader",
            "Reads a file of the conversation.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        ),
        ToolSpec::new("run_python", "Runs Python.", json!({"type": "object"})),
    ]
}

/// The script: read every upload the question names, then report on the last result.
async fn analyst() -> ScriptedModel {
    ScriptedModel::builder()
        .rule(
            "read the uploads",
            |r| r.offers("file_reader") && r.round() == 0 && !r.uploads().is_empty(),
            |r| {
                Turn::calls(
                    r.uploads()
                        .iter()
                        .map(|u| ("file_reader", json!({"path": u}))),
                )
                .with_text("Reading the files.")
                .with_thinking("The question names two uploads; read both.")
            },
        )
        .rule(
            "answer",
            |r| r.last_result().is_some(),
            |r| {
                let last = r.last_result().unwrap();
                Turn::text(format!(
                    "{} results; the last, from {} of {}, {}: {}",
                    r.tool_results().len(),
                    last.name,
                    last.input["path"].as_str().unwrap_or("?"),
                    if last.is_error { "failed" } else { "worked" },
                    last.text.lines().next().unwrap_or_default()
                ))
            },
        )
        .start()
        .await
}

async fn journey(wire: Wire, stream: bool) {
    let model = analyst().await;
    let client = client(&model, wire);
    let mut stamp = SequentialStamp::new("e", T);
    let mut entries = vec![
        LogEntry::new("u1", LogRole::User, T)
            .with_text("Compare <file_ref>upload_001</file_ref> with upload_002, please."),
    ];
    let request = |entries: &[LogEntry]| {
        ModelRequest::new("test-model", entries.to_vec())
            .with_system("You are an analyst.")
            .with_tools(tools())
            .with_stream(stream)
    };

    // Round 0: the model calls file_reader on both uploads.
    let mut deltas = Vec::new();
    let first = client
        .complete_streaming(&request(&entries), &mut |d| deltas.push(d))
        .await
        .unwrap_or_else(|e| panic!("{wire} stream={stream}: {e}"));
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert!(first.problems.is_empty(), "{:?}", first.problems);
    assert_eq!(first.model, "test-model");
    assert!(first.usage.input_tokens > 0 && first.usage.output_tokens > 0);
    assert_eq!(first.message.text(), "Reading the files.");
    let thinking: Vec<&str> = first
        .message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Thinking(t) => Some(t.thinking.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, ["The question names two uploads; read both."]);
    let calls: Vec<_> = first.message.tool_uses().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].name, "file_reader");
    assert_eq!(calls[0].input, json!({"path": "upload_001"}));
    assert_eq!(calls[1].input, json!({"path": "upload_002"}));
    assert_ne!(calls[0].id, calls[1].id);
    if stream {
        let mut text = String::new();
        let mut thought = String::new();
        let mut started = Vec::new();
        let mut input = String::new();
        for d in &deltas {
            match d {
                StreamDelta::Text { text: t, .. } => text += t,
                StreamDelta::Thinking { text: t, .. } => thought += t,
                StreamDelta::ToolCallStarted { id, name, .. } => started.push((id, name)),
                StreamDelta::ToolInput { partial_json, .. } => input += partial_json,
                _ => {}
            }
        }
        assert_eq!(text, "Reading the files.");
        assert_eq!(thought, thinking[0]);
        assert_eq!(started.len(), 2);
        assert_eq!(started[0].0, &calls[0].id);
        assert_eq!(input, r#"{"path":"upload_001"}{"path":"upload_002"}"#);
        // The text came in more than one piece.
        let pieces = deltas
            .iter()
            .filter(|d| matches!(d, StreamDelta::Text { .. }))
            .count();
        assert!(pieces > 1, "{deltas:?}");
    } else {
        assert!(deltas.is_empty());
    }

    // The tool results: one read, one failure.
    entries.extend(first.to_log_entries(&mut stamp).unwrap());
    for (i, call) in calls.iter().enumerate() {
        let text = if i == 0 {
            "region,sales\nnorth,10".to_owned()
        } else {
            "Operation failed.\n\nError Type: not_found\nError Message: no upload_002".to_owned()
        };
        let mut e = LogEntry::new(format!("t{i}"), LogRole::Tool, T).with_text(text);
        e.tool_call_id = Some(call.id.clone());
        e.tool_name = Some(call.name.clone());
        e.is_error = (i == 1).then_some(true);
        entries.push(e);
    }

    // Round 1: the final answer, from what the results said.
    let second = client
        .complete(&request(&entries))
        .await
        .unwrap_or_else(|e| panic!("{wire} stream={stream}: {e}"));
    assert_eq!(second.stop_reason, StopReason::EndTurn);
    assert!(second.message.tool_uses().next().is_none());
    assert_eq!(
        second.message.text(),
        "2 results; the last, from file_reader of upload_002, failed: Operation failed."
    );

    // What the rules saw.
    assert_eq!(
        model.fired(),
        [
            Some("read the uploads".to_owned()),
            Some("answer".to_owned())
        ]
    );
    let seen = model.requests();
    assert_eq!(seen.len(), 2);
    for r in &seen {
        assert_eq!(r.wire(), wire);
        assert_eq!(r.streams(), stream);
        assert_eq!(r.model(), "test-model");
        assert_eq!(r.system(), "You are an analyst.");
        assert_eq!(r.tools(), ["file_reader", "run_python"]);
        assert_eq!(r.uploads(), ["upload_001", "upload_002"]);
        assert!(r.last_user_text().starts_with("Compare "));
    }
    assert_eq!(seen[0].round(), 0);
    assert!(seen[0].tool_results().is_empty());
    let r = &seen[1];
    assert_eq!(r.round(), 1);
    let roles: Vec<Role> = r.messages().iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Tool]);
    let sent_ids: Vec<&str> = r.messages()[1]
        .calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(sent_ids, [calls[0].id.as_str(), calls[1].id.as_str()]);
    let results = r.tool_results();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].name, "file_reader");
    assert_eq!(results[0].text, "region,sales\nnorth,10");
    assert!(!results[0].is_error);
    assert!(results[1].is_error);
    assert!(r.shows("north,10"));
}

#[tokio::test]
async fn anthropic_journey() {
    journey(Wire::Anthropic, false).await;
}

#[tokio::test]
async fn anthropic_streaming_journey() {
    journey(Wire::Anthropic, true).await;
}

#[tokio::test]
async fn openai_journey() {
    journey(Wire::OpenAi, false).await;
}

#[tokio::test]
async fn openai_streaming_journey() {
    journey(Wire::OpenAi, true).await;
}

#[tokio::test]
async fn an_unexpected_request_fails_at_once_naming_the_question() {
    for wire in [Wire::Anthropic, Wire::OpenAi, Wire::Responses] {
        for stream in [false, true] {
            let model = analyst().await;
            let request = ModelRequest::new(
                "test-model",
                vec![LogEntry::new("u1", LogRole::User, T).with_text("Just say hello.")],
            )
            .with_tools(tools())
            .with_stream(stream);
            let error = client(&model, wire).complete(&request).await.unwrap_err();
            let ModelError::Server {
                status,
                message,
                attempts,
                ..
            } = &error
            else {
                panic!("{wire}: {error:?}");
            };
            assert_eq!((*status, *attempts), (500, 1), "{wire}: {error}");
            assert!(message.contains("no rule matched"), "{wire}: {message}");
            assert!(message.contains("Just say hello."), "{wire}: {message}");
            assert_eq!(model.requests().len(), 1, "not retried");
            assert_eq!(model.fired(), [None]);
        }
    }
}

#[tokio::test]
async fn a_scripted_failure_is_retried_by_the_client() {
    for wire in [Wire::Anthropic, Wire::OpenAi, Wire::Responses] {
        let model = ScriptedModel::builder()
            .rule(
                "overloaded first",
                |r| r.index() == 0,
                |_| Turn::fail(529, "Overloaded"),
            )
            .rule(
                "then fine",
                |_| true,
                |_| Turn::text("fine").with_usage(7, 3),
            )
            .start()
            .await;
        let request = ModelRequest::new(
            "test-model",
            vec![LogEntry::new("u1", LogRole::User, T).with_text("Hi")],
        );
        let answer = client(&model, wire).complete(&request).await.unwrap();
        assert_eq!(answer.retries, 1, "{wire}");
        assert_eq!(answer.message.text(), "fine");
        assert_eq!(
            (answer.usage.input_tokens, answer.usage.output_tokens),
            (7, 3)
        );
        assert_eq!(
            model.fired(),
            [
                Some("overloaded first".to_owned()),
                Some("then fine".to_owned())
            ]
        );
    }
}

#[tokio::test]
async fn responses_journey() {
    journey(Wire::Responses, false).await;
}

#[tokio::test]
async fn responses_streaming_journey() {
    journey(Wire::Responses, true).await;
}

/// The embeddings client against the scripted endpoint (hashed bag-of-words vectors).
mod embeddings {
    use super::*;
    use ba_model::{EmbeddingProblem, Embeddings, OpenAiEmbeddings};
    use ba_testkit::model::{EmbeddingsReply, hashed_embedding};

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn texts(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("passage {i}: freight cost for week {i}"))
            .collect()
    }

    fn client(model: &ScriptedModel) -> OpenAiEmbeddings {
        OpenAiEmbeddings::new(
            &model.embeddings_base_url(),
            "nomic-embed",
            Some(ApiKey::new(KEY)),
        )
        .unwrap()
        .with_http(config())
    }

    #[tokio::test]
    async fn vectors_come_back_in_batches_in_the_order_of_the_texts() {
        let model = ScriptedModel::builder().start().await;
        let embedder = client(&model).with_batch_size(4);
        let texts = texts(10);
        let vectors = embedder.embed(&texts).await.unwrap();
        // The stand-in answers each batch in reverse order of `index`.
        let expected: Vec<Vec<f32>> = texts.iter().map(|t| hashed_embedding(t)).collect();
        assert_eq!(vectors, expected);
        let sent = model.embedding_requests();
        assert_eq!(
            sent.iter().map(|r| r.input.len()).collect::<Vec<_>>(),
            [4, 4, 2],
            "batches of four"
        );
        let inputs: Vec<String> = sent.iter().flat_map(|r| r.input.clone()).collect();
        assert_eq!(inputs, texts);
        assert!(sent.iter().all(|r| r.model == "nomic-embed"));
        // Related texts are closer than unrelated ones.
        let q = embedder
            .embed(&[
                "what was the freight cost in week 3?".to_owned(),
                "passage 3: freight cost for week 3".to_owned(),
                "the weather in Lyon".to_owned(),
            ])
            .await
            .unwrap();
        // Four words shared against two ("the", "in").
        assert!(cosine(&q[0], &q[1]) > cosine(&q[0], &q[2]) + 0.2, "{q:?}");
        assert!(embedder.embed(&[]).await.unwrap().is_empty());
        assert_eq!(
            model.embedding_requests().len(),
            4,
            "no request for no texts"
        );
        let request = &model.requests();
        assert!(request.is_empty(), "embeddings are not chat requests");
    }

    #[tokio::test]
    async fn each_fault_of_the_endpoint_is_a_typed_error_that_names_it() {
        let model = ScriptedModel::builder().start().await;
        let embedder = client(&model);
        let texts = texts(3);
        model.set_embeddings(EmbeddingsReply::Status(
            500,
            "the embedding model is not loaded".to_owned(),
        ));
        let e = embedder.embed(&texts).await.unwrap_err();
        assert!(
            matches!(&e, ModelError::Server { status: 500, message, .. } if message == "the embedding model is not loaded"),
            "{e:?}"
        );
        assert!(e.to_string().contains("HTTP 500"), "{e}");
        model.set_embeddings(EmbeddingsReply::Status(401, "bad key".to_owned()));
        let e = embedder.embed(&texts).await.unwrap_err();
        assert!(
            matches!(&e, ModelError::Rejected { status: 401, message, .. } if message == "bad key"),
            "{e:?}"
        );
        model.set_embeddings(EmbeddingsReply::WrongCount);
        let e = embedder.embed(&texts).await.unwrap_err();
        assert!(
            matches!(
                &e,
                ModelError::BadEmbeddings {
                    problem: EmbeddingProblem::Count {
                        expected: 3,
                        found: 2
                    },
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "the embeddings answer held 2 vector(s) for 3 text(s)"
        );
        model.set_embeddings(EmbeddingsReply::WrongDimension);
        let e = embedder.embed(&texts).await.unwrap_err();
        assert!(
            matches!(
                &e,
                ModelError::BadEmbeddings {
                    problem: EmbeddingProblem::Dimension { .. },
                    ..
                }
            ),
            "{e:?}"
        );
        model.set_embeddings(EmbeddingsReply::NonFinite);
        let e = embedder.embed(&texts).await.unwrap_err();
        assert!(
            matches!(
                &e,
                ModelError::BadEmbeddings {
                    problem: EmbeddingProblem::NonFinite {
                        index: 0,
                        position: 0
                    },
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("not a finite 32-bit float"), "{e}");
        model.set_embeddings(EmbeddingsReply::Oversize(200_000));
        let bounded = embedder.with_http(config().with_max_response_bytes(100_000));
        let e = bounded.embed(&texts).await.unwrap_err();
        assert!(
            matches!(e, ModelError::TooLarge { limit: 100_000, .. }),
            "{e:?}"
        );
        // The same answer within a larger bound is read.
        let roomy = bounded.with_http(config());
        assert_eq!(roomy.embed(&texts).await.unwrap().len(), 3);
    }

    #[tokio::test]
    async fn the_key_goes_as_a_bearer_token_and_a_bad_base_url_is_refused() {
        let model = ScriptedModel::builder()
            .embeddings(EmbeddingsReply::Hashed)
            .start()
            .await;
        client(&model).embed(&texts(1)).await.unwrap();
        let sent = model.embedding_requests();
        assert_eq!(
            sent[0].header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert!(
            OpenAiEmbeddings::new("ftp://example.com/v1", "m", None)
                .unwrap_err()
                .to_string()
                .contains("must start with http:// or https://")
        );
        let bare = OpenAiEmbeddings::new(&model.embeddings_base_url(), "m", None).unwrap();
        assert_eq!(bare.batch_size(), OpenAiEmbeddings::DEFAULT_BATCH);
        assert_eq!(bare.model(), "m");
        bare.embed(&texts(2)).await.unwrap();
        assert_eq!(model.embedding_requests()[1].header("authorization"), None);
    }
}
