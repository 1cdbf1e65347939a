//! The OpenAI-compatible client against the mock server: the recorded streaming example,
//! and a tool call streamed and not streamed giving the same answer.

use ba_protocol::ContentBlock;
use ba_protocol::convert::openai_to_log;
use ba_protocol::openai::ChatRequest;

use super::*;

fn openai_example(fixtures: &std::path::Path, name: &str) -> Value {
    let path = fixtures.join("wire/openai/examples").join(name);
    serde_json::from_str(&support::read(&path)).unwrap()
}

fn request_from_openai_body(body: &Value) -> ModelRequest {
    let parsed = ChatRequest::from_json_value(body.clone()).unwrap();
    let entries = openai_to_log(&parsed, &mut SequentialStamp::default()).value;
    let mut request = ModelRequest::new(body["model"].as_str().unwrap(), entries)
        .with_stream(body["stream"] == json!(true));
    if let Some(tools) = body["tools"].as_array() {
        request.tools = tools
            .iter()
            .map(|t| {
                ToolSpec::new(
                    t["function"]["name"].as_str().unwrap(),
                    t["function"]["description"].as_str().unwrap_or_default(),
                    t["function"]["parameters"].clone(),
                )
            })
            .collect();
    }
    request
}

fn sse_of_chunks(chunks: &[Value]) -> String {
    let mut out = String::new();
    for chunk in chunks {
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// The chunks a streamed version of a (non-streaming) tool-call response would carry.
fn tool_call_chunks(response: &Value) -> Vec<Value> {
    let call = &response["choices"][0]["message"]["tool_calls"][0];
    let args = call["function"]["arguments"].as_str().unwrap();
    let base = |delta: Value, finish: Value| {
        json!({"id": response["id"], "object": "chat.completion.chunk", "model": response["model"],
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = vec![base(
        json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": call["id"],
               "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}]}),
        Value::Null,
    )];
    let chars: Vec<char> = args.chars().collect();
    for piece in chars.chunks(5) {
        let piece: String = piece.iter().collect();
        chunks.push(base(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            Value::Null,
        ));
    }
    chunks.push(base(json!({}), json!("tool_calls")));
    chunks.push(
        json!({"id": response["id"], "object": "chat.completion.chunk",
                       "model": response["model"], "choices": [], "usage": response["usage"]}),
    );
    chunks
}

#[tokio::test]
async fn openai_streaming_example_is_served_and_accumulated() {
    let Some(fixtures) = support::fixtures() else {
        return;
    };
    let example = openai_example(&fixtures, "create-streaming.json");
    let chunks = example["response_chunks"].as_array().unwrap();
    let server = MockServer::start(vec![Reply::sse(&sse_of_chunks(chunks), 45, End::Close)]).await;
    let request = request_from_openai_body(&example["request"]);
    let mut deltas = Vec::new();
    let response = openai(&server, config())
        .complete_streaming(&request, &mut |d| deltas.push(d))
        .await
        .unwrap();
    let expected = ba_protocol::stream::openai::accumulate_chunks(chunks).unwrap();
    let expected_text = expected.message.choices[0]
        .message
        .content
        .as_ref()
        .unwrap()
        .to_text()
        .into_owned();
    assert_eq!(response.message.text(), expected_text);
    assert_eq!(collect(&deltas).0, expected_text);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.id, "chatcmpl-123");

    let sent = &server.received()[0];
    assert_eq!(sent.path, "/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(sent.body["messages"], example["request"]["messages"]);
    assert_eq!(sent.body["stream"], json!(true));
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn openai_tool_call_stream_and_non_streaming_answer_agree() {
    let Some(fixtures) = support::fixtures() else {
        return;
    };
    let example = openai_example(&fixtures, "create-functions.json");
    let recorded = &example["response"];
    let sse = sse_of_chunks(&tool_call_chunks(recorded));
    let server = MockServer::start(vec![
        Reply::sse(&sse, 33, End::Close),
        Reply::json(200, &recorded.to_string()),
    ])
    .await;
    let client = openai(&server, config());
    let request = request_from_openai_body(&example["request"]);

    let mut deltas = Vec::new();
    let streamed = client
        .complete_streaming(&request.clone().with_stream(true), &mut |d| deltas.push(d))
        .await
        .unwrap();
    let whole = client.complete(&request).await.unwrap();

    for response in [&streamed, &whole] {
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.usage.input_tokens, 82);
        assert_eq!(response.usage.output_tokens, 17);
        let blocks = &response.message.content;
        assert_eq!(blocks.len(), 1);
        let ContentBlock::ToolUse(call) = &blocks[0] else {
            panic!("{blocks:?}")
        };
        assert_eq!(call.id, "call_abc123");
        assert_eq!(call.name, "get_current_weather");
        assert_eq!(call.input, json!({"location": "Boston, MA"}));
    }
    let (_, calls, input) = collect(&deltas);
    assert_eq!(
        calls,
        [("call_abc123".to_owned(), "get_current_weather".to_owned())]
    );
    assert_eq!(
        input,
        recorded["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap()
    );
    for sent in server.received() {
        assert_eq!(sent.body["messages"], example["request"]["messages"]);
        assert_eq!(sent.body["tools"], example["request"]["tools"]);
    }
}

#[tokio::test]
async fn openai_stream_cut_mid_arguments_reports_the_call() {
    let Some(fixtures) = support::fixtures() else {
        return;
    };
    let example = openai_example(&fixtures, "create-functions.json");
    let chunks = tool_call_chunks(&example["response"]);
    // The call's start (with the role) and two argument pieces, then the connection drops.
    let mut sse = String::new();
    for chunk in &chunks[..3] {
        sse.push_str(&format!("data: {chunk}\n\n"));
    }
    let server = MockServer::start(vec![Reply::sse(&sse, 64, End::CutShort)]).await;
    let err = openai(&server, config())
        .complete(&ModelRequest::new("m", vec![user("hi")]).with_stream(true))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::StreamCut { .. }), "{err}");
    let partial = err.partial_output().unwrap();
    assert_eq!(partial.cut_tool_calls.len(), 1);
    assert_eq!(partial.cut_tool_calls[0].name, "get_current_weather");
    assert_eq!(partial.cut_tool_calls[0].partial_json.chars().count(), 10);
}

#[tokio::test]
async fn openai_non_streaming_default_example() {
    let Some(fixtures) = support::fixtures() else {
        return;
    };
    let example = openai_example(&fixtures, "create-default.json");
    let server = MockServer::start(vec![Reply::json(200, &example["response"].to_string())]).await;
    let request = request_from_openai_body(&example["request"]);
    let response = openai(&server, config()).complete(&request).await.unwrap();
    let expected = example["response"]["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    assert_eq!(response.message.text(), expected);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(
        response.usage.input_tokens + response.usage.cache_read_tokens,
        example["response"]["usage"]["prompt_tokens"]
            .as_u64()
            .unwrap()
    );
    assert_eq!(
        server.received()[0].body["messages"],
        example["request"]["messages"]
    );
}

#[test]
fn api_key_is_redacted_in_client_debug() {
    let client = OpenAiClient::new(Some(ApiKey::new(KEY))).unwrap();
    assert!(!format!("{client:?}").contains(KEY));
    let client = AnthropicClient::new(ApiKey::new(KEY)).unwrap();
    assert!(!format!("{client:?}").contains(KEY));
}
