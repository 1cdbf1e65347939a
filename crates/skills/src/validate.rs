//! The Agent Skills rules, shared by the lenient loader (findings become warnings) and the
//! strict validator (findings become errors).

use crate::diagnostic::Rule;
use crate::frontmatter::{Finding, Frontmatter, SPEC_FIELDS};

/// Longest `name`, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest `description`, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility`, in characters.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// How strictly the rules are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// Loading: the client extensions `model` and `disable-model-invocation` are fine.
    Lenient,
    /// Validation against the specification: only its six fields are allowed.
    Strict,
}

/// Checks a parsed frontmatter against the rules. `dir_name` is the skill folder's name.
/// Findings come in the order unexpected fields, name, description, compatibility, then the
/// type problems met while reading values.
pub(crate) fn check(
    fm: &Frontmatter,
    type_findings: &[Finding],
    dir_name: Option<&str>,
    strictness: Strictness,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let unexpected: Vec<&str> = fm
        .keys
        .iter()
        .map(String::as_str)
        .filter(|k| match strictness {
            Strictness::Strict => !SPEC_FIELDS.contains(k),
            Strictness::Lenient => fm.extra.contains_key(*k),
        })
        .collect();
    if !unexpected.is_empty() {
        let mut sorted = unexpected.clone();
        sorted.sort_unstable();
        sorted.dedup();
        out.push(Finding::new(
            Rule::UnexpectedField,
            format!(
                "unexpected frontmatter field{} {}; the specification allows only {}",
                if sorted.len() == 1 { "" } else { "s" },
                quoted(&sorted),
                quoted(&SPEC_FIELDS),
            ),
        ));
    }
    match fm.name.as_deref().map(str::trim) {
        None | Some("") => out.push(Finding::new(
            Rule::NameMissing,
            "the required field `name` is missing or empty",
        )),
        Some(name) => check_name(name, dir_name, &mut out),
    }
    match fm.description.as_deref() {
        None => out.push(Finding::new(
            Rule::DescriptionMissing,
            "the required field `description` is missing",
        )),
        Some(d) if d.trim().is_empty() => out.push(Finding::new(
            Rule::DescriptionMissing,
            "the required field `description` is empty",
        )),
        Some(d) => {
            let n = d.chars().count();
            if n > MAX_DESCRIPTION_CHARS {
                out.push(Finding::new(
                    Rule::DescriptionTooLong,
                    format!(
                        "description is {n} characters, over the limit of {MAX_DESCRIPTION_CHARS}"
                    ),
                ));
            }
        }
    }
    if let Some(c) = fm.compatibility.as_deref() {
        let n = c.chars().count();
        if n > MAX_COMPATIBILITY_CHARS {
            out.push(Finding::new(
                Rule::CompatibilityTooLong,
                format!(
                    "compatibility is {n} characters, over the limit of {MAX_COMPATIBILITY_CHARS}"
                ),
            ));
        }
    }
    out.extend(type_findings.iter().cloned());
    out
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn check_name(name: &str, dir_name: Option<&str>, out: &mut Vec<Finding>) {
    let n = name.chars().count();
    if n > MAX_NAME_CHARS {
        out.push(Finding::new(
            Rule::NameTooLong,
            format!("name `{name}` is {n} characters, over the limit of {MAX_NAME_CHARS}"),
        ));
    }
    if name != name.to_lowercase() {
        out.push(Finding::new(
            Rule::NameNotLowercase,
            format!("name `{name}` must be lowercase"),
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        out.push(Finding::new(
            Rule::NameHyphenEdge,
            format!("name `{name}` must not start or end with a hyphen"),
        ));
    }
    if name.contains("--") {
        out.push(Finding::new(
            Rule::NameConsecutiveHyphens,
            format!("name `{name}` must not contain consecutive hyphens"),
        ));
    }
    if !name.chars().all(|c| c.is_alphanumeric() || c == '-') {
        out.push(Finding::new(
            Rule::NameInvalidCharacters,
            format!("name `{name}` may hold only letters, digits and hyphens"),
        ));
    }
    if let Some(dir) = dir_name
        && dir != name
    {
        out.push(Finding::new(
            Rule::NameMismatch,
            format!("name `{name}` differs from its folder name `{dir}`"),
        ));
    }
}

/// Whether `name` is a well-formed skill name (the format rules, without the folder match).
///
/// ```
/// assert!(ba_skills::is_valid_name("pdf-processing"));
/// assert!(!ba_skills::is_valid_name("PDF-Processing"));
/// assert!(!ba_skills::is_valid_name("pdf--processing"));
/// ```
pub fn is_valid_name(name: &str) -> bool {
    let mut out = Vec::new();
    check_name(name, None, &mut out);
    !name.is_empty() && out.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(name: &str, description: &str) -> Frontmatter {
        Frontmatter {
            name: Some(name.into()),
            description: Some(description.into()),
            keys: vec!["name".into(), "description".into()],
            ..Frontmatter::default()
        }
    }

    fn rules(f: &Frontmatter, dir: &str, s: Strictness) -> Vec<Rule> {
        check(f, &[], Some(dir), s)
            .into_iter()
            .map(|f| f.rule)
            .collect()
    }

    #[test]
    fn name_rules() {
        use Rule::*;
        let s = Strictness::Strict;
        assert_eq!(rules(&fm("pdf", "d"), "pdf", s), vec![]);
        assert_eq!(rules(&fm("PDF", "d"), "PDF", s), vec![NameNotLowercase]);
        assert_eq!(rules(&fm("-pdf", "d"), "-pdf", s), vec![NameHyphenEdge]);
        assert_eq!(
            rules(&fm("pdf--x", "d"), "pdf--x", s),
            vec![NameConsecutiveHyphens]
        );
        assert_eq!(
            rules(&fm("pdf_x", "d"), "pdf_x", s),
            vec![NameInvalidCharacters]
        );
        assert_eq!(rules(&fm("pdf", "d"), "other", s), vec![NameMismatch]);
        let long = "a".repeat(65);
        assert_eq!(rules(&fm(&long, "d"), &long, s), vec![NameTooLong]);
        assert_eq!(rules(&fm(&"a".repeat(64), "d"), &"a".repeat(64), s), vec![]);
        // Lowercase letters of other scripts are letters, as in the reference validator.
        assert_eq!(rules(&fm("données", "d"), "données", s), vec![]);
    }

    #[test]
    fn description_and_compatibility_limits() {
        use Rule::*;
        let s = Strictness::Strict;
        assert_eq!(rules(&fm("a", &"é".repeat(1024)), "a", s), vec![]);
        assert_eq!(
            rules(&fm("a", &"é".repeat(1025)), "a", s),
            vec![DescriptionTooLong]
        );
        assert_eq!(rules(&fm("a", "  "), "a", s), vec![DescriptionMissing]);
        let mut f = fm("a", "d");
        f.compatibility = Some("x".repeat(501));
        assert_eq!(rules(&f, "a", s), vec![CompatibilityTooLong]);
        f.compatibility = Some("x".repeat(500));
        assert_eq!(rules(&f, "a", s), vec![]);
    }

    #[test]
    fn extensions_are_fields_only_when_lenient() {
        let mut f = fm("a", "d");
        f.model = Some("m".into());
        f.keys.push("model".into());
        f.extra.insert("when_to_use".into(), serde_json::json!("x"));
        f.keys.push("when_to_use".into());
        let strict = check(&f, &[], Some("a"), Strictness::Strict);
        assert_eq!(strict.len(), 1);
        assert!(
            strict[0].message.contains("`model`, `when_to_use`"),
            "{}",
            strict[0].message
        );
        let lenient = check(&f, &[], Some("a"), Strictness::Lenient);
        assert_eq!(lenient.len(), 1);
        assert!(
            !lenient[0].message.contains("`model`,"),
            "{}",
            lenient[0].message
        );
    }

    #[test]
    fn valid_name_helper() {
        assert!(is_valid_name("a1-b2"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("a-"));
    }
}
