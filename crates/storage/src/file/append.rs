//! The append path of [`FileStore`]: the log opened (or reopened when the path names another
//! file) and locked, its tail brought up to date (a torn tail moved aside), batches written as
//! whole lines, and the lines made durable.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::Path;
use std::sync::Arc;

use ba_protocol::LogEntry;

use super::codec::{Tail, encode_lines, scan_tail};
use super::lock::FileLock;
use super::{Durability, FileState, FileStore, identity, lock};
use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::store::Appended;

/// A log opened for appending, under its locks.
struct OpenLog<'a> {
    state: &'a mut FileState,
    file: &'a File,
    path: &'a Path,
    id: &'a ConversationId,
    tail: &'a mut Tail,
}

impl FileStore {
    /// Appends one batch (every-append and OS-buffered durability), with its own `fsync`
    /// for [`Durability::EveryAppend`] — made while the conversation's in-process lock is still
    /// held, so this policy's appends and their `fsync`s go one at a time.
    pub(super) fn append_blocking(
        &self,
        id: &ConversationId,
        entries: &[LogEntry],
        expect_last: Option<u64>,
    ) -> Result<Appended> {
        self.with_locked_log(
            id,
            |log| self.write_batch(log, entries, expect_last),
            |appended, file, path| {
                let appended = appended?;
                if self.inner.opts.durability == Durability::EveryAppend {
                    self.sync_lines(file)
                        .map_err(|e| StorageError::io("syncing", path, e))?;
                }
                Ok(appended)
            },
        )?
    }

    /// Runs `write` on the conversation's log under its in-process lock and an exclusive
    /// `flock`, the tail brought up to date first; then, with the `flock` let go but the
    /// in-process lock still held, `then` on what `write` returned, the open file and its path.
    fn with_locked_log<T, R>(
        &self,
        id: &ConversationId,
        write: impl FnOnce(&mut OpenLog<'_>) -> T,
        then: impl FnOnce(T, &Arc<File>, &Path) -> R,
    ) -> Result<R> {
        let path = self.log_path(id);
        let handle = self.handle(id.as_str());
        let mut state = lock(&handle.state);
        let file = open_current(&mut state, &path, id)?;
        let flock = FileLock::exclusive(&file, &path)?;
        let mut tail = self.current_tail(&mut state, &file, &path, id)?;
        let out = write(&mut OpenLog {
            state: &mut state,
            file: &file,
            path: &path,
            id,
            tail: &mut tail,
        });
        drop(flock);
        Ok(then(out, &file, &path))
    }

    /// The tail of the log under the exclusive lock: as last seen when no other process wrote
    /// since, else rescanned; a torn tail moved aside first.
    fn current_tail(
        &self,
        state: &mut FileState,
        file: &File,
        path: &Path,
        id: &ConversationId,
    ) -> Result<Tail> {
        let len = file
            .metadata()
            .map_err(|e| StorageError::io("reading", path, e))?
            .len();
        let mut tail = match state.known {
            Some(t) if t.len + t.torn == len => t,
            Some(t) if t.len < len => scan_tail(file, path, t)?,
            _ => scan_tail(file, path, self.base_tail(id.as_str())?)?,
        };
        if tail.torn > 0 {
            self.quarantine(file, path, id.as_str(), &mut tail)?;
        }
        state.known = Some(tail);
        Ok(tail)
    }

    /// Writes one batch after the log's tail (under the exclusive lock) and moves the tail
    /// past it. A failed write is taken back, so the log stays whole lines and the batch is
    /// not half-applied.
    fn write_batch(
        &self,
        log: &mut OpenLog<'_>,
        entries: &[LogEntry],
        expect_last: Option<u64>,
    ) -> Result<Appended> {
        let id = log.id;
        if entries.is_empty() {
            return Err(StorageError::invalid(
                format!("append to `{id}`"),
                "the batch holds no entries",
            ));
        }
        let last_seq = log.tail.last_seq;
        if let Some(expected) = expect_last
            && expected != last_seq
        {
            return Err(StorageError::SequenceConflict {
                id: id.to_string(),
                expected,
                actual: last_seq,
            });
        }
        let at = self.now();
        let buf = encode_lines(id, entries, last_seq + 1, at)?;
        if let Err(e) = self.write_lines(log.file, &buf) {
            if log.file.set_len(log.tail.len).is_err() {
                log.state.known = None;
            }
            return Err(StorageError::io("appending to", log.path, e));
        }
        let appended = Appended {
            first_seq: last_seq + 1,
            last_seq: last_seq + entries.len() as u64,
        };
        *log.tail = Tail {
            len: log.tail.len + buf.len() as u64,
            last_seq: appended.last_seq,
            last_at: at,
            torn: 0,
        };
        log.state.known = Some(*log.tail);
        Ok(appended)
    }

    /// Writes a group of queued batches (group commit) in one pass under the locks, then
    /// makes them durable with one `fsync`: each batch's own outcome, in order.
    pub(super) fn commit_group(
        &self,
        id: &ConversationId,
        batches: &[(Vec<LogEntry>, Option<u64>)],
    ) -> Vec<Result<Appended>> {
        // The `fsync` comes after both locks are let go: only this leader writes meanwhile.
        let written = self.with_locked_log(
            id,
            |log| {
                batches
                    .iter()
                    .map(|(entries, expect_last)| self.write_batch(log, entries, *expect_last))
                    .collect::<Vec<_>>()
            },
            |results, file, path| (results, file.clone(), path.to_owned()),
        );
        let (mut results, file, path) = match written {
            Ok(written) => written,
            Err(e) => return batches.iter().map(|_| Err(e.copy_for_another())).collect(),
        };
        if results.iter().any(Result::is_ok)
            && let Err(e) = self.sync_lines(&file)
        {
            let e = StorageError::io("syncing", &path, e);
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(e.copy_for_another());
            }
        }
        results
    }

    /// Writes a batch's lines with one `write` (or through the simulated fault).
    pub(super) fn write_lines(&self, file: &File, buf: &[u8]) -> io::Result<()> {
        let mut writer = file;
        #[cfg(feature = "test-util")]
        if let Some(fault) = &self.inner.opts.fault {
            return fault.write(&mut writer, buf);
        }
        writer.write_all(buf)
    }

    /// Makes appended lines durable (`fdatasync`), counted by the simulated fault when one is
    /// set, so tests can see which appends an `fsync` covered.
    fn sync_lines(&self, file: &File) -> io::Result<()> {
        #[cfg(feature = "test-util")]
        if let Some(fault) = &self.inner.opts.fault {
            return fault.sync(|| file.sync_data());
        }
        file.sync_data()
    }

    /// Moves a torn tail into the `.torn` file and cuts it from the log, so the next line
    /// starts on a line of its own and the torn bytes are kept for inspection.
    fn quarantine(&self, file: &File, path: &Path, id: &str, tail: &mut Tail) -> Result<()> {
        let mut torn = vec![0u8; usize::try_from(tail.torn).unwrap_or(0)];
        let mut reader = file;
        reader
            .seek(SeekFrom::Start(tail.len))
            .and_then(|_| reader.read_exact(&mut torn))
            .map_err(|e| StorageError::io("reading", path, e))?;
        let torn_path = self.torn_path(id);
        let mut side = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&torn_path)
            .map_err(|e| StorageError::io("opening", &torn_path, e))?;
        torn.push(b'\n');
        side.write_all(&torn)
            .and_then(|()| side.sync_all())
            .map_err(|e| StorageError::io("writing", &torn_path, e))?;
        file.set_len(tail.len)
            .and_then(|()| file.sync_all())
            .map_err(|e| StorageError::io("truncating", path, e))?;
        tracing::warn!(
            conversation = id,
            bytes = tail.torn,
            "torn tail moved to {}",
            torn_path.display()
        );
        tail.torn = 0;
        Ok(())
    }
}

/// Opens (or reopens, when the path now names another file) the conversation's log.
fn open_current(state: &mut FileState, path: &Path, id: &ConversationId) -> Result<Arc<File>> {
    let on_disk = match std::fs::metadata(path) {
        Ok(m) => identity(&m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            *state = FileState::default();
            return Err(StorageError::NotFound { id: id.to_string() });
        }
        Err(e) => return Err(StorageError::io("reading", path, e)),
    };
    if let Some(file) = &state.file
        && state.identity == on_disk
    {
        return Ok(file.clone());
    }
    let file = OpenOptions::new()
        .append(true)
        .read(true)
        .open(path)
        .map_err(|e| StorageError::io("opening", path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| StorageError::io("reading", path, e))?;
    let file = Arc::new(file);
    *state = FileState {
        file: Some(file.clone()),
        identity: identity(&meta),
        known: None,
    };
    Ok(file)
}
