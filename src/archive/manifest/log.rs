//! Log generations: replay the trusted prefix, append records, start a new generation.

use super::frame::{self, Decoded};
use super::record::Record;
use super::state::State;
use crate::archive::durable;
use crate::archive::error::{ArchiveError, Result};
use crate::archive::faults::{FaultPoint, Faults, Op};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file name of generation `n`.
pub fn generation_name(n: u64) -> String {
    format!("gen-{n:012}.log")
}

/// The generation number a file name carries, if it is a generation file.
pub fn parse_generation(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("gen-")?.strip_suffix(".log")?;
    (digits.len() == 12 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

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
}

/// Replays the generation file at `path`.
pub fn replay(path: &Path, generation: u64) -> Result<Replayed> {
    let bytes = std::fs::read(path).map_err(ArchiveError::io("read manifest", path))?;
    let corrupt = |offset: usize, message: String| ArchiveError::CorruptManifest {
        path: path.to_path_buf(),
        offset: offset as u64,
        message,
    };
    let mut state = State::default();
    let mut offset = 0usize;
    let mut records = 0usize;
    let tail = loop {
        match frame::decode(&bytes, offset) {
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
                let following = frame::valid_records_after(&bytes, offset).len();
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
                let record = Record::decode(payload).map_err(|e| {
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
                    .apply(&record)
                    .map_err(|e| corrupt(offset, format!("record breaks an invariant: {e}")))?;
                records += 1;
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
    })
}

/// The open, appendable current generation.
#[derive(Debug)]
pub struct LogWriter {
    file: File,
    path: PathBuf,
    len: u64,
}

impl LogWriter {
    /// Opens an existing generation whose trusted prefix is all of it.
    pub fn append_to(path: &Path, len: u64) -> Result<LogWriter> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(ArchiveError::io("open manifest", path))?;
        Ok(LogWriter {
            file,
            path: path.to_path_buf(),
            len,
        })
    }

    /// Writes a new generation holding `state` as its snapshot: written under `tmp`, synced,
    /// renamed into `manifest_dir`, the directory synced.
    pub fn create(
        tmp: &Path,
        manifest_dir: &Path,
        generation: u64,
        state: &State,
        faults: &Faults,
    ) -> Result<LogWriter> {
        let name = generation_name(generation);
        let staged = tmp.join(&name);
        let framed = encode(&Record::Snapshot(state.snapshot(generation)));
        durable::write_synced(faults, &staged, &framed)?;
        durable::sync_dir(faults, tmp)?;
        faults.hit(FaultPoint::AfterSnapshotWrite);
        let path = manifest_dir.join(&name);
        durable::rename(faults, &staged, &path)?;
        durable::sync_dir(faults, manifest_dir)?;
        faults.hit(FaultPoint::AfterSnapshotRename);
        Self::append_to(&path, framed.len() as u64)
    }

    /// Appends one record and syncs it. The record is written in two parts so a fault
    /// injected between them leaves a real torn record.
    pub fn append(&mut self, record: &Record, faults: &Faults) -> Result<()> {
        let framed = encode(record);
        let half = framed.len() / 2;
        faults
            .check(Op::Write, &self.path)
            .and_then(|()| self.file.write_all(&framed[..half]))
            .map_err(ArchiveError::io("append to manifest", &self.path))?;
        faults.hit(FaultPoint::MidRecord);
        faults
            .check(Op::Write, &self.path)
            .and_then(|()| self.file.write_all(&framed[half..]))
            .map_err(ArchiveError::io("append to manifest", &self.path))?;
        faults
            .check(Op::Sync, &self.path)
            .and_then(|()| self.file.sync_data())
            .map_err(ArchiveError::io("sync manifest", &self.path))?;
        self.len += framed.len() as u64;
        Ok(())
    }

    /// The generation file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the generation.
    pub fn bytes(&self) -> u64 {
        self.len
    }
}

/// Frames a record.
pub fn encode(record: &Record) -> Vec<u8> {
    let payload = serde_json::to_vec(record).expect("manifest records always serialize");
    frame::encode_version(record.version(), &payload)
}
