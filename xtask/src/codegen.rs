//! JSON Schemas of the public protocol types and of the HTTP API's events and answers,
//! written to `docs/schema/`.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use ba_protocol as p;
use schemars::{JsonSchema, schema_for};

/// Write the files, or only check that the committed ones are current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Write,
    Check,
}

fn schema<T: JsonSchema>() -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(&schema_for!(T))?;
    text.push('\n');
    Ok(text)
}

/// Every generated file: name and content.
fn files() -> anyhow::Result<Vec<(&'static str, String)>> {
    Ok(vec![
        ("LogEntry", schema::<p::LogEntry>()?),
        ("Message", schema::<p::Message>()?),
        ("ContentBlock", schema::<p::ContentBlock>()?),
        (
            "AnthropicRequest",
            schema::<p::anthropic::AnthropicRequest>()?,
        ),
        (
            "AnthropicResponse",
            schema::<p::anthropic::AnthropicResponse>()?,
        ),
        ("ChatRequest", schema::<p::openai::ChatRequest>()?),
        ("ChatResponse", schema::<p::openai::ChatResponse>()?),
        (
            "ResponsesRequest",
            schema::<p::responses::ResponsesRequest>()?,
        ),
        (
            "ResponsesResponse",
            schema::<p::responses::ResponsesResponse>()?,
        ),
        ("ToolCall", schema::<p::ToolCall>()?),
        ("ToolResult", schema::<p::ToolResult>()?),
        ("InvocationContext", schema::<p::InvocationContext>()?),
        (
            "SkillActivationRequest",
            schema::<p::SkillActivationRequest>()?,
        ),
        (
            "SkillActivationResult",
            schema::<p::SkillActivationResult>()?,
        ),
        ("ContextModifier", schema::<p::ContextModifier>()?),
        ("ConversationRound", schema::<p::ConversationRound>()?),
        ("StructuredResponse", schema::<p::StructuredResponse>()?),
        ("ApiResponse", schema::<p::ApiResponse>()?),
        // The HTTP API (`ba-server`): the data of the event frames and the answers that are
        // not the protocol's own types.
        ("AgentEvent", schema::<ba_agent::AgentEvent>()?),
        ("EntryFrame", schema::<ba_server::EntryFrame>()?),
        ("SyncFrame", schema::<ba_server::SyncFrame>()?),
        ("ResetFrame", schema::<ba_server::ResetFrame>()?),
        ("ConversationView", schema::<ba_server::ConversationView>()?),
        ("RunAccepted", schema::<ba_server::RunAccepted>()?),
        ("UploadMeta", schema::<ba_server::UploadMeta>()?),
        ("Forked", schema::<ba_server::Forked>()?),
        ("Rewound", schema::<ba_server::Rewound>()?),
        ("Branches", schema::<ba_server::Branches>()?),
        ("PendingApprovals", schema::<ba_server::PendingApprovals>()?),
        ("ErrorBody", schema::<ba_server::ErrorBody>()?),
        ("SpendReport", schema::<ba_agent::SpendReport>()?),
    ])
}

fn dir() -> PathBuf {
    crate::root().join("docs/schema")
}

pub(crate) fn generate(mode: Mode) -> anyhow::Result<()> {
    let dir = dir();
    let files = files()?;
    let mut stale = Vec::new();
    for (name, content) in &files {
        let path = dir.join(format!("{name}.schema.json"));
        let current = std::fs::read_to_string(&path).ok();
        if current.as_deref() == Some(content.as_str()) {
            continue;
        }
        match mode {
            Mode::Write => {
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                std::fs::write(&path, content)
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("wrote {}", path.display());
            }
            Mode::Check => stale.push(path.display().to_string()),
        }
    }
    // A schema file for a type no longer generated is stale too.
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let known = files
                .iter()
                .any(|(name, _)| file == format!("{name}.schema.json"));
            if !known && file.ends_with(".schema.json") {
                match mode {
                    Mode::Write => std::fs::remove_file(entry.path())?,
                    Mode::Check => stale.push(entry.path().display().to_string()),
                }
            }
        }
    }
    if !stale.is_empty() {
        bail!(
            "generated schemas are stale: {}; run `cargo xtask codegen`",
            stale.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn schemas_are_fresh() {
        if let Err(err) = super::generate(super::Mode::Check) {
            panic!("{err:#}");
        }
    }
}
