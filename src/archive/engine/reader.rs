//! Reading beside a writer: the retry protocol every read-only reader of a live archive
//! follows (`docs/format.md`, "Readers beside a writer").
//!
//! A reader opens read-only, replays the manifest once and reads the files that state
//! names. A writer may meanwhile commit a checkpoint (the generation the open was listing
//! is replaced), a compaction or a retirement (files the reader's state names are deleted
//! after their record is synced), or declare a stream the reader's state does not know. The
//! reader answers each by checking whether the manifest moved on since its open
//! ([`Archive::manifest_moved`]) and, if it did, reading the whole answer again from a
//! fresh state, at most [`READ_ATTEMPTS`] times in all. Each answer therefore comes from one
//! committed state; a refusal with an unmoved manifest is real and answered at once.
//!
//! [`open`] is the read-only open, [`read`] the protocol with a fresh open per attempt (what
//! a one-shot reader such as the command line does), and [`read_on`] the protocol over any
//! source of snapshots (what a long-lived reader such as `serve` does, reopening only when
//! the manifest moved and sharing the new snapshot with its other requests).

use super::Archive;
use crate::archive::config::Config;
use crate::archive::error::{ArchiveError, ReadError, StoredErrorKind};
use std::borrow::Borrow;
use std::path::Path;

/// How many times a read-only open or a read starts again when a writer moved the manifest
/// under it (a checkpoint replaced the generation it was reading, a compaction deleted a
/// file its snapshot named), counting the first.
pub const READ_ATTEMPTS: usize = 4;

/// The directory the manifest generations live in, below the root (`docs/format.md`).
const MANIFEST: &str = "manifest";

/// Opens the archive at `root` read-only (never the writer's lock) with `config`, starting
/// again when a checkpoint replaced the manifest generation between listing and reading it
/// (the open fails with a file not found while the manifest directory is there), at most
/// [`READ_ATTEMPTS`] times. Any other failure is answered as it is.
///
/// A `root` that is a URL (`s3://bucket/prefix`, `file:///dir`) opens the replica there,
/// from the bucket alone ([`crate::archive::replicate::open_url`]).
pub fn open(root: impl AsRef<Path>, config: &Config) -> Result<Archive, ArchiveError> {
    let root = root.as_ref();
    if let Some(url) = super::replicate::as_url(root) {
        return super::replicate::open_url(url, config);
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        match Archive::open(root, config.clone().read_only(true)) {
            Err(ArchiveError::Io { source, .. })
                if attempt < READ_ATTEMPTS
                    && source.kind() == std::io::ErrorKind::NotFound
                    && root.join(MANIFEST).is_dir() => {}
            other => return other,
        }
    }
}

/// Whether `error` is one a writer's commit after the snapshot was opened explains: a file
/// the snapshot named is gone (a compaction, retirement or offload deleted it), or the
/// snapshot knows no stream by that name (a writer may have declared it since). Such a
/// read is worth reading again on a fresh snapshot, when the manifest moved.
pub fn moved_under(error: &ReadError) -> bool {
    match error {
        ReadError::Stored(e) => e.kind == StoredErrorKind::Missing,
        ReadError::UnknownStream(_) => true,
        _ => false,
    }
}

/// Reads the archive at `root` on a fresh read-only [`open`] with `config`, and on a fresh
/// one again while the read fails in a way a moved manifest explains ([`moved_under`]) and
/// the manifest did move, at most [`READ_ATTEMPTS`] reads in all.
///
/// The outer error is an open that failed; the inner result is the read's own answer (the
/// last one, when every attempt was refused).
pub fn read<T>(
    root: impl AsRef<Path>,
    config: &Config,
    read: impl Fn(&Archive) -> Result<T, ReadError>,
) -> Result<Result<T, ReadError>, ArchiveError> {
    let root = root.as_ref();
    read_on(open(root, config)?, || open(root, config), read)
}

/// The protocol over any source of snapshots (an [`Archive`], a reference or an `Arc` of
/// one): reads `snapshot`, and while the read fails in
/// a way a moved manifest explains ([`moved_under`]) and the snapshot's manifest did move,
/// reads again on the snapshot `reopen` answers, at most [`READ_ATTEMPTS`] reads in all.
///
/// `reopen` is called only after a refusal on a moved manifest: it may open afresh, or hand
/// back a snapshot another reader opened meanwhile. The outer error is a `reopen` that
/// failed; the inner result is the read's own answer.
pub fn read_on<S, T, E>(
    mut snapshot: S,
    mut reopen: impl FnMut() -> Result<S, E>,
    read: impl Fn(&Archive) -> Result<T, ReadError>,
) -> Result<Result<T, ReadError>, E>
where
    S: Borrow<Archive>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let answer = read(snapshot.borrow());
        match &answer {
            Err(e)
                if attempt < READ_ATTEMPTS
                    && moved_under(e)
                    && snapshot.borrow().manifest_moved() =>
            {
                tracing::debug!(attempt, reason = %e, "the manifest moved on during the read; reading again");
            }
            _ => return Ok(answer),
        }
        snapshot = reopen()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{StoredError, StreamSpec};
    use arrow::array::{RecordBatch, UInt64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::cell::Cell;
    use std::sync::Arc;

    type Failed = Box<dyn std::error::Error>;

    fn config() -> Result<Config, Failed> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::UInt64, false)]));
        Ok(Config::new().stream(StreamSpec::dynamic("s", schema, Vec::new(), None)?))
    }

    /// Seals one barrier of one row at `position`.
    fn seal(archive: &mut Archive, position: u64) -> Result<(), Failed> {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::UInt64, false)]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(UInt64Array::from(vec![position]))])?;
        archive.stage_batch("s", &batch, &[position])?;
        archive.seal_all()?;
        Ok(())
    }

    fn gone() -> ReadError {
        ReadError::Stored(StoredError::new(StoredErrorKind::Missing, "a file"))
    }

    #[test]
    fn a_refusal_on_an_unmoved_manifest_is_answered_at_once() -> Result<(), Failed> {
        let dir = tempfile::tempdir()?;
        let mut writer = Archive::open(dir.path(), config()?)?;
        seal(&mut writer, 1)?;
        let snapshot = open(dir.path(), &Config::new())?;
        let reads = Cell::new(0);
        let answer = read_on(
            &snapshot,
            || -> Result<&Archive, Failed> { Err("reopened on an unmoved manifest".into()) },
            |_| -> Result<(), ReadError> {
                reads.set(reads.get() + 1);
                Err(gone())
            },
        )?;
        assert!(matches!(answer, Err(ReadError::Stored(_))));
        assert_eq!(reads.get(), 1);
        Ok(())
    }

    #[test]
    fn a_moved_manifest_is_read_again_at_most_read_attempts_times() -> Result<(), Failed> {
        let dir = tempfile::tempdir()?;
        let mut writer = Archive::open(dir.path(), config()?)?;
        seal(&mut writer, 1)?;
        let snapshot = open(dir.path(), &Config::new())?;
        seal(&mut writer, 2)?;
        assert!(snapshot.manifest_moved());

        // Refused every time: READ_ATTEMPTS reads, the last refusal answered.
        let (reads, reopens) = (Cell::new(0), Cell::new(0));
        let answer = read_on(
            &snapshot,
            || -> Result<&Archive, Failed> {
                reopens.set(reopens.get() + 1);
                Ok(&snapshot)
            },
            |_| -> Result<(), ReadError> {
                reads.set(reads.get() + 1);
                Err(gone())
            },
        )?;
        assert!(matches!(answer, Err(ReadError::Stored(_))));
        assert_eq!(
            (reads.get(), reopens.get()),
            (READ_ATTEMPTS, READ_ATTEMPTS - 1)
        );

        // Refused once, then answered on the snapshot the reopen hands back.
        let fresh = open(dir.path(), &Config::new())?;
        let reads = Cell::new(0);
        let answer = read_on(
            &snapshot,
            || -> Result<&Archive, Failed> { Ok(&fresh) },
            |a| {
                reads.set(reads.get() + 1);
                if reads.get() == 1 {
                    Err(ReadError::UnknownStream("s".into()))
                } else {
                    Ok(a.watermark("s"))
                }
            },
        )?;
        assert_eq!(answer.ok(), Some(crate::Position(2)));
        assert_eq!(reads.get(), 2);

        // A fresh open per attempt: the open sees both barriers.
        let watermark = read(dir.path(), &Config::new(), |a| Ok(a.watermark("s")))?;
        assert_eq!(watermark.ok(), Some(crate::Position(2)));
        Ok(())
    }
}
