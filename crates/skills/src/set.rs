//! [`SkillSet`]: the loaded skills of a list of roots, with Level 1 at hand, Level 2 cached and
//! Level 3 read on demand; [`validate`] for the strict rules.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::SystemTime;

use ba_protocol::TokenCounter;
use serde::Serialize;

use crate::diagnostic::{Diagnostic, Rule, Severity};
use crate::discover::{Found, discover};
use crate::error::{FrontmatterError, Result, SkillsError};
use crate::frontmatter::{self, Finding, Frontmatter, HeadError};
use crate::resource::{self, ResourceEntry};
use crate::validate::{Strictness, check};

/// Limits of a load. The defaults suit real skill collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// Longest frontmatter read at Level 1, in bytes.
    pub max_frontmatter_bytes: usize,
    /// Largest body loaded at Level 2, in bytes.
    pub max_body_bytes: u64,
    /// Largest resource read at Level 3, in bytes.
    pub max_resource_bytes: u64,
    /// Most resources listed for one skill.
    pub max_resources: usize,
    /// Deepest folder searched for skills under a root, and for resources under a skill.
    pub max_depth: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            max_frontmatter_bytes: 64 * 1024,
            max_body_bytes: 1024 * 1024,
            max_resource_bytes: 1024 * 1024,
            max_resources: 2000,
            max_depth: 12,
        }
    }
}

/// One loaded skill at Level 1: where it is and its frontmatter.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// The name it is known by: its own name (the frontmatter `name`, or the folder name when
    /// that is missing), prefixed with its root's namespace and a colon when the root has one
    /// (`sales-ops:forecast`). The catalogue and `activate_skill` use this name.
    pub name: String,
    /// The namespace of its root (a plugin's name), when it has one.
    pub namespace: Option<String>,
    /// The skill folder.
    pub dir: PathBuf,
    /// Its `SKILL.md`.
    pub skill_md: PathBuf,
    /// Index of the root it came from.
    pub root_index: usize,
    /// The frontmatter.
    pub frontmatter: Frontmatter,
    body_offset: usize,
    file_len: u64,
    modified: Option<SystemTime>,
}

impl Skill {
    /// Its own name, without the namespace (what the Agent Skills name rule applies to).
    pub fn local_name(&self) -> &str {
        match &self.namespace {
            Some(ns) => self
                .name
                .strip_prefix(ns.as_str())
                .and_then(|rest| rest.strip_prefix(':'))
                .unwrap_or(&self.name),
            None => &self.name,
        }
    }

    /// The description (empty only if the file changed under us; loading requires one).
    pub fn description(&self) -> &str {
        self.frontmatter.description.as_deref().unwrap_or("")
    }

    /// Size of the body in bytes, as found at load time.
    pub fn body_bytes(&self) -> u64 {
        self.file_len.saturating_sub(self.body_offset as u64)
    }

    fn same_file_state(&self, other: &Skill) -> bool {
        self.skill_md == other.skill_md
            && self.file_len == other.file_len
            && self.modified == other.modified
            && self.body_offset == other.body_offset
            && self.frontmatter == other.frontmatter
            && self.root_index == other.root_index
    }
}

/// One line of the Level 1 catalogue, with its token cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogueEntry {
    /// The skill's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its folder.
    pub path: PathBuf,
    /// Tokens of its rendered catalogue entry.
    pub tokens: usize,
}

/// What a [`SkillSet::reload`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReloadReport {
    /// Skills that appeared.
    pub added: Vec<String>,
    /// Skills whose `SKILL.md` changed.
    pub changed: Vec<String>,
    /// Skills that disappeared.
    pub removed: Vec<String>,
    /// Skills whose new version (or root) could not be read: the last good version stays, and
    /// a `kept-last-good` diagnostic says why.
    pub kept: Vec<String>,
}

impl ReloadReport {
    /// Whether nothing changed (skills kept at their last good version count as a change:
    /// something needs fixing).
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.changed.is_empty()
            && self.removed.is_empty()
            && self.kept.is_empty()
    }
}

/// A folder skills are loaded from, and the namespace its skills are named under.
///
/// A plugin's skills live under a namespaced root: `SkillRoot::namespaced(dir, "sales-ops")`
/// names the skill `forecast` of that folder `sales-ops:forecast`, so two plugins may ship a
/// skill of the same name and both load. The Agent Skills name rule (at most 64 characters of
/// `[a-z0-9-]`) still applies to the skill's own name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SkillRoot {
    /// The folder.
    pub path: PathBuf,
    /// The namespace of its skills' names; none for a plain root.
    pub namespace: Option<String>,
}

impl SkillRoot {
    /// A plain root: its skills are known by their own names.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            namespace: None,
        }
    }

    /// A root whose skills are named `NAMESPACE:SKILL`.
    pub fn namespaced(path: impl Into<PathBuf>, namespace: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            namespace: Some(namespace.into()),
        }
    }

    fn qualify(&self, local: String) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}:{local}"),
            None => local,
        }
    }
}

impl From<PathBuf> for SkillRoot {
    fn from(path: PathBuf) -> Self {
        Self::new(path)
    }
}

impl From<&Path> for SkillRoot {
    fn from(path: &Path) -> Self {
        Self::new(path)
    }
}

/// The token cost of each disclosure level of one skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LevelCosts {
    /// Level 1: the catalogue entry.
    pub level1: usize,
    /// Level 2: the body.
    pub level2: usize,
    /// Level 3: each resource that could be read as text.
    pub level3: Vec<(String, usize)>,
}

/// A body and the exact skill it was read for.
type CachedBody = (Arc<Skill>, Arc<str>);

#[derive(Debug, Default)]
struct Index {
    skills: BTreeMap<String, Arc<Skill>>,
    diagnostics: Vec<Diagnostic>,
}

/// The skills found under an ordered list of roots.
///
/// Loading is lenient: a broken skill becomes a diagnostic and the rest load. The first root
/// wins a name clash. Every method takes `&self`, so one set can be shared (`Arc<SkillSet>`)
/// between the meta-tool and a reloader.
#[derive(Debug)]
pub struct SkillSet {
    roots: Vec<PathBuf>,
    skill_roots: Vec<SkillRoot>,
    options: LoadOptions,
    index: RwLock<Index>,
    // Keyed by name; an entry is valid only for the exact `Arc<Skill>` it was read for, so a
    // reload that replaces a skill makes its cached body stale without a separate sweep.
    bodies: RwLock<HashMap<String, CachedBody>>,
}

impl SkillSet {
    /// Loads every skill under `roots` with the default limits.
    pub fn load<P: Into<PathBuf>>(roots: impl IntoIterator<Item = P>) -> Self {
        Self::load_with(roots, LoadOptions::default())
    }

    /// Loads every skill under `roots`.
    pub fn load_with<P: Into<PathBuf>>(
        roots: impl IntoIterator<Item = P>,
        options: LoadOptions,
    ) -> Self {
        Self::load_roots_with(roots.into_iter().map(|p| SkillRoot::new(p.into())), options)
    }

    /// Loads every skill under `roots`, each named under its root's namespace, with the
    /// default limits.
    pub fn load_roots(roots: impl IntoIterator<Item = SkillRoot>) -> Self {
        Self::load_roots_with(roots, LoadOptions::default())
    }

    /// Loads every skill under `roots`, each named under its root's namespace.
    pub fn load_roots_with(
        roots: impl IntoIterator<Item = SkillRoot>,
        options: LoadOptions,
    ) -> Self {
        let skill_roots: Vec<SkillRoot> = roots.into_iter().collect();
        let index = build_index(&skill_roots, &options);
        Self {
            roots: skill_roots.iter().map(|r| r.path.clone()).collect(),
            skill_roots,
            options,
            index: RwLock::new(index),
            bodies: RwLock::new(HashMap::new()),
        }
    }

    /// The roots' folders, in priority order.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The roots with their namespaces, in priority order.
    pub fn skill_roots(&self) -> &[SkillRoot] {
        &self.skill_roots
    }

    /// The limits in use.
    pub fn options(&self) -> &LoadOptions {
        &self.options
    }

    fn index(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        // A panic elsewhere while holding the lock leaves the index whole (it is replaced in
        // one assignment), so a poisoned lock is still safe to read.
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The skills, sorted by name.
    pub fn skills(&self) -> Vec<Arc<Skill>> {
        self.index().skills.values().cloned().collect()
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.index().skills.keys().cloned().collect()
    }

    /// How many skills are loaded.
    pub fn len(&self) -> usize {
        self.index().skills.len()
    }

    /// Whether no skill is loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The skill called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Skill>> {
        self.index().skills.get(name).cloned()
    }

    fn require(&self, name: &str) -> Result<Arc<Skill>> {
        self.get(name).ok_or_else(|| SkillsError::UnknownSkill {
            name: name.to_owned(),
        })
    }

    /// What the last load found wrong (errors for skills that did not load, warnings for the
    /// ones that did), in discovery order.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.index().diagnostics.clone()
    }

    /// Level 1 for every skill, sorted by name, with the tokens of each catalogue entry.
    pub fn catalogue(&self, counter: &dyn TokenCounter) -> Vec<CatalogueEntry> {
        self.skills()
            .iter()
            .map(|s| CatalogueEntry {
                name: s.name.clone(),
                description: s.description().to_owned(),
                path: s.dir.clone(),
                tokens: counter.count(&catalogue_line(s)),
            })
            .collect()
    }

    /// The catalogue for the system prompt: one line for each skill the model may activate
    /// (skills with `disable-model-invocation` are left out).
    pub fn render_catalogue(&self) -> String {
        let mut out = String::from("<available_skills>\n");
        for skill in self.skills() {
            if !skill.frontmatter.disable_model_invocation {
                out.push_str(&catalogue_line(&skill));
                out.push('\n');
            }
        }
        out.push_str("</available_skills>\n");
        out
    }

    /// Level 2: the body of `name`, read from disk on first use and cached after.
    pub fn body(&self, name: &str) -> Result<Arc<str>> {
        let skill = self.require(name)?;
        if let Some((cached_for, body)) = self
            .bodies
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            && Arc::ptr_eq(cached_for, &skill)
        {
            return Ok(Arc::clone(body));
        }
        let body: Arc<str> = self.read_body(&skill)?.into();
        self.bodies
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), (skill, Arc::clone(&body)));
        Ok(body)
    }

    /// Level 2 straight from disk, bypassing (and not filling) the cache.
    pub fn body_from_disk(&self, name: &str) -> Result<String> {
        let skill = self.require(name)?;
        self.read_body(&skill)
    }

    fn read_body(&self, skill: &Skill) -> Result<String> {
        let path = &skill.skill_md;
        let io = |source| SkillsError::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let limit = self.options.max_body_bytes;
        let frontmatter_limit = self.options.max_frontmatter_bytes as u64;
        let too_large = |size| SkillsError::BodyTooLarge {
            skill: skill.name.clone(),
            path: path.clone(),
            size,
            limit,
        };
        if len > limit.saturating_add(frontmatter_limit) {
            return Err(too_large(len));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        file.take(limit.saturating_add(frontmatter_limit) + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let head = frontmatter::read_head(bytes.as_slice(), self.options.max_frontmatter_bytes)
            .map_err(|e| head_error(path, e))?;
        let body = &bytes[head.body_offset..];
        if body.len() as u64 > limit {
            return Err(too_large(body.len() as u64));
        }
        let text = std::str::from_utf8(body).map_err(|e| SkillsError::Frontmatter {
            path: path.clone(),
            problem: FrontmatterError::NotText {
                reason: format!(
                    "invalid UTF-8 in the body at offset {}",
                    head.body_offset + e.valid_up_to()
                ),
            },
        })?;
        if let Some(at) = text.find('\0') {
            return Err(SkillsError::Frontmatter {
                path: path.clone(),
                problem: FrontmatterError::NotText {
                    reason: format!("NUL byte in the body at offset {}", head.body_offset + at),
                },
            });
        }
        Ok(frontmatter::body_text(text))
    }

    /// Level 3 listing: the files of the skill folder other than `SKILL.md`.
    pub fn resources(&self, name: &str) -> Result<Vec<ResourceEntry>> {
        let skill = self.require(name)?;
        resource::list(
            &skill.dir,
            self.options.max_resources,
            self.options.max_depth,
        )
    }

    /// Level 3: reads `path` (relative to the skill folder) as text. `..`, absolute paths,
    /// symlinks that resolve outside the folder and files over the size limit are refused.
    pub fn read_resource(&self, name: &str, path: &str) -> Result<String> {
        let skill = self.require(name)?;
        // Resolved at each read, not at load: the folder may have been moved or relinked since.
        let canonical_dir = skill.dir.canonicalize().map_err(|source| SkillsError::Io {
            path: skill.dir.clone(),
            source,
        })?;
        resource::read(
            &skill.name,
            &skill.dir,
            &canonical_dir,
            path,
            self.options.max_resource_bytes,
        )
    }

    /// The token cost of each level of `name`. Resources that cannot be read as text (binary,
    /// too large) are left out of Level 3.
    pub fn level_costs(&self, name: &str, counter: &dyn TokenCounter) -> Result<LevelCosts> {
        let skill = self.require(name)?;
        let body = self.body(name)?;
        let level3 = self
            .resources(name)?
            .into_iter()
            .filter_map(|r| {
                let text = self.read_resource(name, &r.path).ok()?;
                Some((r.path, counter.count(&text)))
            })
            .collect();
        Ok(LevelCosts {
            level1: counter.count(&catalogue_line(&skill)),
            level2: counter.count(&body),
            level3,
        })
    }

    /// Reads the roots again and picks up added, changed and deleted skills. Bodies of changed
    /// skills are read again on their next use; unchanged skills keep their cached body.
    ///
    /// A reload never loses a working skill to a passing problem: a skill whose `SKILL.md`
    /// is still there but no longer loads (an edit half saved, a YAML mistake), and every skill
    /// of a root that cannot be read any more, keep their last good version, listed in
    /// [`ReloadReport::kept`] with a `kept-last-good` diagnostic giving the reason. A deleted
    /// skill folder is a removal.
    pub fn reload(&self) -> ReloadReport {
        let mut fresh = build_index(&self.skill_roots, &self.options);
        let mut report = ReloadReport::default();
        let mut index = self.index.write().unwrap_or_else(PoisonError::into_inner);
        for (name, skill) in &mut fresh.skills {
            match index.skills.get(name) {
                None => report.added.push(name.clone()),
                Some(old) if old.same_file_state(skill) => *skill = Arc::clone(old),
                Some(_) => report.changed.push(name.clone()),
            }
        }
        let mut kept = Vec::new();
        for (name, old) in &index.skills {
            if fresh.skills.contains_key(name) {
                continue;
            }
            match why_unreadable(&fresh.diagnostics, old, &self.skill_roots) {
                Some(reason) => kept.push((name.clone(), Arc::clone(old), reason)),
                None => report.removed.push(name.clone()),
            }
        }
        for (name, old, reason) in kept {
            fresh.diagnostics.push(Diagnostic::new(
                &old.skill_md,
                Severity::Warning,
                Rule::KeptLastGood,
                format!("skill `{name}` kept at its last good version: {reason}"),
            ));
            fresh.skills.insert(name.clone(), old);
            report.kept.push(name);
        }
        *index = fresh;
        drop(index);
        let mut bodies = self.bodies.write().unwrap_or_else(PoisonError::into_inner);
        for name in report.changed.iter().chain(&report.removed) {
            bodies.remove(name);
        }
        report
    }
}

/// Why a skill that loaded before is missing from a fresh load when it should not simply be
/// removed: its root cannot be read, or its `SKILL.md` is there but failed to load.
fn why_unreadable(diagnostics: &[Diagnostic], old: &Skill, roots: &[SkillRoot]) -> Option<String> {
    let root = roots.get(old.root_index)?;
    if let Some(d) = diagnostics
        .iter()
        .find(|d| d.rule == Rule::RootUnreadable && d.path == root.path)
    {
        return Some(d.message.clone());
    }
    if !old.skill_md.is_file() {
        return None;
    }
    let errors: Vec<&str> = diagnostics
        .iter()
        .filter(|d| d.is_error() && d.path == old.skill_md)
        .map(|d| d.message.as_str())
        .collect();
    if errors.is_empty() {
        // Still there and fine, but under another name now: the old name is gone.
        return None;
    }
    Some(errors.join("; "))
}

/// One catalogue line: `<skill name="…">description</skill>`, the description's whitespace runs
/// folded to single spaces and XML-escaped, so a description can never close the catalogue
/// early.
fn catalogue_line(skill: &Skill) -> String {
    let description = skill
        .description()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "<skill name=\"{}\">{}</skill>",
        xml_escape(&skill.name),
        xml_escape(&description)
    )
}

fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

fn head_error(path: &Path, err: HeadError) -> SkillsError {
    match err {
        HeadError::Io(source) => SkillsError::Io {
            path: path.to_path_buf(),
            source,
        },
        HeadError::Parse(problem) => SkillsError::Frontmatter {
            path: path.to_path_buf(),
            problem,
        },
    }
}

pub(crate) fn frontmatter_rule(problem: &FrontmatterError) -> Rule {
    match problem {
        FrontmatterError::Missing => Rule::MissingFrontmatter,
        FrontmatterError::Unterminated => Rule::UnterminatedFrontmatter,
        FrontmatterError::TooLarge { .. } => Rule::FrontmatterTooLarge,
        FrontmatterError::NotText { .. } => Rule::NotText,
        FrontmatterError::InvalidYaml { .. } => Rule::InvalidYaml,
        FrontmatterError::NotMapping { .. } => Rule::FrontmatterNotMapping,
    }
}

/// A skill folder read at Level 1: the skill when it can be used, and what was found.
struct Read {
    skill: Option<Skill>,
    diagnostics: Vec<Diagnostic>,
}

fn read_one(
    found: &Found,
    root: Option<&SkillRoot>,
    options: &LoadOptions,
    strictness: Strictness,
) -> Read {
    let path = &found.skill_md;
    let fail = |rule, message: String| Read {
        skill: None,
        diagnostics: vec![Diagnostic::new(path, Severity::Error, rule, message)],
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(err) => return fail(Rule::Io, format!("could not open SKILL.md: {err}")),
    };
    let meta = file.metadata().ok();
    // Most frontmatters fit in the first 4 KiB; a smaller buffer than the default reads less of
    // the body.
    let reader = BufReader::with_capacity(4096, file);
    let head = match frontmatter::read_head(reader, options.max_frontmatter_bytes) {
        Ok(h) => h,
        Err(HeadError::Io(err)) => {
            return fail(Rule::Io, format!("could not read SKILL.md: {err}"));
        }
        Err(HeadError::Parse(problem)) => {
            return fail(frontmatter_rule(&problem), problem.to_string());
        }
    };
    let mut diagnostics = Vec::new();
    let mapping = match frontmatter::parse_yaml(&head.yaml) {
        Ok(m) => m,
        Err(problem) => match (strictness, frontmatter::plain_mapping(&head.yaml)) {
            (Strictness::Lenient, Some(plain)) => {
                diagnostics.push(Diagnostic::new(
                    path,
                    Severity::Warning,
                    Rule::InvalidYaml,
                    format!("{problem}; the frontmatter was read as plain `key: value` lines"),
                ));
                plain
            }
            _ => return fail(frontmatter_rule(&problem), problem.to_string()),
        },
    };
    let (fm, type_findings) = frontmatter::from_mapping(&mapping);
    // A root given as `.` has no name of its own; only then is the path resolved.
    let dir_name = match found.dir.file_name() {
        Some(name) => Some(name.to_string_lossy().into_owned()),
        None => found
            .dir
            .canonicalize()
            .ok()
            .as_deref()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned()),
    };
    let findings = check(&fm, &type_findings, dir_name.as_deref(), strictness);
    let mut usable = true;
    for Finding { rule, message } in findings {
        let severity = match (strictness, rule) {
            (Strictness::Strict, _) => Severity::Error,
            // Without a description the model cannot know when to use the skill.
            (Strictness::Lenient, Rule::DescriptionMissing) => {
                usable = false;
                Severity::Error
            }
            (Strictness::Lenient, _) => Severity::Warning,
        };
        diagnostics.push(Diagnostic::new(path, severity, rule, message));
    }
    let file_len = meta.as_ref().map_or(0, std::fs::Metadata::len);
    let body_bytes = file_len.saturating_sub(head.body_offset as u64);
    if body_bytes > options.max_body_bytes {
        diagnostics.push(Diagnostic::new(
            path,
            Severity::Warning,
            Rule::BodyTooLarge,
            format!(
                "the body is {body_bytes} bytes, over the limit of {} bytes; activating it will fail",
                options.max_body_bytes
            ),
        ));
    }
    let name = fm
        .name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .or(dir_name);
    let skill = match name {
        Some(name) if usable => Some(Skill {
            name: match root {
                Some(root) => root.qualify(name),
                None => name,
            },
            namespace: root.and_then(|r| r.namespace.clone()),
            dir: found.dir.clone(),
            skill_md: path.clone(),
            root_index: found.root_index,
            frontmatter: fm,
            body_offset: head.body_offset,
            file_len,
            modified: meta.and_then(|m| m.modified().ok()),
        }),
        _ => None,
    };
    Read { skill, diagnostics }
}

fn load_all(
    roots: &[SkillRoot],
    options: &LoadOptions,
    strictness: Strictness,
) -> (BTreeMap<String, Arc<Skill>>, Vec<Diagnostic>) {
    let paths: Vec<PathBuf> = roots.iter().map(|r| r.path.clone()).collect();
    let (found, mut diagnostics) = discover(&paths, options.max_depth);
    let mut skills: BTreeMap<String, Arc<Skill>> = BTreeMap::new();
    for f in &found {
        let read = read_one(f, roots.get(f.root_index), options, strictness);
        diagnostics.extend(read.diagnostics);
        let Some(skill) = read.skill else { continue };
        if let Some(first) = skills.get(&skill.name) {
            diagnostics.push(Diagnostic::new(
                &skill.skill_md,
                Severity::Warning,
                Rule::NameClash,
                format!(
                    "skill `{}` is also defined at {}, which wins; this one is ignored",
                    skill.name,
                    first.skill_md.display()
                ),
            ));
            continue;
        }
        skills.insert(skill.name.clone(), Arc::new(skill));
    }
    (skills, diagnostics)
}

fn build_index(roots: &[SkillRoot], options: &LoadOptions) -> Index {
    let (skills, diagnostics) = load_all(roots, options, Strictness::Lenient);
    Index {
        skills,
        diagnostics,
    }
}

/// Strict validation of every skill under `roots`: each rule of the Agent Skills
/// specification that a skill breaks is an error; unreadable skills are errors; name clashes
/// and oversized bodies are warnings.
pub fn validate<P: Into<PathBuf>>(
    roots: impl IntoIterator<Item = P>,
    options: &LoadOptions,
) -> Vec<Diagnostic> {
    validate_roots(roots.into_iter().map(|p| SkillRoot::new(p.into())), options)
}

/// [`validate`] over namespaced roots: a plugin's skills are checked under their own names,
/// and two plugins' skills of the same name do not clash.
pub fn validate_roots(
    roots: impl IntoIterator<Item = SkillRoot>,
    options: &LoadOptions,
) -> Vec<Diagnostic> {
    let roots: Vec<SkillRoot> = roots.into_iter().collect();
    load_all(&roots, options, Strictness::Strict).1
}
