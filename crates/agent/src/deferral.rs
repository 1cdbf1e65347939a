//! Which tools a request sends and which it leaves for the model to search: with many tools
//! (the servers and plugins of a team), every definition in every request costs tokens and
//! clouds the model's choice. Past a share of the window or a count, the tools of the tool
//! sources that are not pinned leave the request; the tool search finds them, and what it
//! found is sent from the next request on, for the rest of the conversation. A source may
//! have its own mode (`servers`): never deferred, always deferred, or by the share and count.
//!
//! The agent's own tools (the built-in ones, `task`, the skills meta-tool, `recall`) are always
//! sent. The order keeps the provider's cache in mind: the sent tools first, in the order they
//! always had, then the search, then the found tools in the order they were found — each
//! finding appends to the list, and the list is the same from request to request otherwise.

use std::collections::{BTreeMap, HashSet};

use ba_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::adapters::SearchKind;

/// When tools leave the request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeferMode {
    /// When the tools' definitions pass `share` of the window or `max_tools` tools.
    #[default]
    Auto,
    /// Always: only pinned tools and those found are sent.
    Always,
    /// Never: every tool is sent every time.
    Never,
}

/// How many tools a request sends, and how the rest are found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSearchSettings {
    /// When tools leave the request (default `auto`).
    pub defer: DeferMode,
    /// Tools always sent, by name; a name ending in `*` pins every tool it starts (a server's:
    /// `github__*`).
    pub pin: Vec<String>,
    /// How a search reads its query unless the model says (default `bm25`).
    pub search: SearchKind,
    /// With `auto`: the share of the window the definitions may take before tools leave
    /// (default 0.1).
    pub share: f64,
    /// With `auto`: the number of tools past which tools leave (default 40).
    pub max_tools: usize,
    /// Use the provider's own tool search where it has one (Anthropic's `defer_loading`):
    /// every tool's definition stays in the request, so its cached prefix never changes, and
    /// the provider loads what its search finds (default on).
    pub native: bool,
    /// `defer` per tool source, by the name that starts its tools' names: an MCP server's
    /// (`github` for `github__create_issue`) or a plugin's (`sales` for all of
    /// `sales__crm__…`). The longest name that starts a tool's name, followed by `__`, wins;
    /// other tools follow `defer`. `never` keeps a source's tools in every request (an
    /// essential server), `always` leaves them to the search however few the tools are.
    pub servers: BTreeMap<String, DeferMode>,
}

impl Default for ToolSearchSettings {
    fn default() -> Self {
        Self {
            defer: DeferMode::Auto,
            pin: Vec::new(),
            search: SearchKind::Bm25,
            share: 0.1,
            max_tools: 40,
            native: true,
            servers: BTreeMap::new(),
        }
    }
}

impl ToolSearchSettings {
    fn pinned(&self, name: &str) -> bool {
        self.pin.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => p == name,
        })
    }

    /// The mode of the tool `name`: its source's, else the default.
    fn mode_of(&self, name: &str) -> DeferMode {
        self.servers
            .iter()
            .filter(|(source, _)| {
                name.strip_prefix(source.as_str())
                    .is_some_and(|rest| rest.starts_with("__"))
            })
            .max_by_key(|(source, _)| source.len())
            .map_or(self.defer, |(_, mode)| *mode)
    }
}

/// The tools of one request: those sent, and those left for the search.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Offer {
    /// Sent, in the order of the request.
    pub(crate) sent: Vec<ToolSpec>,
    /// Left out, for the search to find.
    pub(crate) deferred: Vec<ToolSpec>,
    /// What the search looks through: the tools left out and those found (a found tool is
    /// found again, so a model that lost track of it can look it up).
    pub(crate) searchable: Vec<ToolSpec>,
    /// Of `sent`, those a search found.
    pub(crate) found: Vec<String>,
}

/// What the tools of a run are, beyond their specs.
pub(crate) struct ToolKinds<'a> {
    /// Tools that came from tool sources (deferrable unless pinned).
    pub(crate) sourced: &'a HashSet<String>,
    /// Whether a tool is the tool search.
    pub(crate) finds_tools: &'a dyn Fn(&ToolSpec) -> bool,
    /// The local count of a list of specs.
    pub(crate) count: &'a dyn Fn(&[ToolSpec]) -> usize,
}

/// The offer of `all` (the run's tools for its mode, in their order) under `settings`, for a
/// window of `window_tokens`, the tools `found` so far (in the order they were found) sent.
/// With `native` (the provider searches itself) every deferrable tool is left out of `sent`
/// for the provider to hold back, and no search tool of ours is offered.
pub(crate) fn offer(
    all: Vec<ToolSpec>,
    kinds: &ToolKinds<'_>,
    settings: &ToolSearchSettings,
    found: &[String],
    window_tokens: usize,
    native: bool,
) -> Offer {
    let (search, tools): (Vec<ToolSpec>, Vec<ToolSpec>) =
        all.into_iter().partition(|s| (kinds.finds_tools)(s));
    let mode = |s: &ToolSpec| settings.mode_of(&s.name);
    let deferrable = |s: &ToolSpec| {
        kinds.sourced.contains(&s.name) && !settings.pinned(&s.name) && mode(s) != DeferMode::Never
    };
    // Tools in `auto` leave when all the tools pass the share of the window or the count.
    let past_limit = tools
        .iter()
        .any(|s| deferrable(s) && mode(s) == DeferMode::Auto)
        && (tools.len() > settings.max_tools || {
            let limit = (window_tokens as f64 * settings.share.clamp(0.0, 1.0)) as usize;
            (kinds.count)(&tools) > limit
        });
    let leaves = |s: &ToolSpec| {
        deferrable(s)
            && match mode(s) {
                DeferMode::Always => true,
                DeferMode::Auto => past_limit,
                DeferMode::Never => false,
            }
    };
    if !tools.iter().any(leaves) || search.is_empty() {
        return Offer {
            sent: tools,
            ..Offer::default()
        };
    }
    if native {
        let (deferred, sent): (Vec<ToolSpec>, Vec<ToolSpec>) = tools.into_iter().partition(leaves);
        return Offer {
            sent,
            deferred,
            ..Offer::default()
        };
    }
    let found_set: HashSet<&str> = found.iter().map(String::as_str).collect();
    let (left, kept): (Vec<ToolSpec>, Vec<ToolSpec>) = tools
        .into_iter()
        .partition(|s| leaves(s) && !found_set.contains(s.name.as_str()));
    if left.is_empty() {
        return Offer {
            sent: kept,
            ..Offer::default()
        };
    }
    // Found tools go last, in the order found; the others keep theirs.
    let (mut sent, mut was_found): (Vec<ToolSpec>, Vec<ToolSpec>) = kept
        .into_iter()
        .partition(|s| !(leaves(s) && found_set.contains(s.name.as_str())));
    was_found.sort_by_key(|s| found.iter().position(|f| *f == s.name));
    let found_names: Vec<String> = was_found.iter().map(|s| s.name.clone()).collect();
    let searchable: Vec<ToolSpec> = left.iter().chain(&was_found).cloned().collect();
    sent.extend(search);
    sent.extend(was_found);
    Offer {
        sent,
        deferred: left,
        searchable,
        found: found_names,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec::new(name, format!("Does {name}."), json!({"type": "object"}))
    }

    fn names(specs: &[ToolSpec]) -> Vec<&str> {
        specs.iter().map(|s| s.name.as_str()).collect()
    }

    fn run(settings: &ToolSearchSettings, found: &[&str], window: usize) -> Offer {
        let mut all: Vec<ToolSpec> = ["file_reader", "srv__a", "srv__b", "srv__c", "other__d"]
            .into_iter()
            .map(spec)
            .collect();
        all.push(spec("tool_search"));
        let sourced: HashSet<String> = ["srv__a", "srv__b", "srv__c", "other__d"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        let finds = |s: &ToolSpec| s.name == "tool_search";
        let count = |s: &[ToolSpec]| s.len() * 100;
        let kinds = ToolKinds {
            sourced: &sourced,
            finds_tools: &finds,
            count: &count,
        };
        let found: Vec<String> = found.iter().map(|s| (*s).to_owned()).collect();
        offer(all, &kinds, settings, &found, window, false)
    }

    #[test]
    fn few_tools_are_all_sent_without_the_search() {
        let o = run(&ToolSearchSettings::default(), &[], 100_000);
        assert_eq!(
            names(&o.sent),
            ["file_reader", "srv__a", "srv__b", "srv__c", "other__d"]
        );
        assert!(o.deferred.is_empty());
    }

    #[test]
    fn past_the_share_sourced_tools_leave_and_found_ones_come_back_last() {
        // Five tools at 100 tokens each pass a tenth of a 4,000-token window.
        let settings = ToolSearchSettings {
            pin: vec!["other__*".into()],
            ..ToolSearchSettings::default()
        };
        let o = run(&settings, &[], 4_000);
        assert_eq!(names(&o.sent), ["file_reader", "other__d", "tool_search"]);
        assert_eq!(names(&o.deferred), ["srv__a", "srv__b", "srv__c"]);
        let o = run(&settings, &["srv__c", "srv__a"], 4_000);
        assert_eq!(
            names(&o.sent),
            ["file_reader", "other__d", "tool_search", "srv__c", "srv__a"]
        );
        assert_eq!(names(&o.deferred), ["srv__b"]);
        assert_eq!(o.found, ["srv__c", "srv__a"]);
    }

    #[test]
    fn never_sends_everything_and_always_defers_even_a_few() {
        let never = ToolSearchSettings {
            defer: DeferMode::Never,
            ..ToolSearchSettings::default()
        };
        assert!(run(&never, &[], 1_000).deferred.is_empty());
        let always = ToolSearchSettings {
            defer: DeferMode::Always,
            ..ToolSearchSettings::default()
        };
        assert_eq!(run(&always, &[], 1_000_000).deferred.len(), 4);
    }

    #[test]
    fn a_sources_own_mode_wins_over_the_default() {
        // A large window: by the default (`auto`) nothing would leave.
        let settings = ToolSearchSettings {
            servers: BTreeMap::from([("srv".to_owned(), DeferMode::Always)]),
            ..ToolSearchSettings::default()
        };
        let o = run(&settings, &[], 1_000_000);
        assert_eq!(names(&o.deferred), ["srv__a", "srv__b", "srv__c"]);
        assert_eq!(names(&o.sent), ["file_reader", "other__d", "tool_search"]);

        // Past the share, a source set to `never` stays whole; the others leave.
        let settings = ToolSearchSettings {
            servers: BTreeMap::from([("other".to_owned(), DeferMode::Never)]),
            ..ToolSearchSettings::default()
        };
        let o = run(&settings, &[], 4_000);
        assert_eq!(names(&o.sent), ["file_reader", "other__d", "tool_search"]);

        // With `never` by default, only the source set to `always` leaves.
        let settings = ToolSearchSettings {
            defer: DeferMode::Never,
            servers: BTreeMap::from([("other".to_owned(), DeferMode::Always)]),
            ..ToolSearchSettings::default()
        };
        let o = run(&settings, &[], 4_000);
        assert_eq!(names(&o.deferred), ["other__d"]);
    }

    #[test]
    fn the_longest_source_name_followed_by_two_underscores_decides() {
        let settings = ToolSearchSettings {
            defer: DeferMode::Never,
            servers: BTreeMap::from([
                ("sales".to_owned(), DeferMode::Always),
                ("sales__crm".to_owned(), DeferMode::Never),
            ]),
            ..ToolSearchSettings::default()
        };
        assert_eq!(settings.mode_of("sales__crm__find_deal"), DeferMode::Never);
        assert_eq!(settings.mode_of("sales__mail__send"), DeferMode::Always);
        // `sales` does not start `salesforce__…` as a source name.
        assert_eq!(settings.mode_of("salesforce__query"), DeferMode::Never);
        assert_eq!(settings.mode_of("file_reader"), DeferMode::Never);
    }
}
