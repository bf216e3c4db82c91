//! `series-archive`: ingest, read, inspect and verify an archive from the command line.
//!
//! Exit codes: 0 success; 1 an error (bad input, I/O, a damaged manifest); 2 a usage error;
//! 3 a refusal of the serving contract (`unserved`, `floor`, `unreadable`); 4 `verify` found
//! damage.

mod demo;
mod input;
mod output;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use series_archive::archive::{Archive, Config, ReadError, StreamSpec};
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
        /// Seal a barrier every N staged rows (and once at the end).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
        seal_rows: u64,
        /// Input files (.csv with a header, .jsonl/.ndjson, .parquet) or directories of them.
        #[arg(required = true)]
        files: Vec<PathBuf>,
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
        /// Write to this file instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
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
    Files {
        /// The archive directory.
        archive: PathBuf,
        /// The stream id.
        #[arg(long)]
        stream: String,
    },
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
    },
}

/// A failure with the exit code it maps to.
struct Failure {
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

fn refused(e: ReadError) -> Failure {
    match e {
        ReadError::Refused(r) => Failure {
            code: 3,
            message: format!("refused ({}): {r}", r.kind()),
        },
        other => Failure {
            code: 1,
            message: other.to_string(),
        },
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
    let result = match cli.command {
        Command::Ingest {
            archive,
            stream,
            track,
            axis,
            position,
            seal_rows,
            files,
        } => ingest(
            &archive,
            &stream,
            input::Columns {
                track,
                axis,
                position,
            },
            seal_rows,
            &files,
        ),
        Command::Rows {
            archive,
            stream,
            track,
            from,
            to,
            format,
            out,
        } => rows(&archive, &stream, &track, from, to, format, out.as_deref()),
        Command::Inspect { archive, json } => inspect(&archive, json),
        Command::Verify { archive } => verify(&archive),
        Command::Files { archive, stream } => files(&archive, &stream),
        Command::Demo {
            dir,
            runs,
            probes,
            ticks,
            cadence,
        } => demo::run(&dir, runs, probes, ticks, cadence).map_err(Failure::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("series-archive: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn spinner(what: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix} {msg} [{elapsed}]")
            .expect("a valid template"),
    );
    bar.set_prefix(what.to_owned());
    bar
}

fn read_only(archive: &Path) -> Result<Archive, Failure> {
    Ok(Archive::open(archive, Config::new().read_only(true))?)
}

fn ingest(
    archive_dir: &Path,
    stream: &str,
    columns: input::Columns,
    seal_rows: u64,
    files: &[PathBuf],
) -> Result<(), Failure> {
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
            StreamSpec::dynamic(
                stream,
                std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
                columns.track.clone(),
                Some(columns.axis.clone()),
            )?
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
        }
    };
    let declared = spec.schema().clone();
    let mut archive = Archive::open(archive_dir, Config::new().stream(spec))?;
    for q in &archive.recovery().quarantined {
        eprintln!("recovery: moved {q} into quarantine");
    }
    // Pass 1: check everything; nothing is staged until the whole input is known good.
    let started = Instant::now();
    let bar = spinner("checking");
    let mut checked = 0usize;
    {
        let mut validator = archive.validator(stream)?;
        let mut next_position = archive.watermark(stream).0 + 1;
        for path in &files {
            let kind = input::Kind::of(path)?;
            let schema = std::sync::Arc::new(input::file_schema(path)?);
            let mut row = 0usize;
            for batch in input::batches(path, schema)? {
                let batch = batch?;
                let (shaped, positions) = input::shape(
                    &batch,
                    &declared,
                    columns.position.as_deref(),
                    path,
                    kind,
                    row,
                )?;
                let positions = positions.unwrap_or_else(|| {
                    (next_position..next_position + shaped.num_rows() as u64).collect()
                });
                next_position += shaped.num_rows() as u64;
                validator
                    .check(&shaped, &positions)
                    .map_err(|e| locate(e, path, kind, row))?;
                row += shaped.num_rows();
                checked += shaped.num_rows();
                bar.set_message(format!("{checked} rows"));
            }
        }
    }
    bar.finish_and_clear();
    eprintln!(
        "checked {checked} rows in {} file(s) in {:.2?}",
        files.len(),
        started.elapsed()
    );
    // Pass 2: stage and seal on the cadence.
    let bar = spinner("ingesting");
    let started = Instant::now();
    let mut next_position = archive.watermark(stream).0 + 1;
    let mut total = 0usize;
    let report = |r: Option<series_archive::archive::BarrierReport>, bar: &ProgressBar| {
        if let Some(r) = r {
            for s in &r.streams {
                bar.suspend(|| println!("barrier {}: stream {} durable through position {} ({} rows, {} tracks, {})", r.barrier, s.stream, s.watermark, s.rows, s.tracks, s.file));
            }
        }
    };
    for path in &files {
        let kind = input::Kind::of(path)?;
        let schema = std::sync::Arc::new(input::file_schema(path)?);
        let mut row = 0usize;
        for batch in input::batches(path, schema)? {
            let batch = batch?;
            let (shaped, positions) = input::shape(
                &batch,
                &declared,
                columns.position.as_deref(),
                path,
                kind,
                row,
            )?;
            let positions = positions.unwrap_or_else(|| {
                (next_position..next_position + shaped.num_rows() as u64).collect()
            });
            next_position += shaped.num_rows() as u64;
            archive
                .stage_batch(stream, &shaped, &positions)
                .map_err(|e| locate(e, path, kind, row))?;
            row += shaped.num_rows();
            total += shaped.num_rows();
            if archive.staged_rows() as u64 >= seal_rows {
                report(archive.seal_all()?, &bar);
            }
            bar.set_message(format!("{total} rows"));
        }
    }
    report(archive.flush_all()?, &bar);
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "ingested {total} rows in {secs:.2} s ({:.0} rows/s, seals included)",
        total as f64 / secs.max(1e-9)
    );
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
    out: Option<&Path>,
) -> Result<(), Failure> {
    if let (Some(f), Some(t)) = (from, to) {
        if t < f {
            return Err(format!("--to {t} is below --from {f}; the range is [from, to)").into());
        }
    }
    let archive = read_only(archive)?;
    let start = from.map_or(Bound::Unbounded, |f| Bound::Included(Position(f)));
    let end = to.map_or(Bound::Unbounded, |t| Bound::Excluded(Position(t)));
    let batch = archive
        .read_rows(stream, track, start, end)
        .map_err(refused)?;
    // `_seq` is internal bookkeeping, never an output field.
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|&i| batch.schema().field(i).name() != series_archive::archive::SEQ_COLUMN)
        .collect();
    let batch = batch.project(&keep)?;
    output::write(&batch, format, out)?;
    if let Some(out) = out {
        eprintln!("wrote {} rows to {}", batch.num_rows(), out.display());
    }
    Ok(())
}

fn inspect(archive: &Path, json: bool) -> Result<(), Failure> {
    let archive = read_only(archive)?;
    let d = archive.describe()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&d)?);
        return Ok(());
    }
    println!(
        "archive {} (manifest generation {}, {} barriers)",
        d.root, d.generation, d.barriers
    );
    for s in &d.streams {
        println!();
        println!(
            "stream {}: {} rows, {} tracks, {} files, {} bytes ({:.1} bytes/row)",
            s.id,
            s.rows,
            s.tracks.len(),
            s.files,
            s.bytes,
            s.bytes as f64 / s.rows.max(1) as f64
        );
        println!("  columns   {}", s.columns.join(", "));
        println!(
            "  track     ({})   axis {}",
            s.track.join(", "),
            s.axis.as_deref().unwrap_or("-")
        );
        println!("  measured  {}", s.measured.join(", "));
        println!("  watermark {}   raw floor {}", s.watermark, s.floor);
        println!(
            "  {:<32} {:>10} {:>7} {:>14} {:>8}",
            "track", "rows", "groups", "last axis", "floor"
        );
        for t in &s.tracks {
            let label = if t.labels.is_empty() {
                "(untracked)".to_owned()
            } else {
                t.labels.join(" / ")
            };
            println!(
                "  {:<32} {:>10} {:>7} {:>14} {:>8}",
                label,
                t.rows,
                t.groups,
                t.last_axis.map_or("-".into(), |a| a.to_string()),
                t.floor
            );
        }
    }
    println!();
    if d.quarantine.is_empty() {
        println!("quarantine: empty");
    } else {
        println!("quarantine: {} file(s), {} bytes (evidence kept by recovery; never deleted by the archive)", d.quarantine.len(), d.quarantine.iter().map(|q| q.bytes).sum::<u64>());
        for q in &d.quarantine {
            println!("  {} ({} bytes)", q.path, q.bytes);
        }
    }
    if let Some(at) = d.recovery.damaged_at {
        println!("manifest: DAMAGED at byte {at}; serving the trusted prefix read-only");
    } else if let Some(at) = d.recovery.torn_tail_at {
        println!("manifest: torn tail at byte {at} (a writable open will repair it)");
    }
    Ok(())
}

fn verify(archive: &Path) -> Result<(), Failure> {
    let archive = read_only(archive)?;
    let total: usize = archive
        .state()
        .streams
        .values()
        .map(|s| s.files.len())
        .sum();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("verifying {bar:40} {pos}/{len} files [{elapsed}]")
            .expect("a valid template"),
    );
    let damaged = archive.verify(|done, _| bar.set_position(done as u64));
    bar.finish_and_clear();
    if damaged.is_empty() {
        println!("ok: {total} file(s), every row group and footer digest verified");
        Ok(())
    } else {
        for d in &damaged {
            println!("DAMAGED {d}");
        }
        Err(Failure {
            code: 4,
            message: format!("{} of {total} file(s) damaged", damaged.len()),
        })
    }
}

fn files(archive: &Path, stream: &str) -> Result<(), Failure> {
    let archive = read_only(archive)?;
    for f in archive.files(stream).map_err(refused)? {
        println!("{}", f.display());
    }
    Ok(())
}
