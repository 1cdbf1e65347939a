//! `ba-agent skills …` against the fixture skills and generated bad ones.

// Helpers outside `#[test]` functions are not covered by clippy.toml's test allowances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The fixture skills' folder (a skip, or a failure under CI, when they are absent).
fn skills_fixtures() -> Option<PathBuf> {
    ba_testkit::fixture("skills/anthropics")?;
    ba_testkit::fixture("skills")
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ba-agent"))
        .current_dir(cwd)
        .arg("skills")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn list_json_over_the_fixture() {
    let Some(dir) = skills_fixtures() else { return };
    let out = run(&dir, &["list", "--root", "anthropics", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let value = json(&out);
    let skills = value["skills"].as_array().unwrap();
    assert_eq!(skills.len(), 12);
    assert!(skills.iter().all(|s| s["tokens"].as_u64().unwrap() > 0));
    assert!(value["encoding"].as_str().is_some_and(|e| !e.is_empty()));
    // Nothing here varies between runs or machines: the fixture is fixed, the encoding is the
    // exact cl100k_base and counts are exact, so the whole catalogue is the snapshot.
    assert_eq!(value["encoding"], "cl100k_base");
    insta::assert_json_snapshot!("list_json", value);
}

#[test]
fn list_text_and_diagnostics_on_stderr() {
    let Some(dir) = skills_fixtures() else { return };
    let out = run(&dir, &["list", "--root", "anthropics"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.starts_with("NAME"));
    assert_eq!(text.lines().count(), 14);
    assert!(text.lines().last().unwrap().starts_with("12 skills, "));
    assert_eq!(
        stderr(&out),
        "anthropics/claude-api/SKILL.md: warning[description-too-long]: description is 1068 characters, over the limit of 1024\n"
    );
}

#[test]
fn validate_fixture_exits_one_with_the_one_violation() {
    let Some(dir) = skills_fixtures() else { return };
    let out = run(&dir, &["validate", "--root", "anthropics", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_json_snapshot!("validate_json", json(&out));
    let text = run(&dir, &["validate", "--root", "anthropics"]);
    assert_eq!(text.status.code(), Some(1));
    insta::assert_snapshot!("validate_text", stdout(&text));
}

#[test]
fn validate_passes_on_a_clean_root() {
    let Some(dir) = skills_fixtures() else { return };
    let out = run(
        &dir,
        &[
            "validate",
            "--root",
            "anthropics/mcp-builder",
            "--root",
            "anthropics/theme-factory",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "0 errors, 0 warnings\n");
}

#[test]
fn show_each_level() {
    let Some(dir) = skills_fixtures() else { return };
    let l1 = run(
        &dir,
        &[
            "show",
            "skill-creator",
            "--root",
            "anthropics",
            "--level",
            "1",
        ],
    );
    assert_eq!(l1.status.code(), Some(0), "{}", stderr(&l1));
    let text = stdout(&l1);
    let last = text.lines().last().unwrap().to_owned();
    assert!(last.starts_with("# level 1: "), "{last}");
    // The exact count, as in the listing.
    insta::assert_snapshot!("show_level1", text);

    let l2 = run(
        &dir,
        &[
            "show",
            "mcp-builder",
            "--root",
            "anthropics",
            "--level",
            "2",
            "--json",
        ],
    );
    let value = json(&l2);
    assert!(
        value["body"]
            .as_str()
            .unwrap()
            .trim_start()
            .starts_with("# MCP Server Development Guide")
    );
    assert_eq!(value["resources"].as_array().unwrap().len(), 5);

    let l3 = run(
        &dir,
        &[
            "show",
            "mcp-builder",
            "--root",
            "anthropics",
            "--level",
            "3",
            "--json",
        ],
    );
    let value = json(&l3);
    let resources = value["resources"].as_array().unwrap();
    assert!(resources.iter().all(|r| r["tokens"].as_u64().unwrap() > 0));

    let file = run(
        &dir,
        &[
            "show",
            "mcp-builder",
            "--root",
            "anthropics",
            "--level",
            "3",
            "--resource",
            "reference/evaluation.md",
        ],
    );
    assert_eq!(file.status.code(), Some(0));
    assert_eq!(
        stdout(&file),
        std::fs::read_to_string(dir.join("anthropics/mcp-builder/reference/evaluation.md"))
            .unwrap()
    );
}

#[test]
fn bad_input_exits_two_naming_what_was_wrong() {
    let Some(dir) = skills_fixtures() else { return };
    let escape = run(
        &dir,
        &[
            "show",
            "mcp-builder",
            "--root",
            "anthropics",
            "--level",
            "3",
            "--resource",
            "../claude-api/SKILL.md",
        ],
    );
    assert_eq!(escape.status.code(), Some(2));
    assert_eq!(
        stderr(&escape),
        "error: resource path `../claude-api/SKILL.md` of skill `mcp-builder` is refused: the path climbs out with `..`\n"
    );
    let missing = run(
        &dir,
        &[
            "show",
            "webapp-testing",
            "--root",
            "anthropics",
            "--level",
            "3",
            "--resource",
            "scripts/with_server.py",
        ],
    );
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).starts_with("error: resource `scripts/with_server.py` of skill `webapp-testing` does not exist in anthropics/webapp-testing"));
    let unknown = run(&dir, &["show", "nope", "--root", "anthropics"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).starts_with("error: no skill named `nope` under anthropics"));
    let no_root = run(&dir, &["list", "--root", "does-not-exist"]);
    assert_eq!(no_root.status.code(), Some(2));
    assert_eq!(
        stderr(&no_root),
        "error: --root does-not-exist: not a readable folder\n"
    );
    let usage = run(&dir, &["list"]);
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn broken_skills_are_diagnostics_not_failures() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join("plugins/p/skills/ok")).unwrap();
    std::fs::write(
        root.join("plugins/p/skills/ok/SKILL.md"),
        "---\nname: ok\ndescription: Fine.\n---\nbody\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("broken")).unwrap();
    std::fs::write(root.join("broken/SKILL.md"), "---\nname: broken\n").unwrap();
    let out = run(root, &["list", "--root", ".", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let value = json(&out);
    assert_eq!(value["skills"][0]["name"], "ok");
    assert_eq!(value["skills"][0]["path"], "./plugins/p/skills/ok");
    assert_eq!(value["diagnostics"][0]["rule"], "unterminated-frontmatter");
    assert_eq!(value["diagnostics"][0]["severity"], "error");
    let validate = run(root, &["validate", "--root", "."]);
    assert_eq!(validate.status.code(), Some(1));
}
