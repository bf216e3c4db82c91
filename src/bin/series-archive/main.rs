//! `series-archive`: ingest, read, inspect and verify an archive from the command line.
//!
//! Exit codes: 0 success; 1 an error (bad input, I/O, a damaged manifest); 2 a usage error;
//! 3 a refusal of the serving contract (`unserved`, `floor`, `unreadable`); 4 `verify` found
//! damage.

/// Prints a line to standard output. A failed write never passes for success: a reader
/// ends at once (exit 141 quietly for a closed pipe, `| head`; exit 1 naming the error
/// otherwise), a writer runs to its end and then fails saying what it did (`output::line`).
macro_rules! out {
    () => {
        $crate::output::line(format_args!(""))
    };
    ($($t:tt)*) => {
        $crate::output::line(format_args!($($t)*))
    };
}

/// mimalloc, not the system allocator: a barrier of many tracks allocates and frees small
/// buffers per track, which glibc's malloc answered by consolidating free chunks for a third
/// of an ingest's time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod demo;
mod eventd;
mod input;
mod lifecycle;
mod output;
mod replica;
mod serve;
mod spool;
mod survey;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use series_archive::archive::delta::Table;
use series_archive::archive::{reader, Archive, ArchiveError, Config, ReadError, StreamSpec};
use series_archive::Position;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "series-archive", version, about = "Durable, queryable stream history as plain Parquet", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The cold tier (s3://bucket/prefix, file:///dir/prefix) for commands that write: a
    /// writable open removes objects under it that no record names, and `offload` moves files
    /// there. Reads need no flag: the manifest records each cold file's URL. Credentials,
    /// region and endpoint come from the standard AWS environment variables.
    #[arg(long, global = true, value_name = "URL")]
    cold: Option<String>,
    /// After the command, print to stderr the requests it made per tier: local reads, and
    /// each cold tier's GETs, PUTs, DELETEs and LISTs (what a read or a move costs).
    #[arg(long, global = true)]
    requests: bool,
    /// For commands that seal barriers (ingest, import-eventd) on an archive with a replica:
    /// each barrier waits until the bucket holds every commit but the newest N (0: the
    /// barrier itself), so a lost machine loses at most N commits. Without it the replica
    /// follows on a thread of its own and never holds a barrier up.
    #[arg(long, global = true, value_name = "N")]
    max_lag: Option<u64>,
    /// How long a barrier waits for the bucket under --max-lag before the command fails
    /// (what it committed stays durable locally), in seconds.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 60.0)]
    max_lag_wait: f64,
    /// For reads of an archive by its URL (s3://…, file://…): the directory that keeps what
    /// they fetched from the bucket, a directory per URL beneath it: the bucket's manifest
    /// (the next open fetches only what was replicated since) and the footers and row groups
    /// read (bounded by --cache-size). Default: beneath the system's temporary directory.
    #[arg(long, global = true, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// The most bytes of footers and row groups the cache of a URL keeps (least recently used
    /// removed first; 0 keeps none, so every read goes to the bucket): bytes or with a unit
    /// (64MiB, 1GiB).
    #[arg(long, global = true, value_name = "SIZE", default_value = "256MiB", value_parser = series_archive::archive::lifecycle::parse_size)]
    cache_size: u64,
}

/// Where reads of an archive by its URL keep what they fetch (`--cache`, `--cache-size`).
static CACHE: std::sync::OnceLock<(Option<PathBuf>, u64)> = std::sync::OnceLock::new();

/// What `survey` and `fold` read: a stream, a track selection and an axis range [from, to).
#[derive(clap::Args)]
struct AxisRange {
    /// The archive directory.
    archive: PathBuf,
    /// The stream id.
    #[arg(long)]
    stream: String,
    /// Track labels, outermost first: the whole track or a prefix of it.
    #[arg(long, num_args = 1..)]
    track: Vec<String>,
    /// First axis value (inclusive); the stream's first when absent.
    #[arg(long)]
    from: Option<u64>,
    /// End axis value (exclusive); past the stream's last when absent.
    #[arg(long)]
    to: Option<u64>,
}

#[derive(Subcommand)]
enum Command {
    /// Ingest CSV, JSON-lines or Parquet files into a stream, sealing on a row cadence.
    ///
    /// The whole input is checked before anything is staged: a bad file leaves the archive
    /// exactly as it was. One line per barrier is printed as soon as it is durable.
    Ingest {
        /// The archive directory (created when absent).
        archive: PathBuf,
        /// The stream id.
        #[arg(long)]
        stream: String,
        /// Track columns, outermost first (comma-separated, at most four).
        #[arg(long, value_delimiter = ',', num_args = 1..)]
        track: Vec<String>,
        /// The axis column (an unsigned integer coordinate).
        #[arg(long)]
        axis: String,
        /// A column holding each row's position; without it rows get consecutive positions
        /// after the stream's watermark.
        #[arg(long)]
        position: Option<String>,
        /// The level ladder for a new stream: BASE,FACTOR,LEVELS (cells BASE×FACTOR^k axis
        /// units wide), or `none`. The default suits an ordinal axis; for nanosecond
        /// timestamps try 1000000000,8,8.
        #[arg(long)]
        ladder: Option<String>,
        /// Seal a barrier every N staged rows (and once at the end).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
        seal_rows: u64,
        /// Column types that override what the first file's reader infers, for a new stream:
        /// COL:TYPE,… where TYPE is text, int (Int64), uint (UInt64), float (Float64), bool,
        /// or any Arrow type name (Int32, Float32, Utf8, …). Track columns of a CSV are text
        /// unless named here.
        #[arg(long, value_parser = input::parse_types)]
        types: Vec<input::Types>,
        /// Checked input is held in memory up to this size, then kept in a temporary file
        /// (under TMPDIR) until it is staged: the input is read once.
        #[arg(long, default_value = "1GiB", value_parser = series_archive::archive::lifecycle::parse_size)]
        memory: u64,
        /// Keep the barrier files as sealed. By default, ingest ends with the automatic
        /// maintenance `compact --auto` runs: a stream past its compaction threshold is
        /// compacted before ingest exits, so the next survey reads few files.
        #[arg(long)]
        no_compact: bool,
        /// Run that maintenance during the ingest too, whenever the stream's live data
        /// files hold more than N track slices (a barrier holds one per track it
        /// delivered; each costs about 150 bytes of memory while it is live). A fleet's
        /// long ingest then stays within memory; 0: only at the end. With --no-compact,
        /// passing it is only warned of, once.
        #[arg(long, default_value_t = 4_000_000)]
        slice_budget: u64,
        /// Input files (.csv with a header, .jsonl/.ndjson, .parquet) or directories of them.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Import an eventd metric store (SQLite) whole: counters, gauges and histograms become
    /// the streams `counters`, `gauges` and `histograms` (a series is a track), rollups the
    /// stream `rollups`.
    ///
    /// The database is opened read-only and checked before anything is written: an unknown
    /// schema version or a sample no track could hold is refused, and nothing is touched.
    /// Samples go in eventd's query order, (timestamp, id), in barriers that end between
    /// timestamps, so a killed import run again resumes where it stopped, without duplicates.
    /// The mapping: docs/eventd.md.
    ImportEventd {
        /// The eventd metric database (metrics.db).
        database: PathBuf,
        /// The archive directory (created when absent).
        archive: PathBuf,
        /// Seal a barrier every N samples (at the next timestamp change).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
        seal_rows: u64,
        /// The level ladder of new sample streams: BASE,FACTOR,LEVELS, BASE in nanoseconds or
        /// as a duration. Default 60s,8,8 (cells as wide as eventd's finest rollup window).
        #[arg(long, value_parser = series_archive::eventd::parse_ladder)]
        ladder: Option<series_archive::archive::Ladder>,
        /// Keep the barrier files as sealed (skip the automatic compaction at the end).
        #[arg(long)]
        no_compact: bool,
    },
    /// Print raw rows of a stream in publish order.
    Rows {
        /// The archive directory.
        archive: PathBuf,
        /// The stream id.
        #[arg(long)]
        stream: String,
        /// Track labels, outermost first: the whole track or a prefix of it.
        #[arg(long, num_args = 1..)]
        track: Vec<String>,
        /// First position (inclusive).
        #[arg(long)]
        from: Option<u64>,
        /// End position (exclusive).
        #[arg(long)]
        to: Option<u64>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = output::Format::Csv)]
        format: output::Format,
        /// Write to this file instead of standard output (never inside the archive; an
        /// existing file only with --force).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace an existing --out file.
        #[arg(long, requires = "out")]
        force: bool,
    },
    /// Display buckets (true M4 per measured field) of an axis range under a point budget.
    ///
    /// Answers from the finest level whose cells over [from, to) fit budget / (4 × fields)
    /// buckets per field; whole cells, never more than the budget.
    Survey {
        #[command(flatten)]
        range: AxisRange,
        /// Point budget: four points per bucket.
        #[arg(long)]
        budget: usize,
        /// Print JSON (buckets with what was answered: level, cell width, span).
        #[arg(long, conflicts_with_all = ["csv", "plot"])]
        json: bool,
        /// Print CSV, one bucket per line.
        #[arg(long, conflicts_with = "plot")]
        csv: bool,
        /// Draw each field's envelope (min/max band, first/last line) to a .png or .svg file.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// One statistic per measured field over an axis range [from, to).
    ///
    /// min, max, mean, sum and count fold level-0 cells (whole cells the range touches);
    /// p0..p100 scan the raw values of exactly the range (DuckDB's quantile_disc).
    Fold {
        #[command(flatten)]
        range: AxisRange,
        /// min, max, mean, sum, count or p0..p100 (the median is p50).
        #[arg(long)]
        aggregate: series_archive::Aggregate,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show streams, tracks, rows, files, bytes, watermarks, floors and quarantine.
    Inspect {
        /// The archive directory.
        archive: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check every digest of every committed file; exit 4 naming what is damaged.
    Verify {
        /// The archive directory.
        archive: PathBuf,
    },
    /// List exactly the committed data files of a stream, one path per line.
    ///
    /// Read through the stream's Delta log (what DuckDB, Polars and Spark read), checked
    /// level with the manifest: a log that is behind is refused (exit 1) with the command
    /// that writes it anew. Paths in name order; a cold file is its URL.
    Files {
        /// The archive directory.
        archive: PathBuf,
        /// The stream id.
        #[arg(long)]
        stream: String,
        /// The committed level files instead of the data files.
        #[arg(long)]
        levels: bool,
        /// Only the level files holding this level: every barrier's partials and the level
        /// tables of this level, in the order their cells merge (implies --levels and
        /// --manifest: the Delta log knows no merge order).
        #[arg(long, value_name = "K")]
        level: Option<usize>,
        /// List from the manifest instead of the Delta log (level files in the order their
        /// cells merge: publish order; docs/format.md, level tables).
        #[arg(long)]
        manifest: bool,
    },
    /// Write the streams' Delta logs anew from the manifest.
    ///
    /// Each stream has two Delta tables, STREAM/rows and STREAM/levels under
    /// ARCHIVE/streams/, kept level with the manifest by every commit. Run this after a log
    /// was deleted or damaged, or after writing with the log turned off. Files that still
    /// hold retired row groups are rewritten first, so the log shows exactly what `rows`
    /// serves.
    Publish {
        /// The archive directory.
        archive: PathBuf,
        /// Only these streams (repeatable; default: every stream).
        #[arg(long)]
        stream: Vec<String>,
    },
    /// Apply lifetimes now: retire raw rows and level cells past them, and idle tracks whole.
    ///
    /// Floors only move forward and are recorded before any file is deleted. A duration or
    /// size lifetime never retires a track's newest row group; only --idle retires a track
    /// whole. Lifetimes are policy, not recorded: pass them each time (or declare them in
    /// code with `Config::retention`).
    Sweep {
        /// The archive directory.
        archive: PathBuf,
        /// The stream id.
        #[arg(long)]
        stream: String,
        #[command(flatten)]
        lifetimes: lifecycle::Lifetimes,
        /// Judge ages at this instant (ns since the Unix epoch) instead of now.
        #[arg(long)]
        now: Option<u64>,
        /// Show what would be retired; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Retire tracks whole: nothing of them is served afterwards; reads answer their floor.
    Retire {
        /// The archive directory.
        archive: PathBuf,
        /// The stream id.
        #[arg(long)]
        stream: String,
        /// Track labels, outermost first: a prefix retires every track beneath it.
        #[arg(long, num_args = 1..)]
        track: Vec<String>,
        /// Retire every track of the stream (instead of naming one).
        #[arg(long, conflicts_with = "track")]
        all_tracks: bool,
    },
    /// Rewrite small data files into packed files of about --target-size, merge level partials into whole cells, and summarise deferred levels once they are worth their bytes.
    ///
    /// Equal row for row and cell for cell; one manifest record swaps the files, and the
    /// replaced ones are deleted only after it is durable.
    Compact {
        /// The archive directory.
        archive: PathBuf,
        /// Only these streams (every stream when absent).
        #[arg(long, num_args = 1..)]
        stream: Vec<String>,
        /// Target size of a compacted data file (e.g. 64MiB): each packs many tracks; a track
        /// larger than this gets files of its own.
        #[arg(long, default_value = "64MiB", value_parser = series_archive::archive::lifecycle::parse_size)]
        target_size: u64,
        /// Rows per row group inside a compacted file, at most.
        #[arg(long, default_value_t = 131_072, value_parser = clap::value_parser!(u64).range(1..))]
        group_rows: u64,
        /// Only when a stream is past the automatic thresholds (16 files to rewrite).
        #[arg(long)]
        auto: bool,
    },
    /// Move data files to the cold tier (S3 and the like); every read keeps answering the
    /// same, from there. Level files stay local.
    ///
    /// Upload, confirm every digest read back, one manifest record, then the local copies
    /// are deleted. Without --cold, an archive with a replica evicts instead: one replication
    /// pass, then the local copies of the files the replica holds (every digest read back
    /// from it) are dropped, with no second upload, and are read from the replica from then
    /// on. Credentials, region and endpoint come from the standard AWS environment variables
    /// (AWS_ACCESS_KEY_ID, AWS_REGION, AWS_ENDPOINT, ...).
    Offload {
        /// The archive directory.
        archive: PathBuf,
        /// Move files sealed longer ago than this (e.g. 7d).
        #[arg(long, value_name = "AGE", value_parser = series_archive::archive::lifecycle::parse_duration)]
        older_than: Option<std::time::Duration>,
        /// Move the oldest files until at most this many bytes of data stay local (e.g. 10GiB).
        #[arg(long, value_name = "SIZE", value_parser = series_archive::archive::lifecycle::parse_size)]
        local_budget: Option<u64>,
        /// Show what would move; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Judge ages at this time (ns since the Unix epoch) instead of now.
        #[arg(long)]
        now: Option<u64>,
    },
    /// Replicate the archive to a bucket prefix that becomes a whole archive: every committed
    /// data and level file, the Delta logs and the manifest, in an order that keeps the bucket
    /// consistent as of some commit.
    ///
    /// With URL (s3://bucket/prefix or file:///dir), declares the replica once (recorded in
    /// ARCHIVE/REPLICA; the prefix is claimed by the archive's OWNER token), then every command
    /// that commits (ingest, compact, sweep, retire, offload, checkpoint, repair) replicates
    /// at its end without a flag. Without URL, one pass to the declared replica. Runs beside a
    /// writer (it reads as a reader does); `restore` brings the bucket back as an archive.
    Replicate {
        /// The archive directory.
        archive: PathBuf,
        /// The bucket prefix to declare (only the first time).
        url: Option<String>,
        /// Say how far behind the replica is; upload nothing.
        #[arg(long, conflicts_with = "follow")]
        status: bool,
        /// Keep replicating each new commit until stopped (beside a long-running writer).
        #[arg(long)]
        follow: bool,
        /// With --follow: seconds between looks at the manifest.
        #[arg(long, default_value_t = 1.0, value_parser = positive_seconds)]
        every: f64,
        /// One JSON object per pass (or the status) instead of a line of text.
        #[arg(long)]
        json: bool,
    },
    /// Make a writable archive in DIR from a replica in a bucket (after a lost disk, or to
    /// move the archive): the manifest as of the bucket's last commit, every file it names,
    /// the Delta logs; then opened and verified. The restored archive replicates to the same
    /// prefix, and the archive it came from is fenced (its next replication is refused).
    Restore {
        /// The replica's prefix (s3://bucket/prefix or file:///dir).
        url: String,
        /// A new, empty directory.
        dir: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start a new manifest generation from a snapshot of the live state.
    Checkpoint {
        /// The archive directory.
        archive: PathBuf,
    },
    /// Get past a manifest damaged mid-log: show what would be lost, then (with --yes) start
    /// a new generation from the trusted prefix, keeping the damaged generation and every
    /// file only its lost records named in .quarantine/. Never deletes data.
    Repair {
        /// The archive directory.
        archive: PathBuf,
        /// Carry out the repair shown (without it, nothing is changed).
        #[arg(long)]
        yes: bool,
    },
    /// List the evidence recovery and repair kept in .quarantine/, and purge old evidence.
    Quarantine {
        /// The archive directory.
        archive: PathBuf,
        /// Delete evidence kept longer ago than this (`30d`, `12h`); needs the write lock.
        #[arg(long, value_name = "AGE", value_parser = series_archive::archive::lifecycle::parse_duration)]
        purge_older_than: Option<std::time::Duration>,
    },
    /// Serve the archive's reads over HTTP: a JSON API (streams, survey, fold, rows, watch)
    /// and a history viewer page at `/`.
    ///
    /// Read-only, beside any writer: it never takes the writer's lock and sees each barrier
    /// as it commits. Binds to loopback unless given --token. The API: docs/serve.md.
    Serve(serve::Options),
    /// Run a synthetic capture workload (runs × probes, sealed on a cadence) and read it back.
    Demo {
        /// The archive directory (created, or appended to when it already holds the demo).
        dir: PathBuf,
        /// Runs (outer track component).
        #[arg(long, default_value_t = 4)]
        runs: usize,
        /// Probes per run (inner track component).
        #[arg(long, default_value_t = 8)]
        probes: usize,
        /// Ticks; each tick publishes one row per probe.
        #[arg(long, default_value_t = 20_000)]
        ticks: u64,
        /// Seal every this many ticks.
        #[arg(long, default_value_t = 1_000)]
        cadence: u64,
        /// Keep the barrier files as sealed (skip the compaction at the end).
        #[arg(long)]
        no_compact: bool,
    },
}

/// A failure with the exit code it maps to.
pub(crate) struct Failure {
    code: u8,
    message: String,
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure {
            code: 1,
            message: e.to_string(),
        }
    }
}

pub(crate) fn refused(e: ReadError) -> Failure {
    match e {
        ReadError::Refused(r) => Failure {
            code: 3,
            message: format!("refused: {r}"),
        },
        ReadError::Stored(e) => Failure {
            code: 3,
            message: format!("refused: {}", series_archive::BeneathWindow::from(e)),
        },
        e @ ReadError::Floor { .. } => Failure {
            code: 3,
            message: format!("refused: {e}"),
        },
        other => Failure {
            code: 1,
            message: other.to_string(),
        },
    }
}

/// The requests of every archive handle this command opens, summed for `--requests`: every
/// configuration the command builds shares it (the command is the process).
static REQUESTS: std::sync::LazyLock<series_archive::archive::RequestLog> =
    std::sync::LazyLock::new(series_archive::archive::RequestLog::new);

/// A positive, finite number of seconds.
fn positive_seconds(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or_else(|| format!("{text:?} is not a positive number of seconds"))
}

/// A configuration for one of this command's archive handles.
/// The configuration every command starts from. Replication runs at the end of each command
/// that commits ([`replica::after_commit`]); commands that seal many barriers turn the
/// archive's own replicator on ([`replica::replicating`]).
pub(crate) fn config() -> Config {
    let config = Config::new().requests(REQUESTS.clone()).replication(false);
    match CACHE.get() {
        Some((dir, size)) => {
            let config = config.cache_size(*size);
            match dir {
                Some(dir) => config.replica_cache(dir),
                None => config,
            }
        }
        None => config,
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env(
            "SERIES_ARCHIVE_LOG",
        ))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    lifecycle::set_cold(cli.cold.clone());
    if let Err(f) = replica::set_max_lag(cli.max_lag, cli.max_lag_wait) {
        eprintln!("series-archive: {}", f.message);
        return ExitCode::from(f.code);
    }
    let requests = cli.requests;
    let _ = CACHE.set((cli.cache.clone(), cli.cache_size));
    let result = match cli.command {
        Command::Ingest {
            archive,
            stream,
            track,
            axis,
            position,
            ladder,
            seal_rows,
            no_compact,
            slice_budget,
            types,
            memory,
            files,
        } => replica::after_commit(
            &archive,
            ingest(
                &archive,
                &stream,
                input::Columns {
                    track,
                    axis,
                    position,
                    types: types.into_iter().flat_map(|t| t.0).collect(),
                },
                ladder.as_deref(),
                Cadence {
                    seal_rows,
                    compact: !no_compact,
                    slice_budget,
                    memory: usize::try_from(memory).unwrap_or(usize::MAX),
                },
                &files,
            ),
        ),
        Command::ImportEventd {
            database,
            archive,
            seal_rows,
            ladder,
            no_compact,
        } => replica::after_commit(
            &archive,
            eventd::import(eventd::Request {
                database: &database,
                archive: &archive,
                seal_rows,
                compact: !no_compact,
                ladder,
            }),
        ),
        Command::Survey {
            range,
            budget,
            json,
            csv,
            plot,
        } => survey::survey(
            &range.archive,
            &range.stream,
            &range.track,
            range.from,
            range.to,
            budget,
            json,
            csv,
            plot.as_deref(),
        ),
        Command::Fold {
            range,
            aggregate,
            json,
        } => survey::fold(
            &range.archive,
            &range.stream,
            &range.track,
            range.from,
            range.to,
            aggregate,
            json,
        ),
        Command::Rows {
            archive,
            stream,
            track,
            from,
            to,
            format,
            out,
            force,
        } => rows(
            &archive,
            &stream,
            &track,
            from,
            to,
            format,
            out.as_deref().map(|o| (o, force)),
        ),
        Command::Inspect { archive, json } => inspect(&archive, json),
        Command::Verify { archive } => verify(&archive),
        Command::Files {
            archive,
            stream,
            levels,
            level,
            manifest,
        } => files(&archive, &stream, levels, level, manifest),
        Command::Publish { archive, stream } => lifecycle::publish(&archive, &stream),
        Command::Sweep {
            archive,
            stream,
            lifetimes,
            now,
            dry_run,
        } => replica::after_commit(
            &archive,
            lifecycle::sweep(&archive, &stream, &lifetimes, now, dry_run),
        ),
        Command::Retire {
            archive,
            stream,
            track,
            all_tracks,
        } => replica::after_commit(
            &archive,
            lifecycle::retire(&archive, &stream, &track, all_tracks),
        ),
        Command::Compact {
            archive,
            stream,
            target_size,
            group_rows,
            auto,
        } => replica::after_commit(
            &archive,
            lifecycle::compact(&archive, &stream, target_size, group_rows as usize, auto),
        ),
        Command::Offload {
            archive,
            older_than,
            local_budget,
            dry_run,
            now,
        } => replica::after_commit(
            &archive,
            lifecycle::offload(
                &archive,
                series_archive::archive::lifecycle::OffloadPolicy {
                    older_than,
                    local_budget,
                },
                dry_run,
                now,
            ),
        ),
        Command::Checkpoint { archive } => {
            replica::after_commit(&archive, lifecycle::checkpoint(&archive))
        }
        Command::Repair { archive, yes } => {
            replica::after_commit(&archive, lifecycle::repair(&archive, yes))
        }
        Command::Replicate {
            archive,
            url,
            status,
            follow,
            every,
            json,
        } => replica::run(replica::Request {
            archive: &archive,
            url: url.as_deref(),
            status,
            follow: follow.then(|| std::time::Duration::from_secs_f64(every)),
            json,
        }),
        Command::Restore { url, dir, json } => replica::restore(&url, &dir, json),
        Command::Quarantine {
            archive,
            purge_older_than,
        } => lifecycle::quarantine(&archive, purge_older_than),
        Command::Serve(options) => serve::run(options),
        Command::Demo {
            dir,
            runs,
            probes,
            ticks,
            cadence,
            no_compact,
        } => demo::run(&dir, runs, probes, ticks, cadence, !no_compact).map_err(Failure::from),
    };
    if requests {
        // Every archive handle is closed by now: the totals are the command's.
        for r in REQUESTS.totals() {
            if r.tier.contains("://") {
                eprintln!(
                    "requests: {}: {} GET, {} PUT, {} DELETE, {} LIST, {} read from the cache",
                    r.tier, r.reads, r.writes, r.deletes, r.lists, r.cached
                );
            } else {
                eprintln!("requests: {} (local): {} reads", r.tier, r.reads);
            }
        }
        if let Some(lag) = replica::lag_said() {
            eprintln!("requests: replica {lag}");
        }
    }
    // A write to standard output that failed in a writer (deferred) fails the run now.
    match output::settle(result) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("series-archive: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// A progress bar of `total` units, drawn on stderr (and hidden when it is not a terminal).
pub(crate) fn progress(total: u64, what: &str, units: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{prefix}} {{wide_bar}} {units} {{msg}} [{{elapsed}}, {{eta}} left]"
        ))
        .expect("a valid template"),
    );
    bar.set_prefix(what.to_owned());
    bar
}

pub(crate) fn read_only(archive: &Path) -> Result<Archive, Failure> {
    Ok(reader::open(archive, &crate::config())?)
}

/// An empty answer for a selection that names no track is true, but it is also what a typo
/// gets (`--track a,b` is one label, `--track a b` two): say so on stderr, once per read.
pub(crate) fn note_unknown_track(archive: &Archive, stream: &str, track: &[String]) {
    if track.is_empty() {
        return;
    }
    if let Some(state) = archive.state().streams.get(stream) {
        if !state.tracks.values().any(|t| t.labels.starts_with(track)) {
            eprintln!(
                "note: stream {stream:?} has no track under {track:?} (labels are separate values, outermost first: --track run_0 probe.1)"
            );
        }
    }
}

/// Opens read-only and reads, beside a writer: a read the writer's commit explains (a file
/// its snapshot named deleted, a stream it did not know) is read again on a fresh open
/// ([`series_archive::archive::reader::read`]). Anything else is answered as it is.
pub(crate) fn reading<T>(
    archive: &Path,
    read: impl Fn(&Archive) -> Result<T, ReadError>,
) -> Result<T, Failure> {
    reader::read(archive, &crate::config(), read)?.map_err(refused)
}

/// [`reading`] of one stream beneath one selection: the open catalogs only the tracks the
/// read can reach ([`series_archive::archive::Config::scope`]), so reading one track of a
/// fleet of 100,000 does not build the catalog of all of them.
pub(crate) fn reading_within<T>(
    archive: &Path,
    stream: &str,
    track: &[String],
    read: impl Fn(&Archive) -> Result<T, ReadError>,
) -> Result<T, Failure> {
    // One read, then the process ends: no level group is kept for a next one, so a read of
    // a few tracks decodes only their rows.
    let config = crate::config()
        .scope(stream, track.to_vec())
        .level_cache_cells(0)
        .raw_cache_bytes(0);
    reader::read(archive, &config, read)?.map_err(refused)
}

/// How `ingest` paces its work.
struct Cadence {
    /// Seal a barrier every this many staged rows.
    seal_rows: u64,
    /// End with the automatic maintenance.
    compact: bool,
    /// Run the maintenance during the ingest too once the stream's live files hold more
    /// track slices than this (0: never).
    slice_budget: u64,
    /// Checked input held in memory before the spool spills.
    memory: usize,
}

fn ingest(
    archive_dir: &Path,
    stream: &str,
    columns: input::Columns,
    ladder: Option<&str>,
    cadence: Cadence,
    files: &[PathBuf],
) -> Result<(), Failure> {
    let Cadence {
        seal_rows,
        compact,
        slice_budget,
        memory: spool_memory,
    } = cadence;
    // A barrier line that cannot be printed must not stop the ingest between barriers (a
    // rerun would store the committed rows twice): it finishes, then fails saying so.
    output::defer_failures();
    let ladder_given = ladder.is_some();
    let ladder = match ladder {
        None => Some(series_archive::archive::Ladder::ORDINAL),
        Some("none") => None,
        Some(text) => Some(series_archive::archive::Ladder::parse(text)?),
    };
    let files = input::expand(files)?;
    if files.is_empty() {
        return Err("no input files".into());
    }
    // The declaration: as recorded, or from the first file.
    let recorded = if archive_dir.join("manifest").is_dir() {
        let ro = read_only(archive_dir)?;
        ro.state().streams.get(stream).map(|s| s.decl.clone())
    } else {
        None
    };
    let spec = match &recorded {
        Some(decl) => {
            if decl.track != columns.track || decl.axis.as_deref() != Some(columns.axis.as_str()) {
                return Err(format!(
                    "stream {stream:?} is recorded with track {:?} and axis {:?}; ingest declared track {:?} and axis {:?}",
                    decl.track, decl.axis, columns.track, columns.axis
                )
                .into());
            }
            if ladder_given && decl.ladder != ladder {
                return Err(format!("stream {stream:?} is recorded with ladder {:?}; --ladder asked for {:?} (a stream's ladder cannot change)", decl.ladder, ladder).into());
            }
            // Keep the recorded column types: files are shaped to them.
            let fields: Vec<arrow::datatypes::Field> = decl
                .columns
                .iter()
                .map(|c| {
                    let t: arrow::datatypes::DataType = c
                        .data_type
                        .parse()
                        .map_err(|e| format!("recorded type {:?}: {e}", c.data_type))?;
                    Ok(arrow::datatypes::Field::new(&c.name, t, c.nullable))
                })
                .collect::<Result<_, String>>()?;
            for (name, asked) in &columns.types {
                match fields.iter().find(|f| f.name() == name) {
                    Some(f) if f.data_type() == asked => {}
                    Some(f) => return Err(format!(
                        "stream {stream:?} records column {name:?} as {}; --types asked for {asked} (a stream's column types cannot change)",
                        f.data_type()
                    )
                    .into()),
                    None => return Err(format!(
                        "--types names {name:?}, which is not a column of stream {stream:?}"
                    )
                    .into()),
                }
            }
            StreamSpec::dynamic(
                stream,
                std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
                columns.track.clone(),
                Some(columns.axis.clone()),
            )?
            .with_ladder(decl.ladder)
        }
        None => {
            let first = input::file_schema(&files[0])?;
            let declared = input::declare_from(&first, &columns, &files[0])?;
            StreamSpec::dynamic(
                stream,
                declared,
                columns.track.clone(),
                Some(columns.axis.clone()),
            )?
            .with_ladder(ladder)
        }
    };
    let declared = spec.schema().clone();
    // A stream the archive already records is checked against its durable state; a new one
    // against its declaration alone, so a bad first file creates nothing at all.
    let (opened, validator) = if recorded.is_some() {
        let archive = Archive::open(
            archive_dir,
            replica::replicating(lifecycle::with_cold(crate::config().stream(spec.clone()))?),
        )?;
        for q in &archive.recovery().quarantined {
            eprintln!(
                "recovery: moved {} into quarantine (kept as {q})",
                quarantined_from(q)
            );
        }
        let validator = archive.validator(stream)?;
        (Some(archive), validator)
    } else {
        (
            None,
            series_archive::archive::Validator::for_new_stream(&spec)?,
        )
    };
    // One read: every batch is parsed, shaped and checked once, and kept in the spool;
    // nothing is staged until the whole input is known good. An input of one barrier is
    // kept by the check too, staged, and handed to the writer whole (not staged again).
    let mut validator = validator.keeping(usize::try_from(seal_rows).unwrap_or(usize::MAX));
    let started = Instant::now();
    let input_bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let bar = progress(input_bytes, "reading and checking", "{bytes}/{total_bytes}");
    let mut spool = spool::Spool::new(declared.clone(), spool_memory);
    let first_position = opened
        .as_ref()
        .map_or(0, |a| a.watermark(stream).0)
        .saturating_add(1);
    deliveries(
        &files,
        &declared,
        columns.position.as_deref(),
        first_position,
        &bar,
        |origin, shaped, positions| {
            let (path, kind) = (&files[origin.file], input::Kind::of(&files[origin.file])?);
            validator
                .check(&shaped, &positions)
                .map_err(|e| locate(e, path, kind, origin.first_row))?;
            spool.push(spool::Delivery {
                origin,
                batch: shaped,
                positions,
            })?;
            if spool.spilled() {
                // Past --memory: the checked rows wait on disk, and the check keeps none.
                validator.stop_keeping();
            }
            bar.set_message(format!("{} rows", spool.rows()));
            Ok(())
        },
    )?;
    bar.finish_and_clear();
    let checked = spool.rows();
    let spilled = match spool.spilled_bytes() {
        0 => String::new(),
        n => format!(
            " ({:.1} MiB of it kept in a temporary file past --memory)",
            n as f64 / (1 << 20) as f64
        ),
    };
    eprintln!(
        "read and checked {checked} rows in {} file(s) in {:.2?}{spilled}",
        files.len(),
        started.elapsed()
    );
    // How the writer is opened, again if a failed maintenance left it refusing writes.
    let writable = || -> Result<Archive, Failure> {
        Ok(Archive::open(
            archive_dir,
            replica::replicating(lifecycle::with_cold(crate::config().stream(spec.clone()))?),
        )?)
    };
    let mut archive = match opened {
        Some(archive) => archive,
        None => writable()?,
    };
    // Once a barrier is durable, a failure must say how far: a rerun of the same files
    // would store the committed rows twice.
    let positioned = columns.position.is_some();
    let stopped = |archive: &Archive, staged: usize, e: Failure| {
        stopped_midway(
            archive,
            stream,
            (first_position, positioned),
            (staged, checked),
            e,
        )
    };
    // A maintenance that fails (a damaged file of an older barrier, of any stream) does not
    // stop the ingest of good rows: it is said at once, the writer reopened, and the
    // ingest ends failing with it, every row durable.
    let mut maintenance_failed: Option<Failure> = None;
    // Stage what was checked and seal on the cadence.
    let bar = progress(checked as u64, "ingesting", "{pos}/{len} rows");
    let started = Instant::now();
    let mut total = 0usize;
    let mut compact_past = slice_budget;
    let mut warned = false;
    let report = |r: Option<series_archive::archive::BarrierReport>, bar: &ProgressBar| {
        if let Some(r) = r {
            print_barrier(&r, bar);
        }
    };
    // The whole input checked and kept as one barrier's staged rows: taken as they are.
    // (The validator keeps all of the input or none of it, and an input has rows.)
    let replay = if validator.kept_rows() == checked && archive.adopt(&mut validator)? > 0 {
        drop(spool);
        total = checked;
        bar.set_position(total as u64);
        None
    } else {
        drop(validator);
        Some(spool.replay()?)
    };
    for delivery in replay.into_iter().flatten() {
        let spool::Delivery {
            origin,
            batch: shaped,
            positions,
        } = delivery?;
        let (path, kind) = (&files[origin.file], input::Kind::of(&files[origin.file])?);
        // Stage in slices that fill the cadence exactly, so a barrier is sealed every
        // `seal_rows` rows whatever the input batch size.
        let mut offset = 0;
        while offset < shaped.num_rows() {
            let room = seal_rows
                .saturating_sub(archive.staged_rows() as u64)
                .max(1);
            let len = (shaped.num_rows() - offset).min(room as usize);
            if let Err(e) = archive.stage_batch(
                stream,
                &shaped.slice(offset, len),
                &positions[offset..offset + len],
            ) {
                let e = locate(e, path, kind, origin.first_row + offset);
                return Err(stopped(&archive, total + offset, e));
            }
            offset += len;
            if archive.staged_rows() as u64 >= seal_rows {
                match archive.seal_all() {
                    Ok(r) => report(r, &bar),
                    Err(e) => return Err(stopped(&archive, total + offset, e.into())),
                }
                // Every live slice is an entry in memory until a compaction replaces the
                // barrier files that hold it: a fleet's long ingest compacts as it goes.
                // When a maintenance cannot bring them under the budget (more tracks than it,
                // or nothing due yet), the next waits until they doubled: a few futile plans
                // in all, not one per barrier.
                let slices = live_slices(&archive, stream);
                if !compact && !warned && slice_budget > 0 && slices > slice_budget {
                    // Said once: the memory grows on, as asked.
                    warned = true;
                    bar.suspend(|| {
                        eprintln!(
                            "warning: the live files of stream {stream} hold {slices} track slices, past --slice-budget {slice_budget}; each stays in memory (about 150 bytes) until a compaction, which --no-compact leaves to a later `compact`"
                        )
                    });
                }
                if compact
                    && maintenance_failed.is_none()
                    && slice_budget > 0
                    && slices > compact_past
                {
                    let done = bar.suspend(|| {
                        eprintln!(
                            "the live files of stream {stream} hold {slices} track slices (--slice-budget {slice_budget}): maintenance before the ingest goes on"
                        );
                        maintain(&mut archive)
                    });
                    match done {
                        Ok(()) => {
                            compact_past =
                                slice_budget.max(live_slices(&archive, stream).saturating_mul(2))
                        }
                        Err(e) => {
                            bar.suspend(|| {
                                eprintln!(
                                    "warning: the maintenance failed: {}; the ingest goes on without it (every barrier so far is durable), then fails saying so",
                                    e.message
                                )
                            });
                            // The failed compaction left the writer refusing writes: let go
                            // of it (and its lock) before a new one opens.
                            let refusing = archive;
                            drop(refusing);
                            archive = writable().map_err(|again| {
                                reopen_failed(stream, total + offset, checked, &e, again)
                            })?;
                            maintenance_failed = Some(e);
                        }
                    }
                }
            }
        }
        total += shaped.num_rows();
        bar.set_position(total as u64);
    }
    if total != checked {
        // The spool answered fewer (or more) rows than were read: never end as if it had not.
        return Err(format!(
            "staged {total} rows of the {checked} read and checked; the archive holds what its barriers say (see inspect)"
        )
        .into());
    }
    match archive.flush_all() {
        Ok(r) => report(r, &bar),
        Err(e) => return Err(stopped(&archive, total, e.into())),
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "ingested {total} rows in {secs:.2} s ({:.0} rows/s, seals included)",
        total as f64 / secs.max(1e-9)
    );
    let maintained = match maintenance_failed {
        Some(e) => Err(e),
        None if compact => maintain(&mut archive),
        None => Ok(()),
    };
    if let Err(e) = maintained {
        replica::stopped(&mut archive);
        return Err(Failure {
            code: e.code,
            message: format!(
                "all {total} rows are durable (stream {stream:?} through position {}: do not ingest these files again), but the maintenance after them failed: {}; compaction stays undone until that is mended (`series-archive verify` names damaged files)",
                archive.watermark(stream).0,
                e.message
            ),
        });
    }
    replica::stopped(&mut archive);
    if let Some((e, lines)) = output::take_failure() {
        return Err(format!(
            "writing to standard output failed after {lines} barrier line(s): {e}; the ingest went on and finished: all {total} rows are durable (stream {stream:?} through position {}; `inspect` shows it){}",
            archive.watermark(stream).0,
            if columns.position.is_none() {
                " — do not ingest these files again: their rows would be stored twice, at new positions"
            } else {
                ""
            }
        )
        .into());
    }
    Ok(())
}

/// The failure of an ingest that stopped after `staged` of its `checked` rows, saying how
/// far `stream` is durable (its watermark) and that the files must not simply be ingested
/// again. `first` is the position the ingest's first row took (when `positioned` is false,
/// the archive numbered them).
fn stopped_midway(
    archive: &Archive,
    stream: &str,
    (first, positioned): (u64, bool),
    (staged, checked): (usize, usize),
    e: Failure,
) -> Failure {
    let watermark = archive.watermark(stream).0;
    if watermark < first {
        // No barrier of this ingest is durable: the archive holds what it held before.
        return e;
    }
    let durable = watermark - first + 1;
    let rerun = if positioned {
        "ingest only the rows past it (the rows through it are stored)".to_owned()
    } else {
        format!(
            "{durable} of the {checked} rows are stored; do not ingest these files again: the stored rows would be stored twice, at new positions"
        )
    };
    // A refused row's message says nothing was ingested, which is no longer so.
    let why = e.message.trim_end_matches("; nothing was ingested");
    Failure {
        code: e.code,
        message: format!(
            "{why}; the ingest stopped after staging {staged} of {checked} rows: stream {stream:?} is durable through position {watermark} (the barrier lines above), {rerun}"
        ),
    }
}

/// The failure of an ingest whose writer could not be opened again after a failed
/// maintenance (`failed`): how far it got, and both errors.
fn reopen_failed(
    stream: &str,
    staged: usize,
    checked: usize,
    failed: &Failure,
    again: Failure,
) -> Failure {
    Failure {
        code: again.code,
        message: format!(
            "the maintenance failed ({}) and the archive could not be opened again ({}); the ingest stopped after staging {staged} of {checked} rows: every barrier line above is durable for stream {stream:?}, and `inspect` shows its watermark",
            failed.message, again.message
        ),
    }
}

/// The track slices (manifest entries) of `stream`'s live data files.
fn live_slices(archive: &Archive, stream: &str) -> u64 {
    archive
        .state()
        .streams
        .get(stream)
        .map_or(0, |s| s.files.iter().map(|f| f.groups.len() as u64).sum())
}

/// What `compact --auto` does, so a CLI user never has to know: a stream past its threshold
/// (many barrier files) becomes packed files and whole level cells; then, once the log
/// holds mostly replaced history, a checkpoint starts a generation from the live state, so
/// every later open reads the state, not the history.
pub(crate) fn maintain(archive: &mut Archive) -> Result<(), Failure> {
    let began = std::time::Instant::now();
    let reports = archive.compact(false, |_, _, _| {})?;
    if !reports.is_empty() {
        let t = series_archive::archive::lifecycle::CompactReport::total(&reports);
        eprintln!(
            "compacted in {} step(s): {} barrier files → {} files; {} level files merged size-tiered; in {:.2?}; --no-compact keeps them as sealed",
            reports.len(),
            t.files_in,
            t.files_out,
            t.level_files_in,
            began.elapsed()
        );
    }
    if let Some(generation) = archive.checkpoint_if_due()? {
        eprintln!("checkpoint: manifest generation {generation}");
    }
    Ok(())
}

/// Prints each stream of a durable barrier as one line, above the progress bar.
pub(crate) fn print_barrier(r: &series_archive::archive::BarrierReport, bar: &ProgressBar) {
    // The barrier is durable whether or not its line can be printed: a writer goes on.
    output::defer_failures();
    for s in &r.streams {
        bar.suspend(|| {
            out!(
                "barrier {}: stream {} durable through position {} ({} rows, {} tracks, {})",
                r.barrier,
                s.stream,
                s.watermark,
                s.rows,
                s.tracks,
                s.file
            )
        });
    }
}

/// The path a file had before recovery moved it to `kept` (`.quarantine/open-…/PATH`).
pub(crate) fn quarantined_from(kept: &str) -> &str {
    kept.splitn(3, '/').nth(2).unwrap_or(kept)
}

/// Reads every file once as deliveries shaped to the declaration, in order, handing each to
/// `take` with its origin (file index, first row within the file) and positions (from the
/// position column, or consecutive from `first_position`). `bar` counts the bytes read.
fn deliveries(
    files: &[PathBuf],
    declared: &arrow::datatypes::SchemaRef,
    position: Option<&str>,
    first_position: u64,
    bar: &ProgressBar,
    mut take: impl FnMut(spool::Origin, arrow::array::RecordBatch, Vec<u64>) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut next_position = first_position;
    for (file, path) in files.iter().enumerate() {
        let kind = input::Kind::of(path)?;
        let schema = std::sync::Arc::new(input::file_schema(path)?);
        let batches = input::batches(path, schema, declared, position, bar)?;
        // Two stages on two threads: this file is parsed on one while the batches before are
        // shaped (converted to the stream's types, which for a CSV is parsing its values),
        // checked and kept on the caller's. (Shaping sat on the parsing thread, which then
        // took four times the checking thread's time on a CSV.)
        std::thread::scope(|scope| -> Result<(), Failure> {
            let (tx, rx) = std::sync::mpsc::sync_channel(4);
            scope.spawn(move || {
                for batch in batches {
                    let failed = batch.is_err();
                    // The receiver is gone when the caller failed: stop reading.
                    if tx.send(batch).is_err() || failed {
                        break;
                    }
                }
            });
            let mut rows = 0;
            for batch in rx {
                let (shaped, positions) =
                    input::shape(&batch?, declared, position, path, kind, rows)?;
                let n = shaped.num_rows();
                let first_row = rows;
                rows += n;
                let positions = match positions {
                    Some(p) => p,
                    None => {
                        let end = next_position
                            .checked_add(n as u64)
                            .filter(|&e| e <= series_archive::archive::MAX_STORED)
                            .ok_or_else(|| {
                            format!(
                                "{}: automatic positions would pass {} (the stream is at {}); give the rows a --position column",
                                path.display(),
                                series_archive::archive::MAX_STORED - 1,
                                next_position.saturating_sub(1)
                            )
                        })?;
                        (next_position..end).collect()
                    }
                };
                next_position = next_position.saturating_add(n as u64);
                take(spool::Origin { file, first_row }, shaped, positions)?;
            }
            if rows == 0 {
                // A header alone (or an empty Parquet file) is more often a failed export
                // than an empty period: refused, naming it, before anything is staged.
                return Err(format!(
                    "{}: no rows in the file; leave it out (nothing was ingested)",
                    path.display()
                )
                .into());
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Rewrites a staging error's delivery-relative row as a file row.
fn locate(
    e: series_archive::ArchiveError,
    path: &Path,
    kind: input::Kind,
    first_row: usize,
) -> Failure {
    match e {
        series_archive::ArchiveError::Input {
            row,
            column,
            message,
            ..
        } => Failure {
            code: 1,
            message: format!(
                "{}, {}{}: {message}; nothing was ingested",
                path.display(),
                kind.locate(first_row + row),
                column
                    .map(|c| format!(", column {c:?}"))
                    .unwrap_or_default()
            ),
        },
        other => other.into(),
    }
}

fn rows(
    archive: &Path,
    stream: &str,
    track: &[String],
    from: Option<u64>,
    to: Option<u64>,
    format: output::Format,
    out: Option<(&Path, bool)>,
) -> Result<(), Failure> {
    if let (Some(f), Some(t)) = (from, to) {
        if t < f {
            return Err(format!("--to {t} is below --from {f}; the range is [from, to)").into());
        }
    }
    if let Some((path, force)) = out {
        output::check_target(archive, path, force)?;
    }
    let out = out.map(|(path, _)| path);
    let start = from.map_or(Bound::Unbounded, |f| Bound::Included(Position(f)));
    let end = to.map_or(Bound::Unbounded, |t| Bound::Excluded(Position(t)));
    let batch = reading_within(archive, stream, track, |a| {
        note_unknown_track(a, stream, track);
        a.read_rows(stream, track, start, end)
    })?;
    let batch = series_archive::render::without_seq(&batch)?;
    output::write(&batch, format, out)?;
    if let Some(out) = out {
        eprintln!("wrote {} rows to {}", batch.num_rows(), out.display());
    }
    Ok(())
}

fn inspect(archive_dir: &Path, json: bool) -> Result<(), Failure> {
    let archive = read_only(archive_dir)?;
    let d = archive.describe()?;
    if json {
        // Counts that leave a row group out are said on stderr too, not only in the JSON.
        for s in &d.streams {
            for why in &s.unreadable {
                eprintln!("warning: stream {:?}: {why}", s.id);
            }
        }
        /// The description, and where the replica stands when there is one.
        #[derive(serde::Serialize)]
        struct Inspected<'a> {
            #[serde(flatten)]
            description: &'a series_archive::archive::Description,
            #[serde(skip_serializing_if = "Option::is_none")]
            replica: Option<serde_json::Value>,
        }
        output::json(&Inspected {
            description: &d,
            replica: replica::inspected_json(archive_dir),
        })?;
        return Ok(());
    }
    out!(
        "archive {} (manifest generation {}, {} bytes; {} barriers)",
        d.root,
        d.generation,
        d.manifest_bytes,
        d.barriers
    );
    if let Some(line) = replica::inspected(archive_dir) {
        out!("replica   {line}");
    }
    for s in &d.streams {
        out!();
        out!(
            "stream {}: {} rows, {} tracks, {} files, {} bytes ({:.1} bytes/row)",
            s.id,
            s.rows,
            s.tracks.len(),
            s.files,
            s.bytes,
            s.bytes as f64 / s.rows.max(1) as f64
        );
        for why in &s.unreadable {
            out!("  UNREADABLE {why}");
            eprintln!("warning: stream {:?}: {why}", s.id);
        }
        out!("  columns   {}", s.columns.join(", "));
        out!(
            "  track     ({})   axis {}",
            s.track.join(", "),
            s.axis.as_deref().unwrap_or("-")
        );
        out!("  measured  {}", s.measured.join(", "));
        match s.ladder {
            Some(l) => {
                out!("  levels    {} file(s), {} bytes ({:.1}% of raw); ladder base {} × {}^k, {} levels", s.level_files, s.level_bytes, 100.0 * s.level_bytes as f64 / s.bytes.max(1) as f64, l.base, l.factor, l.levels);
                match s.levels_from {
                    Some(0) => out!("  stored    every level (decided by the rows' density)"),
                    Some(k) => out!("  stored    levels {k} to {} (finer ones hold too few rows a cell: folded from the raw rows when read)", l.levels - 1),
                    None => out!("  stored    every level (undecided: no barrier has held enough rows to judge)"),
                }
                if let Some(from) = s.levels_deferred_from {
                    out!("  deferred  rows from _seq {from} on have no level partials yet: too few rows a cell to be worth their bytes; reads fold them from the raw rows, and a compaction summarises them once they are worth it");
                }
            }
            None => out!("  levels    none"),
        }
        out!("  watermark {}   raw floor {}", s.watermark, s.floor);
        for d in &s.delta {
            match &d.note {
                None => out!(
                    "  delta     {}: level with the manifest, {} file(s): {}",
                    d.table,
                    d.files,
                    d.path
                ),
                Some(why) => out!("  delta     {}: NOT level: {why}", d.table),
            }
        }
        out!(
            "  tiers     raw: {} file(s), {} bytes ({} local, {} bytes; {} cold, {} bytes{}); levels: {} file(s), {} bytes (local)",
            s.files,
            s.bytes,
            s.files - s.cold_files,
            s.bytes - s.cold_bytes,
            s.cold_files,
            s.cold_bytes,
            if s.cold_tiers.is_empty() {
                String::new()
            } else {
                format!(" in {}", s.cold_tiers.join(", "))
            },
            s.level_files,
            s.level_bytes
        );
        out!(
            "  {:<32} {:>10} {:>7} {:>14} {:>10} {:>12}  level floors (axis)",
            "track",
            "rows",
            "groups",
            "last axis",
            "raw floor",
            "raw axis ≥"
        );
        let mut table = output::Block::new();
        for t in &s.tracks {
            let label = if t.labels.is_empty() {
                "(untracked)".to_owned()
            } else {
                t.labels.join(" / ")
            };
            let levels = if t.level_floors.iter().all(|&f| f == 0) {
                "-".to_owned()
            } else {
                t.level_floors
                    .iter()
                    .enumerate()
                    .map(|(k, f)| format!("L{k}≥{f}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            table.line(format_args!(
                "  {:<32} {:>10} {:>7} {:>14} {:>10} {:>12}  {levels}{}",
                label,
                t.rows,
                t.groups,
                t.last_axis.map_or("-".into(), |a| a.to_string()),
                t.floor,
                t.raw_axis_floor,
                if t.retired { "  (retired)" } else { "" }
            ));
        }
    }
    out!();
    if d.quarantine.is_empty() {
        out!("quarantine: empty");
    } else {
        out!("quarantine: {} file(s), {} bytes (evidence kept by recovery; never deleted by the archive)", d.quarantine.len(), d.quarantine.iter().map(|q| q.bytes).sum::<u64>());
        for q in &d.quarantine {
            out!("  {} ({} bytes)", q.path, q.bytes);
        }
    }
    if let Some(at) = d.recovery.damaged_at {
        out!("manifest: DAMAGED at byte {at} of {} ({}); the counts above are the trusted prefix only, every read is refused (exit 3) and `verify` exits 4 — `series-archive repair` shows what the evidence holds, keeps it and starts a new generation", d.recovery.damaged_path.as_deref().unwrap_or("the current generation"), d.recovery.damage.as_deref().unwrap_or("valid records follow the damage"));
    } else if let Some(at) = d.recovery.torn_tail_at {
        out!("manifest: torn tail at byte {at} (a writable open will repair it)");
    }
    Ok(())
}

fn verify(archive: &Path) -> Result<(), Failure> {
    // A manifest that cannot be read at all is damage `verify` exists to report (exit 4),
    // not an ordinary error.
    let archive = match reader::open(archive, &crate::config()) {
        Ok(archive) => archive,
        Err(
            e @ (ArchiveError::CorruptManifest { .. }
            | ArchiveError::NoManifest { .. }
            | ArchiveError::DamagedManifest { .. }
            | ArchiveError::DamagedTail { .. }),
        ) => {
            out!("DAMAGED {e}");
            return Err(Failure {
                code: 4,
                message: "the manifest cannot be read; nothing could be verified".into(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    // Data and level files alike: the set `Archive::verify` checks.
    let total = archive.state().live_files().count();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("verifying {bar:40} {pos}/{len} files [{elapsed}]")
            .expect("a valid template"),
    );
    let damaged = archive.verify(|done, _| bar.set_position(done as u64));
    bar.finish_and_clear();
    if damaged.is_empty() {
        out!("ok: {total} file(s), every row group and footer digest verified, every data file's entries hold its rows; the manifest replays whole");
        Ok(())
    } else {
        // A cold file whose tier did not answer is neither damaged nor verified (exit 3 when
        // nothing else is found: retry once the tier answers).
        let unverified = |d: &&String| d.starts_with(series_archive::archive::cold::UNVERIFIED);
        for d in &damaged {
            if unverified(&d) {
                out!("{d}");
            } else {
                out!("DAMAGED {d}");
            }
        }
        let (unverified, damaged): (Vec<&String>, Vec<&String>) =
            damaged.iter().partition(unverified);
        if damaged.is_empty() {
            return Err(Failure {
                code: 3,
                message: format!("{} cold file(s) not verified: their tier did not answer; nothing verified was found damaged", unverified.len()),
            });
        }
        Err(Failure {
            code: 4,
            message: format!(
                "{} damaged ({} of {total} committed file(s){})",
                damaged.len(),
                damaged.len().saturating_sub(usize::from(
                    archive.recovery().unrepaired_damage().is_some()
                )),
                if archive.recovery().unrepaired_damage().is_some() {
                    ", and the manifest"
                } else {
                    ""
                }
            ),
        })
    }
}

fn files(
    archive: &Path,
    stream: &str,
    levels: bool,
    level: Option<usize>,
    manifest: bool,
) -> Result<(), Failure> {
    // A replica opened by its URL has no local Delta log: its files come from its manifest.
    let url = series_archive::archive::replicate::as_url(archive).is_some();
    let listed = if manifest || level.is_some() || url {
        reading(archive, |a| {
            if levels || level.is_some() {
                a.level_files(stream, level)
            } else {
                a.files(stream)
            }
        })?
    } else {
        let table = if levels { Table::Levels } else { Table::Rows };
        // One open: the manifest's own checks first (an unknown stream, a damaged manifest),
        // as for every read; then the log, checked level with it. Neither reads a data file,
        // so `reading`'s retry for files deleted under a read has nothing to retry.
        let opened = read_only(archive)?;
        opened.files(stream).map_err(refused)?;
        opened.delta_files(stream, table)?
    };
    for f in listed {
        out!("{f}");
    }
    Ok(())
}
