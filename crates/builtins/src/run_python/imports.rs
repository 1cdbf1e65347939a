//! The import allow-list of `run_python`: a convenience that tells the model early which modules
//! it may use, not a boundary (the sandbox is). Strings and comments are skipped; relative
//! imports are refused.

use super::BuiltinError;

/// Checks every `import x` / `from x import y` in `code` against `allowed` (top-level names).
/// Strings and comments are skipped; relative imports are refused since the code has no
/// package.
pub fn check_imports(code: &str, allowed: &[String]) -> Result<(), BuiltinError> {
    for (module, line) in find_imports(code) {
        let top = module.split('.').next().unwrap_or_default();
        let ok = top == "__future__" || (!top.is_empty() && allowed.iter().any(|a| a == top));
        if !ok {
            return Err(BuiltinError::ImportRefused {
                module,
                line,
                allowed: allowed.join(", "),
            });
        }
    }
    Ok(())
}

/// The modules imported by `code`, each with the 1-based line of its statement.
fn find_imports(code: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (text, line) in logical_lines(code) {
        for segment in text.split(';') {
            scan_statement(segment.trim(), line, &mut found);
        }
    }
    found
}

/// Compound statements whose body can follow the colon on the same line.
const COMPOUND: [&str; 11] = [
    "if", "elif", "else", "try", "except", "finally", "with", "for", "while", "def", "class",
];

fn scan_statement(stmt: &str, line: usize, found: &mut Vec<(String, usize)>) {
    let first = stmt.split_whitespace().next().unwrap_or_default();
    if let Some(rest) = stmt.strip_prefix("import").filter(|_| first == "import") {
        for part in rest.replace(['(', ')'], " ").split(',') {
            if let Some(module) = part.split_whitespace().next() {
                found.push((module.to_owned(), line));
            }
        }
    } else if let Some(rest) = stmt.strip_prefix("from").filter(|_| first == "from") {
        if let Some(module) = rest.split_whitespace().next() {
            found.push((module.to_owned(), line));
        }
    } else if COMPOUND.contains(&first.trim_end_matches(':'))
        && let Some(colon) = stmt.find(':')
    {
        scan_statement(stmt[colon + 1..].trim(), line, found);
    }
}

/// Joins physical lines into logical ones (open brackets, backslash continuations) with string
/// contents and comments removed; each comes with the line it starts on.
fn logical_lines(code: &str) -> Vec<(String, usize)> {
    let mut lines = Vec::new();
    let mut current = String::new();
    let mut start_line = 1;
    let mut line = 1;
    let mut depth = 0i32;
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                while chars.peek().is_some_and(|&d| d != '\n') {
                    chars.next();
                }
            }
            '\'' | '"' => {
                let triple = chars.peek() == Some(&c) && {
                    let mut ahead = chars.clone();
                    ahead.next();
                    ahead.peek() == Some(&c)
                };
                if triple {
                    chars.next();
                    chars.next();
                }
                let mut run = 0;
                while let Some(d) = chars.next() {
                    if d == '\n' {
                        line += 1;
                        if !triple {
                            break;
                        }
                    }
                    if d == '\\' {
                        if chars.next() == Some('\n') {
                            line += 1;
                        }
                        run = 0;
                        continue;
                    }
                    if d == c {
                        run += 1;
                        if !triple || run == 3 {
                            break;
                        }
                    } else {
                        run = 0;
                    }
                }
                current.push_str("\"\"");
            }
            '(' | '[' | '{' => {
                depth += 1;
                current.push(c);
            }
            ')' | ']' | '}' => {
                depth -= 1;
                current.push(c);
            }
            '\\' if chars.peek() == Some(&'\n') => {
                chars.next();
                line += 1;
                current.push(' ');
            }
            '\n' => {
                line += 1;
                if depth > 0 {
                    current.push(' ');
                } else {
                    lines.push((std::mem::take(&mut current), start_line));
                    start_line = line;
                }
            }
            _ => {
                if current.trim().is_empty() && !c.is_whitespace() {
                    start_line = line;
                }
                current.push(c);
            }
        }
    }
    lines.push((current, start_line));
    lines
}

#[cfg(test)]
mod tests {
    use super::super::DEFAULT_ALLOWED_MODULES;
    use super::*;

    fn allowed() -> Vec<String> {
        DEFAULT_ALLOWED_MODULES
            .iter()
            .map(|m| (*m).to_owned())
            .collect()
    }

    fn imports(code: &str) -> Vec<(String, usize)> {
        find_imports(code)
    }

    #[test]
    fn finds_imports_in_all_their_shapes() {
        let code = "import pandas as pd, numpy\nfrom matplotlib import (\n    pyplot,\n)\n\
                    x = 'import os'  # import sys\ns = \"\"\"\nimport shutil\n\"\"\"\n\
                    if True: import socket\nimport json; from os import path\n\
                    from . import sibling\n";
        let got = imports(code);
        let names: Vec<&str> = got.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(
            names,
            ["pandas", "numpy", "matplotlib", "socket", "json", "os", "."]
        );
        assert_eq!(got[3].1, 9);
        assert_eq!(got[5].1, 10);
    }

    #[test]
    fn import_check_names_the_module_and_line() {
        check_imports(
            "import pandas.io\nfrom __future__ import annotations\n",
            &allowed(),
        )
        .unwrap();
        let err = check_imports("x = 1\nimport os\n", &allowed()).unwrap_err();
        assert!(
            matches!(&err, BuiltinError::ImportRefused { module, line: 2, .. } if module == "os"),
            "{err}"
        );
        let err = check_imports("from subprocess import run", &allowed()).unwrap_err();
        assert!(err.to_string().contains("subprocess"), "{err}");
        assert!(check_imports("from .x import y", &allowed()).is_err());
    }

    proptest::proptest! {
        #[test]
        fn import_scanner_never_panics(code in "[a-z .,;:()#'\"\\\n]{0,80}") {
            let _ = find_imports(&code);
        }
    }
}
