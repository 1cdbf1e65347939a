//! Reading `WORKFLOW.md` files: one text, every file under a list of roots (lenient), or a
//! strict validation.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::{WorkflowDef, graph, parse::Reader};
use crate::diagnostic::{Diagnostic, Rule, Severity};
use crate::discover::discover_files;
use crate::frontmatter::{self, HeadError};
use crate::set::{LoadOptions, frontmatter_rule};
use crate::validate::Strictness;

/// The file that makes a folder a workflow.
pub const WORKFLOW_FILE: &str = "WORKFLOW.md";

/// The largest `WORKFLOW.md` read, in bytes: a skill's default frontmatter and body limits
/// together.
pub const MAX_WORKFLOW_BYTES: u64 = 64 * 1024 + 1024 * 1024;

fn read_text(
    text: &str,
    path: &Path,
    strictness: Strictness,
    known_tools: Option<&BTreeSet<String>>,
) -> (Option<WorkflowDef>, Vec<Diagnostic>) {
    let fail = |rule, message: String| {
        (
            None,
            vec![Diagnostic::new(path, Severity::Error, rule, message)],
        )
    };
    let limits = LoadOptions::default();
    let head = match frontmatter::read_head(text.as_bytes(), limits.max_frontmatter_bytes) {
        Ok(head) => head,
        Err(HeadError::Parse(problem)) => {
            return fail(frontmatter_rule(&problem), problem.to_string());
        }
        Err(HeadError::Io(err)) => return fail(Rule::Io, err.to_string()),
    };
    let mapping = match frontmatter::parse_yaml(&head.yaml) {
        Ok(m) => m,
        Err(problem) => return fail(frontmatter_rule(&problem), problem.to_string()),
    };
    let serde_json::Value::Object(front) = frontmatter::to_json(&yaml_rust2::Yaml::Hash(mapping))
    else {
        return fail(
            Rule::FrontmatterNotMapping,
            "the frontmatter is not a mapping".to_owned(),
        );
    };
    let body = frontmatter::body_text(text.get(head.body_offset..).unwrap_or(""));
    let dir_name = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    let mut reader = Reader::new(path, strictness);
    let def = reader.workflow(&front, body, dir_name.as_deref());
    let mut found = reader.found;
    if let Some(def) = &def {
        found.extend(graph::check(def, known_tools));
    }
    let usable = !found.iter().any(Diagnostic::is_error);
    (def.filter(|_| usable), found)
}

/// Reads one `WORKFLOW.md` text leniently: unknown fields are warnings, and the definition
/// comes back only when nothing is an error. `path` names the file in the diagnostics (an
/// embedded workflow may give any path; its folder's name should be the workflow's name).
///
/// ```
/// let text = "---\nname: review\ndescription: Reviews.\nnodes:\n  - id: a\n    title: A\n    brief: Do a.\n---\nGuidance.\n";
/// let (def, diagnostics) = ba_skills::parse_workflow(text, "review/WORKFLOW.md".as_ref());
/// assert!(diagnostics.is_empty(), "{diagnostics:?}");
/// let def = def.unwrap();
/// assert_eq!(def.first_node().map(|n| n.id.as_str()), Some("a"));
/// assert_eq!(def.body, "Guidance.\n");
/// ```
pub fn parse_workflow(text: &str, path: &Path) -> (Option<WorkflowDef>, Vec<Diagnostic>) {
    read_text(text, path, Strictness::Lenient, None)
}

/// Strict validation of one `WORKFLOW.md` text: unknown fields are errors, and with
/// `known_tools` every tool a node allows must be one of them.
pub fn validate_workflow_text(
    text: &str,
    path: &Path,
    known_tools: Option<&BTreeSet<String>>,
) -> Vec<Diagnostic> {
    read_text(text, path, Strictness::Strict, known_tools).1
}

/// Reads a file: a regular file inside its folder (a symlink out of it is refused), no larger
/// than [`MAX_WORKFLOW_BYTES`], UTF-8.
fn read_file(path: &Path) -> Result<String, Diagnostic> {
    let fail = |rule, message: String| Diagnostic::new(path, Severity::Error, rule, message);
    let io = |err: std::io::Error| fail(Rule::Io, format!("could not read {WORKFLOW_FILE}: {err}"));
    let real = path.canonicalize().map_err(io)?;
    let folder = path
        .parent()
        .map(Path::canonicalize)
        .transpose()
        .map_err(io)?;
    if folder.is_some_and(|f| real.parent() != Some(f.as_path())) {
        return Err(fail(
            Rule::Io,
            format!("{WORKFLOW_FILE} is a link to a file outside its folder; it is not read"),
        ));
    }
    let file = std::fs::File::open(&real).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_WORKFLOW_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_WORKFLOW_BYTES {
        return Err(fail(
            Rule::BodyTooLarge,
            format!("{WORKFLOW_FILE} is over the limit of {MAX_WORKFLOW_BYTES} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        fail(
            Rule::NotText,
            format!(
                "the file is not UTF-8 text (invalid UTF-8 at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

fn load_roots(
    roots: &[PathBuf],
    strictness: Strictness,
    known_tools: Option<&BTreeSet<String>>,
) -> (Vec<(Option<WorkflowDef>, PathBuf)>, Vec<Diagnostic>) {
    let (found, mut diagnostics) = discover_files(
        roots,
        WORKFLOW_FILE,
        "workflow",
        LoadOptions::default().max_depth,
    );
    let mut defs = Vec::new();
    for f in found {
        match read_file(&f.skill_md) {
            Ok(text) => {
                let (def, diags) = read_text(&text, &f.skill_md, strictness, known_tools);
                diagnostics.extend(diags);
                defs.push((def, f.skill_md));
            }
            Err(diag) => diagnostics.push(diag),
        }
    }
    (defs, diagnostics)
}

/// Strict validation of every `WORKFLOW.md` at `path`: a `WORKFLOW.md` file itself, or every
/// one under a folder (at any depth, as skills are found). With `known_tools`, every tool a
/// node allows must be one of them. Returns every finding; any error fails the validation.
pub fn validate_workflow(path: &Path, known_tools: Option<&BTreeSet<String>>) -> Vec<Diagnostic> {
    if path.is_file() {
        return match read_file(path) {
            Ok(text) => validate_workflow_text(&text, path, known_tools),
            Err(diag) => vec![diag],
        };
    }
    load_roots(&[path.to_path_buf()], Strictness::Strict, known_tools).1
}

/// The workflows found under a list of roots, loaded leniently: a broken workflow becomes
/// diagnostics and the rest load; the first root wins a name clash.
#[derive(Debug, Clone, Default)]
pub struct WorkflowSet {
    workflows: BTreeMap<String, WorkflowDef>,
    diagnostics: Vec<Diagnostic>,
}

impl WorkflowSet {
    /// Loads every `WORKFLOW.md` under `roots`, in root order.
    pub fn load(roots: &[PathBuf]) -> Self {
        let (defs, diagnostics) = load_roots(roots, Strictness::Lenient, None);
        let mut set = Self {
            workflows: BTreeMap::new(),
            diagnostics,
        };
        for def in defs.into_iter().filter_map(|(def, _)| def) {
            set.insert(def);
        }
        set
    }

    /// Adds a workflow read from `text` (an embedded one) after those already loaded: it loses
    /// a name clash. Its diagnostics join the set's.
    pub fn add_text(&mut self, text: &str, path: &Path) {
        let (def, diagnostics) = parse_workflow(text, path);
        self.diagnostics.extend(diagnostics);
        if let Some(def) = def {
            self.insert(def);
        }
    }

    fn insert(&mut self, def: WorkflowDef) {
        if let Some(first) = self.workflows.get(&def.name) {
            self.diagnostics.push(Diagnostic::new(
                &def.path,
                Severity::Warning,
                Rule::NameClash,
                format!(
                    "workflow `{}` is also defined at {}, which wins; this one is ignored",
                    def.name,
                    first.path.display()
                ),
            ));
            return;
        }
        self.workflows.insert(def.name.clone(), def);
    }

    /// The workflow of this name.
    pub fn get(&self, name: &str) -> Option<&WorkflowDef> {
        self.workflows.get(name)
    }

    /// The workflow `name` and `given` read as its inputs (defaults for those not given):
    /// what a run starts from, checked the same way by every front end.
    ///
    /// # Errors
    /// [`StartError`]: an unknown name (naming the known ones), inputs that do not read (each
    /// problem a sentence naming the input), a workflow without nodes.
    pub fn start(
        &self,
        name: &str,
        given: &BTreeMap<String, String>,
    ) -> Result<(&WorkflowDef, serde_json::Map<String, serde_json::Value>), StartError> {
        let Some(definition) = self.get(name) else {
            let known: Vec<&str> = self.workflows().map(|w| w.name.as_str()).collect();
            return Err(StartError::Unknown {
                name: name.to_owned(),
                known: if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                },
            });
        };
        let inputs = definition
            .resolve_inputs(given)
            .map_err(|problems| StartError::Inputs {
                name: name.to_owned(),
                problems: problems.join("; "),
            })?;
        if definition.first_node().is_none() {
            return Err(StartError::NoNodes {
                name: name.to_owned(),
            });
        }
        Ok((definition, inputs))
    }

    /// Every workflow, by name.
    pub fn workflows(&self) -> impl Iterator<Item = &WorkflowDef> {
        self.workflows.values()
    }

    /// What loading found.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }
}

/// Why a run of a workflow cannot start ([`WorkflowSet::start`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// No workflow has this name.
    #[error("no workflow named {name:?} (known: {known})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The workflows there are, comma-separated, or `none`.
        known: String,
    },
    /// Inputs that do not read as their types, unknown ones, missing required ones.
    #[error("workflow {name:?}: {problems}")]
    Inputs {
        /// The workflow.
        name: String,
        /// Each problem, a sentence naming the input, joined by `; `.
        problems: String,
    },
    /// The workflow has no node to start at.
    #[error("workflow {name:?} has no nodes")]
    NoNodes {
        /// The workflow.
        name: String,
    },
}
