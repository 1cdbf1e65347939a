//! Fuzzing of the JSONL loader with byte and structure mutations of a real conversation file
//! (flipped bits, cut lines, duplicated lines, stray braces, invalid UTF-8). Loading never
//! panics and never fails (a bad line costs only itself); what loads is in strictly increasing
//! order; the next append is taken and continues after every number the file held, and the
//! entries read before it are read again unchanged.
//! `cargo xtask fuzz --cases N` runs longer.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use ba_protocol::{LogEntry, LogRole};
use ba_storage::conformance::text_entry;
use ba_storage::{ConversationId, ConversationStore, FileStore, NewConversation};
use ba_testkit::fuzz::{cases, mutated};
use proptest::prelude::*;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn id() -> ConversationId {
    ConversationId::new("fuzzed").unwrap()
}

/// A conversation file written by the store itself: user, assistant and a multi-byte text.
fn seed() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let store = FileStore::open(dir.path()).unwrap();
        store
            .create(&id(), NewConversation::default())
            .await
            .unwrap();
        let texts = [
            (LogRole::User, "West Q3 2024 sales against the target?"),
            (LogRole::Assistant, "Querying the sales table."),
            (LogRole::User, "Only 华东 and West, in CNY."),
            (LogRole::Assistant, "West: 1,284,500 CNY (+22 %)."),
        ];
        for (i, (role, text)) in texts.into_iter().enumerate() {
            store
                .append(&id(), &text_entry(&format!("e{i}"), role, text), None)
                .await
                .unwrap();
        }
        vec![std::fs::read(store.log_path(&id())).unwrap()]
    })
}

fn file_cases() -> u32 {
    // Each case opens a store on disk: a quarter of the in-memory cases.
    (cases() / 4).max(16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: file_cases(), ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_log_loads_in_order_and_appends_after_every_number(bytes in mutated(seed())) {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        rt.block_on(async {
            let store = FileStore::open(dir.path()).unwrap();
            store.create(&id(), NewConversation::default()).await.unwrap();
            std::fs::write(store.log_path(&id()), &bytes).unwrap();

            // A fresh store, as a new process would open it.
            let store = FileStore::open(dir.path()).unwrap();
            // A bad line costs only itself: the damaged file always loads.
            let loaded = match store.load(&id()).await {
                Ok(loaded) => loaded,
                Err(e) => {
                    return Err(TestCaseError::fail(format!("a damaged log no longer loads: {e}")));
                }
            };
            let seqs: Vec<u64> = loaded.entries.iter().map(|e| e.seq).collect();
            prop_assert!(seqs.windows(2).all(|w| w[0] < w[1]), "out of order: {seqs:?}");
            prop_assert!(loaded.last_seq >= seqs.last().copied().unwrap_or(0));
            for d in &loaded.diagnostics {
                prop_assert!(!d.to_string().is_empty());
            }

            let next: LogEntry = text_entry("after", LogRole::User, "and the East?");
            let seq = store.append(&id(), &next, Some(loaded.last_seq)).await;
            // And it takes the next entry after the last number it holds: load and append read
            // the same file the same way.
            let seq = match seq {
                Ok(seq) => seq,
                Err(e) => {
                    return Err(TestCaseError::fail(format!(
                        "a damaged log refuses the next entry: {e}"
                    )));
                }
            };
            prop_assert_eq!(seq, loaded.last_seq + 1);

            let again = FileStore::open(dir.path()).unwrap().load(&id()).await.unwrap();
            let before: Vec<(u64, String)> = loaded
                .entries
                .iter()
                .map(|e| (e.seq, e.entry.id.clone()))
                .collect();
            let after: Vec<(u64, String)> = again
                .entries
                .iter()
                .map(|e| (e.seq, e.entry.id.clone()))
                .collect();
            prop_assert_eq!(&after[..after.len() - 1], &before[..], "entries changed");
            prop_assert_eq!(after.last().cloned(), Some((seq, "after".to_owned())));
            Ok(())
        })?;
    }
}
