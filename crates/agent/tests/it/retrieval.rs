//! Retrieval with embeddings, through the agent: a conversation whose window compacts, and
//! whose last question names a figure that left it. The `retrieval` strategy brings the
//! figure back into the window as a recalled passage, ranked by BM25 and the vectors of the
//! scripted model's `/v1/embeddings`; when that endpoint fails, the compaction ranks by BM25
//! alone, a warning says so, and the turn is answered all the same.

use std::sync::{Arc, Mutex};

use ba_agent::{Agent, AgentSettings, Input, RunStatus};
use ba_context::{ContextBudget, RECALL_MARK};
use ba_model::{AnthropicClient, ApiKey, OpenAiEmbeddings};
use ba_storage::{FileStore, NewConversation};
use ba_testkit::model::{EmbeddingsReply, Request, ScriptedModel, Turn};
use ba_tools::typed_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct Items {}

/// The value of item `i`: item 35's is the one asked for at the end.
fn value(i: usize) -> String {
    if i == 35 {
        "777123.45".to_owned()
    } else {
        format!("{}.{:02}", 10_000 + (i * 7_919) % 80_000, i % 100)
    }
}

/// The recalled entry of a request's messages, when there is one.
fn recalled(r: &Request) -> Option<String> {
    let body = r.body().get("messages")?.to_string();
    let at = body.find(RECALL_MARK)?;
    Some(body[at..].chars().take(2_000).collect())
}

/// A model that reads the table, then answers a question about item 35 only from what its
/// window shows (it has no rule for `recall`: a window without the figure fails the test).
async fn model(embeddings: EmbeddingsReply) -> ScriptedModel {
    ScriptedModel::builder()
        .embeddings(embeddings)
        .rule(
            "read the table when asked to",
            |r| r.last_user_text().contains("Read the items") && r.tool_results().is_empty(),
            |_| Turn::call("items", json!({})).with_usage(0, 1),
        )
        .rule(
            "say the table was read",
            |r| r.last_result().is_some_and(|t| t.name == "items"),
            |_| Turn::text("I read the items table.").with_usage(0, 1),
        )
        .rule(
            "answer from the window",
            |r| r.last_user_text().contains("item 35") && r.shows("item 35: value "),
            |r| {
                let body = r.body().to_string();
                let at = body.find("item 35: value ").unwrap() + "item 35: value ".len();
                let figure: String = body[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                Turn::text(format!("Item 35 is worth {figure}.")).with_usage(0, 1)
            },
        )
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

/// Reads the table, then asks for item 35 with `strategy: retrieval` and embeddings from the
/// scripted endpoint; returns the answer and the request that asked.
async fn ask(model: &ScriptedModel) -> (String, Request) {
    let dir = tempfile::tempdir().unwrap();
    let client = AnthropicClient::new(ApiKey::new("test-key"))
        .unwrap()
        .with_base_url(model.anthropic_base_url())
        .unwrap();
    let embeddings =
        OpenAiEmbeddings::new(&model.embeddings_base_url(), "scripted-embeddings", None).unwrap();
    let items = typed_tool("items", "The items table.", |_: Items, _| async move {
        let rows: String = (0..70)
            .map(|i| format!("item {i}: value {}\n", value(i)))
            .collect();
        Ok(Value::String(rows))
    });
    let settings = AgentSettings {
        budget: ContextBudget::new(1_500, 200),
        strategy: "retrieval".to_owned(),
        retrieval_share: 0.15,
        ..AgentSettings::default()
    };
    let agent = Agent::builder(Arc::new(client))
        .store(Arc::new(FileStore::open(dir.path()).unwrap()))
        .settings(settings)
        .tool(items)
        .recall(false)
        .embeddings(Arc::new(embeddings))
        .build()
        .unwrap();
    let id = agent
        .new_conversation(NewConversation::default())
        .await
        .unwrap();
    let first = agent
        .send(&id, Input::message("Read the items table."))
        .finish()
        .await;
    assert_eq!(first.status, RunStatus::Answered, "{first:?}");
    let second = agent
        .send(&id, Input::message("What is the value of item 35?"))
        .finish()
        .await;
    assert_eq!(second.status, RunStatus::Answered, "{second:?}");
    let asked = model
        .requests()
        .into_iter()
        .find(|r| r.last_user_text().contains("item 35"))
        .unwrap();
    (second.final_answer.unwrap_or_default(), asked)
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
