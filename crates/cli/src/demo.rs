//! The offline demo: a recorded business-analysis session played against the real built-in
//! tools, a real file store and a project-written skill, all set up in one folder.
//!
//! The recording ([`RECORDING`]) is in the structured-JSON mode: the model activates
//! the `sales-report` skill, reads the targets sheet of the sales workbook and queries the
//! quarterly actuals in parallel, breaks West's Q3 down by product and month, computes the
//! growth figures with `run_python`, and answers with a report that cites the saved code as a
//! `<code_ref>`. The context budget is small on purpose, so the later rounds are compressed. A
//! second question ([`CHART_QUESTION`]) queries the quarterly sales of every region and answers
//! with an HTML report drawing them as an ECharts bar chart.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ba_context::{ContextBudget, Encoding};
use ba_protocol::EntryKind;
use ba_protocol::{LogRole, Mode};
use ba_skills::SkillSet;
use ba_storage::{ConversationId, FileStore, NewConversation};

use ba_agent::{Agent, AgentBuilder, AgentError, ResponseMode};
use ba_builtins::{demo_data, demo_tools};
use ba_model::{
    DeltaSink, ExpectedRequest, ModelClient, ModelError, ModelRequest, ModelResponse, ReplayClient,
    ReplayTurn,
};

/// The question of the recorded session.
pub const QUESTION: &str = "Why did the West region's sales jump in Q3 2024, and did it beat its target? \
Give me a short report with the figures and the code behind them.";

/// The second recorded question: its report is HTML with an ECharts chart (the page's HTML
/// path, offline).
pub const CHART_QUESTION: &str = "Chart the 2024 quarterly sales of every region.";

/// The questions the recording answers (what `ba-agent serve --demo` offers).
pub const QUESTIONS: &[&str] = &[QUESTION, CHART_QUESTION];

/// The recorded model turns.
pub const RECORDING: &str = include_str!("../demo/recording.json");

/// The recording of the example workflow's run (`monthly-sales-review` for 2024-09), played by
/// `ba-agent demo --workflow` and by `serve --demo` when the page starts that run.
pub const WORKFLOW_RECORDING: &str = include_str!("../demo/workflow-recording.json");

/// The example workflow the demo runs, and its inputs.
pub const WORKFLOW: &str = "monthly-sales-review";

/// The demo's skill.
pub const SKILL_MD: &str = include_str!("../demo/skills/sales-report/SKILL.md");

/// The demo's example workflow (a definition only: listed and validated, not yet run).
pub const WORKFLOW_MD: &str = include_str!("../demo/workflows/monthly-sales-review/WORKFLOW.md");

/// The path the embedded workflow is known by in listings and diagnostics; its folder's name is
/// the workflow's name, as on disk.
pub const WORKFLOW_PATH: &str = "<demo>/workflows/monthly-sales-review/WORKFLOW.md";

/// The context window of the demo, small enough that the session is compressed: beside the
/// tool definitions (about 1 500 tokens) and the skill, the window is compacted from the fourth
/// round on.
pub const DEMO_BUDGET: usize = 5_500;

/// Why the demo could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// A file or folder could not be written.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The recording could not be read.
    #[error(transparent)]
    Recording(#[from] ModelError),
    /// The agent could not be built.
    #[error(transparent)]
    Agent(#[from] AgentError),
    /// A store could not be opened.
    #[error(transparent)]
    Store(#[from] ba_storage::StorageError),
}

/// A demo set up in a folder.
#[derive(Debug)]
pub struct Demo {
    /// The folder.
    pub dir: PathBuf,
    /// The agent.
    pub agent: Agent,
    /// The conversation to run the question in.
    pub conversation: ConversationId,
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> DemoError + use<> {
    let path = path.to_owned();
    move |source| DemoError::Io { what, path, source }
}

/// Sets the demo up in `dir` (created if missing; earlier demo files in it are replaced):
/// `data/` with the sales database, targets file, GBK targets and workbook (the recording
/// reads its `targets` sheet), `skills/sales-report/`, the conversation
/// store at the folder's root (`conversations/`, `index.json`), `code/` (saved code) and
/// `data/spill/` (large tool results). `budget`
/// replaces [`DEMO_BUDGET`].
///
/// # Errors
/// [`DemoError`] naming the file that could not be written or the part that failed.
pub async fn setup(dir: &Path, budget: Option<usize>) -> Result<Demo, DemoError> {
    setup_as(dir, budget, false).await
}

/// [`setup`] for the example workflow's run (`ba-agent demo --workflow`): a new untitled
/// conversation (the run names it), played from both recordings.
///
/// # Errors
/// As [`setup`].
pub async fn setup_workflow(dir: &Path, budget: Option<usize>) -> Result<Demo, DemoError> {
    setup_as(dir, budget, true).await
}

async fn setup_as(dir: &Path, budget: Option<usize>, workflow: bool) -> Result<Demo, DemoError> {
    // The folder is the store's root, as `home` is for the other commands; an earlier demo's
    // conversations go.
    let conversations = dir.join("conversations");
    if conversations.exists() {
        std::fs::remove_dir_all(&conversations).map_err(io("clearing", &conversations))?;
    }
    let index = dir.join("index.json");
    if index.exists() {
        std::fs::remove_file(&index).map_err(io("clearing", &index))?;
    }
    let client: Arc<dyn ModelClient> = if workflow {
        Arc::new(DemoModel::new()?)
    } else {
        Arc::new(
            ReplayClient::from_json(RECORDING, "the demo recording")?
                .with_token_counter(Arc::new(Encoding::Cl100kBase)),
        )
    };
    let agent = build(dir, budget, client)?;
    let conversation = agent
        .new_conversation(NewConversation {
            title: (!workflow).then(|| "West Q3 2024 sales".into()),
            mode: Some(if workflow { Mode::Run } else { Mode::Agent }),
            ..NewConversation::default()
        })
        .await?;
    Ok(Demo {
        dir: dir.to_owned(),
        agent,
        conversation,
    })
}

/// The demo's agent for a server: the same folder layout as [`setup`], with a model that
/// answers every conversation that asks a recorded question (the turn is chosen by what the
/// request ends with, not by a position shared by all conversations).
///
/// # Errors
/// As [`setup`].
pub fn server_agent(dir: &Path, budget: Option<usize>) -> Result<Agent, DemoError> {
    server_agent_with(dir, budget, |b| b)
}

/// [`server_agent`] with more of the builder: `serve --demo --config F` adds the file's
/// approvals and hooks, so a pause or a hook can be tried offline.
///
/// # Errors
/// As [`server_agent`].
pub fn server_agent_with(
    dir: &Path,
    budget: Option<usize>,
    more: impl FnOnce(AgentBuilder) -> AgentBuilder,
) -> Result<Agent, DemoError> {
    build_with(dir, budget, Arc::new(DemoModel::new()?), more)
}

/// The recording played per request: the turn whose expectation the request meets.
#[derive(Debug)]
pub struct DemoModel {
    turns: Vec<ReplayTurn>,
}

impl DemoModel {
    /// The demo's recordings: the question's and the example workflow's.
    ///
    /// # Errors
    /// The recording could not be read.
    pub fn new() -> Result<Self, ModelError> {
        let mut turns = ReplayClient::from_json(RECORDING, "the demo recording")?
            .turns()
            .to_vec();
        turns.extend_from_slice(
            ReplayClient::from_json(WORKFLOW_RECORDING, "the demo workflow's recording")?.turns(),
        );
        Ok(Self { turns })
    }
}

/// The last user or tool entry of a request, past the `continue` (or format correction) the
/// loop itself wrote: after a Stop and Continue the turn cut short is played again.
fn asked(request: &ModelRequest) -> ExpectedRequest {
    request
        .entries
        .iter()
        .rev()
        .filter(|e| e.include_in_context)
        .filter(|e| !matches!(e.kind(), Some(EntryKind::Continue | EntryKind::FormatError)))
        .find(|e| matches!(e.role, LogRole::User | LogRole::Tool))
        .map(|e| ExpectedRequest {
            role: Some(e.role),
            text: Some(e.text().into_owned()),
            tool_call_id: e.tool_call_id.clone(),
        })
        .unwrap_or_default()
}

fn meets(expect: &ExpectedRequest, found: &ExpectedRequest) -> bool {
    (expect.role.is_none() || expect.role == found.role)
        && (expect.text.is_none() || expect.text == found.text)
        && (expect.tool_call_id.is_none() || expect.tool_call_id == found.tool_call_id)
}

#[async_trait::async_trait]
impl ModelClient for DemoModel {
    fn provider(&self) -> &str {
        "replay"
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let found = asked(request);
        let turn = self
            .turns
            .iter()
            .find(|t| meets(&t.expect, &found))
            .cloned()
            .ok_or(ModelError::ReplayDiverged {
                turn: 0,
                expected: "a request the demo recording answers (ask a recorded question)"
                    .to_owned(),
                found: format!("{:?}", found.text.unwrap_or_default()),
            })?;
        // Matched above, past any `continue`: the inner client must not check it again.
        let mut turn = turn;
        turn.expect = ExpectedRequest::default();
        let one = ReplayClient::new(vec![turn]).with_token_counter(Arc::new(Encoding::Cl100kBase));
        one.complete_streaming(request, on_delta).await
    }
}

/// The folders, data and skill of the demo in `dir` (created if missing), and its agent.
fn build(
    dir: &Path,
    budget: Option<usize>,
    client: Arc<dyn ModelClient>,
) -> Result<Agent, DemoError> {
    build_with(dir, budget, client, |b| b)
}

/// The demo's workflows: the monthly sales review.
pub fn workflows() -> ba_skills::WorkflowSet {
    let mut set = ba_skills::WorkflowSet::default();
    set.add_text(WORKFLOW_MD, Path::new(WORKFLOW_PATH));
    set
}

fn build_with(
    dir: &Path,
    budget: Option<usize>,
    client: Arc<dyn ModelClient>,
    more: impl FnOnce(AgentBuilder) -> AgentBuilder,
) -> Result<Agent, DemoError> {
    let data = dir.join("data");
    let skill_dir = dir.join("skills").join("sales-report");
    for d in [&data, &skill_dir] {
        std::fs::create_dir_all(d).map_err(io("creating", d))?;
    }
    demo_data::generate(&data).map_err(io("writing the demo data into", &data))?;
    let skill = skill_dir.join("SKILL.md");
    std::fs::write(&skill, SKILL_MD).map_err(io("writing", &skill))?;
    // The store's workspace keeps the conversation's files: saved code, spilled data, outputs.
    let store = Arc::new(FileStore::open(dir)?);
    let skills = Arc::new(SkillSet::load([dir.join("skills")]));
    let total = budget.unwrap_or(DEMO_BUDGET);
    let builder = Agent::builder(client)
        .store(store)
        .skills(skills)
        .workflows(Arc::new(workflows()))
        .tools(demo_tools(&data))
        .configure(|s| {
            s.model = "demo-recording".into();
            s.response_mode = ResponseMode::Structured;
            s.budget = ContextBudget::new(total, total / 6);
            s.max_rounds = 8;
        });
    let agent = more(builder).build()?;
    Ok(agent)
}
