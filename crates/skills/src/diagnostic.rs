//! Diagnostics: what a lenient load or a strict validation found wrong with a skill or a
//! workflow.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum Severity {
    /// The skill still works; the finding is worth fixing.
    Warning,
    /// The skill breaks a rule (strict validation) or could not be loaded at all.
    Error,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// The rule a finding is about; serialised in kebab-case (`description-too-long`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum Rule {
    /// A root folder does not exist or cannot be read.
    RootUnreadable,
    /// A file or folder could not be read.
    Io,
    /// `SKILL.md` is not UTF-8 text.
    NotText,
    /// `SKILL.md` has no frontmatter.
    MissingFrontmatter,
    /// The frontmatter is never closed.
    UnterminatedFrontmatter,
    /// The frontmatter is longer than the limit.
    FrontmatterTooLarge,
    /// The frontmatter is not valid YAML.
    InvalidYaml,
    /// The frontmatter is not a mapping.
    FrontmatterNotMapping,
    /// `name` is missing or empty.
    NameMissing,
    /// `name` is longer than 64 characters.
    NameTooLong,
    /// `name` has uppercase letters.
    NameNotLowercase,
    /// `name` starts or ends with a hyphen.
    NameHyphenEdge,
    /// `name` has `--`.
    NameConsecutiveHyphens,
    /// `name` has characters other than letters, digits and hyphens.
    NameInvalidCharacters,
    /// `name` differs from the folder name.
    NameMismatch,
    /// `description` is missing or empty.
    DescriptionMissing,
    /// `description` is longer than 1024 characters.
    DescriptionTooLong,
    /// `compatibility` is longer than 500 characters.
    CompatibilityTooLong,
    /// A field has the wrong YAML type.
    FieldType,
    /// A key outside the Agent Skills fields.
    UnexpectedField,
    /// `metadata` values must be strings.
    MetadataNotString,
    /// The body is over the size limit.
    BodyTooLarge,
    /// Two skills share a name; the first root wins.
    NameClash,
    /// A reload could not read a skill (or its root) that loaded before; the last good version
    /// is kept until the problem is fixed.
    KeptLastGood,
    /// A required field of a workflow, a node, an input or an output is missing.
    FieldMissing,
    /// A workflow has no nodes.
    NoNodes,
    /// Two nodes, inputs or outputs share an id or a name.
    DuplicateId,
    /// A `next`, a case or a default names a node the workflow does not have.
    UnknownNode,
    /// A branch's `on` names an output its node does not declare.
    BranchOnUndeclared,
    /// A branch on a decision misses one of its options and has no default.
    BranchMissesOption,
    /// A branch's case is not one of the decision's options.
    CaseNotAnOption,
    /// A node allows a tool that is not known.
    UnknownTool,
    /// An input's `type` is not one the workflows know.
    UnknownInputType,
    /// An output's `kind` is not one the workflows know.
    UnknownOutputKind,
    /// An input's `default` does not read as its type.
    BadDefault,
    /// A node cannot be reached from the first node.
    Unreachable,
    /// A node from which `end` cannot be reached (a cycle without an exit).
    NoWayOut,
}

impl Rule {
    /// The kebab-case id (`description-too-long`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RootUnreadable => "root-unreadable",
            Self::Io => "io",
            Self::NotText => "not-text",
            Self::MissingFrontmatter => "missing-frontmatter",
            Self::UnterminatedFrontmatter => "unterminated-frontmatter",
            Self::FrontmatterTooLarge => "frontmatter-too-large",
            Self::InvalidYaml => "invalid-yaml",
            Self::FrontmatterNotMapping => "frontmatter-not-mapping",
            Self::NameMissing => "name-missing",
            Self::NameTooLong => "name-too-long",
            Self::NameNotLowercase => "name-not-lowercase",
            Self::NameHyphenEdge => "name-hyphen-edge",
            Self::NameConsecutiveHyphens => "name-consecutive-hyphens",
            Self::NameInvalidCharacters => "name-invalid-characters",
            Self::NameMismatch => "name-mismatch",
            Self::DescriptionMissing => "description-missing",
            Self::DescriptionTooLong => "description-too-long",
            Self::CompatibilityTooLong => "compatibility-too-long",
            Self::FieldType => "field-type",
            Self::UnexpectedField => "unexpected-field",
            Self::MetadataNotString => "metadata-not-string",
            Self::BodyTooLarge => "body-too-large",
            Self::NameClash => "name-clash",
            Self::KeptLastGood => "kept-last-good",
            Self::FieldMissing => "field-missing",
            Self::NoNodes => "no-nodes",
            Self::DuplicateId => "duplicate-id",
            Self::UnknownNode => "unknown-node",
            Self::BranchOnUndeclared => "branch-on-undeclared",
            Self::BranchMissesOption => "branch-misses-option",
            Self::CaseNotAnOption => "case-not-an-option",
            Self::UnknownTool => "unknown-tool",
            Self::UnknownInputType => "unknown-input-type",
            Self::UnknownOutputKind => "unknown-output-kind",
            Self::BadDefault => "bad-default",
            Self::Unreachable => "unreachable",
            Self::NoWayOut => "no-way-out",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The `SKILL.md` (or folder) the finding is about.
    pub path: PathBuf,
    /// How serious it is.
    pub severity: Severity,
    /// The rule.
    pub rule: Rule,
    /// A sentence for a person.
    pub message: String,
}

impl Diagnostic {
    /// A new finding.
    pub fn new(
        path: impl Into<PathBuf>,
        severity: Severity,
        rule: Rule,
        message: impl Into<String>,
    ) -> Self {
        Self {
            path: path.into(),
            severity,
            rule,
            message: message.into(),
        }
    }

    /// Whether it is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}[{}]: {}",
            self.path.display(),
            self.severity.as_str(),
            self.rule,
            self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use ba_testkit::assert_wire_names;

    use super::{Rule, Severity};
    use crate::workflow::{InputType, OutputKind};

    /// The rule ids and the workflow kinds are what files and scripts use.
    #[test]
    fn every_name_is_the_wire_name() {
        assert_wire_names(Rule::as_str);
        assert_wire_names(Severity::as_str);
        assert_wire_names(InputType::as_str);
        assert_wire_names(OutputKind::as_str);
    }
}
