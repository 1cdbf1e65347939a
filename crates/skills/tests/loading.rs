//! Bad input, roots, name clashes, the confined reader and hot reload, on generated skills.

// Helpers outside `#[test]` functions are not covered by clippy.toml's test allowances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use ba_protocol::SkillActivationRequest;
use ba_skills::Invoker;
use ba_skills::{
    ActivateSkill, ActivationStack, ConversationLocks, Diagnostic, LoadOptions, Rule, Severity,
    SkillSet, SkillsError,
};

fn write(path: &Path, content: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn skill(root: &Path, name: &str, extra: &str, body: &str) {
    write(
        &root.join(name).join("SKILL.md"),
        format!("---\nname: {name}\ndescription: Does {name} things.\n{extra}---\n{body}"),
    );
}

fn rules(diags: &[Diagnostic]) -> Vec<(String, Severity, Rule)> {
    diags
        .iter()
        .map(|d| {
            let folder = d.path.parent().unwrap().file_name().unwrap();
            (folder.to_string_lossy().into_owned(), d.severity, d.rule)
        })
        .collect()
}

#[test]
fn one_bad_skill_never_stops_a_load() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    skill(root, "good", "", "# Good\n");
    write(&root.join("no-front/SKILL.md"), "# Just markdown\n");
    write(
        &root.join("unterminated/SKILL.md"),
        "---\nname: unterminated\ndescription: x\n",
    );
    write(
        &root.join("bad-yaml/SKILL.md"),
        "---\nname: bad-yaml\ndescription: [oops\n---\nbody\n",
    );
    write(
        &root.join("binary/SKILL.md"),
        b"\x7fELF\x02\x01\x01\0\0\0\0\xff\xfe",
    );
    write(
        &root.join("no-desc/SKILL.md"),
        "---\nname: no-desc\n---\nbody\n",
    );
    write(&root.join("listy/SKILL.md"), "---\n- a\n- b\n---\n");
    skill(root, "wrong-folder", "", "");
    std::fs::rename(root.join("wrong-folder"), root.join("renamed")).unwrap();
    let set = SkillSet::load([root]);
    assert_eq!(set.names(), ["good", "wrong-folder"]);
    let found = rules(&set.diagnostics());
    let e = Severity::Error;
    assert_eq!(
        found,
        vec![
            ("bad-yaml".into(), e, Rule::InvalidYaml),
            ("binary".into(), e, Rule::NotText),
            ("listy".into(), e, Rule::FrontmatterNotMapping),
            ("no-desc".into(), e, Rule::DescriptionMissing),
            ("no-front".into(), e, Rule::MissingFrontmatter),
            ("renamed".into(), Severity::Warning, Rule::NameMismatch),
            ("unterminated".into(), e, Rule::UnterminatedFrontmatter),
        ]
    );
    let yaml = set
        .diagnostics()
        .into_iter()
        .find(|d| d.rule == Rule::InvalidYaml)
        .unwrap();
    assert!(
        yaml.message
            .starts_with("invalid YAML in the frontmatter at line 4: "),
        "{}",
        yaml.message
    );
}

#[test]
fn an_unquoted_colon_loads_leniently_and_fails_strictly() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        &tmp.path().join("colon/SKILL.md"),
        "---\nname: colon\ndescription: Use when: the user asks\n---\nbody\n",
    );
    let set = SkillSet::load([tmp.path()]);
    assert_eq!(
        set.get("colon").unwrap().description(),
        "Use when: the user asks"
    );
    assert_eq!(
        rules(&set.diagnostics()),
        vec![("colon".into(), Severity::Warning, Rule::InvalidYaml)]
    );
    let strict = ba_skills::validate([tmp.path()], &LoadOptions::default());
    assert_eq!(
        rules(&strict),
        vec![("colon".into(), Severity::Error, Rule::InvalidYaml)]
    );
}

#[test]
fn unknown_keys_load_with_a_warning_and_fail_strict_validation() {
    let tmp = tempfile::tempdir().unwrap();
    skill(
        tmp.path(),
        "ext",
        "model: some-model\nwhen_to_use: always\nallowed-tools:\n  - Read\n  - Bash(git log:*)\n",
        "",
    );
    let set = SkillSet::load([tmp.path()]);
    let s = set.get("ext").unwrap();
    assert_eq!(s.frontmatter.extra["when_to_use"], "always");
    assert_eq!(
        s.frontmatter.allowed_tools.as_ref().unwrap(),
        &["Read", "Bash(git log:*)"]
    );
    let lenient = set.diagnostics();
    assert_eq!(
        rules(&lenient),
        vec![("ext".into(), Severity::Warning, Rule::UnexpectedField)]
    );
    assert!(lenient[0].message.contains("`when_to_use`"));
    let strict = ba_skills::validate([tmp.path()], &LoadOptions::default());
    assert_eq!(
        rules(&strict),
        vec![("ext".into(), Severity::Error, Rule::UnexpectedField)]
    );
    assert!(
        strict[0].message.contains("`model`, `when_to_use`"),
        "{}",
        strict[0].message
    );
}

#[test]
fn first_root_wins_a_clash() {
    let project = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    skill(project.path(), "shared", "", "project body\n");
    skill(
        &user.path().join("plugins/p/skills"),
        "shared",
        "",
        "user body\n",
    );
    skill(&user.path().join("plugins/p/skills"), "only-user", "", "");
    let set = SkillSet::load([project.path(), user.path()]);
    assert_eq!(set.names(), ["only-user", "shared"]);
    assert_eq!(&*set.body("shared").unwrap(), "project body\n");
    assert_eq!(set.get("shared").unwrap().root_index, 0);
    let diags = set.diagnostics();
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0].rule, Rule::NameClash);
    assert_eq!(diags[0].severity, Severity::Warning);
    assert!(diags[0].path.starts_with(user.path()));
}

#[test]
fn crlf_skill_loads() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        &tmp.path().join("crlf/SKILL.md"),
        "---\r\nname: crlf\r\ndescription: |-\r\n  Line one.\r\n  Line two.\r\n---\r\n# Title\r\n",
    );
    let set = SkillSet::load([tmp.path()]);
    assert!(set.diagnostics().is_empty(), "{:?}", set.diagnostics());
    assert_eq!(
        set.get("crlf").unwrap().description(),
        "Line one.\nLine two."
    );
    assert_eq!(&*set.body("crlf").unwrap(), "# Title\n");
}

#[test]
fn a_five_megabyte_body_is_a_warning_then_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    skill(tmp.path(), "huge", "", &"x".repeat(5 * 1024 * 1024));
    let set = SkillSet::load([tmp.path()]);
    assert_eq!(
        rules(&set.diagnostics()),
        vec![("huge".into(), Severity::Warning, Rule::BodyTooLarge)]
    );
    let err = set.body("huge").unwrap_err();
    assert!(
        matches!(
            err,
            SkillsError::BodyTooLarge {
                limit: 1_048_576,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("over the limit of 1048576 bytes"));
    let tool = ActivateSkill::new(Arc::new(set));
    let result = tool.activate_or_report(&SkillActivationRequest::new("huge"), Invoker::Model);
    assert!(!result.success);
    assert!(result.error.unwrap().contains("over the limit"));
}

#[test]
fn the_reader_stays_inside_the_skill_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    skill(&root, "s", "", "");
    write(&root.join("s/references/a.md"), "inside");
    write(&tmp.path().join("secret.txt"), "outside");
    write(&root.join("s/assets/logo.bin"), b"\x89PNG\0\0");
    let set = SkillSet::load_with(
        [&root],
        LoadOptions {
            max_resource_bytes: 10,
            ..LoadOptions::default()
        },
    );
    assert_eq!(set.read_resource("s", "references/a.md").unwrap(), "inside");
    assert_eq!(
        set.read_resource("s", "./references/a.md").unwrap(),
        "inside"
    );
    for bad in [
        "../../secret.txt",
        "references/../../../secret.txt",
        "/etc/passwd",
        "",
    ] {
        assert!(
            matches!(
                set.read_resource("s", bad),
                Err(SkillsError::InvalidResourcePath { .. })
            ),
            "{bad}"
        );
    }
    let abs = tmp.path().join("secret.txt");
    assert!(set.read_resource("s", abs.to_str().unwrap()).is_err());
    assert!(matches!(
        set.read_resource("s", "assets/logo.bin"),
        Err(SkillsError::ResourceNotText { .. })
    ));
    assert!(matches!(
        set.read_resource("s", "references"),
        Err(SkillsError::ResourceNotAFile { .. })
    ));
    write(&root.join("s/references/big.md"), "0123456789ab");
    assert!(matches!(
        set.read_resource("s", "references/big.md"),
        Err(SkillsError::ResourceTooLarge {
            size: 12,
            limit: 10,
            ..
        })
    ));
    assert!(matches!(
        set.read_resource("nope", "x"),
        Err(SkillsError::UnknownSkill { .. })
    ));
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(tmp.path().join("secret.txt"), root.join("s/leak.txt")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), root.join("s/up")).unwrap();
        std::os::unix::fs::symlink("references/a.md", root.join("s/alias.md")).unwrap();
        for escaping in ["leak.txt", "up/secret.txt"] {
            let err = set.read_resource("s", escaping).unwrap_err();
            assert!(
                matches!(err, SkillsError::ResourceEscapes { .. }),
                "{escaping}: {err}"
            );
            assert_eq!(
                err.to_string(),
                format!("resource `{escaping}` of skill `s` resolves outside the skill folder")
            );
        }
        assert_eq!(set.read_resource("s", "alias.md").unwrap(), "inside");
        let listed: Vec<String> = set
            .resources("s")
            .unwrap()
            .into_iter()
            .map(|r| r.path)
            .collect();
        assert_eq!(
            listed,
            [
                "alias.md",
                "assets/logo.bin",
                "references/a.md",
                "references/big.md"
            ]
        );
    }
}

#[test]
fn reload_picks_up_added_changed_and_deleted_skills() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    skill(root, "stays", "", "same\n");
    skill(root, "changes", "", "old\n");
    skill(root, "goes", "", "bye\n");
    let set = SkillSet::load([root]);
    let stays = set.body("stays").unwrap();
    assert_eq!(&*set.body("changes").unwrap(), "old\n");

    skill(root, "changes", "license: MIT\n", "new body\n");
    std::fs::remove_dir_all(root.join("goes")).unwrap();
    skill(root, "arrives", "", "hi\n");
    let report = set.reload();
    assert_eq!(report.added, ["arrives"]);
    assert_eq!(report.changed, ["changes"]);
    assert_eq!(report.removed, ["goes"]);
    assert_eq!(&*set.body("changes").unwrap(), "new body\n");
    assert!(
        Arc::ptr_eq(&stays, &set.body("stays").unwrap()),
        "unchanged bodies stay cached"
    );
    assert!(matches!(
        set.body("goes"),
        Err(SkillsError::UnknownSkill { .. })
    ));
    assert!(set.reload().is_empty());
}

#[test]
fn meta_tool_modifier_and_invocation_rules() {
    let tmp = tempfile::tempdir().unwrap();
    skill(
        tmp.path(),
        "deploy",
        "allowed-tools: Bash(git push:*) Read\nmodel: big-model\ndisable-model-invocation: true\n",
        "Deploy steps.\n",
    );
    skill(tmp.path(), "open", "", "Open steps.\n");
    let set = Arc::new(SkillSet::load([tmp.path()]));
    assert!(!set.render_catalogue().contains("deploy"));
    let tool = ActivateSkill::new(Arc::clone(&set));
    assert_eq!(
        tool.input_schema()["properties"]["skill"]["enum"],
        serde_json::json!(["open"])
    );
    let req = SkillActivationRequest::new("deploy");
    assert!(matches!(
        tool.activate(&req),
        Err(SkillsError::ModelInvocationDisabled { .. })
    ));
    let result = tool.activate_as(&req, Invoker::User).unwrap();
    let m = &result.context_modifier;
    assert_eq!(
        m.allowed_tools.as_deref().unwrap(),
        ["Bash(git push:*)", "Read"]
    );
    assert_eq!(m.model.as_deref(), Some("big-model"));
    assert!(m.disable_model_invocation);
    let perms = result.messages.last().unwrap();
    assert_eq!(perms.kind, ba_protocol::SkillMessageKind::Permissions);
    assert!(perms.content.contains("Bash(git push:*), Read"));

    for (args, msg) in [
        (
            serde_json::json!({}),
            "the required field `skill` is missing",
        ),
        (
            serde_json::json!({"skill": 3}),
            "field `skill` must be a non-empty string",
        ),
        (
            serde_json::json!({"skill": "open", "load_level": 4}),
            "field `load_level` must be 1, 2 or 3, not 4",
        ),
        (
            serde_json::json!({"skill": "open", "x": 1}),
            "unknown field `x`",
        ),
        (
            serde_json::json!([1]),
            "the arguments must be a JSON object",
        ),
    ] {
        let err = tool.parse_arguments(&args).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("invalid arguments for `activate_skill`: {msg}")
        );
    }
    let mut cyclic = SkillActivationRequest::new("open");
    cyclic.chain = vec!["open".into()];
    cyclic.depth = 1;
    assert_eq!(
        tool.activate(&cyclic).unwrap_err().to_string(),
        "skill activation cycle refused: open → open"
    );
    let mut level0 = SkillActivationRequest::new("open");
    level0.load_level = 0;
    assert!(matches!(
        tool.activate(&level0),
        Err(SkillsError::InvalidLoadLevel { level: 0 })
    ));
}

/// Eight conversations activate nested skills at the same time, sharing what the product
/// shares: one lock table (bound 4, so inserts evict while locks are held), one tool and its
/// body cache. Each conversation has one activation stack, used by two tasks in turn under the
/// conversation's lock. All eight locks are held at once (so different conversations never
/// wait for each other), a held lock is never handed out again (not even after eviction), the
/// second task of a conversation only gets in once the first is out and finds the stack clean,
/// and a cycle or depth error in one conversation never shows in another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_activations_on_different_conversations() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::Barrier;
    const CONVERSATIONS: usize = 8;
    let tmp = tempfile::tempdir().unwrap();
    for name in ["a", "b", "c", "d"] {
        skill(tmp.path(), name, "", &format!("{name} body\n"));
    }
    let tool = Arc::new(ActivateSkill::new(Arc::new(SkillSet::load([tmp.path()]))));
    let locks = Arc::new(ConversationLocks::new(4));
    let stacks: Vec<ActivationStack> = (0..CONVERSATIONS).map(|_| ActivationStack::new()).collect();
    let inside: Arc<Vec<AtomicUsize>> =
        Arc::new((0..CONVERSATIONS).map(|_| AtomicUsize::new(0)).collect());
    let all_held = Arc::new(Barrier::new(CONVERSATIONS + 1));
    let release = Arc::new(Barrier::new(CONVERSATIONS + 1));

    // One conversation's turn: nested activations on its stack, then the errors.
    let activate = |conv: usize| {
        let (tool, stack) = (Arc::clone(&tool), stacks[conv].clone());
        async move {
            assert_eq!(stack.depth(), 0, "conv-{conv}: the stack was left dirty");
            let mut guards = Vec::new();
            for name in ["a", "b", "c"] {
                let result = tool.activate(&stack.request(name, 2)).unwrap();
                guards.push(stack.push_with_id(name, result.activation_id).unwrap());
                tokio::task::yield_now().await;
            }
            assert_eq!(stack.chain(), ["a", "b", "c"], "conv-{conv}");
            let too_deep = tool.activate(&stack.request("d", 2)).unwrap_err();
            assert!(matches!(too_deep, SkillsError::DepthExceeded { .. }));
            if conv.is_multiple_of(2) {
                let err = tool.activate(&stack.request("a", 2)).unwrap_err();
                assert_eq!(
                    err.to_string(),
                    "skill activation cycle refused: a → b → c → a"
                );
            }
            tokio::task::yield_now().await;
            assert_eq!(stack.chain(), ["a", "b", "c"], "conv-{conv}");
            drop(guards);
            assert_eq!(stack.depth(), 0);
        }
    };
    fn enter(inside: &[AtomicUsize], conv: usize) {
        let n = inside[conv].fetch_add(1, Ordering::SeqCst);
        assert_eq!(n, 0, "two tasks inside conv-{conv} at once");
    }

    let mut holders = Vec::new();
    for conv in 0..CONVERSATIONS {
        let (locks, inside) = (Arc::clone(&locks), Arc::clone(&inside));
        let (all_held, release) = (Arc::clone(&all_held), Arc::clone(&release));
        let turn = activate(conv);
        holders.push(tokio::spawn(async move {
            let _held = locks.lock(&format!("conv-{conv}")).await;
            enter(&inside, conv);
            all_held.wait().await;
            release.wait().await;
            turn.await;
            inside[conv].fetch_sub(1, Ordering::SeqCst);
        }));
    }
    // Generous: only a lock of one conversation blocking another runs it out.
    let limit = std::time::Duration::from_secs(30);
    tokio::time::timeout(limit, all_held.wait())
        .await
        .expect("the conversations' locks were not all held at once");
    assert!(locks.len() >= CONVERSATIONS, "held entries were evicted");
    for conv in 0..CONVERSATIONS {
        assert!(
            locks.try_lock(&format!("conv-{conv}")).is_none(),
            "the lock of conv-{conv} was handed out while held"
        );
    }
    let mut followers = Vec::new();
    for conv in 0..CONVERSATIONS {
        let (locks, inside) = (Arc::clone(&locks), Arc::clone(&inside));
        let turn = activate(conv);
        followers.push(tokio::spawn(async move {
            let _held = locks.lock(&format!("conv-{conv}")).await;
            enter(&inside, conv);
            turn.await;
            inside[conv].fetch_sub(1, Ordering::SeqCst);
        }));
    }
    release.wait().await;
    for task in holders.into_iter().chain(followers) {
        tokio::time::timeout(limit, task)
            .await
            .expect("a conversation never got its lock back")
            .unwrap();
    }
    assert!(stacks.iter().all(|s| s.depth() == 0));
}

/// The test plugins of the MCP crate, laid out as Claude Code plugins (one folder each).
fn plugin_fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mcp/tests/fixtures/plugins")
        .join(name)
        .join("skills")
}

#[test]
fn namespaced_roots_load_two_plugins_skills_of_the_same_name() {
    use ba_skills::SkillRoot;
    let set = SkillSet::load_roots([
        SkillRoot::namespaced(plugin_fixture("sales-ops"), "sales-ops"),
        SkillRoot::namespaced(plugin_fixture("finance-ops"), "finance-ops"),
    ]);
    assert!(set.diagnostics().is_empty(), "{:?}", set.diagnostics());
    // Both `forecast`s load, neither shadows the other; the SKILL.md nested in the sales
    // skill's folder is a resource of it, not a skill.
    assert_eq!(set.names(), ["finance-ops:forecast", "sales-ops:forecast"]);
    let sales = set.get("sales-ops:forecast").unwrap();
    assert_eq!(sales.local_name(), "forecast");
    assert_eq!(sales.namespace.as_deref(), Some("sales-ops"));
    assert!(set.body("sales-ops:forecast").unwrap().contains("quota"));
    assert!(set.body("finance-ops:forecast").unwrap().contains("ledger"));
    let resources: Vec<String> = set
        .resources("sales-ops:forecast")
        .unwrap()
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(resources, ["templates/nested/SKILL.md"]);
    assert!(
        set.render_catalogue()
            .contains("<skill name=\"finance-ops:forecast\">")
    );
    // The meta-tool activates a skill by its namespaced name.
    let tool = ActivateSkill::new(Arc::new(set));
    let result = tool
        .activate(&SkillActivationRequest::new("finance-ops:forecast"))
        .unwrap();
    assert!(result.success);
    // Strict validation checks each skill's own name and sees no clash.
    let strict = ba_skills::validate_roots(
        [
            SkillRoot::namespaced(plugin_fixture("sales-ops"), "sales-ops"),
            SkillRoot::namespaced(plugin_fixture("finance-ops"), "finance-ops"),
        ],
        &LoadOptions::default(),
    );
    assert!(strict.is_empty(), "{strict:?}");
    // Without namespaces the second one is a clash, as before.
    let plain = SkillSet::load([plugin_fixture("sales-ops"), plugin_fixture("finance-ops")]);
    assert_eq!(plain.names(), ["forecast"]);
    assert_eq!(plain.diagnostics()[0].rule, Rule::NameClash);
}

#[test]
fn a_reload_that_cannot_read_a_skill_keeps_its_last_good_version() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("skills");
    skill(&root, "steady", "", "steady body\n");
    skill(&root, "edited", "", "first body\n");
    let set = SkillSet::load([&root]);
    assert_eq!(set.names(), ["edited", "steady"]);

    // A half-saved edit: the frontmatter is broken, the file is still there.
    write(&root.join("edited/SKILL.md"), "---\nname: edited\ndescr");
    let report = set.reload();
    assert_eq!(report.kept, ["edited"]);
    assert!(report.removed.is_empty() && report.changed.is_empty());
    assert_eq!(set.names(), ["edited", "steady"]);
    let why = set
        .diagnostics()
        .into_iter()
        .find(|d| d.rule == Rule::KeptLastGood)
        .unwrap();
    assert!(
        why.message.contains("kept at its last good version"),
        "{why}"
    );
    assert!(why.message.contains("never closed") || why.message.contains("frontmatter"));

    // Fixed: the new version replaces the old one.
    skill(&root, "edited", "", "second body\n");
    let report = set.reload();
    assert_eq!(report.changed, ["edited"]);
    assert!(report.kept.is_empty());
    assert_eq!(&*set.body("edited").unwrap(), "second body\n");
    assert!(set.diagnostics().is_empty());

    // A root that disappears for a moment (a checkout, a remount) keeps its skills.
    let moved = tmp.path().join("elsewhere");
    std::fs::rename(&root, &moved).unwrap();
    let report = set.reload();
    assert_eq!(report.kept, ["edited", "steady"]);
    assert_eq!(set.len(), 2);
    std::fs::rename(&moved, &root).unwrap();
    assert!(set.reload().kept.is_empty());

    // Deleting a skill folder is a removal, not a failure.
    std::fs::remove_dir_all(root.join("steady")).unwrap();
    let report = set.reload();
    assert_eq!(report.removed, ["steady"]);
    assert_eq!(set.names(), ["edited"]);
}
