//! Level 1 index of 1,000 generated skills from disk, and Level 2 bodies: a cache hit against
//! a read from disk.
//!
//! The two Level 2 paths do not give the same guarantee: the cache hit returns the body read
//! earlier without looking at the file, the read from disk opens it, checks its size and
//! frontmatter and reads the body again. The group is named for what it compares (it is not
//! an activation, which also takes the conversation's lock and writes the messages).

// Helpers outside `#[test]` functions are not covered by clippy.toml's test allowances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::path::Path;

use ba_skills::SkillSet;
use criterion::{Criterion, criterion_group, criterion_main};

const SKILLS: usize = 1000;

/// Writes `SKILLS` skills, spread over plugin folders like a real collection, each with a
/// realistic frontmatter and an 8 KB body.
fn generate(root: &Path) {
    let body: String = (0..160)
        .map(|i| format!("Step {i}: read the input, check it, write the report section.\n"))
        .collect();
    for i in 0..SKILLS {
        let dir = root.join(format!("plugins/p{}/skills/skill-{i:04}", i % 20));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: skill-{i:04}\ndescription: |-\n  Generated skill number {i}. Use it when \
                 the user asks for report {i}, a summary of dataset {i}, or a chart of metric {i}.\n\
                 license: Apache-2.0\nallowed-tools: Read Grep Bash(python:*)\nmetadata:\n  \
                 author: bench\n  version: \"1.0\"\n---\n# Skill {i}\n\n{body}"
            ),
        )
        .unwrap();
    }
}

/// The obvious loader: read every `SKILL.md` whole and parse its frontmatter.
fn read_whole_files(root: &Path) -> usize {
    let mut names = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let skill = dir.join("SKILL.md");
        if skill.is_file() {
            let text = std::fs::read_to_string(&skill).unwrap();
            let (fm, _, _) = ba_skills::parse_document(&text).unwrap();
            names += usize::from(fm.name.is_some());
            continue;
        }
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    names
}

fn index(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path());
    let mut group = c.benchmark_group("l1_index_1000_skills");
    group.sample_size(10);
    group.bench_function("baseline_read_whole_files", |b| {
        b.iter(|| assert_eq!(read_whole_files(black_box(tmp.path())), SKILLS));
    });
    group.bench_function("skillset_load_frontmatter_only", |b| {
        b.iter(|| assert_eq!(SkillSet::load([black_box(tmp.path())]).len(), SKILLS));
    });
    group.finish();

    let set = SkillSet::load([tmp.path()]);
    let mut group = c.benchmark_group("l2_body_cache_hit_vs_reread");
    group.bench_function("baseline_reread_and_check_file", |b| {
        b.iter(|| set.body_from_disk(black_box("skill-0500")).unwrap().len());
    });
    // Filled by the first call; no file access after that.
    group.bench_function("cache_hit_no_file_check", |b| {
        b.iter(|| set.body(black_box("skill-0500")).unwrap().len());
    });
    ba_testkit::bench_note(
        env!("CARGO_TARGET_TMPDIR"),
        "l2_body_cache_hit_vs_reread",
        "not the same guarantee: the cache hit returns the 8 KB body read earlier without \
         looking at the file; the baseline opens the file, checks its size and frontmatter and \
         reads the body again (what a cache miss costs, and what a hit skips)",
    );
    group.finish();
}

criterion_group!(benches, index);
criterion_main!(benches);
