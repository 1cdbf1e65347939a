//! # ba-skills
//!
//! Agent Skills: discovery of `SKILL.md` folders, progressive disclosure, validation
//! against the public Agent Skills format, the activation stack, per-conversation locks and the
//! `activate_skill` meta-tool.
//!
//! - [`SkillSet`] loads every skill under an ordered list of roots (first root wins a name
//!   clash; skills may sit at any depth, as in `plugins/*/skills/*/`). A [`SkillRoot`] may
//!   carry a namespace: a plugin's skills are named `PLUGIN:SKILL`
//!   ([`SkillSet::load_roots`]), so two plugins' skills of the same name both load. Loading is lenient: a
//!   broken skill becomes a [`Diagnostic`] and the rest load. Level 1 (the frontmatter) is read
//!   for every skill at load time and rendered by [`SkillSet::render_catalogue`]; Level 2
//!   ([`SkillSet::body`]) is read on first use and cached; Level 3
//!   ([`SkillSet::read_resource`]) reads files of the skill folder through a path-confined
//!   reader. [`SkillSet::reload`] picks up added, changed and deleted skills, keeping the last
//!   good version of a skill that no longer loads.
//! - [`validate()`] applies the specification's rules strictly.
//! - [`ActivationStack`] refuses cycles (with the full path) and over-deep nesting; its
//!   [`ActivationGuard`] pops on drop.
//! - [`WorkflowDef`] is a workflow read from a `WORKFLOW.md` (typed inputs and a graph of
//!   nodes with briefs, tools, outputs and branches); [`WorkflowSet`] loads them leniently,
//!   [`validate_workflow`] checks them strictly. Running one is the agent's job.
//! - [`ConversationLocks`] serializes injections per conversation.
//! - [`ActivateSkill`] is the meta-tool's logic, returning the protocol's
//!   `SkillActivationResult`.
//!
//! Neighbours: this crate depends on `ba-protocol` only. Token costs take any
//! `&dyn ba_protocol::TokenCounter` (the exact counters live in `ba-context`); the agent crate
//! wraps [`ActivateSkill`] in the tools crate's `Tool` trait.
//!
//! ```
//! use std::sync::Arc;
//! use ba_protocol::SkillActivationRequest;
//! use ba_protocol::ApproxCounter;
//! use ba_skills::{ActivateSkill, SkillSet};
//!
//! let root = tempfile::tempdir()?;
//! std::fs::create_dir_all(root.path().join("report-writer"))?;
//! std::fs::write(
//!     root.path().join("report-writer/SKILL.md"),
//!     "---\nname: report-writer\ndescription: Writes reports.\nallowed-tools: Read Write\n---\n# Steps\n",
//! )?;
//!
//! let skills = Arc::new(SkillSet::load([root.path()]));
//! assert!(skills.diagnostics().is_empty());
//! assert_eq!(skills.catalogue(&ApproxCounter)[0].name, "report-writer");
//!
//! let tool = ActivateSkill::new(Arc::clone(&skills));
//! let result = tool.activate(&SkillActivationRequest::new("report-writer"))?;
//! assert!(result.messages[1].content.contains("# Steps"));
//! assert!(result.context_modifier.allows("Read"));
//! assert!(!result.context_modifier.allows("Bash"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod activation;
mod diagnostic;
mod discover;
mod error;
mod frontmatter;
mod locks;
mod meta_tool;
mod resource;
mod set;
mod validate;
mod workflow;

pub use activation::{ActivationGuard, ActivationStack, Frame, check_activation, check_request};
pub use diagnostic::{Diagnostic, Rule, Severity};
pub use discover::{Found, SKILL_FILE, discover};
pub use error::{FrontmatterError, Result, SkillsError};
pub use frontmatter::{EXTENSION_FIELDS, Frontmatter, SPEC_FIELDS, parse_document, split_tools};
pub use locks::{ConversationGuard, ConversationLocks, DEFAULT_LOCK_TABLE_BOUND};
pub use meta_tool::{ACTIVATE_SKILL, ActivateSkill, Invoker};
pub use resource::{ResourceEntry, references};
pub use set::{
    CatalogueEntry, LevelCosts, LoadOptions, ReloadReport, Skill, SkillRoot, SkillSet, validate,
    validate_roots,
};
pub use validate::{
    MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, Strictness, is_valid_name,
};
pub use workflow::{
    END, FileReference, InputType, MAX_WORKFLOW_BYTES, Next, NodeOutput, OutputKind, StartError,
    WORKFLOW_FILE, WorkflowDef, WorkflowError, WorkflowInput, WorkflowNode, WorkflowSet,
    parse_workflow, validate_workflow, validate_workflow_text,
};
