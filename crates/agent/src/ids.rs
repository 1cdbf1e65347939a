//! Ids and times of the entries the agent writes: one place, so every part that appends (a
//! run, a compaction, a rewind, a hook's record) stamps entries alike.

use ba_protocol::convert::Stamp;
use ba_storage::{Clock, SystemClock};

/// Ids and times of new entries, for the protocol's conversions.
pub(crate) struct LiveStamp;

impl Stamp for LiveStamp {
    fn next_id(&mut self) -> String {
        new_id()
    }
    fn now(&mut self) -> String {
        now()
    }
}

/// A new entry id.
pub(crate) fn new_id() -> String {
    format!("e_{}", uuid::Uuid::new_v4().simple())
}

/// The time now, as entries record it.
pub(crate) fn now() -> String {
    ba_storage::rfc3339(SystemClock.now_ms())
}
