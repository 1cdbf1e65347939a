//! Fuzzing of the protocol's parsers with byte and structure mutations of valid inputs: the SSE
//! parser fed in random pieces, the three stream accumulators, the Responses request reader and
//! its conversions, and the structured-response reader.
//! None may panic; every rejection is a typed error. `cargo xtask fuzz --cases N` runs longer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_protocol::StructuredResponse;
use ba_protocol::responses::ResponsesRequest;
use ba_protocol::stream::sse::SseParser;
use ba_protocol::stream::{anthropic, openai, responses};
use ba_testkit::fuzz::{cases, mutated_text};
use proptest::prelude::*;

const ANTHROPIC: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"West grew 220 %.\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"query_database\",\"input\":{}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"query\\\": \\\"SELECT 1\\\"}\"}}\n\n\
event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
event: ping\ndata: {\"type\":\"ping\"}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":20}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

const OPENAI: &str = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"West \"}}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"query_database\",\"arguments\":\"{\\\"q\"}}]}}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"uery\\\": 1}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4}}\n\n\
data: [DONE]\n\n";

const RESPONSES: &str = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n\
event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"encrypted_content\":\"gAAA\"}}\n\n\
event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":2,\"output_index\":0,\"summary_index\":0,\"delta\":\"Query it.\"}\n\n\
event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":3,\"output_index\":1,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"status\":\"in_progress\",\"content\":[]}}\n\n\
event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"output_index\":1,\"content_index\":0,\"delta\":\"West \"}\n\n\
event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":5,\"output_index\":2,\"item\":{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"query_database\",\"arguments\":\"\"}}\n\n\
event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":6,\"output_index\":2,\"delta\":\"{\\\"q\\\": 1}\"}\n\n\
event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":7,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":{\"input_tokens\":9,\"output_tokens\":4,\"input_tokens_details\":{\"cached_tokens\":8}}}}\n\n";

const RESPONSES_REQUEST: &str = r#"{"model": "gpt-5", "instructions": "Be brief.", "input": [{"role": "user", "content": [{"type": "input_text", "text": "West?"}]}, {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "q"}], "encrypted_content": "gAAA"}, {"type": "function_call", "call_id": "c1", "name": "q", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c1", "output": "1"}, {"type": "compaction", "encrypted_content": "x"}]}"#;

const STRUCTURED: &[&str] = &[
    r#"{"task_analysis": "West Q3", "execution_plan": "R1 query", "current_round": 1, "action": {"type": "tool_call", "content": [{"tool_name": "query_database", "tool_call_id": "c1", "arguments": {"query": "SELECT 1"}}]}}"#,
    "```json\n{\"task_analysis\": \"done\", \"execution_plan\": \"R2\", \"current_round\": 2, \"action\": {\"type\": \"complete\", \"content\": \"West beat its target.\", \"recommended_questions\": [\"Q4?\"], \"download_links\": []}}\n```",
];

fn seeds(texts: &[&str]) -> Vec<Vec<u8>> {
    texts.iter().map(|t| t.as_bytes().to_vec()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn sse_streams_never_panic(text in mutated_text(seeds(&[ANTHROPIC, OPENAI, RESPONSES])), cut in 1usize..97) {
        // The raw parser, fed in pieces cut anywhere (inside lines and characters).
        let mut parser = SseParser::new();
        let chars: Vec<char> = text.chars().collect();
        let mut events = 0;
        for piece in chars.chunks(cut) {
            events += parser.push(&piece.iter().collect::<String>()).len();
        }
        events += parser.finish().len();
        prop_assert!(events <= text.len() + 1);
        // Both accumulators: a message, or a typed error naming what was wrong.
        match anthropic::accumulate_sse(&text) {
            Ok(acc) => prop_assert!(acc.message.content.len() <= text.len()),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        match openai::accumulate_sse(&text) {
            Ok(_) => {}
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        match responses::accumulate_sse(&text) {
            Ok(acc) => prop_assert!(acc.message.output.len() <= text.len()),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn responses_requests_never_panic(text in mutated_text(seeds(&[RESPONSES_REQUEST]))) {
        // Read, converted to the log and back to every format: a value or a typed error.
        match ResponsesRequest::from_json(&text) {
            Ok(req) => {
                let mut stamp = ba_protocol::convert::SequentialStamp::default();
                match ba_protocol::convert::responses_to_log(&req, &mut stamp) {
                    Ok(log) => {
                        let _ = ba_protocol::convert::log_to_responses(&log.value);
                        let _ = ba_protocol::convert::log_to_anthropic(&log.value);
                        let _ = ba_protocol::convert::log_to_openai(&log.value);
                    }
                    Err(e) => prop_assert!(!e.to_string().is_empty()),
                }
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    #[test]
    fn structured_answers_never_panic(text in mutated_text(seeds(STRUCTURED))) {
        match StructuredResponse::parse_lenient(&text) {
            Ok(r) => prop_assert!(r.current_round < u32::MAX),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}
