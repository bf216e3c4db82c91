//! Every name the archive gives a file or directory, in one place (see `docs/format.md`,
//! "Layout"). The bottom layer: it names things and touches nothing.
//!
//! ```text
//! <root>/LOCK                         held by the one writer
//! <root>/OWNER                        the token that claims a cold tier's prefix
//! <root>/REPLICA                      the bucket prefix the archive replicates to
//! <root>/manifest/gen-NNNNNNNNNNNN.log the manifest's generations (the commit point)
//! <root>/streams/<id>/rows/NNNNNNNNNNNN.parquet   data files
//! <root>/streams/<id>/levels/NNNNNNNNNNNN.parquet level files
//! <root>/streams/<id>/{rows,levels}/_delta_log/   the Delta logs, derived
//! <root>/.tmp/                        files being written
//! <root>/.quarantine/<n>/             evidence an open kept, never deleted
//! ```

use std::path::Path;

/// The directory of the manifest's generations.
pub const MANIFEST_DIR: &str = "manifest";
/// The directory of the streams' files.
pub const STREAMS_DIR: &str = "streams";
/// Where files are written before they are renamed into place.
pub const TMP_DIR: &str = ".tmp";
/// Where evidence is kept.
pub const QUARANTINE_DIR: &str = ".quarantine";
/// The writer's lock file.
pub const LOCK_FILE: &str = "LOCK";
/// The token that claims a cold tier's prefix: kept at the root, and as an object at the
/// prefix (see `docs/format.md`, "Who owns a cold prefix").
pub const OWNER_FILE: &str = "OWNER";
/// The URL of the bucket prefix the archive replicates to (one line), once declared (see
/// `docs/format.md`, "Replicas").
pub const REPLICA_FILE: &str = "REPLICA";
/// The directory of a table's Delta log.
pub const LOG_DIR: &str = "_delta_log";

/// The file name of manifest generation `n`.
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

/// The file name of data file number `name`.
pub fn data_file_name(name: u64) -> String {
    format!("{name:012}.parquet")
}

/// The name number a data file name carries.
pub fn parse_data_file_name(file: &str) -> Option<u64> {
    let digits = file.strip_suffix(".parquet")?;
    (digits.len() == 12 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The data file number a path names, if its file name is a data file's.
pub fn numbered(path: &Path) -> Option<u64> {
    parse_data_file_name(path.file_name()?.to_str()?)
}

/// The generation a path names, if its file name is a generation's.
pub fn generation_of(path: &Path) -> Option<u64> {
    parse_generation(path.file_name()?.to_str()?)
}

/// `path` relative to `root`, with `/` separators (how reports and records name files).
pub fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}
