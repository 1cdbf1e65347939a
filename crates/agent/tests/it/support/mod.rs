//! What the agent's test binaries share: replay turns and an agent on a replay client.

use std::sync::Arc;

use ba_agent::{Agent, AgentBuilder, TASK_TOOL};
use ba_model::ReplayClient;
use ba_storage::FileStore;
use serde_json::{Value, json};

/// A recorded answer `text` to a request whose last message matches `expect`.
pub fn text_turn(text: &str, expect: Value) -> Value {
    json!({"expect": expect, "response": {"message": {"role": "assistant", "content": text},
        "stop_reason": "end_turn"}})
}

/// The parent asks for the `task` tool; the child answers its own prompt; the parent ends.
pub fn delegating_turns() -> [Value; 3] {
    [
        json!({"expect": {"role": "user", "text": "Delegate it."},
               "response": {"message": {"role": "assistant", "content": [
                   {"type": "tool_use", "id": "t1", "name": TASK_TOOL,
                    "input": {"description": "count", "prompt": "Count to three."}}]},
                   "stop_reason": "tool_use"}}),
        // The child's turn: it sees only its own prompt.
        text_turn(
            "One, two, three.",
            json!({"role": "user", "text": "Count to three."}),
        ),
        text_turn(
            "The sub-agent counted.",
            json!({"role": "tool", "tool_call_id": "t1"}),
        ),
    ]
}

/// An agent answering from `turns`, its log in a file store under `dir`, set up further by `f`.
pub fn replay_agent(
    dir: &std::path::Path,
    turns: &[Value],
    f: impl FnOnce(AgentBuilder) -> AgentBuilder,
) -> Agent {
    let client =
        ReplayClient::from_json(&Value::Array(turns.to_vec()).to_string(), "test").unwrap();
    f(Agent::builder(Arc::new(client)).store(Arc::new(FileStore::open(dir).unwrap())))
        .build()
        .unwrap()
}

pub mod items;
