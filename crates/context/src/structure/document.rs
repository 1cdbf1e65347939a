//! Documents: JSON (one document or JSON lines, cut short or not) and YAML, read as paths to
//! values. The values a document is read for are those outside its lists of records — a
//! summary object, a total, a count — each kept with its path.

use std::collections::HashMap;

use super::names::is_aggregate;
use super::{KeyItem, number};

/// A step of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Seg {
    Key(String),
    Index(usize),
}

/// A scalar of a document: where it is, and how it is written.
#[derive(Debug, Clone)]
struct Leaf {
    path: Vec<Seg>,
    /// The scalar as written (a string without its quotes).
    raw: String,
    /// Whether it was written as a string.
    string: bool,
    /// Its place among the document's scalars.
    order: usize,
}

fn path_text(path: &[Seg]) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

#[derive(Debug)]
enum Frame {
    Object {
        key: Option<String>,
        expect_key: bool,
    },
    Array {
        index: usize,
    },
}

/// The scalars of a JSON text (one document, JSON lines, or a document cut short), or `None`
/// when it is not JSON.
fn json_leaves(text: &str) -> Option<Vec<Leaf>> {
    let first = text.trim_start().chars().next()?;
    if first != '{' && first != '[' {
        return None;
    }
    let cs: Vec<char> = text.chars().collect();
    let mut stack: Vec<Frame> = Vec::new();
    let mut leaves = Vec::new();
    let mut documents = 0usize;
    let mut odd = 0usize;
    let mut seen = 0usize;
    let mut i = 0;
    let path_of = |stack: &[Frame], documents: usize| -> Vec<Seg> {
        let mut p = vec![Seg::Index(documents)];
        for f in stack {
            match f {
                Frame::Object { key, .. } => p.push(Seg::Key(key.clone().unwrap_or_default())),
                Frame::Array { index } => p.push(Seg::Index(*index)),
            }
        }
        p
    };
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        seen += 1;
        match c {
            '{' | '[' => {
                stack.push(if c == '{' {
                    Frame::Object {
                        key: None,
                        expect_key: true,
                    }
                } else {
                    Frame::Array { index: 0 }
                });
                i += 1;
            }
            '}' | ']' => {
                if stack.pop().is_none() {
                    odd += 1;
                } else if stack.is_empty() {
                    documents += 1;
                }
                i += 1;
            }
            ',' => {
                match stack.last_mut() {
                    Some(Frame::Array { index }) => *index += 1,
                    Some(Frame::Object { key, expect_key }) => {
                        *key = None;
                        *expect_key = true;
                    }
                    None => odd += 1,
                }
                i += 1;
            }
            ':' => {
                if let Some(Frame::Object { expect_key, .. }) = stack.last_mut() {
                    *expect_key = false;
                } else {
                    odd += 1;
                }
                i += 1;
            }
            '"' => {
                let mut s = String::new();
                i += 1;
                while i < cs.len() && cs[i] != '"' {
                    if cs[i] == '\\' && i + 1 < cs.len() {
                        i += 1;
                        s.push(match cs[i] {
                            'n' => '\n',
                            't' => '\t',
                            other => other,
                        });
                    } else {
                        s.push(cs[i]);
                    }
                    i += 1;
                }
                i += 1;
                match stack.last_mut() {
                    Some(Frame::Object {
                        key,
                        expect_key: true,
                    }) => *key = Some(s),
                    _ => {
                        let path = path_of(&stack, documents);
                        leaves.push(Leaf {
                            path,
                            raw: s,
                            string: true,
                            order: leaves.len(),
                        });
                    }
                }
            }
            _ if c == '-' || c.is_ascii_alphanumeric() => {
                let from = i;
                while i < cs.len()
                    && (cs[i].is_ascii_alphanumeric() || matches!(cs[i], '-' | '+' | '.'))
                {
                    i += 1;
                }
                let raw: String = cs[from..i].iter().collect();
                let valid =
                    number(&raw).is_some() || matches!(raw.as_str(), "true" | "false" | "null");
                if !valid || stack.is_empty() {
                    odd += raw.len();
                    continue;
                }
                let path = path_of(&stack, documents);
                leaves.push(Leaf {
                    path,
                    raw,
                    string: false,
                    order: leaves.len(),
                });
            }
            _ => {
                odd += 1;
                i += 1;
            }
        }
    }
    (!leaves.is_empty() && odd * 50 <= seen.max(1)).then_some(leaves)
}

/// The key items of a JSON text, or `None` when it is not JSON.
pub(super) fn json(text: &str) -> Option<Vec<KeyItem>> {
    let mut leaves = json_leaves(text)?;
    // One document: its paths need no document number.
    if leaves
        .iter()
        .all(|l| l.path.first() == Some(&Seg::Index(0)))
    {
        for l in &mut leaves {
            l.path.remove(0);
        }
    }
    Some(items(&leaves))
}

/// The key items of a document's scalars: one item per object (or list of scalars), its path
/// the label, its scalars the pairs. Objects in a list of three or more are records and weigh
/// nothing; the others weigh more with figures, and more again when a key or the path names an
/// aggregate.
fn items(leaves: &[Leaf]) -> Vec<KeyItem> {
    // Leaves grouped by the object that holds them.
    let mut groups: Vec<(Vec<Seg>, Vec<&Leaf>)> = Vec::new();
    let mut at: HashMap<Vec<Seg>, usize> = HashMap::new();
    for l in leaves {
        let parent = l.path[..l.path.len().saturating_sub(1)].to_vec();
        match at.get(&parent) {
            Some(&g) => groups[g].1.push(l),
            None => {
                at.insert(parent.clone(), groups.len());
                groups.push((parent, vec![l]));
            }
        }
    }
    // Lists: how many elements each holds.
    let mut list_len: HashMap<Vec<Seg>, usize> = HashMap::new();
    for l in leaves {
        for (k, s) in l.path.iter().enumerate() {
            if let Seg::Index(i) = s {
                let list = l.path[..k].to_vec();
                let n = list_len.entry(list).or_default();
                *n = (*n).max(i + 1);
            }
        }
    }
    // What each element of a list holds: the keys right under it.
    let mut element_keys: HashMap<Vec<Seg>, Vec<String>> = HashMap::new();
    for l in leaves {
        for (k, s) in l.path.iter().enumerate() {
            if let (Seg::Index(_), Some(Seg::Key(key))) = (s, l.path.get(k + 1)) {
                let keys = element_keys.entry(l.path[..=k].to_vec()).or_default();
                if !keys.contains(key) {
                    keys.push(key.clone());
                }
            }
        }
    }
    // The keys most elements of each list hold: an element holding others (a summary object
    // at the end of a list of rows) is not one of the records.
    let mut usual: HashMap<Vec<Seg>, Vec<String>> = HashMap::new();
    {
        let mut counts: HashMap<(Vec<Seg>, Vec<String>), usize> = HashMap::new();
        for (element, keys) in &element_keys {
            let mut keys = keys.clone();
            keys.sort();
            *counts
                .entry((element[..element.len() - 1].to_vec(), keys))
                .or_default() += 1;
        }
        let mut best: HashMap<Vec<Seg>, (usize, Vec<String>)> = HashMap::new();
        for ((list, keys), n) in counts {
            let slot = best.entry(list).or_insert((0, Vec::new()));
            if n > slot.0 || (n == slot.0 && keys < slot.1) {
                *slot = (n, keys);
            }
        }
        for (list, (_, keys)) in best {
            usual.insert(list, keys);
        }
    }
    let in_records = |path: &[Seg]| {
        path.iter().enumerate().any(|(k, s)| {
            if !matches!(s, Seg::Index(_)) || list_len.get(&path[..k]).is_none_or(|n| *n < 3) {
                return false;
            }
            let mut keys = element_keys.get(&path[..=k]).cloned().unwrap_or_default();
            keys.sort();
            usual.get(&path[..k]).is_none_or(|u| *u == keys)
        })
    };
    let mut out = Vec::new();
    for (parent, group) in &groups {
        if in_records(parent) {
            continue;
        }
        let key_of = |l: &Leaf| match l.path.last() {
            Some(Seg::Key(k)) => k.clone(),
            _ => String::new(),
        };
        let figures: Vec<&&Leaf> = group
            .iter()
            .filter(|l| !l.string && number(&l.raw).is_some())
            .collect();
        let aggregate = parent
            .iter()
            .any(|s| matches!(s, Seg::Key(k) if is_aggregate(k)))
            || group.iter().any(|l| is_aggregate(&key_of(l)));
        let big = figures.iter().any(|l| {
            l.raw
                .chars()
                .take_while(|c| *c != '.')
                .filter(char::is_ascii_digit)
                .count()
                >= 4
        });
        let weight = if figures.is_empty() {
            1
        } else {
            5 + 3 * i32::from(aggregate) + i32::from(big)
        };
        let mut pairs: Vec<(bool, usize, (String, String))> = group
            .iter()
            .map(|l| {
                let key = key_of(l);
                let rank = if is_aggregate(&key) {
                    0
                } else if !l.string && number(&l.raw).is_some() {
                    1
                } else {
                    2
                };
                (l.string, rank, (key, l.raw.clone()))
            })
            .collect();
        pairs.sort_by_key(|p| p.1);
        out.push(KeyItem {
            weight,
            at: group.first().map_or(0, |l| l.order),
            why: if figures.is_empty() {
                "document values"
            } else {
                "document figures"
            },
            label: path_text(parent),
            pairs: pairs.into_iter().map(|p| p.2).collect(),
            line: String::new(),
        });
    }
    out
}

/// A YAML key line (`key: value`, `key:`) or list line (`- …`).
fn yaml_shape(content: &str) -> bool {
    let c = content.trim_start_matches("- ").trim();
    if content.trim_start().starts_with("- ") || content.trim() == "-" {
        return true;
    }
    let Some((key, rest)) = c.split_once(':') else {
        return false;
    };
    // A key is a word (quoted, it may hold spaces); a number before a colon is a line number
    // or a time, and words before a colon are a sentence.
    let quoted = key.starts_with(['"', '\'']);
    let key = key.trim_matches(|q| q == '"' || q == '\'');
    !key.is_empty()
        && key
            .chars()
            .all(|k| k.is_alphanumeric() || matches!(k, '_' | '-' | '.') || (quoted && k == ' '))
        && key.chars().any(char::is_alphabetic)
        && (rest.is_empty() || rest.starts_with(' '))
}

/// The key items of a YAML document, or `None` when the lines are not one.
pub(super) fn yaml(lines: &[&str]) -> Option<Vec<KeyItem>> {
    let content: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#') && t != "---" && t != "..."
        })
        .map(|(i, l)| (i, *l))
        .collect();
    if content.len() < 3 {
        return None;
    }
    let first = content[0].1.trim_start();
    if first.starts_with('{') || first.starts_with('[') {
        return None;
    }
    let shaped = content.iter().filter(|(_, l)| yaml_shape(l)).count();
    let keyed = content
        .iter()
        .filter(|(_, l)| {
            l.trim_start().trim_start_matches("- ").contains(": ") || l.trim_end().ends_with(':')
        })
        .count();
    if shaped * 10 < content.len() * 9 || keyed * 2 < content.len() {
        return None;
    }
    // (indent, step, opened a block)
    let mut stack: Vec<(usize, Seg, bool)> = Vec::new();
    let mut counters: HashMap<Vec<Seg>, usize> = HashMap::new();
    let mut leaves = Vec::new();
    for (_, line) in content {
        let mut indent = line.len() - line.trim_start().len();
        let mut rest = line.trim_start();
        loop {
            let list = rest.starts_with("- ") || rest == "-";
            while let Some((i, seg, opened)) = stack.last() {
                let sibling = *i == indent && !(list && *opened && matches!(seg, Seg::Key(_)));
                if *i > indent || sibling {
                    stack.pop();
                } else {
                    break;
                }
            }
            if !list {
                break;
            }
            let parent: Vec<Seg> = stack.iter().map(|s| s.1.clone()).collect();
            let n = counters.entry(parent).or_default();
            stack.push((indent, Seg::Index(*n), false));
            *n += 1;
            rest = rest.get(2..).unwrap_or("").trim_start();
            indent += 2;
            if rest.is_empty() {
                break;
            }
        }
        if rest.is_empty() {
            continue;
        }
        let path: Vec<Seg> = stack.iter().map(|s| s.1.clone()).collect();
        match rest.split_once(':') {
            Some((key, value)) if yaml_shape(rest) => {
                let key = key
                    .trim()
                    .trim_matches(|q| q == '"' || q == '\'')
                    .to_owned();
                let value = value.trim();
                if value.is_empty() {
                    stack.push((indent, Seg::Key(key), true));
                } else {
                    let mut p = path;
                    p.push(Seg::Key(key));
                    let raw = value.trim_matches(|q| q == '"' || q == '\'').to_owned();
                    let string = number(&raw).is_none();
                    leaves.push(Leaf {
                        path: p,
                        raw,
                        string,
                        order: leaves.len(),
                    });
                }
            }
            _ => {
                let raw = rest.trim_matches(|q| q == '"' || q == '\'').to_owned();
                let string = number(&raw).is_none();
                let mut p = path;
                if !matches!(p.last(), Some(Seg::Index(_))) {
                    p.push(Seg::Index(0));
                }
                leaves.push(Leaf {
                    path: p,
                    raw,
                    string,
                    order: leaves.len(),
                });
            }
        }
    }
    (!leaves.is_empty()).then(|| items(&leaves))
}
