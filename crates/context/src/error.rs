//! The error type of the crate.

/// What can go wrong while counting, budgeting or compressing a conversation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// The encoding name is not one this crate implements.
    #[error("unknown encoding `{name}`: expected cl100k_base or o200k_base")]
    UnknownEncoding {
        /// The name given.
        name: String,
    },
    /// The budget leaves no room for any message.
    #[error(
        "the budget of {total} tokens with {reserved} reserved for the response leaves no room for the conversation"
    )]
    EmptyBudget {
        /// The total budget.
        total: usize,
        /// Tokens reserved for the response.
        reserved: usize,
    },
    /// The system prompt and the tool definitions alone do not fit.
    #[error(
        "the system prompt takes {system} tokens with the tool definitions, more than the {available} tokens available"
    )]
    SystemTooLarge {
        /// Tokens of the system prompt, the tool definitions and the note after the window.
        system: usize,
        /// Tokens available after the response reserve.
        available: usize,
    },
    /// The conversation has nothing the model could answer.
    #[error("the conversation has no user message to answer")]
    NoUserMessage,
    /// The latest user message alone does not fit.
    #[error(
        "the latest user message `{id}` needs {needed} tokens, more than the {available} tokens left for messages"
    )]
    LatestUserTooLarge {
        /// The log entry id of the latest user message.
        id: String,
        /// Tokens the mandatory part of the window needs.
        needed: usize,
        /// Tokens left for messages.
        available: usize,
    },
    /// The results the model is about to read do not fit the budget even as previews, with the
    /// latest user message and the system prompt: the budget is too small for this turn.
    #[error(
        "the tool results of `{call}` the model is about to read need a budget of at least {needed} tokens (system prompt, latest user message, the results as previews and the reply's reserve); the budget is {budget}"
    )]
    PendingTooLarge {
        /// The id of the assistant entry whose calls the results answer.
        call: String,
        /// The smallest budget that fits this turn.
        needed: usize,
        /// The budget.
        budget: usize,
    },
    /// A strategy returned a window that breaks an invariant; a bug in that strategy.
    #[error("strategy `{strategy}` broke an invariant: {detail}")]
    Invariant {
        /// The strategy's name.
        strategy: String,
        /// What was wrong.
        detail: String,
    },
    /// The summarizer failed.
    #[error("summarizing {entries} entries failed: {message}")]
    Summary {
        /// How many entries were to be summarized.
        entries: usize,
        /// What the summarizer said.
        message: String,
    },
    /// The strategy name is not one this crate implements.
    #[error(
        "unknown strategy `{name}`: expected truncate, key-messages, importance, summary or hybrid"
    )]
    UnknownStrategy {
        /// The name given.
        name: String,
    },
}

/// Result with [`ContextError`].
pub type Result<T, E = ContextError> = std::result::Result<T, E>;
