//! `${VAR}` and `${VAR:-default}` expansion, as Claude Code applies it to `.mcp.json`.

/// A string after expansion, and the variables it named that were not set.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Expanded {
    /// The expanded text.
    pub value: String,
    /// Variables written as `${VAR}` that were unset: they stay in `value` literally.
    pub unset: Vec<String>,
}

/// Expands `${VAR}` and `${VAR:-default}` in `input`, reading variables through `lookup`.
///
/// - `${VAR}` becomes the variable's value; when it is unset the text stays as written and the
///   name is reported in [`Expanded::unset`].
/// - `${VAR:-default}` becomes the value when it is set and not empty, otherwise `default`
///   (taken literally, up to the first `}`).
/// - A bare `$VAR`, and anything after `${` that is not a variable name, stays as written.
///
/// ```
/// let env = |k: &str| (k == "TOKEN").then(|| "s3cret".to_owned());
/// let e = ba_mcp::expand_vars("Bearer ${TOKEN} ${HOST:-localhost} $TOKEN ${NOPE}", env);
/// assert_eq!(e.value, "Bearer s3cret localhost $TOKEN ${NOPE}");
/// assert_eq!(e.unset, ["NOPE"]);
/// ```
pub fn expand_vars(input: &str, lookup: impl Fn(&str) -> Option<String>) -> Expanded {
    let mut value = String::with_capacity(input.len());
    let mut unset = Vec::new();
    let mut rest = input;
    while let Some(start) = rest.find("${") {
        value.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match parse_reference(after) {
            Some((name, default, used)) => {
                let found = lookup(name);
                match (found, default) {
                    (Some(v), Some(_)) if !v.is_empty() => value.push_str(&v),
                    (_, Some(d)) => value.push_str(d),
                    (Some(v), None) => value.push_str(&v),
                    (None, None) => {
                        value.push_str(&rest[start..start + 2 + used]);
                        if !unset.iter().any(|u| u == name) {
                            unset.push(name.to_owned());
                        }
                    }
                }
                rest = &after[used..];
            }
            None => {
                value.push_str("${");
                rest = after;
            }
        }
    }
    value.push_str(rest);
    Expanded { value, unset }
}

/// Reads `NAME}` or `NAME:-default}` at the start of `s`: the name, the default and the bytes
/// used, or `None` when `s` does not start with a reference.
fn parse_reference(s: &str) -> Option<(&str, Option<&str>, usize)> {
    let name_len = s
        .char_indices()
        .take_while(|&(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()))
        .count();
    if name_len == 0 {
        return None;
    }
    let name = &s[..name_len];
    let tail = &s[name_len..];
    if tail.starts_with('}') {
        return Some((name, None, name_len + 1));
    }
    if let Some(d) = tail.strip_prefix(":-") {
        let end = d.find('}')?;
        return Some((name, Some(&d[..end]), name_len + 2 + end + 1));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "HOME" => Some("/home/a".into()),
            "EMPTY" => Some(String::new()),
            "V1" => Some("one".into()),
            _ => None,
        }
    }

    #[test]
    fn forms() {
        let cases = [
            ("${HOME}/x", "/home/a/x"),
            ("${V1}${V1}", "oneone"),
            ("${MISSING:-dflt}", "dflt"),
            ("${EMPTY:-dflt}", "dflt"),
            ("${EMPTY}", ""),
            ("${HOME:-dflt}", "/home/a"),
            ("${MISSING:-}", ""),
            ("$HOME", "$HOME"),
            ("${", "${"),
            ("${1A}", "${1A}"),
            ("${A-b}", "${A-b}"),
            ("${MISSING:-no end", "${MISSING:-no end"),
            ("a${MISSING}b", "a${MISSING}b"),
            ("${V1:-${HOME}}", "one}"),
            ("é${V1}é", "éoneé"),
        ];
        for (input, want) in cases {
            assert_eq!(expand_vars(input, env).value, want, "{input}");
        }
        assert_eq!(expand_vars("${A} ${A} ${B:-x} ${HOME}", env).unset, ["A"]);
    }

    proptest! {
        #[test]
        fn text_without_references_is_unchanged(s in "[^$]*") {
            prop_assert_eq!(expand_vars(&s, env).value, s);
        }

        #[test]
        fn unset_references_stay_literal(s in "\\PC*") {
            let e = expand_vars(&s, |_| None);
            // With nothing set, only `:-` defaults change the text.
            if !s.contains(":-") {
                prop_assert_eq!(e.value, s);
            }
        }
    }
}
