//! Benchmarks of `FileStore`.
//!
//! - `durable_appends_8_writers`: 8 tasks append to one conversation at the same time;
//!   `baseline_fsync_per_append` flushes each append, `group_commit` shares flushes. A tmpfs
//!   makes `fsync` free, so the store lives in a disk-backed folder: `BA_AGENT_BENCH_DIR` when
//!   set, else cargo's `target/tmp`. The bench refuses a memory filesystem, prints the one it
//!   ran on, and leaves it in a note for the table `cargo xtask bench` writes.
//! - `load_100k_entries`: loading a 100,000-entry conversation, against
//!   `baseline_serde_json_value`, plain `serde_json` parsing of the same file's lines.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ba_protocol::LogRole;
use ba_storage::conformance::text_entry;
use ba_storage::{
    ConversationId, ConversationStore, Durability, FileStore, FileStoreOptions, NewConversation,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const WRITERS: usize = 8;
const EACH: usize = 8;

/// The filesystem `dir` is on, from the longest mount point of `/proc/self/mounts` that
/// contains it: (type, device, mount point).
fn filesystem(dir: &Path) -> Option<(String, String, String)> {
    let dir = dir.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (device, point, kind) = (f.next()?, f.next()?, f.next()?);
            // Spaces in mount points are written as \040.
            let point = point.replace("\\040", " ");
            dir.starts_with(&point)
                .then(|| (kind.to_owned(), device.to_owned(), point))
        })
        .max_by_key(|(_, _, point)| point.len())
}

/// A folder on a disk for the durable-append bench, and a line saying which filesystem it is.
fn disk_folder() -> (tempfile::TempDir, String) {
    let base = std::env::var_os("BA_AGENT_BENCH_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::tempdir_in(&base).unwrap();
    let Some((kind, device, point)) = filesystem(dir.path()) else {
        eprintln!(
            "error: cannot tell the filesystem of {}; durable_appends_8_writers needs a disk",
            dir.path().display()
        );
        std::process::exit(2);
    };
    if matches!(kind.as_str(), "tmpfs" | "ramfs") {
        eprintln!(
            "error: {} is on {kind} ({device} at {point}), where fsync costs nothing; point \
             BA_AGENT_BENCH_DIR at a folder on a disk",
            dir.path().display()
        );
        std::process::exit(2);
    }
    let line = format!("ran on {kind} ({device} mounted at {point})");
    eprintln!("durable_appends_8_writers: {} {line}", dir.path().display());
    (dir, line)
}

fn appends(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(16)
        .build()
        .unwrap();
    let mut group = c.benchmark_group("durable_appends_8_writers");
    group.throughput(Throughput::Elements((WRITERS * EACH) as u64));
    group.sample_size(10);
    let mut on = Vec::new();
    for (name, durability) in [
        ("baseline_fsync_per_append", Durability::EveryAppend),
        ("group_commit", Durability::GroupCommit),
    ] {
        let (dir, line) = disk_folder();
        on.push(line);
        let store = FileStore::open_with(
            dir.path(),
            FileStoreOptions::default().with_durability(durability),
        )
        .unwrap();
        let id = ConversationId::new("bench").unwrap();
        rt.block_on(store.create(&id, NewConversation::default()))
            .unwrap();
        let store = Arc::new(store);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    rt.block_on(async {
                        let mut tasks = Vec::new();
                        for w in 0..WRITERS {
                            let (store, id) = (store.clone(), id.clone());
                            tasks.push(tokio::spawn(async move {
                                for i in 0..EACH {
                                    let e = text_entry(
                                        &format!("w{w}-{i}"),
                                        LogRole::User,
                                        "a durable line of text",
                                    );
                                    store.append(&id, &e, None).await.unwrap();
                                }
                            }));
                        }
                        for t in tasks {
                            t.await.unwrap();
                        }
                    });
                    total += start.elapsed();
                }
                total
            });
        });
    }
    group.finish();
    on.dedup();
    ba_testkit::bench_note(
        env!("CARGO_TARGET_TMPDIR"),
        "durable_appends_8_writers",
        &on.join("; "),
    );
}

fn load(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::open_with(
        dir.path(),
        FileStoreOptions::default().with_durability(Durability::OsBuffered),
    )
    .unwrap();
    let id = ConversationId::new("big").unwrap();
    rt.block_on(async {
        store.create(&id, NewConversation::default()).await.unwrap();
        let roles = [LogRole::User, LogRole::Assistant];
        for chunk in 0..100 {
            let batch: Vec<_> = (0..1000)
                .map(|i| {
                    let n = chunk * 1000 + i;
                    text_entry(&format!("m{n}"), roles[n % 2], &format!("Entry {n}: revenue in the north region grew by {}% over the quarter, driven by new accounts.", n % 97))
                })
                .collect();
            store.append_batch(&id, &batch, None).await.unwrap();
        }
    });
    let bytes = std::fs::read(store.log_path(&id)).unwrap();
    let mut group = c.benchmark_group("load_100k_entries");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.sample_size(10);
    group.bench_function("baseline_serde_json_value", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let v: serde_json::Value = serde_json::from_slice(line).unwrap();
                n += usize::from(v.is_object());
            }
            assert_eq!(n, 100_000);
        });
    });
    // The same lines parsed straight into log entries on one thread: the cost of the
    // protocol's `LogEntry` deserializer, without the store around it.
    #[derive(serde::Deserialize)]
    struct Line {
        #[allow(dead_code)]
        seq: u64,
        #[allow(dead_code)]
        at: i64,
        #[allow(dead_code)]
        entry: ba_protocol::LogEntry,
    }
    group.bench_function("serde_json_log_entry_one_thread", |b| {
        b.iter(|| {
            let lines: Vec<Line> = bytes
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).unwrap())
                .collect();
            assert_eq!(lines.len(), 100_000);
        });
    });
    group.bench_function("file_store_load", |b| {
        b.iter(|| {
            let loaded = rt.block_on(store.load(&id)).unwrap();
            assert_eq!(loaded.entries.len(), 100_000);
        });
    });
    group.finish();
}

criterion_group!(benches, appends, load);
criterion_main!(benches);
