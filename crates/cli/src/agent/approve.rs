//! A person in the loop at the terminal: the decisions `run` was given on its command line,
//! what a paused `run` prints, and `chat`'s questions about each waiting call.

use anyhow::Context as _;
use ba_agent::Input;
use ba_storage::ConversationId;

use crate::out::outln;

/// A run that paused for a person's approval: come back with a decision.
pub(super) const AWAITING_APPROVAL: u8 = 3;

/// The decisions `run` was given: the calls to `approve`, those to `reject` with `reason`
/// (`--approve-all` is filled in once the pending calls are read).
pub(super) fn decisions(approve: &[String], reject: &[String], reason: Option<&str>) -> Input {
    let mut answers: Vec<ba_agent::ApprovalAnswer> = approve
        .iter()
        .map(ba_agent::ApprovalAnswer::approve)
        .collect();
    let reason = reason.unwrap_or("rejected from the command line");
    answers.extend(
        reject
            .iter()
            .map(|c| ba_agent::ApprovalAnswer::reject(c, reason.to_owned())),
    );
    Input::Decide(answers)
}

/// ` (waiting: ID, ID)`, or ` (none waits)`.
pub(super) fn waiting_list(pending: &[ba_protocol::PendingApproval]) -> String {
    if pending.is_empty() {
        " (none waits)".to_owned()
    } else {
        let ids: Vec<&str> = pending.iter().map(|p| p.call_id.as_str()).collect();
        format!(" (waiting: {})", ids.join(", "))
    }
}

/// What waits, and how to go on: a JSON line with `--json` (the last line), else text.
pub(super) fn print_pending(
    id: &ConversationId,
    pending: &[ba_protocol::PendingApproval],
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let calls: Vec<serde_json::Value> = pending
            .iter()
            .map(|p| {
                serde_json::json!({"call_id": p.call_id, "tool": p.tool, "arguments": p.arguments})
            })
            .collect();
        let line = serde_json::json!({
            "status": "awaiting_approval",
            "conversation": id.as_str(),
            "pending": calls,
        });
        outln!("{line}");
        return Ok(());
    }
    outln!();
    outln!("Waiting for approval:");
    for p in pending {
        outln!("  {}  {} {}", p.call_id, p.tool, p.arguments);
    }
    outln!(
        "Go on with `ba-agent run --conversation {id} --approve CALL_ID` (or --approve-all, \
         or --reject CALL_ID --reason TEXT)."
    );
    Ok(())
}

/// Asks on the terminal about each waiting call: `y` approve, `a` approve for the rest of the
/// conversation, `n` reject (then a reason), `e` edit (then the arguments as JSON). `None` when
/// the input ends first (the calls keep waiting; a new message leaves them unrun).
pub(super) fn ask_decisions(
    pending: &[ba_protocol::PendingApproval],
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
) -> anyhow::Result<Option<Vec<ba_agent::ApprovalAnswer>>> {
    let mut read = |prompt: &str| -> anyhow::Result<Option<String>> {
        eprint!("{prompt}");
        match lines.next() {
            Some(line) => Ok(Some(
                line.context("reading standard input")?.trim().to_owned(),
            )),
            None => Ok(None),
        }
    };
    let mut answers = Vec::with_capacity(pending.len());
    for p in pending {
        outln!("Approval needed: {} {}", p.tool, p.arguments);
        loop {
            let Some(choice) =
                read("Run it? [y]es, [a]lways in this conversation, [n]o, [e]dit: ")?
            else {
                return Ok(None);
            };
            let answer = match choice.to_ascii_lowercase().as_str() {
                "y" | "yes" => ba_agent::ApprovalAnswer::approve(&p.call_id),
                "a" | "always" => ba_agent::ApprovalAnswer::approve_for_conversation(&p.call_id),
                "n" | "no" => {
                    let Some(reason) = read("Why (the model reads it): ")? else {
                        return Ok(None);
                    };
                    let reason = if reason.is_empty() {
                        "rejected in the chat".to_owned()
                    } else {
                        reason
                    };
                    ba_agent::ApprovalAnswer::reject(&p.call_id, reason)
                }
                "e" | "edit" => {
                    let Some(text) = read("Arguments (one line of JSON): ")? else {
                        return Ok(None);
                    };
                    match serde_json::from_str::<serde_json::Value>(&text) {
                        Ok(v @ serde_json::Value::Object(_)) => {
                            ba_agent::ApprovalAnswer::edit(&p.call_id, v)
                        }
                        Ok(_) => {
                            outln!("the arguments must be a JSON object");
                            continue;
                        }
                        Err(e) => {
                            outln!("not JSON: {e}");
                            continue;
                        }
                    }
                }
                _ => {
                    outln!("answer y, a, n or e");
                    continue;
                }
            };
            answers.push(answer);
            break;
        }
    }
    Ok(Some(answers))
}
