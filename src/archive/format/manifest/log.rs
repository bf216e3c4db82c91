//! Log generations as bytes: the trusted prefix a generation's bytes prove, and a record's
//! frame. Reading and appending the files is `io::log`'s.

pub use super::columns::PAGE_ENTRIES;
use super::columns::{decoding_within, paging};
use super::frame::PAGED_VERSION;
use super::frame::{self, Decoded};
use super::record::Record;
use super::state::{Scope, State};
use crate::archive::error::{ArchiveError, Result};
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

/// Replays generation `generation` from its bytes, read from `path` (named in errors).
pub fn replay_bytes(path: &Path, bytes: &[u8], generation: u64) -> Result<Replayed> {
    replay_scoped(path, bytes, generation, None)
}

/// [`replay_bytes`] for a scoped open: every record is applied and checked, and the catalog
/// holds only the tracks within `scope` (see [`Scope`]).
pub fn replay_scoped(
    path: &Path,
    bytes: &[u8],
    generation: u64,
    scope: Option<Scope>,
) -> Result<Replayed> {
    let corrupt = |offset: usize, message: String| ArchiveError::CorruptManifest {
        path: path.to_path_buf(),
        offset: offset as u64,
        message,
    };
    let mut state = State {
        scope,
        ..State::default()
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
                let record = decoding_within(within, || Record::decode(payload)).map_err(|e| {
                    corrupt(
                        offset,
                        format!("record passed its check but does not decode: {e}"),
                    )
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
