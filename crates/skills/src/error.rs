//! The crate's one error type.

use std::path::PathBuf;

/// Why a `SKILL.md` could not be split into frontmatter and body, or its frontmatter read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrontmatterError {
    /// The file does not start with a `---` line.
    #[error("the file does not start with a `---` frontmatter line")]
    Missing,
    /// The opening `---` has no closing `---` line.
    #[error("the frontmatter opened on line 1 is never closed by a `---` line")]
    Unterminated,
    /// The frontmatter is longer than the limit.
    #[error("the frontmatter is longer than {limit} bytes without a closing `---` line")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The file holds a NUL byte or is not UTF-8.
    #[error("the file is not UTF-8 text ({reason})")]
    NotText {
        /// What gave it away.
        reason: String,
    },
    /// The frontmatter is not valid YAML.
    #[error("invalid YAML in the frontmatter{}: {message}", line.map(|l| format!(" at line {l}")).unwrap_or_default())]
    InvalidYaml {
        /// 1-based line inside the file, when the parser knows it.
        line: Option<usize>,
        /// The parser's description.
        message: String,
    },
    /// The frontmatter is valid YAML but not a mapping of keys to values.
    #[error("the frontmatter is a YAML {found}, not a mapping of keys to values")]
    NotMapping {
        /// What it is instead (`sequence`, `string`, …).
        found: &'static str,
    },
}

/// What went wrong loading, reading or activating a skill.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillsError {
    /// No loaded skill has this name.
    #[error("no skill named `{name}` is loaded")]
    UnknownSkill {
        /// The name asked for.
        name: String,
    },
    /// A file could not be read.
    #[error("could not read {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A `SKILL.md` could not be parsed.
    #[error("{}: {problem}", path.display())]
    Frontmatter {
        /// The `SKILL.md`.
        path: PathBuf,
        /// What is wrong with it.
        problem: FrontmatterError,
    },
    /// The body of a `SKILL.md` is over the size limit.
    #[error("the body of skill `{skill}` ({}) is {size} bytes, over the limit of {limit} bytes", path.display())]
    BodyTooLarge {
        /// The skill.
        skill: String,
        /// Its `SKILL.md`.
        path: PathBuf,
        /// The file size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// A resource path was refused before touching the disk.
    #[error("resource path `{path}` of skill `{skill}` is refused: {reason}")]
    InvalidResourcePath {
        /// The skill.
        skill: String,
        /// The path as given.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A resource does not exist in the skill folder.
    #[error("resource `{path}` of skill `{skill}` does not exist in {}", dir.display())]
    ResourceNotFound {
        /// The skill.
        skill: String,
        /// The path as given.
        path: String,
        /// The skill folder.
        dir: PathBuf,
    },
    /// A resource resolves (through a symlink) to a place outside the skill folder.
    #[error("resource `{path}` of skill `{skill}` resolves outside the skill folder")]
    ResourceEscapes {
        /// The skill.
        skill: String,
        /// The path as given.
        path: String,
    },
    /// A resource is a folder or a special file.
    #[error("resource `{path}` of skill `{skill}` is not a regular file")]
    ResourceNotAFile {
        /// The skill.
        skill: String,
        /// The path as given.
        path: String,
    },
    /// A resource is over the size limit.
    #[error(
        "resource `{path}` of skill `{skill}` is {size} bytes, over the limit of {limit} bytes"
    )]
    ResourceTooLarge {
        /// The skill.
        skill: String,
        /// The path as given.
        path: String,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// A resource is not UTF-8 text.
    #[error("resource `{path}` of skill `{skill}` is not UTF-8 text")]
    ResourceNotText {
        /// The skill.
        skill: String,
        /// The path as given.
        path: String,
    },
    /// Activating the skill would close a cycle.
    #[error("skill activation cycle refused: {}", path.join(" → "))]
    Cycle {
        /// The active chain, outermost first, ending with the skill that closes the cycle.
        path: Vec<String>,
    },
    /// Activating the skill would nest deeper than allowed.
    #[error(
        "activating skill `{skill}` would exceed the nesting limit of {max_depth} (active: {})",
        display_chain(chain)
    )]
    DepthExceeded {
        /// The skill asked for.
        skill: String,
        /// The active chain, outermost first.
        chain: Vec<String>,
        /// The limit.
        max_depth: u32,
    },
    /// The request's disclosure level is not 1, 2 or 3.
    #[error("load level {level} is not one of 1, 2, 3")]
    InvalidLoadLevel {
        /// The level asked for.
        level: u8,
    },
    /// The meta-tool's arguments do not match its input schema.
    #[error("invalid arguments for `activate_skill`: {message}")]
    InvalidArguments {
        /// What is wrong, naming the field.
        message: String,
    },
    /// The skill sets `disable-model-invocation` and the model asked for it.
    #[error("skill `{skill}` can only be activated by the user (disable-model-invocation is set)")]
    ModelInvocationDisabled {
        /// The skill.
        skill: String,
    },
}

fn display_chain(chain: &[String]) -> String {
    if chain.is_empty() {
        "none".to_owned()
    } else {
        chain.join(" → ")
    }
}

/// The crate's result type.
pub type Result<T, E = SkillsError> = std::result::Result<T, E>;
