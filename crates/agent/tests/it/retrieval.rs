//! Retrieval with embeddings, through the agent: a conversation whose window compacts, and
//! whose last question names a figure that left it. The `retrieval` strategy brings the
//! figure back into the window as a recalled passage, ranked by BM25 and the vectors of the
//! scripted model's `/v1/embeddings`; when that endpoint fails, the compaction ranks by BM25
//! alone, a warning says so, and the turn is answered all the same. Recall reads the log, so an
//! agent reopened on the same store recalls the same figure, and a question asked in place of
//! one taken back recalls its own item.

use std::path::Path;
use std::sync::{Arc, Mutex};

use ba_agent::{Agent, AgentSettings, Input, RunStatus};
use ba_context::{ContextBudget, RECALL_MARK};
use ba_model::{AnthropicClient, ApiKey, OpenAiEmbeddings};
use ba_storage::{ConversationId, ConversationStore as _, FileStore, NewConversation};
use ba_testkit::model::{EmbeddingsReply, Request, ScriptedModel};

use crate::support::items;

/// The recalled entry of a request's messages, when there is one.
fn recalled(r: &Request) -> Option<String> {
    let body = r.body().get("messages")?.to_string();
    let at = body.find(RECALL_MARK)?;
    Some(body[at..].chars().take(2_000).collect())
}

/// A model that reads the table, then answers a question about an item only from what its
/// window shows (it has no rule for `recall`: a window without the figure fails the test).
async fn model(embeddings: EmbeddingsReply) -> ScriptedModel {
    items::rules(ScriptedModel::builder().embeddings(embeddings))
        .start()
        .await
}

/// The messages of the warnings logged while it is set.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = Text(String::new());
            event.record(&mut text);
            self.0.lock().unwrap().push(text.0);
        }
    }
}

/// An agent on the file store under `dir` with `strategy: retrieval` and embeddings from the
/// scripted endpoint, in a window the table does not fit.
fn agent(dir: &Path, model: &ScriptedModel) -> Agent {
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let embeddings =
        OpenAiEmbeddings::new(&model.embeddings_base_url(), "scripted-embeddings", None).unwrap();
    let settings = AgentSettings {
        budget: ContextBudget::new(1_500, 200),
        strategy: "retrieval".to_owned(),
        retrieval_share: 0.15,
        ..AgentSettings::default()
    };
    Agent::builder(Arc::new(client))
        .store(Arc::new(FileStore::open(dir).unwrap()))
        .settings(settings)
        .tool(items::tool())
        .recall(false)
        .embeddings(Arc::new(embeddings))
        .build()
        .unwrap()
}

/// Sends `text`, expects an answer, and returns it with the last request that asked `text`.
async fn say(
    agent: &Agent,
    id: &ConversationId,
    model: &ScriptedModel,
    text: &str,
) -> (String, Request) {
    let run = agent.send(id, Input::message(text)).finish().await;
    assert_eq!(run.status, RunStatus::Answered, "{run:?}");
    let asked = model
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.last_user_text() == text)
        .unwrap();
    (run.final_answer.unwrap_or_default(), asked)
}

/// Reads the table, then asks for item 35; returns the answer and the request that asked.
async fn ask(model: &ScriptedModel) -> (String, Request) {
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(dir.path(), model);
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    say(&agent, &id, model, "Read the items table.").await;
    say(&agent, &id, model, "What is the value of item 35?").await
}

/// The first passage of a recalled entry.
fn first_recalled(recalled: &str) -> String {
    recalled.split("\\n").nth(1).unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_figure_that_left_the_window_comes_back_recalled_by_embeddings() {
    let model = model(EmbeddingsReply::Hashed).await;
    let (answer, asked) = ask(&model).await;
    assert!(answer.contains("777123.45"), "{answer}");
    let recalled = recalled(&asked).expect("a recalled entry in the question's window");
    assert!(recalled.contains("item 35: value 777123.45"), "{recalled}");
    // The question and the passages were embedded; the figure's line among them.
    let embedded: Vec<String> = model
        .embedding_requests()
        .into_iter()
        .flat_map(|r| r.input)
        .collect();
    assert!(
        embedded
            .iter()
            .any(|t| t.contains("What is the value of item 35?")),
        "{embedded:?}"
    );
    assert!(
        embedded
            .iter()
            .any(|t| t.contains("item 35: value 777123.45")),
        "{embedded:?}"
    );
}

#[tokio::test]
async fn a_failing_embeddings_endpoint_leaves_bm25_to_recall_and_says_so() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let warnings = Warnings::default();
    let _logged =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(warnings.clone()));
    let model = model(EmbeddingsReply::Status(
        500,
        "the embedding model is not loaded".to_owned(),
    ))
    .await;
    let (answer, asked) = ask(&model).await;
    assert!(answer.contains("777123.45"), "{answer}");
    assert!(recalled(&asked).is_some_and(|r| r.contains("item 35: value 777123.45")));
    assert!(
        !model.embedding_requests().is_empty(),
        "the endpoint was asked"
    );
    let warnings = warnings.0.lock().unwrap().clone();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("retrieval ranks by BM25 alone")
                && w.contains("the embedding model is not loaded")),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn the_agent_reopened_on_the_same_store_recalls_the_same_figure() {
    let model = model(EmbeddingsReply::Hashed).await;
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let before = agent(dir.path(), &model);
        let id = before
            .new_conversation(NewConversation::default())
            .await
            .unwrap();
        say(&before, &id, &model, "Read the items table.").await;
        let (answer, _) = say(&before, &id, &model, "What is the value of item 35?").await;
        assert!(answer.contains("777123.45"), "{answer}");
        id
    };
    // A new agent on the same folder: the compactions and the table come from the log.
    let after = agent(dir.path(), &model);
    let (answer, asked) = say(&after, &id, &model, "Once more: what is item 35 worth?").await;
    assert!(answer.contains("777123.45"), "{answer}");
    let recalled = recalled(&asked).expect("a recalled entry after the restart");
    assert!(recalled.contains("item 35: value 777123.45"), "{recalled}");
}

#[tokio::test]
async fn after_a_rewind_the_new_questions_item_is_recalled_not_the_old_ones() {
    let model = model(EmbeddingsReply::Hashed).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(dir.path(), &model);
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    say(&agent, &id, &model, "Read the items table.").await;
    let kept = agent.store().metadata(&id).await.unwrap().last_seq;
    let (_, old) = say(&agent, &id, &model, "What is the value of item 35?").await;
    assert!(first_recalled(&recalled(&old).unwrap()).contains("item 35: value 777123.45"));
    // The question is taken back and another asked in its place.
    agent.rewind(&id, kept).await.unwrap();
    let (answer, asked) = say(&agent, &id, &model, "What is the value of item 12?").await;
    let twelve = items::value(12);
    assert!(answer.contains(&twelve), "{answer}");
    assert!(!asked.shows("What is the value of item 35?"));
    let recalled = recalled(&asked).expect("a recalled entry for the new question");
    let first = first_recalled(&recalled);
    assert!(
        first.contains(&format!("item 12: value {twelve}")),
        "{recalled}"
    );
}
