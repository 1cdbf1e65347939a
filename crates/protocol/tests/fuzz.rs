//! Fuzzing of the protocol's parsers with byte and structure mutations of valid inputs: the SSE
//! parser fed in random pieces, both stream accumulators and the structured-response reader.
//! None may panic; every rejection is a typed error. `cargo xtask fuzz --cases N` runs longer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_protocol::StructuredResponse;
use ba_protocol::stream::sse::SseParser;
use ba_protocol::stream::{anthropic, openai};
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
    fn sse_streams_never_panic(text in mutated_text(seeds(&[ANTHROPIC, OPENAI])), cut in 1usize..97) {
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
    }

    #[test]
    fn structured_answers_never_panic(text in mutated_text(seeds(STRUCTURED))) {
        match StructuredResponse::parse_lenient(&text) {
            Ok(r) => prop_assert!(r.current_round < u32::MAX),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}
