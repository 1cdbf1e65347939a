//! A crate's modules import one another without a cycle (docs/ARCHITECTURE.md, "Invariants"):
//! the graph of which source file names which through `crate::` and `super::` paths and `use`
//! statements — a re-export followed to the file that defines the item, test modules and
//! doc-only imports left out — has no strongly connected part of more than one file. The rule
//! holds for the crates in `ACYCLIC`; the others still have circles of a module and its
//! children (a child using its parent's types while the parent calls the child) and join the
//! list as they lose them.

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    type Graph = BTreeMap<String, BTreeSet<String>>;

    /// A module's path from the crate root, from its file's path under `src/`.
    fn module_of(file: &str) -> Vec<String> {
        let mut parts: Vec<String> = file
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_owned)
            .collect();
        if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
            parts.pop();
        }
        parts
    }

    /// The index just past the brace that closes the one opened before `from`.
    fn block_end(src: &str, from: usize) -> usize {
        let mut depth = 1;
        for (i, c) in src[from..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return from + i + 1;
                    }
                }
                _ => {}
            }
        }
        src.len()
    }

    /// `src` without line comments, test modules and doc-only imports.
    fn code_of(src: &str) -> String {
        let mut code: String = src
            .lines()
            .map(|l| l.find("//").map_or(l, |at| &l[..at]))
            .collect::<Vec<_>>()
            .join("\n");
        while let Some(at) = code.find("#[cfg(test)]") {
            let after = at + "#[cfg(test)]".len();
            let rest = code[after..].trim_start();
            let is_mod = rest.starts_with("mod ") || rest.starts_with("pub(crate) mod ");
            let brace = code[after..].find('{');
            let semicolon = code[after..].find(';');
            let end = if is_mod && semicolon.is_some_and(|s| brace.is_none_or(|b| s < b)) {
                // `mod name;`: a test module in a file of its own, which is not read.
                after + semicolon.unwrap_or(0) + 1
            } else if is_mod {
                block_end(&code, after + brace.unwrap_or(0) + 1)
            } else {
                after
            };
            code.replace_range(at..end, "");
        }
        while let Some(at) = code.find("#[cfg(doc)]") {
            let end = at + code[at..].find(';').map_or(0, |e| e + 1);
            code.replace_range(at..end, "");
        }
        code
    }

    fn is_ident(c: char) -> bool {
        c.is_alphanumeric() || c == '_'
    }

    /// The paths a `use` tree starting at `text` names (`a::b`, `a::{b, c::{d}}`, `{a, b}`), each
    /// as its segments after `base` (`super` and `self` taken as they read).
    fn paths_at(text: &str, base: &[String]) -> Vec<Vec<String>> {
        let mut segments = base.to_vec();
        let mut i = 0;
        loop {
            let len = text[i..].chars().take_while(|c| is_ident(*c)).count();
            match &text[i..i + len] {
                "" => {}
                "super" => {
                    segments.pop();
                }
                "self" => {}
                name => segments.push(name.to_owned()),
            }
            i += len;
            let rest = &text[i..];
            let group = if len == 0 && rest.starts_with('{') {
                Some(i + 1)
            } else if rest.starts_with("::{") {
                Some(i + 3)
            } else {
                None
            };
            if let Some(open) = group {
                let close = block_end(text, open) - 1;
                let mut out = Vec::new();
                for item in split_top(&text[open..close]) {
                    let item = item.split(" as ").next().unwrap_or(item).trim();
                    if item.is_empty() || item == "*" {
                        continue;
                    }
                    out.extend(paths_at(item, &segments));
                }
                return out;
            }
            if rest.starts_with("::") && len > 0 {
                i += 2;
                continue;
            }
            return vec![segments];
        }
    }

    /// `text` split at its commas outside braces.
    fn split_top(text: &str) -> Vec<&str> {
        let (mut out, mut depth, mut from) = (Vec::new(), 0, 0);
        for (i, c) in text.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(&text[from..i]);
                    from = i + 1;
                }
                _ => {}
            }
        }
        out.push(&text[from..]);
        out
    }

    /// The inline modules (`mod name { … }`) of `code`, as byte ranges.
    fn inline_modules(code: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(at) = code[from..].find("mod ") {
            let at = from + at;
            from = at + 4;
            if at > 0 && code[..at].chars().last().is_some_and(is_ident) {
                continue;
            }
            let rest = &code[from..];
            let name_len = rest.chars().take_while(|c| is_ident(*c)).count();
            if rest[name_len..].trim_start().starts_with('{') {
                let open = from + name_len + rest[name_len..].find('{').unwrap_or(0) + 1;
                out.push((at, block_end(code, open)));
            }
        }
        out
    }

    /// Every `crate::`/`super::` path in `code` of the file of module `module`.
    fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
        let inline = inline_modules(code);
        let mut out = Vec::new();
        for head in ["crate::", "super::"] {
            let mut from = 0;
            while let Some(at) = code[from..].find(head) {
                let at = from + at;
                from = at + head.len();
                if code[..at].ends_with("::") || code[..at].chars().last().is_some_and(is_ident) {
                    continue;
                }
                let base: Vec<String> = if head == "crate::" {
                    Vec::new()
                } else if inline.iter().any(|&(a, b)| a <= at && at < b) {
                    module.to_vec()
                } else {
                    module[..module.len().saturating_sub(1)].to_vec()
                };
                out.extend(paths_at(&code[from..], &base));
            }
        }
        out
    }

    /// What the `use` statements of a module's file name: each path, whether it is a re-export
    /// (`pub use`, `pub(crate) use`, `pub(super) use`) and whether it is written relative to the
    /// module (not from `crate::` or `super::`, which [`named_paths`] reads).
    fn uses(code: &str, module: &[String]) -> Vec<(Vec<String>, bool, bool)> {
        let mut out = Vec::new();
        for statement in code.split(';') {
            let s = statement.trim();
            let (tree, public) = match ["pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|p| s.strip_prefix(p))
            {
                Some(tree) => (tree, true),
                None => match s.strip_prefix("use ") {
                    Some(tree) => (tree, false),
                    None => continue,
                },
            };
            let (base, tree, relative) = if let Some(t) = tree.strip_prefix("crate::") {
                (Vec::new(), t, false)
            } else if let Some(t) = tree.strip_prefix("super::") {
                (module[..module.len().saturating_sub(1)].to_vec(), t, false)
            } else {
                (
                    module.to_vec(),
                    tree.strip_prefix("self::").unwrap_or(tree),
                    true,
                )
            };
            out.extend(
                paths_at(tree, &base)
                    .into_iter()
                    .map(|p| (p, public, relative)),
            );
        }
        out
    }

    /// The re-exports of a module's file: the item's path there, and the path it names.
    fn re_exports(code: &str, module: &[String]) -> Vec<(Vec<String>, Vec<String>)> {
        uses(code, module)
            .into_iter()
            .filter(|(_, public, _)| *public)
            .filter_map(|(target, _, _)| {
                let mut at = module.to_vec();
                at.push(target.last()?.clone());
                Some((at, target))
            })
            .collect()
    }

    /// Which file each file of the crate names, from the files' text by their path under `src/`.
    fn import_graph(files: &BTreeMap<String, String>) -> Graph {
        let code: BTreeMap<&str, String> = files
            .iter()
            .map(|(f, s)| (f.as_str(), code_of(s)))
            .collect();
        let modules: BTreeMap<Vec<String>, &str> =
            files.keys().map(|f| (module_of(f), f.as_str())).collect();
        let exports: BTreeMap<Vec<String>, Vec<String>> = code
            .iter()
            .flat_map(|(f, c)| re_exports(c, &module_of(f)))
            .collect();
        let resolve = |mut path: Vec<String>| -> Option<&str> {
            for _ in 0..8 {
                let k = (0..=path.len())
                    .rev()
                    .find(|k| modules.contains_key(&path[..*k]))?;
                match path.get(k) {
                    Some(_) => match exports.get(&path[..=k]) {
                        Some(target) if *target != path[..=k] => {
                            let mut next = target.clone();
                            next.extend_from_slice(&path[k + 1..]);
                            path = next;
                        }
                        _ => return modules.get(&path[..k]).copied(),
                    },
                    None => return modules.get(&path[..k]).copied(),
                }
            }
            None
        };
        let mut graph = Graph::new();
        for (file, c) in &code {
            let named = graph.entry((*file).to_owned()).or_default();
            let module = module_of(file);
            // A path relative to the module names a child module's item, or an outside crate's
            // (which resolves to the file itself and is left out).
            let used = uses(c, &module)
                .into_iter()
                .filter(|(_, _, relative)| *relative)
                .map(|(path, _, _)| path);
            for path in named_paths(c, &module).into_iter().chain(used) {
                if let Some(target) = resolve(path)
                    && target != *file
                {
                    named.insert(target.to_owned());
                }
            }
        }
        graph
    }

    /// The strongly connected parts of `graph` with more than one file (Tarjan's).
    fn cycles(graph: &Graph) -> Vec<Vec<String>> {
        struct Walk<'a> {
            graph: &'a Graph,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            out: Vec<Vec<String>>,
        }
        fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
            let n = w.index.len();
            w.index.insert(v, n);
            w.low.insert(v, n);
            w.stack.push(v);
            for next in w.graph.get(v).into_iter().flatten() {
                let next = next.as_str();
                if !w.index.contains_key(next) {
                    visit(w, next);
                    let low = w.low[v].min(w.low[next]);
                    w.low.insert(v, low);
                } else if w.stack.contains(&next) {
                    let low = w.low[v].min(w.index[next]);
                    w.low.insert(v, low);
                }
            }
            if w.low[v] == w.index[v] {
                let at = w.stack.iter().rposition(|s| *s == v).unwrap();
                let part: Vec<String> = w.stack.drain(at..).map(str::to_owned).collect();
                if part.len() > 1 {
                    w.out.push(part);
                }
            }
        }
        let mut w = Walk {
            graph,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            out: Vec::new(),
        };
        for v in graph.keys() {
            if !w.index.contains_key(v.as_str()) {
                visit(&mut w, v);
            }
        }
        w.out
    }

    /// The crates whose modules have no import cycle, each held to it.
    const ACYCLIC: [&str; 4] = ["agent", "cli", "model", "server"];

    /// The sources of crate `name` by their path under its `src/`.
    fn sources(name: &str) -> BTreeMap<String, String> {
        let root = crate::root().join("crates").join(name).join("src");
        let mut out = BTreeMap::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let name = path
                        .strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    out.insert(name, std::fs::read_to_string(&path).unwrap());
                }
            }
        }
        out
    }

    #[test]
    fn the_modules_of_these_crates_import_one_another_without_a_cycle() {
        let agent = import_graph(&sources("agent"));
        // The reading sees the imports it must: a sample of edges the code has.
        assert!(agent["run/mod.rs"].contains("history.rs"), "{agent:#?}");
        assert!(agent["run/task.rs"].contains("run/mod.rs"), "{agent:#?}");
        assert!(agent["lib.rs"].contains("events.rs"), "{agent:#?}");
        for name in ACYCLIC {
            let graph = import_graph(&sources(name));
            assert!(graph.len() > 1, "crates/{name}/src has no modules");
            assert_eq!(
                cycles(&graph),
                Vec::<Vec<String>>::new(),
                "crates/{name}: {graph:#?}"
            );
        }
    }

    #[test]
    fn a_cycle_through_a_re_export_or_a_parent_is_found() {
        let files: BTreeMap<String, String> = [
        (
            "lib.rs",
            "mod a;\n#[cfg(test)]\nmod checks;\nmod run;\npub use run::{Run};\n",
        ),
        (
            "a.rs",
            "// crate::b is a comment\nuse crate::{Run, ids::{new_id}};\n#[cfg(test)]\nmod tests { use crate::run::task::x; }\n",
        ),
        ("ids.rs", "pub(crate) fn new_id() {}\n"),
        ("run/mod.rs", "mod task;\nmod tools;\npub use task::Run;\nuse tools::Kit;\n"),
        ("run/tools.rs", "use super::Runner;\npub(crate) struct Kit;\n"),
        ("run/task.rs", "use super::super::a::Thing;\npub struct Run;\n"),
    ]
    .into_iter()
    .map(|(f, s)| (f.to_owned(), s.to_owned()))
    .collect();
        let graph = import_graph(&files);
        assert_eq!(
            graph["a.rs"],
            BTreeSet::from(["ids.rs".to_owned(), "run/task.rs".to_owned()])
        );
        let mut found = cycles(&graph);
        found.iter_mut().for_each(|c| c.sort());
        found.sort();
        assert_eq!(
            found,
            vec![
                vec!["a.rs".to_owned(), "run/task.rs".to_owned()],
                vec!["run/mod.rs".to_owned(), "run/tools.rs".to_owned()],
            ]
        );
    }
}
