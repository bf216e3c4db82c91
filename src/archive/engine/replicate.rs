//! Replication: the bucket as a whole archive, and a restore from it.
//!
//! ```text
//! the local manifest's durable prefix ─► replay it (the state it proves)
//!   ─► upload every live data and level file the bucket lacks, each confirmed whole
//!   ─► upload the Delta logs' new commits (then `_last_checkpoint`)
//!   ─► upload the manifest bytes past what the bucket holds as ONE part object
//!      (the bucket's commit point)
//!   ─► delete the objects that state proves no record can name again
//! ```
//!
//! A pass reads the archive as a read-only reader does, so it runs beside a writer, off the
//! delivery path, and a crash anywhere in it leaves the bucket a whole archive as of the last
//! part it wrote: nothing a part names is written after it. A pass that cannot reach the
//! bucket changes nothing locally; the next pass works the lag off. See `docs/format.md`,
//! "Replicas".

use super::Archive;
use crate::archive::config::Config;
use crate::archive::engine::delta::log_version;
use crate::archive::error::{ArchiveError, ColdError, Result};
use crate::archive::format::manifest::frame::{self, Decoded};
use crate::archive::format::manifest::log::replay_bytes;
use crate::archive::format::manifest::State;
use crate::archive::io::cold::{ColdTier, Listing, Pending, UPLOADS_AT_ONCE};
use crate::archive::io::faults::{FaultPoint, Faults};
use crate::archive::io::storage::Disk;
use crate::archive::io::{durable, local};
use crate::archive::layout::{
    self, generation_of, parse_data_file_name, LOG_DIR, MANIFEST_DIR, OWNER_FILE, REPLICA_FILE,
    STREAMS_DIR, TMP_DIR,
};
use bytes::Bytes;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// How many times a pass starts again when a checkpoint replaced the generation it was
/// reading.
const ATTEMPTS: usize = 4;

/// How many bytes at the end of the bucket's last manifest part a pass compares with the
/// archive's before it extends the bucket.
const TAIL_CHECKED: u64 = 4096;

/// Where a replica stands against its archive.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplicaStatus {
    /// The bucket prefix (`s3://bucket/prefix`).
    pub url: String,
    /// The archive's current manifest generation, its durable bytes and its records.
    pub local_generation: u64,
    /// Bytes of the local generation's durable prefix.
    pub local_bytes: u64,
    /// Records in it.
    pub local_records: usize,
    /// The generation the bucket holds, if any.
    pub generation: Option<u64>,
    /// Bytes of the local generation the bucket holds (0 while it holds an older one).
    pub bytes: u64,
    /// Records of the local generation the bucket does not hold yet.
    pub records_behind: usize,
    /// Their bytes.
    pub bytes_behind: u64,
    /// How long ago the oldest record the bucket lacks was committed, in seconds, by the
    /// time it carries (a barrier's `sealed_at_ns`, a retirement's `retired_at_ns`): 0 when
    /// caught up; `None` when behind only by records that carry no time (a declaration, a
    /// compaction, an offload, a checkpoint's snapshot).
    pub seconds_behind: Option<f64>,
    /// Set when the bucket did not answer: where it stood is then what this archive's last
    /// completed pass left it at (`REPLICA.seen`), as of this time (ns since the epoch). The
    /// bucket may hold more (a pass cut short after its part), never less: the figures
    /// behind are an upper bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of_ns: Option<u64>,
}

impl ReplicaStatus {
    /// Whether the bucket holds every record the archive holds.
    pub fn caught_up(&self) -> bool {
        self.generation == Some(self.local_generation) && self.bytes_behind == 0
    }
}

/// What one replication pass did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplicationReport {
    /// Where the replica stands after the pass.
    pub status: ReplicaStatus,
    /// Data and level files uploaded, and their bytes.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Delta log objects uploaded.
    pub delta_objects: usize,
    /// Manifest part objects written (0 or 1).
    pub parts: usize,
    /// Objects deleted: files the replicated state proves unnamed, older generations' parts.
    pub deleted: usize,
}

/// What a restore made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    /// The bucket prefix restored from.
    pub url: String,
    /// The generation restored, its bytes and records.
    pub generation: u64,
    /// Bytes of the manifest restored.
    pub manifest_bytes: u64,
    /// Records in it.
    pub records: usize,
    /// Data and level files downloaded (cold files stay in their tier).
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Delta log objects downloaded.
    pub delta_objects: usize,
}

/// The archive-relative name of generation `generation`'s part starting at byte `offset`.
fn part_name(generation: u64, offset: u64) -> String {
    format!(
        "{MANIFEST_DIR}/gen-{generation:012}/{offset:020}.part",
        generation = generation,
        offset = offset
    )
}

/// Whether `relative` names an object of a Delta log that replication carries: a commit, a
/// checkpoint, a checksum file, `_last_checkpoint` — not what a writer leaves in the
/// directory while it writes (object_store's local store stages a file as `NAME#N` and
/// renames it; a process that stops meanwhile leaves it), which no Delta reader reads and a
/// restore must not fetch.
fn is_delta_log_object(relative: &str) -> bool {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    name == "_last_checkpoint"
        || (log_version(name).is_some()
            && name[20..]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
            && [".json", ".parquet", ".crc"]
                .iter()
                .any(|suffix| name.ends_with(suffix)))
}

/// The archive-relative name of the object holding bytes `[0, end)` of `generation`: the
/// parts up to `end` consolidated, so that an open from the bucket reads one object and the
/// parts after it, not every part since the generation began.
fn whole_name(generation: u64, end: u64) -> String {
    format!("{MANIFEST_DIR}/gen-{generation:012}/{end:020}.whole")
}

/// The archive-relative name of the consolidation holding bytes `[start, end)` of
/// `generation`: a whole ([`whole_name`]) when it starts at 0, else a span
/// (`START-END.span`, both 20 digits).
fn span_name(generation: u64, (start, end): (u64, u64)) -> String {
    if start == 0 {
        return whole_name(generation, end);
    }
    format!("{MANIFEST_DIR}/gen-{generation:012}/{start:020}-{end:020}.span")
}

/// How many objects at the end of a generation's cover a pass merges into one, at least
/// ([`due_consolidation`]): the cover an open reads stays within `FANOUT - 1` objects per
/// power of `FANOUT` parts, and a byte of the manifest is uploaded again once per such
/// power.
const FANOUT: usize = 16;

/// The generation and offset a part's archive-relative name carries.
fn parse_part(relative: &str) -> Option<(u64, u64)> {
    parse_manifest_object(relative, ".part")
}

/// The generation and end a consolidated object's archive-relative name carries.
fn parse_whole(relative: &str) -> Option<(u64, u64)> {
    parse_manifest_object(relative, ".whole")
}

/// The generation and byte range a span's archive-relative name carries (its start above 0,
/// its end above its start).
fn parse_span(relative: &str) -> Option<(u64, (u64, u64))> {
    let (generation, file) = manifest_file(relative)?;
    let (start, end) = file.strip_suffix(".span")?.split_once('-')?;
    let (start, end) = (digits(start, 20)?, digits(end, 20)?);
    (0 < start && start < end).then_some((generation, (start, end)))
}

fn parse_manifest_object(relative: &str, suffix: &str) -> Option<(u64, u64)> {
    let (generation, file) = manifest_file(relative)?;
    Some((generation, digits(file.strip_suffix(suffix)?, 20)?))
}

/// The generation of a manifest object's archive-relative name (`manifest/gen-N/FILE`) and
/// its file name.
fn manifest_file(relative: &str) -> Option<(u64, &str)> {
    let rest = relative.strip_prefix(MANIFEST_DIR)?.strip_prefix("/gen-")?;
    let (generation, file) = rest.split_once('/')?;
    Some((digits(generation, 12)?, file))
}

/// `s` as a number when it is exactly `n` decimal digits.
fn digits(s: &str, n: usize) -> Option<u64> {
    (s.len() == n && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// One generation's parts in the bucket, `(offset, length)` in offset order.
type PartList = Vec<(u64, u64)>;
/// The bucket's manifest: each generation's parts.
type Parts = BTreeMap<u64, PartList>;
/// Each generation's consolidations, as the byte ranges `[start, end)` they hold (a whole is
/// `(0, end)`).
type Spans = BTreeMap<u64, BTreeSet<(u64, u64)>>;

/// One object of a generation's cover: a part or a consolidation, and the bytes it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    range: (u64, u64),
    span: bool,
}

impl Piece {
    fn name(self, generation: u64) -> String {
        if self.span {
            span_name(generation, self.range)
        } else {
            part_name(generation, self.range.0)
        }
    }

    fn len(self) -> u64 {
        self.range.1 - self.range.0
    }

    /// How many parts it holds.
    fn weight(self, parts: &[(u64, u64)]) -> usize {
        let below = |at: u64| parts.partition_point(|&(offset, _)| offset < at);
        below(self.range.1) - below(self.range.0)
    }
}

/// The fewest objects, each read whole, that hold bytes `[from, end)` of a generation whose
/// parts are `parts` (`from` and `end` part boundaries, the parts running without a gap
/// between them): from each offset, the consolidation that reaches furthest within `end` and
/// ends on a part boundary, else the part that starts there. `None` when no part starts at an
/// offset the walk reaches (the parts have a gap).
fn cover(
    parts: &[(u64, u64)],
    spans: Option<&BTreeSet<(u64, u64)>>,
    from: u64,
    end: u64,
) -> Option<Vec<Piece>> {
    let boundary = |at: u64| {
        at == end
            || parts
                .binary_search_by_key(&at, |&(offset, _)| offset)
                .is_ok()
    };
    let mut pieces = Vec::new();
    let mut at = from;
    while at < end {
        let span = spans.and_then(|spans| {
            spans
                .range((at, at + 1)..=(at, end))
                .rev()
                .find(|&&(_, e)| boundary(e))
                .copied()
        });
        let piece = match span {
            Some(range) => Piece { range, span: true },
            None => {
                let i = parts
                    .binary_search_by_key(&at, |&(offset, _)| offset)
                    .ok()?;
                let (offset, len) = parts[i];
                Piece {
                    range: (offset, offset + len),
                    span: false,
                }
            }
        };
        if piece.range.1 > end || piece.range.1 <= at {
            return None;
        }
        at = piece.range.1;
        pieces.push(piece);
    }
    Some(pieces)
}

/// The consolidation a pass writes after the part that ends at `end`, if one is due: the
/// longest run of at least [`FANOUT`] objects at the end of the generation's cover none of
/// which holds more than a [`FANOUT`]th of the parts the run holds, as one object. When every
/// pass writes what is due, this is a counter in base [`FANOUT`] (a carry through several
/// digits merges them at once): after `n` parts an open reads as many objects as the digits
/// of `n` add up to, at most `(FANOUT - 1) × log_FANOUT(n)` and each byte has gone up again at
/// most `log_FANOUT(n)` times, since an object is only ever merged into one at least
/// [`FANOUT`] times its weight. A pass that failed before its consolidation leaves a longer
/// run at the end, which a later pass merges.
///
/// A run of more than `max_bytes` is not merged: objects that large cost a reader their bytes,
/// not their requests, so an open of a generation of `B` bytes reads at most about
/// `B / max_bytes` objects more, and a writer whose every pass carries megabytes does not
/// upload its manifest a second time.
fn due_consolidation(
    parts: &[(u64, u64)],
    spans: Option<&BTreeSet<(u64, u64)>>,
    end: u64,
    max_bytes: u64,
) -> Option<(u64, u64)> {
    let pieces = cover(parts, spans, 0, end)?;
    let (mut total, mut heaviest, mut start) = (0, 0, None);
    for (k, piece) in pieces.iter().rev().enumerate() {
        if end - piece.range.0 > max_bytes {
            break;
        }
        let weight = piece.weight(parts);
        total += weight;
        heaviest = heaviest.max(weight);
        if k + 1 >= FANOUT && heaviest * FANOUT <= total {
            start = Some(piece.range.0);
        }
    }
    Some((start?, end))
}

/// The largest consolidation a pass writes ([`due_consolidation`]).
const SPAN_BYTES: u64 = 16 << 20;

/// What the bucket holds, as the archive's own replicator remembers it from one of its passes
/// to the next, so that a pass does not list the prefix again (a listing grows with the
/// history; a pass should cost what is new). Only this archive's processes write the prefix
/// (its `OWNER` token, checked by every pass); another of them writing beside the replicator
/// is met by a refused part, which drops what is remembered, and the next pass lists again.
#[derive(Clone, Debug, Default)]
pub(crate) struct Known {
    parts: Parts,
    spans: Spans,
    /// How many records the bytes of the bucket's current generation ([`bucket_current`] of
    /// `parts`) hold: the next pass of the same generation reads the manifest file from there
    /// on (a pass costs what is new, not the generation's length).
    records_held: usize,
    /// Objects under `streams/` (data and level files, Delta logs) and their sizes.
    objects: BTreeMap<String, u64>,
    /// The bytes of each Delta log's `_last_checkpoint` (rewritten in place) as the bucket
    /// holds them, so a pass compares the local pointer with them instead of fetching it.
    pointers: BTreeMap<String, Bytes>,
    /// Each local Delta log's lowest commit as the last pass found it, `(version, CRC-32C of
    /// its bytes)`, by the log's archive-relative directory: a log whose lowest commit is
    /// lower, or the same with other bytes, was written anew ([`bucket_log`]).
    anchors: BTreeMap<String, (u64, u32)>,
    /// The live files the last pass's state named (the next pass deletes, of the objects
    /// listed, only those that state named and the next one does not).
    named: BTreeSet<String>,
    /// When this replicator last wrote [`SEEN_FILE`], and where a later pass left the bucket
    /// without writing it (a pass writes it at most every [`SEEN_EVERY`]; the replicator
    /// writes what is left when it stops, see [`flush_seen`]).
    seen_at: Option<std::time::Instant>,
    unrecorded: Option<(u64, u64)>,
}

/// How often the replicator's passes rewrite [`SEEN_FILE`]: the record is advisory (an upper
/// bound on the lag while the bucket cannot be asked), and rewriting it after every pass was a
/// quarter of a caught-up pass's own CPU.
const SEEN_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Writes where the replicator's last completed pass left the bucket, if a throttled pass did
/// not ([`Known::unrecorded`]): called when the replicator stops.
pub(crate) fn flush_seen(root: &Path, known: &mut Option<Known>) {
    if let Some((generation, bytes)) = known.as_mut().and_then(|k| k.unrecorded.take()) {
        record_seen(root, generation, bytes);
    }
}

/// The error of a replica whose manifest objects show damage (`why`).
fn damaged(tier: &ColdTier, why: String) -> ArchiveError {
    ArchiveError::Replica(format!("{}: {why}", tier.url()))
}

fn cold(e: ColdError) -> ArchiveError {
    ArchiveError::Replica(e.to_string())
}

fn bucket_parts(tier: &ColdTier) -> Result<Parts> {
    Ok(bucket_manifest(tier)?.0)
}

/// The bucket's manifest parts and consolidations, as one listing shows them.
fn bucket_manifest(tier: &ColdTier) -> Result<(Parts, Spans)> {
    let listed = tier.list(MANIFEST_DIR).map_err(cold)?;
    Ok(manifest_objects(
        listed.iter().map(|(r, s)| (r.as_str(), *s)),
    ))
}

fn manifest_objects<'a>(listed: impl Iterator<Item = (&'a str, u64)>) -> (Parts, Spans) {
    let mut parts = Parts::new();
    let mut spans = Spans::new();
    for (relative, size) in listed {
        if let Some((generation, offset)) = parse_part(relative) {
            parts.entry(generation).or_default().push((offset, size));
        } else if let Some((generation, end)) = parse_whole(relative) {
            // One whose size is not its name's range is no consolidation (never written so).
            if size == end && end > 0 {
                spans.entry(generation).or_default().insert((0, end));
            }
        } else if let Some((generation, (start, end))) = parse_span(relative) {
            if size == end - start {
                spans.entry(generation).or_default().insert((start, end));
            }
        }
    }
    for list in parts.values_mut() {
        list.sort_unstable();
    }
    (parts, spans)
}

/// The bytes of a generation the bucket holds: the run of parts from offset 0, each
/// starting where the one before ends, and the offset of the first part past a gap in it
/// (if one is listed).
fn held(parts: &[(u64, u64)]) -> (u64, Option<u64>) {
    let mut end = 0;
    for &(offset, len) in parts {
        if offset != end {
            return (end, Some(offset));
        }
        end += len;
    }
    (end, None)
}

/// The generation the bucket serves, and its bytes: the highest generation listed. A pass
/// writes a generation's parts in order, each once the bucket holds the bytes before it, and
/// deletes a generation's parts only once a newer one holds its part 0; so the newest
/// generation's parts run from offset 0 without a gap. A newest generation that lacks its
/// part 0, or lists a part past a gap, has lost an object a completed pass wrote: the parts
/// after it are evidence of commits the bucket acknowledged, so it is refused as damaged,
/// never served as the shorter history before the gap (or as the older generation).
fn bucket_current(parts: &Parts) -> std::result::Result<Option<(u64, u64)>, String> {
    let Some((&generation, list)) = parts.iter().next_back() else {
        return Ok(None);
    };
    match held(list) {
        (end, None) => Ok(Some((generation, end))),
        (end, Some(past)) => Err(format!(
            "the manifest of generation {generation} lacks the part at byte {end}, and the part at byte {past} is listed past it: an object a completed pass wrote is gone (the replica is damaged; it is refused, not read short)"
        )),
    }
}

/// Counts the records of `bytes` from `from` (a record boundary) to the end.
fn records_from(bytes: &[u8], from: usize) -> usize {
    whole_records(bytes, from).0
}

/// The records of `bytes` from `from` (a record boundary) on that pass their check, and the
/// offset their run ends at.
fn whole_records(bytes: &[u8], from: usize) -> (usize, usize) {
    let mut at = from;
    let mut n = 0;
    while let Decoded::Record { next, .. } = frame::decode(bytes, at) {
        n += 1;
        at = next;
    }
    (n, at)
}

/// A live file as a pass sees it: its archive-relative path, its bytes, whether it lives in
/// a cold tier (then it is not uploaded: it is read from there).
#[derive(Clone, Debug)]
pub(crate) struct LiveFile {
    path: String,
    bytes: u64,
    /// The file's URL in its cold tier, when it lives there.
    cold: Option<String>,
}

/// What a pass replicates: the archive's current manifest generation, its durable prefix (a
/// torn or in-flight tail left out), how many records that holds, and of the state it proves
/// what a pass needs (the live files, the streams, the next name). The bytes are the
/// prefix's from `base` on: a pass of the archive's replicator that knows the bucket holds
/// the generation up to `base` does not read what lies before it.
pub(crate) struct LocalLog {
    generation: u64,
    /// The offset of `bytes` in the generation, a record boundary.
    base: u64,
    bytes: Vec<u8>,
    /// Records in the whole prefix (`[0, base)` and `bytes`).
    records: usize,
    files: Vec<LiveFile>,
    streams: Vec<String>,
    next_name: u64,
}

impl LocalLog {
    /// The length of the generation's durable prefix.
    fn len(&self) -> u64 {
        self.base + self.bytes.len() as u64
    }

    /// The generation's bytes `[start, end)` (`end` within [`LocalLog::len`]): from memory,
    /// and what lies before `base` from the generation file at `root`.
    fn range(&self, root: &Path, (start, end): (u64, u64)) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity((end - start) as usize);
        if start < self.base {
            let path = root
                .join(MANIFEST_DIR)
                .join(layout::generation_name(self.generation));
            out = local::read_range(&path, start, self.base.min(end) - start)
                .map_err(ArchiveError::io("read", &path))?;
        }
        if end > self.base {
            let from = start.max(self.base) - self.base;
            out.extend_from_slice(&self.bytes[from as usize..(end - self.base) as usize]);
        }
        Ok(out)
    }
}

/// What the archive's writer hands its replicator after a commit: the state its manifest
/// proves up to `len` bytes of generation `generation`, without the bytes (the replicator
/// reads them from the manifest file, which holds them durably by then).
#[derive(Clone, Debug)]
pub(crate) struct Committed {
    pub(crate) generation: u64,
    pub(crate) len: u64,
    pub(crate) files: Vec<LiveFile>,
    pub(crate) streams: Vec<String>,
    pub(crate) next_name: u64,
}

impl Committed {
    /// What `state` (durable through `len` bytes of its generation) hands a replicator.
    pub(crate) fn of(state: &State, len: u64) -> Committed {
        Committed {
            generation: state.generation,
            len,
            files: live_files(state),
            streams: state.streams.keys().cloned().collect(),
            next_name: state.next_name,
        }
    }

    /// The pass's view: the manifest file's first `len` bytes, of which only those past
    /// `held` (`(generation, bytes, records)`: what the bucket held after the last pass, when
    /// it is of this generation) are read (refused when the file is gone or shorter: a
    /// checkpoint replaced the generation, and a later commit's view is due).
    fn read(self, root: &Path, held: Option<(u64, u64, usize)>) -> Result<LocalLog> {
        let path = root
            .join(MANIFEST_DIR)
            .join(layout::generation_name(self.generation));
        let (base, base_records) = match held {
            Some((generation, bytes, records))
                if generation == self.generation && bytes <= self.len =>
            {
                (bytes, records)
            }
            _ => (0, 0),
        };
        let short = |got: u64| {
            ArchiveError::Replica(format!(
                "{}: {got} bytes, the writer committed {}",
                path.display(),
                self.len
            ))
        };
        let bytes = match local::read_range(&path, base, self.len - base) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(short(local::len(&path).unwrap_or(0)))
            }
            Err(e) => return Err(ArchiveError::io("read", &path)(e)),
        };
        Ok(LocalLog {
            generation: self.generation,
            base,
            records: base_records + records_from(&bytes, 0),
            bytes,
            files: self.files,
            streams: self.streams,
            next_name: self.next_name,
        })
    }
}

fn live_files(state: &State) -> Vec<LiveFile> {
    state
        .live_files()
        .map(|f| LiveFile {
            path: f.path.clone(),
            bytes: f.bytes,
            cold: f.cold.clone(),
        })
        .collect()
}

/// The archive's current manifest generation: its number, its file and its bytes. With
/// `sync`, the file is synced before its bytes are trusted: a writer beside a pass syncs a
/// record after appending it, so what is read here may not be durable yet; synced now (fsync
/// flushes what any process wrote to the file), the bucket never holds a record a crash of
/// this machine could still take back.
fn newest_generation(root: &Path, sync: bool) -> Result<(u64, std::path::PathBuf, Vec<u8>)> {
    let dir = root.join(MANIFEST_DIR);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let newest = durable::list_files(&dir)?
            .into_iter()
            .filter_map(|p| generation_of(&p).map(|g| (g, p)))
            .max_by_key(|(g, _)| *g);
        let Some((generation, path)) = newest else {
            return Err(ArchiveError::NoManifest {
                path: root.to_path_buf(),
            });
        };
        // A checkpoint may replace the generation between the listing and the read.
        let replaced =
            |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound && attempt < ATTEMPTS;
        let bytes = match local::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if replaced(&e) => continue,
            Err(e) => return Err(ArchiveError::io("read", &path)(e)),
        };
        if sync {
            match local::sync_path(&path) {
                Ok(()) => {}
                Err(ArchiveError::Io { source, .. }) if replaced(&source) => continue,
                Err(e) => return Err(e),
            }
        }
        return Ok((generation, path, bytes));
    }
}

/// The archive's manifest as a reader sees it (its current generation replayed).
fn local_log(root: &Path, sync: bool) -> Result<LocalLog> {
    let (generation, path, mut bytes) = newest_generation(root, sync)?;
    let replayed = replay_bytes(&path, &bytes, generation)?;
    bytes.truncate(replayed.trusted_len as usize);
    Ok(LocalLog {
        generation,
        base: 0,
        bytes,
        records: replayed.records,
        files: live_files(&replayed.state),
        streams: replayed.state.streams.keys().cloned().collect(),
        next_name: replayed.state.next_name,
    })
}

/// The archive's current manifest generation up to the end of its run of whole frames, not
/// replayed (what [`status`] needs: the bytes and records a pass would carry).
fn framed_log(root: &Path) -> Result<LocalLog> {
    let (generation, _, mut bytes) = newest_generation(root, false)?;
    let (records, end) = whole_records(&bytes, 0);
    bytes.truncate(end);
    Ok(LocalLog {
        generation,
        base: 0,
        bytes,
        records,
        files: Vec::new(),
        streams: Vec::new(),
        next_name: 0,
    })
}

/// The cold tiers the archive's manifest names files in: each cold file's URL, less its
/// archive-relative path.
fn cold_prefixes(root: &Path) -> Result<BTreeSet<String>> {
    let log = match local_log(root, false) {
        Ok(log) => log,
        Err(ArchiveError::NoManifest { .. }) => return Ok(BTreeSet::new()),
        Err(e) => return Err(e),
    };
    Ok(log
        .files
        .iter()
        .filter_map(|f| {
            let url = f.cold.as_deref()?;
            Some(url.strip_suffix(&f.path)?.trim_end_matches('/').to_owned())
        })
        .collect())
}

/// The token this archive claims prefixes with (its `OWNER` file), if it has one.
pub(super) fn local_token(root: &Path) -> Result<Option<String>> {
    Ok(local::read_if_present(&root.join(OWNER_FILE))?.map(|t| t.trim().to_owned()))
}

/// The token the `OWNER` object of `tier`'s prefix holds, if there is one.
pub(super) fn bucket_token(tier: &ColdTier) -> std::result::Result<Option<String>, ColdError> {
    token(tier.get(OWNER_FILE))
}

/// The token an `OWNER` object's read answered (`None` when there is no such object).
fn token(
    read: std::result::Result<Bytes, ColdError>,
) -> std::result::Result<Option<String>, ColdError> {
    match read {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).trim().to_owned())),
        Err(e) if e.missing => Ok(None),
        Err(e) => Err(e),
    }
}

/// The bucket prefix recorded for the archive at `root` (its `REPLICA` file), if any.
pub fn recorded(root: &Path) -> Result<Option<String>> {
    Ok(local::read_if_present(&root.join(REPLICA_FILE))?
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty()))
}

/// Whether the prefixes `a` and `b` (URLs) are one, or one holds the other.
pub fn overlaps(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim_end_matches('/'), b.trim_end_matches('/'));
    let within = |inner: &str, outer: &str| {
        inner == outer
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    within(a, b) || within(b, a)
}

/// Writes `text` as the file `name` at `root`, durably: staged under `.tmp/`, synced,
/// renamed into place, the root synced.
pub(super) fn write_root_file(disk: &Disk, root: &Path, name: &str, text: &str) -> Result<()> {
    let tmp = root.join(TMP_DIR);
    durable::create_dir(disk, &tmp)?;
    let staged = tmp.join(name);
    durable::write_synced(disk, &staged, text.as_bytes())?;
    durable::rename(disk, &staged, &root.join(name))?;
    durable::sync_dir(disk, root)
}

/// Declares `tier` the replica of the archive at `root`: claims its prefix for the archive
/// (the `OWNER` token, created when the archive has none) and records its URL in `REPLICA`,
/// so that every later command replicates to it without being told. Refuses a prefix another
/// archive owns, or one that holds objects and no owner; changes nothing then. Does not
/// upload anything: [`replicate`] does.
///
/// The caller holds the archive's writer lock (the command line opens it writable first).
pub fn declare(root: &Path, disk: &Disk, tier: &ColdTier, now_ns: u64) -> Result<()> {
    if let Some(url) = recorded(root)? {
        if url != tier.url() {
            return Err(ArchiveError::Replica(format!(
                    "this archive already replicates to {url}; it has one replica (remove {} by hand to move it)",
                    root.join(REPLICA_FILE).display()
                ),
            ));
        }
    }
    if let Some(shared) = cold_prefixes(root)?
        .into_iter()
        .find(|url| overlaps(url, tier.url()))
    {
        return Err(ArchiveError::Replica(format!(
                "{} shares a prefix with this archive's cold tier {shared}: give the replica a prefix of its own (each removes objects the other holds)",
                tier.url()
            ),
        ));
    }
    let mine = local_token(root)?;
    match (bucket_token(tier).map_err(cold)?, &mine) {
        (Some(theirs), Some(mine)) if &theirs == mine => {}
        (Some(theirs), _) => {
            return Err(ArchiveError::Replica(format!(
                "{} belongs to another archive (its {OWNER_FILE} object holds {theirs:?}); give this archive a prefix of its own",
                tier.url()
            )))
        }
        (None, _) => {
            let listed = tier.list("").map_err(cold)?;
            if !listed.is_empty() {
                return Err(ArchiveError::Replica(format!(
                    "{} holds {} object(s) and no {OWNER_FILE} object: it may be another archive's; give this archive a prefix of its own",
                    tier.url(),
                    listed.len()
                )));
            }
            let token = match mine {
                Some(token) => token,
                None => {
                    let token = super::offload::new_owner_token(now_ns);
                    write_root_file(disk, root, OWNER_FILE, &format!("{token}\n"))?;
                    token
                }
            };
            if !tier
                .put_if_absent(OWNER_FILE, Bytes::from(format!("{token}\n")))
                .map_err(cold)?
                && bucket_token(tier).map_err(cold)?.as_deref() != Some(token.as_str())
            {
                return Err(ArchiveError::Replica(format!(
                    "{}: another archive claimed the prefix at the same time",
                    tier.url()
                )));
            }
        }
    }
    write_root_file(disk, root, REPLICA_FILE, &format!("{}\n", tier.url()))
}

/// Refuses a repair of the archive at `root` (its manifest generation `generation` damaged
/// at byte `damaged_at`) while its replica (`declared`, else the one `REPLICA` records) holds
/// that generation past the damage, or a newer one: the bucket then holds, whole, records the
/// repair would drop, and the first pass after it would replace the bucket's copy with the
/// repaired history. The operator restores from the bucket instead. A replica that cannot be
/// asked refuses too (nothing proves the repair loses nothing there).
pub(super) fn guard_repair(
    root: &Path,
    declared: Option<&ColdTier>,
    generation: u64,
    damaged_at: u64,
) -> Result<()> {
    let recorded_tier;
    let tier = match declared {
        Some(tier) => tier,
        None => match recorded(root)? {
            None => return Ok(()),
            Some(url) => {
                recorded_tier = ColdTier::from_url(&url).map_err(cold)?;
                &recorded_tier
            }
        },
    };
    let url = tier.url();
    let without = format!(
        "or remove {} to repair without it (its next pass then replaces what the bucket holds)",
        root.join(REPLICA_FILE).display()
    );
    let parts = bucket_parts(tier).map_err(|e| {
        ArchiveError::Replica(format!(
            "the repair needs to know whether the replica {url} holds records past the damage, and it cannot be asked ({e}): repair once it answers, {without}"
        ))
    })?;
    match bucket_current(&parts).map_err(|e| damaged(tier, e))? {
        Some((g, end)) if g > generation || (g == generation && end > damaged_at) => {
            Err(ArchiveError::Replica(format!(
                "the replica {url} holds {end} bytes of manifest generation {g}, past the damage at byte {damaged_at} of this archive's generation {generation}: it holds, whole, records this repair would drop, and the next pass would replace them with the repaired history. Restore from it instead (`series-archive restore {url} NEW_DIR` makes an archive of everything it holds), {without}"
            )))
        }
        _ => Ok(()),
    }
}

/// Where the replica in `tier` of the archive at `root` stands, without changing anything;
/// `now_ns` dates the lag.
pub fn status(root: &Path, tier: &ColdTier, now_ns: u64) -> Result<ReplicaStatus> {
    let log = framed_log(root)?;
    let current = bucket_current(&bucket_parts(tier)?).map_err(|e| damaged(tier, e))?;
    let status = standing(tier.url(), &log, current);
    Ok(dated(&log, status, now_ns))
}

/// The advisory file beside `REPLICA` that says where the bucket stood after this archive's
/// last completed pass (JSON: generation, bytes, when): what the lag is estimated from while
/// the bucket does not answer. Not part of the commit protocol: written without a sync, and
/// nothing reads it but the status of an unreachable bucket.
pub const SEEN_FILE: &str = "REPLICA.seen";

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Seen {
    generation: u64,
    bytes: u64,
    at_ns: u64,
}

/// Records where a completed pass left the bucket (failing to is only logged).
fn record_seen(root: &Path, generation: u64, bytes: u64) {
    use crate::archive::clock::Clock;
    let seen = Seen {
        generation,
        bytes,
        at_ns: crate::archive::clock::SystemClock.now_ns(),
    };
    let path = root.join(SEEN_FILE);
    let written = serde_json::to_vec(&seen)
        .map_err(std::io::Error::other)
        .and_then(|bytes| local::replace(&path, &bytes));
    if let Err(e) = written {
        tracing::warn!("{}: {e}", path.display());
    }
}

/// Where the replica at `url` of the archive at `root` stood as of the archive's last
/// completed pass, when the bucket itself cannot be asked: `None` when no pass has completed
/// (or the record of it is unreadable). The figures behind are an upper bound
/// ([`ReplicaStatus::as_of_ns`]).
pub fn last_seen(root: &Path, url: &str, now_ns: u64) -> Result<Option<ReplicaStatus>> {
    let Some(text) = local::read_if_present(&root.join(SEEN_FILE))? else {
        return Ok(None);
    };
    let Ok(seen) = serde_json::from_str::<Seen>(&text) else {
        return Ok(None);
    };
    let log = framed_log(root)?;
    let mut status = dated(
        &log,
        standing(url, &log, Some((seen.generation, seen.bytes))),
        now_ns,
    );
    status.as_of_ns = Some(seen.at_ns);
    Ok(Some(status))
}

/// `status` with its lag in seconds, dated at `now_ns`.
fn dated(log: &LocalLog, mut status: ReplicaStatus, now_ns: u64) -> ReplicaStatus {
    status.seconds_behind = if status.records_behind == 0 {
        Some(0.0)
    } else {
        oldest_time(
            &log.bytes,
            (log.len() - status.bytes_behind).saturating_sub(log.base) as usize,
        )
        .map(|t| now_ns.saturating_sub(t) as f64 / 1e9)
    };
    status
}

/// The earliest time a record of `bytes` from `from` (a record boundary) on carries: a
/// barrier's `sealed_at_ns`, a retirement's `retired_at_ns`. Only the two fields are read of
/// each record's JSON.
fn oldest_time(bytes: &[u8], from: usize) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Stamp {
        sealed_at_ns: Option<u64>,
        retired_at_ns: Option<u64>,
    }
    let mut at = from;
    let mut oldest: Option<u64> = None;
    while let Decoded::Record { payload, next } = frame::decode(bytes, at) {
        // A paged record is its JSON, a newline, then its pages.
        let json = payload.split(|b| *b == b'\n').next().unwrap_or(payload);
        if let Ok(stamp) = serde_json::from_slice::<Stamp>(json) {
            if let Some(t) = stamp.sealed_at_ns.or(stamp.retired_at_ns) {
                oldest = Some(oldest.map_or(t, |o| o.min(t)));
            }
        }
        at = next;
    }
    oldest
}

fn standing(url: &str, log: &LocalLog, bucket: Option<(u64, u64)>) -> ReplicaStatus {
    let local_bytes = log.len();
    let bytes = match bucket {
        Some((g, held)) if g == log.generation => held.min(local_bytes),
        _ => 0,
    };
    let behind = local_bytes - bytes;
    ReplicaStatus {
        url: url.to_owned(),
        local_generation: log.generation,
        local_bytes,
        local_records: log.records,
        generation: bucket.map(|(g, _)| g),
        bytes,
        // Bytes before `base` are not in memory: a bucket that holds fewer (never, after a
        // pass of the same generation) counts every record as behind, an upper bound.
        records_behind: match bytes.checked_sub(log.base) {
            Some(at) => records_from(&log.bytes, at as usize),
            None => log.records,
        },
        bytes_behind: behind,
        seconds_behind: (behind == 0).then_some(0.0),
        as_of_ns: None,
    }
}

/// One replication pass: brings the replica in `tier` of the archive at `root` up to the
/// archive's durable manifest, in an order that keeps the bucket a whole archive as of some
/// commit at every moment (see the module's documentation). `progress(done, total, bytes)`
/// after each file uploaded. Safe to run beside the archive's writer and to run again after a
/// crash or a failure: it starts from what the bucket holds.
///
/// Refuses a prefix whose `OWNER` object is not this archive's token (another archive, or a
/// restore that took the prefix over: this archive is fenced), and a bucket whose manifest is
/// ahead of the archive's or is not a prefix of it.
pub fn replicate(
    root: &Path,
    tier: &ColdTier,
    faults: &Faults,
    progress: impl FnMut(usize, usize, u64),
) -> Result<ReplicationReport> {
    let look = Look::send(tier, None);
    let log = local_log(root, true)?;
    let bucket = look.finish(root, tier)?;
    let to = Replica { root, tier, faults };
    replicate_log(to, log, progress, bucket, &mut None)
}

/// The pass the archive's own replicator runs after its writer committed `committed`: as
/// [`replicate`], from the state the writer handed over instead of a replay of the manifest,
/// and from what the bucket held after the last pass (`known`, listed when `None`; left
/// `None` when the pass fails).
pub(crate) fn replicate_committed(
    root: &Path,
    tier: &ColdTier,
    faults: &Faults,
    committed: Committed,
    known: &mut Option<Known>,
) -> Result<ReplicationReport> {
    let held = known.as_ref().and_then(|k| {
        let (generation, bytes) = bucket_current(&k.parts).ok().flatten()?;
        Some((generation, bytes, k.records_held))
    });
    // Taken: what is remembered is put back only by a pass that completes.
    let look = Look::send(tier, known.take());
    let log = committed.read(root, held)?;
    let bucket = look.finish(root, tier)?;
    let to = Replica { root, tier, faults };
    replicate_log(to, log, |_, _, _| {}, bucket, known)
}

/// What a pass asks the bucket before it writes anything: the prefix's `OWNER` token and,
/// when it remembers nothing of the bucket, the listings of its manifest and of its streams.
/// The requests are sent side by side and waited for together (one round trip, not three),
/// while the pass reads its own manifest.
struct Look<'t> {
    owner: Pending<'t, Bytes>,
    held: Held<'t>,
}

/// What a pass starts from: what this replicator's last pass left, or the bucket's listings.
enum Held<'t> {
    Remembered(Known),
    Listed {
        manifest: Pending<'t, Listing>,
        streams: Pending<'t, Listing>,
    },
}

/// What the bucket holds as a pass starts, and whether this replicator's earlier passes left
/// it so (`remembered`: the parts are its own, and the objects it listed are up whole).
struct Bucket {
    known: Known,
    remembered: bool,
}

impl<'t> Look<'t> {
    fn send(tier: &'t ColdTier, remembered: Option<Known>) -> Look<'t> {
        Look {
            owner: tier.begin_get(OWNER_FILE),
            held: match remembered {
                Some(known) => Held::Remembered(known),
                None => Held::Listed {
                    manifest: tier.begin_list(MANIFEST_DIR),
                    streams: tier.begin_list(STREAMS_DIR),
                },
            },
        }
    }

    /// Refuses a prefix whose `OWNER` object is not the token of the archive at `root`, and
    /// answers what the bucket holds.
    fn finish(self, root: &Path, tier: &ColdTier) -> Result<Bucket> {
        check_owner(root, tier, token(self.owner.wait()).map_err(cold)?)?;
        Ok(match self.held {
            Held::Remembered(known) => Bucket {
                known,
                remembered: true,
            },
            Held::Listed { manifest, streams } => {
                let (manifest, streams) = (
                    manifest.wait().map_err(cold)?,
                    streams.wait().map_err(cold)?,
                );
                let (parts, spans) =
                    manifest_objects(manifest.iter().map(|(r, s, _)| (r.as_str(), *s)));
                Bucket {
                    known: Known {
                        parts,
                        spans,
                        objects: streams.into_iter().map(|(r, s, _)| (r, s)).collect(),
                        ..Known::default()
                    },
                    remembered: false,
                }
            }
        })
    }
}

/// Refuses a prefix whose `OWNER` object holds `theirs`, not the token of the archive at
/// `root`.
fn check_owner(root: &Path, tier: &ColdTier, theirs: Option<String>) -> Result<()> {
    let mine = local_token(root)?;
    if mine.is_none() || mine != theirs {
        return Err(ArchiveError::Replica(format!(
            "{} is not this archive's replica: its {OWNER_FILE} object holds {}, this archive's token is {} — another archive owns it, or a restore took it over (this archive is fenced); declare a replica with `series-archive replicate ARCHIVE URL`",
            tier.url(),
            theirs.map_or("nothing".to_owned(), |t| format!("{t:?}")),
            mine.map_or("absent".to_owned(), |t| format!("{t:?}")),
        )));
    }
    Ok(())
}

/// Where a pass replicates: the archive at `root` into `tier`, with `faults` injected.
struct Replica<'a> {
    root: &'a Path,
    tier: &'a ColdTier,
    faults: &'a Faults,
}

/// One pass from `bucket` (what the bucket holds as it starts, from [`Look::finish`]) to the
/// commit `log` reads. `known` is empty as it starts (a caller moved what it remembered into
/// `bucket`), and receives what the bucket holds once the pass completes, never before.
fn replicate_log(
    to: Replica<'_>,
    log: LocalLog,
    mut progress: impl FnMut(usize, usize, u64),
    bucket: Bucket,
    known: &mut Option<Known>,
) -> Result<ReplicationReport> {
    let Replica { root, tier, faults } = to;
    let ours = bucket.remembered;
    let Known {
        mut parts,
        mut spans,
        objects: mut listed,
        mut pointers,
        mut anchors,
        named: previously_named,
        seen_at,
        ..
    } = bucket.known;
    let bucket = bucket_current(&parts).map_err(|e| damaged(tier, e))?;
    let mut report = ReplicationReport::default();
    match bucket {
        Some((g, _)) if g > log.generation => {
            return Err(ArchiveError::Replica(format!(
                "{} holds manifest generation {g}, newer than this archive's {}: the bucket is not this archive's past",
                tier.url(),
                log.generation
            )))
        }
        Some((g, end)) if g == log.generation => {
            if end > log.len() {
                return Err(ArchiveError::Replica(format!(
                    "{} holds {end} bytes of manifest generation {g}, more than this archive's {}: the bucket is not this archive's past",
                    tier.url(),
                    log.len()
                )));
            }
            // The last part must be what the archive holds there: a bucket that took another
            // history is refused, not extended.
            // Its last bytes suffice (they end in its last record's checksum, and the part
            // is read back in one ranged GET however long the generation grew).
            // A remembered part is one this replicator wrote.
            if let Some(&(offset, len)) = parts[&g]
                .iter()
                .take_while(|(o, _)| *o < end && !ours)
                .last()
            {
                let tail = len.min(TAIL_CHECKED);
                let theirs = tier
                    .read(&part_name(g, offset), len - tail, tail)
                    .map_err(cold)?;
                if theirs[..] != log.range(root, (offset + len - tail, offset + len))?[..] {
                    return Err(ArchiveError::Replica(format!(
                        "{}: the manifest part at byte {offset} of generation {g} differs from this archive's: the bucket holds another history",
                        tier.url()
                    )));
                }
            }
        }
        _ => {}
    }
    let from = match bucket {
        Some((g, end)) if g == log.generation => end,
        _ => 0,
    };
    // Every live local file the bucket lacks, whole. Cold files live in their own tier.
    let missing: Vec<(&str, u64)> = log
        .files
        .iter()
        .filter(|f| f.cold.is_none() && listed.get(&f.path) != Some(&f.bytes))
        .map(|f| (f.path.as_str(), f.bytes))
        .collect();
    // Several at a time (a request's latency, not the link, bounds one upload at a time), a
    // batch bounded in files and bytes read into memory.
    let mut done = 0;
    for batch in upload_batches(&missing) {
        upload_files(root, tier, batch)?;
        for (path, bytes) in batch {
            listed.insert((*path).to_owned(), *bytes);
            report.files += 1;
            report.bytes += bytes;
            done += 1;
            faults.reach(FaultPoint::AfterReplicaFile);
            progress(done, missing.len(), report.bytes);
        }
    }

    // The Delta logs: each log's new objects in version order, `_last_checkpoint`
    // (rewritten in place) last. A log's objects go up one at a time, so a Delta reader of
    // the bucket never meets a gap in its versions; the logs go up side by side, a wave
    // carrying the next object of each.
    // A commit's bytes are read when its wave goes (a pass after a long outage may find
    // many); the pointer's, small, when it is compared.
    let mut logs: Vec<std::collections::VecDeque<(String, std::path::PathBuf, Option<Bytes>)>> =
        Vec::new();
    // Objects of the bucket's logs that the local logs expired, deleted once the uploads
    // below (the new checkpoint and `_last_checkpoint` with them) are done.
    let mut expired: Vec<String> = Vec::new();
    for id in &log.streams {
        for table in ["rows", "levels"] {
            let dir = root.join(STREAMS_DIR).join(id).join(table).join(LOG_DIR);
            let mut files = durable::list_files(&dir)?;
            files.sort_by_key(|p| p.file_name().is_some_and(|n| n == "_last_checkpoint"));
            match bucket_log(root, tier, &dir, &files, &listed, &mut anchors)? {
                LogCopy::Rewritten(old) => {
                    for relative in old {
                        tier.delete(&relative).map_err(cold)?;
                        listed.remove(&relative);
                        pointers.remove(&relative);
                        report.deleted += 1;
                    }
                }
                LogCopy::Expired(old) => expired.extend(old),
            }
            let mut new = std::collections::VecDeque::new();
            for path in files {
                let relative = layout::relative(root, &path);
                if !is_delta_log_object(&relative) {
                    continue;
                }
                // Commits are written once: held at their size, they are held, and are not
                // read (a pass costs what is new, not the log's history). The pointer
                // `_last_checkpoint` is rewritten in place: held when its bytes are.
                let pointer = relative.ends_with("_last_checkpoint");
                if !pointer {
                    // Every object a completed pass left listed is held at its local size:
                    // a remembered pass need not look at it again.
                    if ours && listed.contains_key(&relative) {
                        continue;
                    }
                    let len = local::len(&path).map_err(ArchiveError::io("stat", &path))?;
                    if listed.get(&relative) != Some(&len) {
                        new.push_back((relative, path, None));
                    }
                    continue;
                }
                // Compared with what this replicator last put or found there, else with the
                // bucket's object (one GET).
                let bytes =
                    Bytes::from(local::read(&path).map_err(ArchiveError::io("read", &path))?);
                let held = match pointers.get(&relative) {
                    Some(known) => *known == bytes,
                    None => {
                        listed.get(&relative) == Some(&(bytes.len() as u64))
                            && tier.get(&relative).map_err(cold)? == bytes
                    }
                };
                if held {
                    pointers.insert(relative, bytes);
                } else {
                    new.push_back((relative, path, Some(bytes)));
                }
            }
            logs.push(new);
        }
    }
    loop {
        let mut wave = Vec::with_capacity(logs.len());
        for (relative, path, bytes) in logs.iter_mut().filter_map(|l| l.pop_front()) {
            let bytes = match bytes {
                Some(bytes) => bytes,
                None => Bytes::from(local::read(&path).map_err(ArchiveError::io("read", &path))?),
            };
            wave.push((relative, bytes));
        }
        if wave.is_empty() {
            break;
        }
        for outcome in tier.put_all(&wave) {
            outcome.map_err(cold)?;
        }
        for (relative, bytes) in wave {
            listed.insert(relative.clone(), bytes.len() as u64);
            if relative.ends_with("_last_checkpoint") {
                pointers.insert(relative, bytes);
            }
            report.delta_objects += 1;
        }
    }

    for relative in expired {
        tier.delete(&relative).map_err(cold)?;
        listed.remove(&relative);
        report.deleted += 1;
    }

    faults.reach(FaultPoint::AfterReplicaDelta);

    // The commit point: the manifest's bytes past what the bucket holds, as one object. A
    // pass that finds the manifest caught up still did the steps above (a Delta commit written
    // after the pass that carried its record) and does the deletions below (a pass cut short
    // before them).
    let end = log.len();
    if from < end {
        let part = Bytes::from(log.range(root, (from, end))?);
        let name = part_name(log.generation, from);
        // A conditional put whose answer was lost is retried by the client and refused by
        // the server: the object is then the one this pass wrote. Read back, the same bytes
        // are this pass's part; other bytes are another writer's.
        if !tier.put_if_absent(&name, part.clone()).map_err(cold)?
            && tier.get(&name).map_err(cold)? != part
        {
            return Err(ArchiveError::Replica(format!(
                "{}: a manifest part at byte {from} of generation {} appeared meanwhile: another replicator writes this prefix",
                tier.url(),
                log.generation
            )));
        }
        report.parts = 1;
        parts
            .entry(log.generation)
            .or_default()
            .push((from, end - from));
        faults.reach(FaultPoint::AfterReplicaPart);
        // A restore that took the prefix over between this pass's owner check and its part
        // read the manifest after its new token went up (`restore`), and may not hold this
        // part: the commit is not counted as replicated (by the writer's replicator, which a
        // barrier under a lag bound waits on, or by `replicate`, which would say "caught up"
        // and exit 0), and this archive is fenced.
        check_owner(root, tier, token(tier.get(OWNER_FILE)).map_err(cold)?)?;
        consolidate(root, tier, &log, &parts[&log.generation], &mut spans)?;
    }

    // The files a state names only leave it, and new ones are uploaded above: after a pass
    // that remembers the bucket, only files the last pass named can have become unnamed.
    let named: BTreeSet<String> = log.files.iter().map(|f| f.path.clone()).collect();
    let candidates: Option<Vec<String>> =
        ours.then(|| previously_named.difference(&named).cloned().collect());
    report.deleted = delete_unnamed(
        tier,
        &log,
        &named,
        candidates,
        &mut parts,
        &mut spans,
        &mut listed,
    )?;
    report.status = standing(tier.url(), &log, Some((log.generation, log.len())));
    // A pass of the replicator (one that remembers the bucket) writes the record at most
    // every SEEN_EVERY; any other pass (a command's, the first after a failure) always does.
    let end = (log.generation, log.len());
    let mut seen_at = seen_at.filter(|at| at.elapsed() < SEEN_EVERY);
    let unrecorded = if ours && seen_at.is_some() {
        Some(end)
    } else {
        record_seen(root, end.0, end.1);
        seen_at = Some(std::time::Instant::now());
        None
    };
    *known = Some(Known {
        parts,
        spans,
        anchors,
        records_held: log.records,
        objects: listed,
        pointers,
        named,
        seen_at,
        unrecorded,
    });
    Ok(report)
}

/// Writes the consolidations due after the part that ends the bucket's copy of `log`
/// ([`due_consolidation`]), each after the parts it holds, with a conditional create (refused,
/// it is read back and kept when the bytes are the same). A consolidation is only a shortcut:
/// one whose bytes cannot be read because a checkpoint replaced the generation meanwhile is
/// left to no one (the next pass replicates the new generation).
fn consolidate(
    root: &Path,
    tier: &ColdTier,
    log: &LocalLog,
    parts: &[(u64, u64)],
    spans: &mut Spans,
) -> Result<()> {
    while let Some(range) =
        due_consolidation(parts, spans.get(&log.generation), log.len(), SPAN_BYTES)
    {
        let bytes = match log.range(root, range) {
            Ok(bytes) => Bytes::from(bytes),
            Err(ArchiveError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(())
            }
            Err(e) => return Err(e),
        };
        let name = span_name(log.generation, range);
        if !tier.put_if_absent(&name, bytes.clone()).map_err(cold)?
            && tier.get(&name).map_err(cold)? != bytes
        {
            return Err(ArchiveError::Replica(format!(
                "{}: {name} appeared meanwhile with other bytes: another replicator writes this prefix",
                tier.url()
            )));
        }
        spans.entry(log.generation).or_default().insert(range);
    }
    Ok(())
}

/// What the bucket's copy of one local Delta log needs beside the new objects a pass uploads
/// ([`bucket_log`]).
enum LogCopy {
    /// The local log was written anew: these objects of the old one go before anything is
    /// uploaded.
    Rewritten(Vec<String>),
    /// These objects the local log expired go after the uploads.
    Expired(Vec<String>),
}

/// What the bucket's copy of the local Delta log at `dir` (its objects `files`, sorted) needs,
/// by `listed` (what the bucket holds) and `anchors` (each log's lowest commit as the last
/// pass found it, updated here).
///
/// - A local log written anew (`publish`, or a damaged log rewritten from the manifest)
///   numbers its versions from 0 again, so the bucket's objects of the old log, under the same
///   names or above them, would make a Delta reader of the bucket read a table the archive
///   never held: every one of them is to be deleted first (a reader then finds no table until
///   the new log is up, and reads the archive's table after). Written anew means: its lowest
///   commit is lower than the last pass found, or the same version with other bytes; with
///   nothing remembered, that commit's bytes differ from the bucket's object of that name, or
///   the bucket lacks it and holds a later version.
/// - Otherwise the bucket's objects of versions below the local log's lowest commit, which
///   the local log expired after a checkpoint, are to be deleted after the uploads.
fn bucket_log(
    root: &Path,
    tier: &ColdTier,
    dir: &Path,
    files: &[std::path::PathBuf],
    listed: &BTreeMap<String, u64>,
    anchors: &mut BTreeMap<String, (u64, u32)>,
) -> Result<LogCopy> {
    let version_of = |relative: &str| {
        relative
            .rsplit('/')
            .next()
            .and_then(log_version)
            .map(|(v, _)| v)
    };
    // Sorted by name, which begins with the zero-padded version: the first commit is the
    // lowest.
    let lowest = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .find_map(|p| Some((version_of(p.to_str()?)?, p)));
    let Some((lowest, path)) = lowest else {
        // No local log (or none yet): nothing to compare the bucket's with.
        return Ok(LogCopy::Expired(Vec::new()));
    };
    let bytes = local::read(path).map_err(ArchiveError::io("read", path))?;
    let crc = crc32c::crc32c(&bytes);
    let prefix = format!("{}/", layout::relative(root, dir));
    let held: Vec<String> = listed
        .range(prefix.clone()..)
        .take_while(|(relative, _)| relative.starts_with(&prefix))
        .map(|(relative, _)| relative.clone())
        .filter(|relative| is_delta_log_object(relative))
        .collect();
    let name = layout::relative(root, path);
    let rewritten = match anchors.get(&prefix) {
        Some(&(version, was)) => lowest < version || (lowest == version && crc != was),
        None if listed.contains_key(&name) => tier.get(&name).map_err(cold)? != bytes,
        None => held
            .iter()
            .any(|relative| version_of(relative).is_some_and(|v| v > lowest)),
    };
    anchors.insert(prefix, (lowest, crc));
    Ok(if rewritten {
        LogCopy::Rewritten(held)
    } else {
        LogCopy::Expired(
            held.into_iter()
                .filter(|relative| version_of(relative).is_some_and(|v| v < lowest))
                .collect(),
        )
    })
}

/// Deletes what the state `log` proves unnamed, once the bucket holds it: older generations'
/// parts, and numbered files below its next name that it does not hold (a file once dropped
/// never returns, and files of later commits take names from the next name on). Answers how
/// many objects went.
fn delete_unnamed(
    tier: &ColdTier,
    log: &LocalLog,
    named: &BTreeSet<String>,
    candidates: Option<Vec<String>>,
    parts: &mut Parts,
    spans: &mut Spans,
    listed: &mut BTreeMap<String, u64>,
) -> Result<usize> {
    let mut deleted = 0;
    // A generation's consolidations go first: an open that finds one still finds the parts
    // it was made of.
    let older: Vec<u64> = spans.range(..log.generation).map(|(&g, _)| g).collect();
    for g in older {
        for range in spans.remove(&g).unwrap_or_default() {
            tier.delete(&span_name(g, range)).map_err(cold)?;
            deleted += 1;
        }
    }
    let older: Vec<u64> = parts.range(..log.generation).map(|(&g, _)| g).collect();
    for g in older {
        for (offset, _) in parts.remove(&g).unwrap_or_default() {
            tier.delete(&part_name(g, offset)).map_err(cold)?;
            deleted += 1;
        }
    }
    let log_dir = format!("/{LOG_DIR}/");
    let unnamed_file = |relative: &String| {
        let numbered = relative
            .rsplit('/')
            .next()
            .and_then(parse_data_file_name)
            .is_some_and(|n| n < log.next_name);
        numbered && !named.contains(relative) && !relative.contains(&log_dir)
    };
    let unnamed: Vec<String> = match candidates {
        Some(candidates) => candidates
            .into_iter()
            .filter(|relative| listed.contains_key(relative) && unnamed_file(relative))
            .collect(),
        None => {
            let unnamed: Vec<String> = listed.keys().filter(|r| unnamed_file(r)).cloned().collect();
            // A pass that listed the bucket may run beside the archive's own replicator,
            // which can meanwhile upload a file of a newer commit whose name was reserved
            // before this pass's state was read (a compaction's output) and write that
            // commit's part. Such a file is unnamed here and named there: the deletions wait
            // for a pass that finds the bucket where it left it.
            let moved = !unnamed.is_empty()
                && bucket_current(&bucket_parts(tier)?).map_err(|e| damaged(tier, e))?
                    != Some((log.generation, log.len()));
            if moved {
                Vec::new()
            } else {
                unnamed
            }
        }
    };
    for relative in unnamed {
        tier.delete(&relative).map_err(cold)?;
        listed.remove(&relative);
        deleted += 1;
    }
    Ok(deleted)
}

/// Uploads the local files `files` (each of the bytes the manifest records), several at a
/// time. An upload that succeeds is whole: an S3 tier opened from a URL sends each object's
/// SHA-256, which the server checks before storing it; a local directory writes it whole and
/// renames it. A tier built by the embedder ([`ColdTier::new`]) is confirmed by each object's
/// size after the upload, since its store may do neither.
fn upload_files(root: &Path, tier: &ColdTier, files: &[(&str, u64)]) -> Result<()> {
    let mut uploads = Vec::with_capacity(files.len());
    for &(relative, bytes) in files {
        let path = root.join(relative);
        let data = local::read(&path).map_err(ArchiveError::io("read", &path))?;
        if data.len() as u64 != bytes {
            return Err(ArchiveError::Replica(format!(
                "{}: {} bytes on disk, the manifest records {bytes}; not replicated (run verify)",
                path.display(),
                data.len()
            )));
        }
        uploads.push((relative.to_owned(), Bytes::from(data)));
    }
    for outcome in tier.put_all(&uploads) {
        outcome.map_err(cold)?;
    }
    if tier.verified_puts() {
        return Ok(());
    }
    for &(relative, bytes) in files {
        let size = tier.size(relative).map_err(cold)?;
        if size != bytes {
            return Err(ArchiveError::Replica(format!(
                "{}: the object holds {size} bytes after the upload, the file {bytes}",
                tier.object_url(relative)
            )));
        }
    }
    Ok(())
}

/// The bytes of local files one upload batch reads into memory (a larger file goes alone).
const BATCH_BYTES: u64 = 64 << 20;

/// `files` cut into batches of at most twice [`UPLOADS_AT_ONCE`] files and [`BATCH_BYTES`]
/// (a file larger than that alone), in order.
fn upload_batches<'a>(files: &'a [(&'a str, u64)]) -> Vec<&'a [(&'a str, u64)]> {
    let mut batches = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, &(_, len)) in files.iter().enumerate() {
        if i > start && (i - start >= 2 * UPLOADS_AT_ONCE || bytes + len > BATCH_BYTES) {
            batches.push(&files[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += len;
    }
    if start < files.len() {
        batches.push(&files[start..]);
    }
    batches
}

/// The replica's manifest: its current generation, that generation's bytes (its parts
/// concatenated) and what they replay to. Refuses a bucket with no manifest, and one whose
/// parts end inside a record.
fn fetch_manifest(
    tier: &ColdTier,
) -> Result<(
    u64,
    Vec<u8>,
    crate::archive::format::manifest::log::Replayed,
)> {
    let (parts, spans) = bucket_manifest(tier)?;
    let (generation, end, list) = current_parts(&parts, tier)?;
    let manifest = fetch_from(
        tier,
        generation,
        &list,
        spans.get(&generation),
        Vec::new(),
        end,
    )?;
    let replayed = replay_whole(tier, generation, &manifest)?;
    Ok((generation, manifest, replayed))
}

/// The generation the bucket serves, its bytes, and its parts; an error when it holds none.
fn current_parts(parts: &Parts, tier: &ColdTier) -> Result<(u64, u64, PartList)> {
    let Some((generation, end)) = bucket_current(parts).map_err(|e| damaged(tier, e))? else {
        return Err(ArchiveError::Replica(format!(
            "{} holds no replicated manifest (no {MANIFEST_DIR}/gen-…/…part object at offset 0): nothing to restore or read",
            tier.url()
        )));
    };
    Ok((generation, end, parts[&generation].clone()))
}

/// Appends to `manifest` (the generation's bytes up to a part boundary) the bytes of
/// `generation` from there up to `end`: the objects of its [`cover`] (consolidations and
/// parts), each read whole and its length checked.
fn fetch_from(
    tier: &ColdTier,
    generation: u64,
    parts: &[(u64, u64)],
    spans: Option<&BTreeSet<(u64, u64)>>,
    mut manifest: Vec<u8>,
    end: u64,
) -> Result<Vec<u8>> {
    let from = manifest.len() as u64;
    let Some(pieces) = cover(parts, spans, from, end) else {
        return Err(ArchiveError::Replica(format!(
            "{}: the parts of manifest generation {generation} do not run from byte {from} to {end} without a gap: the bucket's manifest is damaged",
            tier.url()
        )));
    };
    manifest.reserve((end - from) as usize);
    for piece in pieces {
        let name = piece.name(generation);
        let bytes = tier.get(&name).map_err(cold)?;
        if bytes.len() as u64 != piece.len() {
            return Err(ArchiveError::Replica(format!(
                "{}: {name} read back {} bytes, listed {}",
                tier.url(),
                bytes.len(),
                piece.len()
            )));
        }
        manifest.extend_from_slice(&bytes);
    }
    Ok(manifest)
}

/// Replays a generation's bytes as the bucket holds them: every record must be whole.
fn replay_whole(
    tier: &ColdTier,
    generation: u64,
    manifest: &[u8],
) -> Result<crate::archive::format::manifest::log::Replayed> {
    let shown = format!("{}/{}", tier.url(), part_name(generation, 0));
    let replayed = replay_bytes(Path::new(&shown), manifest, generation)?;
    if replayed.trusted_len != manifest.len() as u64 {
        return Err(ArchiveError::Replica(format!(
            "{shown}: the replicated manifest's records end at byte {}, its parts at {}: the bucket's manifest is damaged",
            replayed.trusted_len,
            manifest.len()
        )));
    }
    Ok(replayed)
}

/// Makes a writable archive at `dir` (absent or empty) from the replica in `tier`, as of the
/// last manifest part the bucket holds: the manifest, every local file it names and the Delta
/// logs are downloaded (files it names in a cold tier stay there). The restored archive
/// records `tier` as its replica and takes the prefix over with a token of its own, so the
/// archive it was replicated from is fenced: its next replication pass is refused.
///
/// Files are written before the manifest, which is renamed into place last: a restore cut
/// short leaves no manifest, and the directory is then refused by every open (remove it and
/// restore again). The caller opens the result to verify it.
pub fn restore(
    tier: &ColdTier,
    dir: &Path,
    disk: &Disk,
    now_ns: u64,
    mut progress: impl FnMut(usize, usize, u64),
) -> Result<RestoreReport> {
    if local::holds_anything(dir) {
        return Err(ArchiveError::Replica(format!(
            "{} is not empty: restore makes a new archive in an empty directory",
            dir.display()
        )));
    }
    // The prefix is this archive's first: a token of its own in the bucket fences the archive
    // it came from before anything is read, so that archive commits nothing more there (its
    // next pass is refused, and a pass under way when the token moved finds it moved before
    // it counts its commit as replicated: see `replicate_committed`). What it wrote before
    // the fence is read below.
    // A prefix that holds no replica (or a damaged one) is refused before anything is
    // written, here or there.
    current_parts(&bucket_parts(tier)?, tier)?;
    let token = super::offload::new_owner_token(now_ns);
    tier.put(OWNER_FILE, Bytes::from(format!("{token}\n")))
        .map_err(cold)?;
    durable::create_dir(disk, dir)?;
    let download = |relative: &str| -> Result<Bytes> {
        let bytes = tier.get(relative).map_err(cold)?;
        let target = dir.join(relative);
        if let Some(parent) = target.parent() {
            durable::create_dir(disk, parent)?;
        }
        durable::write_synced(disk, &target, &bytes)?;
        Ok(bytes)
    };
    let mut downloaded: BTreeSet<String> = BTreeSet::new();
    let mut report = RestoreReport {
        url: tier.url().to_owned(),
        ..RestoreReport::default()
    };
    // A pass of the fenced archive that was under way as the token moved can still land its
    // commit: the manifest is read again after the downloads, and once more if it moved.
    let mut attempts = 0;
    let (generation, manifest, replayed, listed) = loop {
        attempts += 1;
        let (generation, manifest, replayed) = fetch_manifest(tier)?;
        let wanted: Vec<(&str, u64)> = replayed
            .state
            .live_files()
            .filter(|f| f.cold.is_none())
            .map(|f| (f.path.as_str(), f.bytes))
            .collect();
        for (done, &(relative, bytes)) in wanted.iter().enumerate() {
            if downloaded.contains(relative) {
                continue;
            }
            let got = download(relative)?;
            if got.len() as u64 != bytes {
                return Err(ArchiveError::Replica(format!(
                    "{}: {} bytes, the manifest records {bytes}",
                    tier.object_url(relative),
                    got.len()
                )));
            }
            downloaded.insert(relative.to_owned());
            report.files += 1;
            report.bytes += bytes;
            progress(done + 1, wanted.len(), report.bytes);
        }
        let listed = tier.list(STREAMS_DIR).map_err(cold)?;
        let now = bucket_current(&bucket_parts(tier)?).map_err(|e| damaged(tier, e))?;
        if now == Some((generation, manifest.len() as u64)) {
            break (generation, manifest, replayed, listed);
        }
        if attempts == 3 {
            return Err(ArchiveError::Replica(format!(
                "{}: its manifest kept moving while this restore read it (another writer commits there despite the new {OWNER_FILE} token); nothing was restored",
                tier.url()
            )));
        }
    };
    report.generation = generation;
    report.manifest_bytes = manifest.len() as u64;
    report.records = replayed.records;
    // Objects the restored state does not name, numbered at or past its next name, are
    // what a pass of the fenced archive uploaded for a commit it never made there: the
    // restored archive will give those names to files of its own, so they go now (a later
    // pass compares an object it finds by its size alone).
    for (relative, _) in &listed {
        let numbered = relative
            .rsplit('/')
            .next()
            .and_then(parse_data_file_name)
            .is_some_and(|n| n >= replayed.state.next_name);
        if numbered && !relative.contains(&format!("/{LOG_DIR}/")) {
            tier.delete(relative).map_err(cold)?;
        }
    }
    for (relative, _) in &listed {
        if relative.contains(&format!("/{LOG_DIR}/")) && is_delta_log_object(relative) {
            download(relative)?;
            report.delta_objects += 1;
        }
    }
    // Every directory a file was written into, synced once.
    let dirs: BTreeSet<&Path> = downloaded
        .iter()
        .map(String::as_str)
        .chain(listed.iter().map(|(relative, _)| relative.as_str()))
        .filter_map(|relative| Path::new(relative).parent())
        .collect();
    for parent in dirs {
        let full = dir.join(parent);
        if local::holds_anything(&full) {
            durable::sync_dir(disk, &full)?;
        }
    }
    write_root_file(disk, dir, OWNER_FILE, &format!("{token}\n"))?;
    write_root_file(disk, dir, REPLICA_FILE, &format!("{}\n", tier.url()))?;
    // The commit point last.
    let manifest_dir = dir.join(MANIFEST_DIR);
    durable::create_dir(disk, &manifest_dir)?;
    let staged = dir.join(TMP_DIR).join(layout::generation_name(generation));
    durable::write_synced(disk, &staged, &manifest)?;
    durable::rename(
        disk,
        &staged,
        &manifest_dir.join(layout::generation_name(generation)),
    )?;
    durable::sync_dir(disk, &manifest_dir)?;
    durable::sync_dir(disk, dir)?;
    Ok(report)
}

/// The URL `root` names, when it is one (`s3://…`, `s3a://…`, `file://…`, `memory://…`)
/// rather than a directory.
pub fn as_url(root: &Path) -> Option<&str> {
    let text = root.to_str()?;
    ["s3://", "s3a://", "file://", "memory://"]
        .iter()
        .any(|scheme| text.starts_with(scheme))
        .then_some(text)
}

/// Opens the replica at `url` read-only, from the bucket alone: its manifest (the parts of its
/// current generation) is kept in a cache directory of its own ([`Config::replica_cache`],
/// else beneath the system's temporary directory) and replayed as a local archive's is, and
/// every file it names is read from the bucket by ranged GETs checked against the same
/// digests (files it names in a cold tier from there). Answers what the archive served as of
/// the replica's last commit. The open follows the bucket: [`Archive::manifest_moved`] asks
/// it whether a pass replicated a commit since, so a read that finds a file the replica's next
/// pass deleted (`Missing`) starts again on a fresh open ([`crate::archive::reader::read`]),
/// and `serve` of a URL moves to each new commit as it does beside a local writer.
pub fn open_url(url: &str, config: &Config) -> Result<Archive> {
    let tier = std::sync::Arc::new(ColdTier::from_url(url).map_err(cold)?);
    let mut attempt = 0;
    loop {
        attempt += 1;
        match open_replica(&tier, config) {
            // Another reader of the same cache put a newer generation in place and removed
            // the one this open had written, between its rename and its replay.
            Err(ArchiveError::Io { source, .. })
                if attempt < ATTEMPTS && source.kind() == std::io::ErrorKind::NotFound => {}
            other => return other,
        }
    }
}

fn open_replica(tier: &std::sync::Arc<ColdTier>, config: &Config) -> Result<Archive> {
    let base = match &config.replica_cache {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join("series-archive-replicas"),
    };
    // One directory per URL and endpoint (two servers may hold the same bucket name).
    let cache = base.join(format!(
        "{:08x}-{}",
        crc32c::crc32c_append(
            crc32c::crc32c(tier.url().as_bytes()),
            tier.endpoint().unwrap_or("").as_bytes()
        ),
        tier.url()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(80)
            .collect::<String>()
    ));
    let disk: Disk = std::sync::Arc::new(crate::archive::io::storage::LocalDisk);
    let dir = cache.join(MANIFEST_DIR);
    durable::create_dir(&disk, &dir)?;
    let tmp = cache.join(TMP_DIR);
    durable::create_dir(&disk, &tmp)?;
    // The parts with their entity tags: what the cache kept of the generation is reused when
    // every part it was assembled from is still listed alike, and only the parts after it
    // are fetched (an open costs what was replicated since, not the whole manifest).
    let listed = tier.list_tagged(MANIFEST_DIR).map_err(cold)?;
    let (parts, spans) = manifest_objects(listed.iter().map(|(r, s, _)| (r.as_str(), *s)));
    let tags: BTreeMap<(u64, u64), (u64, Option<String>)> = listed
        .into_iter()
        .filter_map(|(relative, size, tag)| {
            parse_part(&relative).map(|(generation, offset)| ((generation, offset), (size, tag)))
        })
        .collect();
    let (generation, end, list) = current_parts(&parts, tier)?;
    let name = layout::generation_name(generation);
    let kept = cached_prefix(&cache, &dir.join(&name), generation, &tags, end);
    let spans = spans.get(&generation);
    let from_bucket = || fetch_from(tier, generation, &list, spans, Vec::new(), end);
    let reused = !kept.is_empty();
    let mut manifest = if reused {
        fetch_from(tier, generation, &list, spans, kept, end)?
    } else {
        from_bucket()?
    };
    if let Err(e) = replay_whole(tier, generation, &manifest) {
        if !reused {
            return Err(e);
        }
        // The cached bytes were damaged on this machine: the bucket's alone decide.
        tracing::warn!(
            "{}: the cached manifest did not replay ({e}); fetched again",
            cache.display()
        );
        manifest = from_bucket()?;
        replay_whole(tier, generation, &manifest)?;
    }
    // Written whole under a name of this process's, then renamed into place: readers of the
    // same cache never see a part of it. The list of parts it holds is written after it, so
    // a list that does not add up to the file is never trusted.
    let staged = tmp.join(format!("{name}.{}", std::process::id()));
    durable::write_synced(&disk, &staged, &manifest)?;
    durable::rename(&disk, &staged, &dir.join(&name))?;
    let held = CachedParts {
        generation,
        parts: list
            .iter()
            .filter(|&&(offset, _)| offset < end)
            .filter_map(|&(offset, len)| {
                let tag = tags.get(&(generation, offset))?.1.clone()?;
                Some((offset, len, tag))
            })
            .collect(),
    };
    let staged = tmp.join(format!("{PARTS_FILE}.{}", std::process::id()));
    let text = serde_json::to_vec(&held).map_err(|e| ArchiveError::Replica(e.to_string()))?;
    durable::write_synced(&disk, &staged, &text)?;
    durable::rename(&disk, &staged, &cache.join(PARTS_FILE))?;
    for old in durable::list_files(&dir)? {
        if generation_of(&old).is_some_and(|g| g < generation) {
            let _ = durable::remove(&disk, &old);
        }
    }
    let cache_bytes = config
        .cache_size
        .unwrap_or(crate::archive::io::cache::DEFAULT_CACHE_BYTES);
    let ranges = (cache_bytes > 0).then(|| {
        std::sync::Arc::new(crate::archive::io::cache::RangeCache::new(
            cache.join(RANGES_DIR),
            cache_bytes,
        ))
    });
    // The files are the bucket's: the open reads a file recorded by its row groups (format
    // 11) from there, through the same cache.
    let mut opening = config.clone().read_only(true);
    opening.files_in = Some((tier.clone(), ranges));
    let mut archive = Archive::open(&cache, opening)?;
    for stream in archive.commit.state_mut().streams.values_mut() {
        for file in stream.files.iter_mut().chain(stream.levels.iter_mut()) {
            if file.cold.is_none() {
                file.cold = Some(tier.object_url(&file.path));
            }
        }
    }
    archive.origin = Some(tier.clone());
    Ok(archive)
}

/// The file in a URL's cache directory that lists the parts its manifest was assembled from.
const PARTS_FILE: &str = "parts.json";
/// The directory in a URL's cache directory that holds cached ranges of its files.
const RANGES_DIR: &str = "ranges";

/// The parts a cached manifest was assembled from: `(offset, length, entity tag)`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct CachedParts {
    generation: u64,
    parts: Vec<(u64, u64, String)>,
}

/// The bytes of `generation` the cache at `cache` holds (in `path`) and may be trusted with:
/// every part they were assembled from is still listed with the same length and entity tag,
/// the parts run from offset 0 without a gap, and the file holds exactly them. Anything else
/// (no list, another generation, a part replaced, a store that gives no tags) trusts nothing.
fn cached_prefix(
    cache: &Path,
    path: &Path,
    generation: u64,
    tags: &BTreeMap<(u64, u64), (u64, Option<String>)>,
    end: u64,
) -> Vec<u8> {
    let Ok(text) = local::read(&cache.join(PARTS_FILE)) else {
        return Vec::new();
    };
    let Ok(held) = serde_json::from_slice::<CachedParts>(&text) else {
        return Vec::new();
    };
    let mut at = 0;
    for (offset, len, tag) in &held.parts {
        let listed = tags.get(&(generation, *offset));
        if held.generation != generation
            || *offset != at
            || listed.map(|(l, t)| (*l, t.as_deref())) != Some((*len, Some(tag.as_str())))
        {
            return Vec::new();
        }
        at += len;
    }
    if at > end {
        return Vec::new();
    }
    match local::read(path) {
        Ok(bytes) if bytes.len() as u64 == at => bytes,
        _ => Vec::new(),
    }
}

/// Whether the replica in `tier` holds more than the manifest generation `generation` up to
/// byte `len` (what a read-only open of it replayed): a part past `len`, or a newer
/// generation. A bucket that does not answer proves no move (logged).
pub(super) fn bucket_moved(tier: &ColdTier, generation: u64, len: u64) -> bool {
    match bucket_parts(tier) {
        Ok(parts) => match bucket_current(&parts) {
            Ok(now) => now.is_some_and(|now| now > (generation, len)),
            // The state already read stays a whole commit; the damage is said, and every
            // open from the bucket refuses it.
            Err(e) => {
                tracing::warn!("{}: {e}", tier.url());
                false
            }
        },
        Err(e) => {
            tracing::warn!("asking {} whether its manifest moved: {e}", tier.url());
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_that_knows_what_the_bucket_holds_reads_only_the_bytes_after_it() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(root.path().join(MANIFEST_DIR)).expect("manifest dir");
        let path = root
            .path()
            .join(MANIFEST_DIR)
            .join(layout::generation_name(3));
        let records: Vec<Vec<u8>> = (0..3)
            .map(|i| frame::encode(format!("{{\"record\":{i}}}").as_bytes()))
            .collect();
        local::replace(&path, &records.concat()).expect("write");
        let held = (records[0].len() + records[1].len()) as u64;
        let len = held + records[2].len() as u64;
        let committed = Committed {
            generation: 3,
            len,
            files: Vec::new(),
            streams: Vec::new(),
            next_name: 0,
        };
        // What the bucket holds is not read again: damage there goes unseen by this pass,
        // which proves it read only the bytes after it.
        let mut bytes = local::read(&path).expect("read");
        bytes[0] ^= 0xff;
        local::replace(&path, &bytes).expect("write");
        let log = committed
            .clone()
            .read(root.path(), Some((3, held, 2)))
            .expect("read");
        assert_eq!((log.base, log.len(), log.records), (held, len, 3));
        assert_eq!(log.bytes, records[2]);
        // Bytes before `base` are read from the file when a part or a consolidation needs them.
        assert_eq!(log.range(root.path(), (1, len)).expect("range"), bytes[1..]);
        // Another generation held, or nothing remembered: the whole prefix is read (and the
        // damaged first record then counts no record at all).
        for held in [Some((2, held, 2)), None] {
            let log = committed.clone().read(root.path(), held).expect("read");
            assert_eq!((log.base, log.len(), log.records), (0, len, 0));
        }
        // A file shorter than the writer committed is refused.
        let short = Committed {
            len: len + 1,
            ..committed
        };
        assert!(short.read(root.path(), Some((3, held, 2))).is_err());
    }

    #[test]
    fn upload_batches_bound_files_and_bytes_and_keep_every_file_in_order() {
        let small: Vec<(&str, u64)> = (0..40).map(|_| ("f", 1)).collect();
        let batches = upload_batches(&small);
        assert_eq!(
            batches.iter().map(|b| b.len()).collect::<Vec<_>>(),
            [16, 16, 8]
        );
        // A file larger than a batch's bytes goes alone; the bytes bound cuts the rest.
        let big = [
            ("a", 1),
            ("b", BATCH_BYTES + 1),
            ("c", BATCH_BYTES / 2),
            ("d", BATCH_BYTES / 2),
            ("e", 1),
        ];
        let batches = upload_batches(&big);
        let names: Vec<Vec<&str>> = batches
            .iter()
            .map(|b| b.iter().map(|(n, _)| *n).collect())
            .collect();
        assert_eq!(names, [vec!["a"], vec!["b"], vec!["c", "d"], vec!["e"]]);
        assert!(upload_batches(&[]).is_empty());
    }

    #[test]
    fn part_names_round_trip_and_others_are_not_parts() {
        assert_eq!(
            part_name(3, 1234),
            "manifest/gen-000000000003/00000000000000001234.part"
        );
        assert_eq!(parse_part(&part_name(3, 1234)), Some((3, 1234)));
        for other in [
            "manifest/gen-3/00000000000000001234.part",
            "manifest/gen-000000000003/1234.part",
            "manifest/gen-000000000003.log",
            "streams/x/rows/000000000001.parquet",
        ] {
            assert_eq!(parse_part(other), None, "{other}");
        }
    }

    #[test]
    fn an_open_reads_the_consolidations_that_reach_furthest_on_part_boundaries() {
        let listed = [
            (part_name(2, 0), 10),
            (part_name(2, 10), 5),
            (part_name(2, 15), 7),
            (part_name(2, 22), 3),
            (whole_name(2, 10), 10),
            (whole_name(2, 15), 15),
            (span_name(2, (15, 25)), 10),
            // Not a consolidation: its size is not its range's.
            (whole_name(2, 22), 21),
            (span_name(2, (10, 22)), 11),
            (whole_name(1, 40), 40),
            ("manifest/gen-000000000002/15.whole".to_owned(), 15),
            (
                "manifest/gen-000000000002/00000000000000000000-00000000000000000015.span"
                    .to_owned(),
                15,
            ),
        ];
        let (parts, spans) = manifest_objects(listed.iter().map(|(r, s)| (r.as_str(), *s)));
        assert_eq!(parts[&2], vec![(0, 10), (10, 5), (15, 7), (22, 3)]);
        assert_eq!(spans[&2], BTreeSet::from([(0, 10), (0, 15), (15, 25)]));
        let part = |offset, len| Piece {
            range: (offset, offset + len),
            span: false,
        };
        let span = |range| Piece { range, span: true };
        assert_eq!(
            cover(&parts[&2], spans.get(&2), 0, 25),
            Some(vec![span((0, 15)), span((15, 25))])
        );
        // Beyond what the parts hold, a consolidation is not used.
        assert_eq!(
            cover(&parts[&2], spans.get(&2), 0, 22),
            Some(vec![span((0, 15)), part(15, 7)])
        );
        assert_eq!(
            cover(&parts[&2], spans.get(&2), 0, 12),
            None,
            "12 is no part boundary"
        );
        assert_eq!(
            cover(&parts[&2], None, 10, 22),
            Some(vec![part(10, 5), part(15, 7)])
        );
        assert_eq!(cover(&parts[&2], None, 22, 22), Some(vec![]));
        // A gap in the parts.
        assert_eq!(cover(&[(0, 10), (12, 3)], None, 0, 15), None);
        assert_eq!(parse_whole(&whole_name(7, 99)), Some((7, 99)));
        assert_eq!(parse_part(&whole_name(7, 99)), None);
        assert_eq!(parse_span(&span_name(7, (3, 99))), Some((7, (3, 99))));
        assert_eq!(span_name(7, (0, 99)), whole_name(7, 99));
        assert_eq!(parse_span(&part_name(7, 99)), None);
    }

    /// Appends `n` parts of uneven sizes as passes do, writing the consolidations each pass
    /// finds due (all of them, or with `lost` saying which pass's last one failed), and
    /// answers the parts, the consolidations and the bytes they uploaded again.
    fn passes(
        n: u64,
        size: impl Fn(u64) -> u64,
        lost: impl Fn(u64) -> bool,
    ) -> (PartList, BTreeSet<(u64, u64)>, u64) {
        let mut parts = PartList::new();
        let mut spans = Spans::new();
        let mut uploaded = 0;
        let mut end = 0;
        for i in 1..=n {
            let len = size(i);
            parts.push((end, len));
            end += len;
            while let Some(range) = due_consolidation(&parts, spans.get(&0), end, SPAN_BYTES) {
                if lost(i) {
                    break;
                }
                uploaded += range.1 - range.0;
                spans.entry(0).or_default().insert(range);
            }
        }
        (parts, spans.remove(&0).unwrap_or_default(), uploaded)
    }

    #[test]
    fn consolidations_keep_an_open_short_and_upload_each_byte_a_few_times() {
        let uneven = |i: u64| (i * 7919) % 97 + 1;
        let digit_sum = |mut n: u64| {
            let mut sum = 0;
            while n > 0 {
                sum += n % FANOUT as u64;
                n /= FANOUT as u64;
            }
            sum as usize
        };
        for n in [1, 15, 16, 17, 255, 256, 257, 1000, 4096, 5000] {
            let (parts, spans, uploaded) = passes(n, uneven, |_| false);
            let end = parts.last().map_or(0, |&(o, l)| o + l);
            let pieces = cover(&parts, Some(&spans), 0, end).expect("a cover");
            // A base-16 counter: an open reads one object per unit of each digit of n.
            assert_eq!(pieces.len(), digit_sum(n), "{n} parts");
            assert_eq!(pieces.iter().map(|p| p.len()).sum::<u64>(), end);
            // Each byte goes up again once per power of 16 it was merged into.
            let levels = (n as f64).log(FANOUT as f64).floor() as u64;
            assert!(
                uploaded <= levels * end,
                "{n} parts: {uploaded} bytes again, {end} in all"
            );
        }
        // Consolidations lost to failed passes leave a longer cover, never a wrong one.
        let (parts, spans, _) = passes(3000, uneven, |i| i % 7 == 0);
        let end = parts.last().map_or(0, |&(o, l)| o + l);
        let pieces = cover(&parts, Some(&spans), 0, end).expect("a cover");
        let mut at = 0;
        for piece in &pieces {
            assert_eq!(piece.range.0, at);
            at = piece.range.1;
        }
        assert_eq!(at, end);
        assert!(pieces.len() <= 15 * 3, "{} pieces", pieces.len());
        // Parts of a mebibyte merge sixteen at a time, and no further: a reader of 1,000 of
        // them reads 62 objects of 16 MiB and 8 parts, and each byte went up twice in all.
        let (parts, spans, uploaded) = passes(1000, |_| 1 << 20, |_| false);
        let end = 1000 << 20;
        let pieces = cover(&parts, Some(&spans), 0, end).expect("a cover");
        assert_eq!(pieces.len(), 1000 / 16 + 1000 % 16);
        assert_eq!(uploaded, 1000 / 16 * (16 << 20));
        // Parts of more than 16 MiB are never merged.
        let (_, spans, uploaded) = passes(100, |_| 17 << 20, |_| false);
        assert!(spans.is_empty() && uploaded == 0);
    }

    #[test]
    fn only_delta_log_objects_are_carried() {
        for name in [
            "streams/s/rows/_delta_log/00000000000000000004.json",
            "streams/s/rows/_delta_log/00000000000000000010.checkpoint.parquet",
            "streams/s/rows/_delta_log/00000000000000000010.crc",
            "streams/s/rows/_delta_log/_last_checkpoint",
        ] {
            assert!(is_delta_log_object(name), "{name}");
        }
        for name in [
            "streams/s/rows/_delta_log/00000000000000000004.json#1",
            "streams/s/rows/_delta_log/.00000000000000000004.json.tmp",
            "streams/s/rows/_delta_log/4.json",
            "streams/s/rows/_delta_log/0000000000000000000x.json",
            "streams/s/rows/_delta_log/00000000000000000004.txt",
        ] {
            assert!(!is_delta_log_object(name), "{name}");
        }
    }

    #[test]
    fn prefixes_overlap_when_one_holds_the_other() {
        assert!(overlaps("s3://b/p", "s3://b/p/"));
        assert!(overlaps("s3://b/p/cold", "s3://b/p"));
        assert!(overlaps("s3://b/p", "s3://b/p/cold"));
        assert!(!overlaps("s3://b/p", "s3://b/p2"));
        assert!(!overlaps("s3://b/p", "s3://c/p"));
    }

    #[test]
    fn the_bucket_holds_the_run_of_parts_from_zero_and_a_gap_in_it_is_damage() {
        let mut parts = Parts::new();
        assert_eq!(bucket_current(&parts), Ok(None));
        // An older generation may be half deleted (its part 0 first): the newest serves.
        parts.insert(1, vec![(10, 5)]);
        parts.insert(2, vec![(0, 7), (7, 3), (10, 4)]);
        assert_eq!(bucket_current(&parts), Ok(Some((2, 14))));
        // A part past a gap, or a newest generation without its part 0, is a lost object:
        // never the shorter history before it, nor the older generation.
        parts.insert(2, vec![(0, 7), (7, 3), (20, 4)]);
        let gap = bucket_current(&parts).expect_err("a gap");
        assert!(gap.contains("lacks the part at byte 10"), "{gap}");
        parts.insert(2, vec![(0, 7)]);
        parts.insert(3, vec![(5, 4)]);
        let headless = bucket_current(&parts).expect_err("no part 0");
        assert!(
            headless.contains("generation 3 lacks the part at byte 0"),
            "{headless}"
        );
        assert_eq!(held(&[]), (0, None));
    }
}
