//! Log generations as bytes: the trusted prefix a generation's bytes prove, and a record's
//! frame. Reading and appending the files is `io::log`'s.

pub use super::columns::PAGE_ENTRIES;
use super::columns::{decoding_within, paging};
use super::columns::{take_rows, UnreadGroup};
use super::frame::PAGED_VERSION;
use super::frame::{self, Decoded};
use super::record::{GroupEntry, Record, SegmentFile, StreamDecl};
use super::state::{Catalog, Scope, State};
use crate::archive::error::{ArchiveError, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use crate::archive::layout::{generation_name, parse_generation};

/// How the log ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tail {
    /// Every byte belongs to a record that passed its check.
    Clean,
    /// A record fails its check at `offset`, nothing valid follows, and the bytes are what
    /// an interrupted append leaves (see [`frame::classify_tail`]): a torn write.
    Torn {
        /// Where the failing bytes start.
        offset: u64,
    },
    /// A record fails its check at `offset` and `following` valid records come after it.
    Damaged {
        /// Where the failing bytes start.
        offset: u64,
        /// Valid records found after it.
        following: usize,
    },
    /// A record fails its check at `offset` and nothing valid follows, but the bytes are
    /// not what an interrupted append leaves: a record written whole and damaged since, so
    /// it may have been acknowledged.
    Broken {
        /// Where the failing bytes start.
        offset: u64,
        /// What the bytes show, in words.
        why: String,
    },
}

impl Tail {
    /// Where the trusted prefix ends, if anything follows it.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Tail::Clean => None,
            Tail::Torn { offset } | Tail::Damaged { offset, .. } | Tail::Broken { offset, .. } => {
                Some(*offset)
            }
        }
    }
}

/// The result of replaying one generation.
#[derive(Debug)]
pub struct Replayed {
    /// The state the trusted prefix proves.
    pub state: State,
    /// Records in the trusted prefix.
    pub records: usize,
    /// Length of the trusted prefix in bytes.
    pub trusted_len: u64,
    /// How the log ended.
    pub tail: Tail,
    /// The generation's length in bytes when it was read.
    pub file_len: u64,
    /// Bytes of its first record, the snapshot it starts from.
    pub snapshot_len: u64,
}

/// Reads, for a replay, the slices of a file recorded by its row groups (format version 11)
/// from the file's rows: the engine's, which reads the files where they live.
pub trait SliceReader {
    /// The slices of row groups `groups` (indices, ascending) of `file`, a data file of the
    /// stream `decl` (only those of tracks beneath `within`, when it is given): in file order, each naming its row group, its first row in it and the
    /// group's span, its track's labels as staging renders them, its rows and the ranges of
    /// its `_position`, axis and `_seq`: one answer per row group, in the order of `groups`, so
    /// a row group that cannot be read fails alone. The replay checks them against the record.
    fn slices(
        &self,
        decl: &StreamDecl,
        file: &SegmentFile,
        groups: &[usize],
        within: Option<&[String]>,
    ) -> Result<Vec<Result<Vec<GroupEntry>>>>;
}

/// Replays generation `generation` from its bytes, read from `path` (named in errors), for
/// what its live files are: every record is applied and checked, and no stream catalogs a
/// track (see [`State::files_only`]), so no file's rows are read.
pub fn replay_bytes(path: &Path, bytes: &[u8], generation: u64) -> Result<Replayed> {
    let state = State {
        files_only: true,
        ..State::default()
    };
    replay_into(path, bytes, generation, state, None)
}

/// Replays generation `generation` from its bytes for an open: every record is applied and
/// checked, and the catalog holds only the tracks within `scope` (every track for `None`,
/// see [`Scope`]). The slices of a file recorded by its row groups are read from its rows by
/// `rows`, for the row groups that hold a cataloged track.
pub fn replay_scoped(
    path: &Path,
    bytes: &[u8],
    generation: u64,
    scope: Option<Scope>,
    rows: &dyn SliceReader,
) -> Result<Replayed> {
    let state = State {
        scope,
        ..State::default()
    };
    replay_into(path, bytes, generation, state, Some(rows))
}

/// Reads from the rows the slices of the row groups of `record`'s format-11 files that hold a
/// track `state` catalogs (the streams the record names as `state` knows them, or as its
/// snapshot declares them). A file a later record of the generation takes out of the live set
/// ([`Later`]) is read when it can be, and otherwise catalogs nothing (no read of the end
/// state needs it); one a later record moved to the cold tier is read from there. A row group whose rows cannot be read (missing,
/// failing its digest, a tier that does not answer) is left unread and named
/// ([`Elided::unreadable`]): the open goes on, and every read meeting its tracks refuses.
fn read_rows(
    record: &mut Record,
    state: &State,
    rows: Option<&dyn SliceReader>,
    later: &Later,
) -> std::result::Result<(), Unread> {
    let decls: BTreeMap<String, StreamDecl> = match record {
        Record::Snapshot(s) => s
            .streams
            .iter()
            .map(|s| (s.decl.id.clone(), s.decl.clone()))
            .collect(),
        _ => BTreeMap::new(),
    };
    for (id, file) in record.data_files_mut() {
        let Some(elided) = file.elided.as_ref().filter(|e| e.is_rows_form()) else {
            continue;
        };
        let Some(decl) = decls
            .get(id)
            .or_else(|| state.streams.get(id).map(|s| &s.decl))
        else {
            // A record naming an undeclared stream is refused when it is applied.
            continue;
        };
        let within = match state.catalog_of(id) {
            Catalog::All => None,
            Catalog::Beneath(prefix) => Some(prefix).filter(|p| !p.is_empty()),
            Catalog::Nothing => Some(Vec::new()),
        };
        let wanted = match &within {
            Some(prefix) if prefix.is_empty() => Vec::new(),
            _ => elided.rows_to_read(within.as_deref()),
        };
        // A file a later record removes is read when it is still there (its tracks' history:
        // where they started, when they were sealed); the writer checkpoints before it
        // deletes one, so a generation naming it most often still has it. When it cannot be
        // read it catalogs nothing: no read of the generation's end state needs it.
        let removed = later.removed.contains(&file.name);
        let mut groups = Vec::with_capacity(wanted.len());
        let mut slices = Vec::new();
        let mut unreadable = Vec::new();
        // A file a later record moved to the cold tier is read from there.
        let moved = later
            .moved
            .get(&file.name)
            .filter(|_| file.cold.is_none() && !wanted.is_empty())
            .map(|url| SegmentFile {
                cold: Some(url.clone()),
                groups: Default::default(),
                ..file.clone()
            });
        let read = match (wanted.is_empty(), rows) {
            (true, _) => Vec::new(),
            (false, Some(rows)) => rows
                .slices(
                    decl,
                    moved.as_ref().unwrap_or(file),
                    &wanted,
                    within.as_deref(),
                )
                .map_err(Unread::Failed)?,
            (false, None) => {
                return Err(Unread::Failed(ArchiveError::Internal(format!(
                    "file {} records its row groups, and this replay reads no rows",
                    file.path
                ))))
            }
        };
        // The slices read, each moved once: the first row group's vector is kept (a barrier's
        // file is most often one row group), the others appended to it, room made once.
        let expected: usize = read.iter().flatten().map(Vec::len).sum();
        for (g, result) in wanted.into_iter().zip(read) {
            match result {
                Ok(read) if slices.is_empty() => {
                    groups.push(g);
                    slices = read;
                    slices.reserve(expected.saturating_sub(slices.len()));
                }
                Ok(read) => {
                    groups.push(g);
                    slices.extend(read);
                }
                Err(ArchiveError::Unreadable { .. }) if removed => {
                    groups.clear();
                    slices.clear();
                    break;
                }
                Err(ArchiveError::Unreadable { message, kind, .. }) => {
                    unreadable.push(UnreadGroup {
                        group: g,
                        kind,
                        why: message,
                    });
                }
                Err(e) => return Err(Unread::Failed(e)),
            }
        }
        take_rows(file, &groups, slices, within.is_none(), unreadable).map_err(|why| {
            Unread::Damage(format!(
                "file {}: its rows do not hold what the record says: {why}",
                file.path
            ))
        })?;
    }
    Ok(())
}

/// Why a record's slices were not read from the rows.
enum Unread {
    /// The rows were read and disagree with the record.
    Damage(String),
    /// The rows could not be read.
    Failed(ArchiveError),
}

/// What later records of a generation do to the files a record names, which a replay needs
/// before it reads a file's rows: which files they take out of the live set (a compaction's
/// removed files, a retirement's dropped ones: their rows are not read), and which they move
/// to the cold tier (their rows are read from there: the local copy is gone).
#[derive(Default)]
struct Later {
    removed: BTreeSet<u64>,
    moved: BTreeMap<u64, String>,
}

/// [`Later`] of the records of `bytes`, read from those records alone.
fn later_in(bytes: &[u8]) -> Later {
    #[derive(serde::Deserialize)]
    struct Moved {
        name: u64,
        url: String,
    }
    #[derive(serde::Deserialize)]
    struct Changes {
        #[serde(default)]
        removed: Vec<u64>,
        #[serde(default)]
        dropped: Vec<u64>,
        #[serde(default)]
        files: Vec<Moved>,
    }
    let mut out = Later::default();
    let mut at = 0;
    while let Decoded::Record { payload, next } = frame::decode(bytes, at) {
        let json = payload.split(|b| *b == b'\n').next().unwrap_or(payload);
        let changes = [
            &br#"{"record":"compact""#[..],
            br#"{"record":"retire""#,
            br#"{"record":"offload""#,
        ]
        .iter()
        .any(|tag| json.starts_with(tag));
        if changes {
            if let Ok(c) = serde_json::from_slice::<Changes>(json) {
                out.removed.extend(c.removed);
                out.removed.extend(c.dropped);
                out.moved
                    .extend(c.files.into_iter().map(|m| (m.name, m.url)));
            }
        }
        at = next;
    }
    out
}

fn replay_into(
    path: &Path,
    bytes: &[u8],
    generation: u64,
    mut state: State,
    rows: Option<&dyn SliceReader>,
) -> Result<Replayed> {
    let later = match rows {
        Some(_) => later_in(bytes),
        None => Later::default(),
    };
    let corrupt = |offset: usize, message: String| ArchiveError::CorruptManifest {
        path: path.to_path_buf(),
        offset: offset as u64,
        message,
    };
    let mut offset = 0usize;
    let mut records = 0usize;
    let mut snapshot_len = 0u64;
    let tail = loop {
        match frame::decode(bytes, offset) {
            Decoded::End => break Tail::Clean,
            Decoded::UnknownVersion(found) => {
                return Err(ArchiveError::UnknownVersion {
                    path: path.to_path_buf(),
                    offset: offset as u64,
                    found,
                    supported: frame::FORMAT_VERSION,
                })
            }
            Decoded::Failed => {
                let following = frame::valid_records_after(bytes, offset).len();
                break if following == 0 {
                    match frame::classify_tail(&bytes[offset..]) {
                        frame::TailShape::Torn => Tail::Torn {
                            offset: offset as u64,
                        },
                        frame::TailShape::Damaged(why) => Tail::Broken {
                            offset: offset as u64,
                            why,
                        },
                    }
                } else {
                    Tail::Damaged {
                        offset: offset as u64,
                        following,
                    }
                };
            }
            Decoded::Record { payload, next } => {
                let within = state.scope.as_ref().map(|s| s.track.as_slice());
                let mut record =
                    decoding_within(within, || Record::decode(payload)).map_err(|e| {
                        corrupt(
                            offset,
                            format!("record passed its check but does not decode: {e}"),
                        )
                    })?;
                read_rows(&mut record, &state, rows, &later).map_err(|unread| match unread {
                    Unread::Damage(message) => corrupt(offset, message),
                    Unread::Failed(e) => e,
                })?;
                if records == 0 {
                    match &record {
                        Record::Snapshot(s) if s.generation == generation => {}
                        _ => {
                            return Err(corrupt(
                                offset,
                                format!("generation {generation} does not start with its snapshot"),
                            ))
                        }
                    }
                }
                state
                    .apply_owned(record)
                    .map_err(|e| corrupt(offset, format!("record breaks an invariant: {e}")))?;
                records += 1;
                if records == 1 {
                    snapshot_len = next as u64;
                }
                offset = next;
            }
        }
    };
    if records == 0 {
        return Err(corrupt(0, "generation holds no valid snapshot".into()));
    }
    Ok(Replayed {
        state,
        records,
        trusted_len: offset as u64,
        tail,
        file_len: bytes.len() as u64,
        snapshot_len,
    })
}

/// Frames a record. A file entry of more than [`PAGE_ENTRIES`] entries is written paged
/// (format version 10): see `docs/format.md`, "Version 10". The archive's own writes use
/// [`try_encode`].
///
/// # Panics
///
/// On a record [`try_encode`] refuses: one naming a file that a scoped replay decoded.
pub fn encode(record: &Record) -> Vec<u8> {
    encode_paged(record, PAGE_ENTRIES)
}

/// Frames a record as [`encode`] does, or says why it cannot be written: it names a file
/// that a scoped replay decoded, whose entries it only partly holds (`SegmentFile::elided`).
pub fn try_encode(record: &Record) -> serde_json::Result<Vec<u8>> {
    try_encode_paged(record, PAGE_ENTRIES)
}

/// Frames a record, paging every file entry of more than `page_entries` entries (what
/// [`encode`] does with [`PAGE_ENTRIES`]; other sizes are for tests of the format).
///
/// # Panics
///
/// As [`encode`].
pub fn encode_paged(record: &Record, page_entries: usize) -> Vec<u8> {
    try_encode_paged(record, page_entries)
        .expect("only a record naming a scoped replay's file fails to serialize")
}

/// Frames a record, paging every file entry of more than `page_entries` entries. A record
/// with pages is framed as version 10, whatever else it holds; one without keeps the version
/// its contents need.
fn try_encode_paged(record: &Record, page_entries: usize) -> serde_json::Result<Vec<u8>> {
    let (payload, pages) = paging(page_entries, || serde_json::to_vec(record));
    let mut payload = payload?;
    if pages.is_empty() {
        return Ok(frame::encode_version(record.version(), &payload));
    }
    payload.push(b'\n');
    payload.extend_from_slice(&pages);
    Ok(frame::encode_version(
        record.version().max(PAGED_VERSION),
        &payload,
    ))
}
