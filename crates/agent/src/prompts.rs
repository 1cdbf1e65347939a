//! The prompt texts: one markdown file of `## name` sections, with the built-in texts as
//! the fallback for any section a file leaves out.

use std::path::Path;

use ba_context::PromptParts;

use crate::error::AgentError;

/// The built-in prompts file.
pub const BUILTIN_PROMPTS: &str = include_str!("../prompts.md");

/// The section names a prompts file may define.
pub const SECTIONS: [&str; 6] = [
    "base_rules",
    "tool_policy",
    "persona",
    "run_directive",
    "post_run_protocol",
    "structured_format",
];

/// The prompt texts of an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompts {
    /// Rules for every mode.
    pub base_rules: String,
    /// How tools may be used.
    pub tool_policy: String,
    /// The persona of agent mode.
    pub persona: String,
    /// The directive of run mode.
    pub run_directive: String,
    /// What to do once a run completed.
    pub post_run_protocol: String,
    /// The reply format of structured mode.
    pub structured_format: String,
}

impl Default for Prompts {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Prompts {
    /// The built-in texts.
    pub fn builtin() -> Self {
        // The built-in file defines every section; a test keeps it so.
        let mut p = Self::empty();
        p.apply(BUILTIN_PROMPTS, "built-in prompts")
            .unwrap_or_default();
        p
    }

    fn empty() -> Self {
        Self {
            base_rules: String::new(),
            tool_policy: String::new(),
            persona: String::new(),
            run_directive: String::new(),
            post_run_protocol: String::new(),
            structured_format: String::new(),
        }
    }

    /// The built-in texts with the sections of `text` (a prompts file) replacing theirs.
    ///
    /// # Errors
    /// [`AgentError::Config`] naming the line of a section this crate does not know.
    pub fn parse(text: &str, source: &str) -> Result<Self, AgentError> {
        let mut p = Self::builtin();
        p.apply(text, source)?;
        Ok(p)
    }

    /// Reads a prompts file.
    ///
    /// # Errors
    /// [`AgentError::Config`] when the file cannot be read or names an unknown section.
    pub fn load(path: &Path) -> Result<Self, AgentError> {
        let text = std::fs::read_to_string(path).map_err(|e| AgentError::Config {
            message: format!("cannot read the prompts file {}: {e}", path.display()),
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    fn apply(&mut self, text: &str, source: &str) -> Result<(), AgentError> {
        let mut current: Option<(String, usize)> = None;
        let mut body = String::new();
        let mut sections: Vec<(String, usize, String)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if let Some(name) = line.strip_prefix("## ") {
                if let Some((name, at)) = current.take() {
                    sections.push((name, at, std::mem::take(&mut body)));
                }
                current = Some((name.trim().to_owned(), n + 1));
                body.clear();
            } else if current.is_some() {
                body.push_str(line);
                body.push('\n');
            }
        }
        if let Some((name, at)) = current {
            sections.push((name, at, body));
        }
        for (name, line, body) in sections {
            let slot = match name.as_str() {
                "base_rules" => &mut self.base_rules,
                "tool_policy" => &mut self.tool_policy,
                "persona" => &mut self.persona,
                "run_directive" => &mut self.run_directive,
                "post_run_protocol" => &mut self.post_run_protocol,
                "structured_format" => &mut self.structured_format,
                other => {
                    return Err(AgentError::Config {
                        message: format!(
                            "{source}, line {line}: unknown prompt section `{other}` (known: {})",
                            SECTIONS.join(", ")
                        ),
                    });
                }
            };
            *slot = body.trim().to_owned();
        }
        Ok(())
    }

    /// The pieces the context builder composes the system prompt from.
    pub fn parts(&self) -> PromptParts {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        PromptParts {
            base_rules: self.base_rules.clone(),
            tool_policy: self.tool_policy.clone(),
            persona: some(&self.persona),
            run_directive: some(&self.run_directive),
            node_brief: None,
            step_context: None,
            post_run_protocol: some(&self.post_run_protocol),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_file_defines_every_section() {
        let p = Prompts::builtin();
        for (name, text) in [
            ("base_rules", &p.base_rules),
            ("tool_policy", &p.tool_policy),
            ("persona", &p.persona),
            ("run_directive", &p.run_directive),
            ("post_run_protocol", &p.post_run_protocol),
            ("structured_format", &p.structured_format),
        ] {
            assert!(!text.is_empty(), "section {name} is empty");
        }
    }

    #[test]
    fn a_file_replaces_only_its_sections() {
        let p = Prompts::parse("intro\n## persona\nYou are Ada.\n", "mine.md").unwrap();
        assert_eq!(p.persona, "You are Ada.");
        assert_eq!(p.base_rules, Prompts::builtin().base_rules);
    }

    #[test]
    fn unknown_sections_are_named_with_their_line() {
        let err = Prompts::parse("## persona\nx\n## tone\ny\n", "mine.md").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("mine.md, line 3") && text.contains("`tone`"),
            "{text}"
        );
    }
}
