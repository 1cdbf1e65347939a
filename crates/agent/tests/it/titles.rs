//! A new conversation is named after its first question at once; where a summary model is
//! configured, the model's title replaces that one before the run is over — unless someone
//! renamed the conversation in the meantime, and a title model that fails costs only the title.

use std::sync::Arc;

use async_trait::async_trait;
use ba_agent::{Agent, Input, RunStatus};
use ba_context::{Summarizer, SummaryError};
use ba_model::ReplayClient;
use ba_protocol::LogEntry;
use ba_storage::{ConversationId, ConversationStore, FileStore, MetaUpdate, NewConversation};
use serde_json::{Value, json};

const QUESTION: &str =
    "why did the West region's sales jump in Q3 2024 and did it beat its target?";

/// Titles as a model would write them; optionally renames the conversation first, as a person
/// at the page would while the title is being written.
struct Titler {
    answer: Result<String, String>,
    rename: Option<(Arc<dyn ConversationStore>, ConversationId)>,
}

impl std::fmt::Debug for Titler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Titler")
            .field("answer", &self.answer)
            .finish()
    }
}

#[async_trait]
impl Summarizer for Titler {
    async fn summarize(&self, _: &[LogEntry], _: usize) -> Result<String, SummaryError> {
        Ok("a summary".into())
    }

    async fn title(&self, question: &str) -> Result<Option<String>, SummaryError> {
        assert_eq!(question, QUESTION);
        if let Some((store, id)) = &self.rename {
            let update = MetaUpdate {
                title: Some("Renamed by hand".into()),
                ..MetaUpdate::default()
            };
            store.update_metadata(id, update).await?;
        }
        match &self.answer {
            Ok(t) => Ok(Some(t.clone())),
            Err(e) => Err(e.clone().into()),
        }
    }
}

async fn title_after_a_run(answer: Result<&str, &str>, rename: bool) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(dir.path()).unwrap());
    let id = ConversationId::random();
    store.create(&id, NewConversation::default()).await.unwrap();
    let turns: Value = json!([{"expect": {"role": "user"}, "response": {"message":
        {"role": "assistant", "content": "It beat it by 220 %."}, "stop_reason": "end_turn"}}]);
    let client = ReplayClient::from_json(&turns.to_string(), "test").unwrap();
    let titler = Titler {
        answer: answer.map(str::to_owned).map_err(str::to_owned),
        rename: rename.then(|| (Arc::clone(&store), id.clone())),
    };
    let agent = Agent::builder(Arc::new(client))
        .store(Arc::clone(&store))
        .summarizer(Arc::new(titler))
        .build()
        .unwrap();
    let done = agent.send(&id, Input::message(QUESTION)).finish().await;
    assert_eq!(done.status, RunStatus::Answered, "{done:?}");
    store.metadata(&id).await.unwrap().title
}

#[tokio::test]
async fn the_summary_model_names_the_conversation_before_the_run_ends() {
    assert_eq!(
        title_after_a_run(Ok("\"West Q3 2024 sales against target.\"\n"), false)
            .await
            .as_deref(),
        Some("West Q3 2024 sales against target")
    );
}

#[tokio::test]
async fn a_rename_wins_and_a_failed_title_keeps_the_question() {
    assert_eq!(
        title_after_a_run(Ok("West Q3 2024 sales"), true)
            .await
            .as_deref(),
        Some("Renamed by hand")
    );
    assert_eq!(
        title_after_a_run(Err("the model is down"), false)
            .await
            .as_deref(),
        Some("why did the West region's sales jump in Q3 2024 and did it…")
    );
}
