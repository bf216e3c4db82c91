//! Writing out: the lines every command prints (`out!`), and rows as CSV, JSON lines or
//! Parquet, to a file or standard output.
//!
//! A failed write to standard output never passes for success. A reader (`rows`, `survey`,
//! `fold`, `inspect`, `verify`, `files`) ends at once: quietly with exit 141 when the pipe was
//! closed (`| head`: what a shell reports for a writer killed by SIGPIPE), exit 1 naming the
//! error otherwise (a full disk, `/dev/full`). A writer (`ingest`, `import-eventd`, the
//! lifecycle commands) has acknowledged what it committed: it defers the failure, writes
//! nothing more to standard output, runs to its end, and then exits 1 saying what it did.

use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The exit code of a reader whose standard output was closed (128 + SIGPIPE).
pub const CLOSED_PIPE: u8 = 141;

/// What became of standard output in this process.
struct Stdout {
    /// Record a failure and go on (a writer) instead of ending the process (a reader).
    defer: bool,
    /// The first failed write; nothing is written after it.
    failed: Option<std::io::Error>,
    /// Lines written whole.
    lines: u64,
}

static STDOUT: Mutex<Stdout> = Mutex::new(Stdout {
    defer: false,
    failed: None,
    lines: 0,
});

fn stdout_state() -> std::sync::MutexGuard<'static, Stdout> {
    STDOUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// From now on a failed write to standard output is recorded, not fatal: the command runs
/// to its end and [`settle`] fails it then. For commands that change the archive.
pub(crate) fn defer_failures() {
    stdout_state().defer = true;
}

/// Ends the process for a failed write to standard output (a reader's answer is incomplete).
fn end_now(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        // The reader stopped reading (`| head`): no message, as Unix tools end.
        std::process::exit(i32::from(CLOSED_PIPE));
    }
    // (Not `eprintln!`, which panics when standard error is gone too.)
    let _ = writeln!(
        std::io::stderr(),
        "series-archive: writing to standard output: {e}; the output is incomplete"
    );
    std::process::exit(1);
}

/// Notes a failed write to standard output: ends the process (a reader), or records it
/// (after [`defer_failures`]) for [`settle`].
fn stdout_failed(state: &mut Stdout, e: std::io::Error) {
    if !state.defer {
        end_now(&e);
    }
    if state.failed.is_none() {
        state.failed = Some(e);
    }
}

/// Writes one line to standard output, whole, and flushes it (`out!`). After a failed write
/// nothing more is written: a later line that fits would hide the hole.
pub(crate) fn line(args: std::fmt::Arguments) {
    write_lines(&format!("{args}\n"), 1);
}

/// Writes `text`, `lines` whole lines, to standard output in one write and flushes it, as
/// [`line`] writes one.
fn write_lines(text: &str, lines: u64) {
    let mut state = stdout_state();
    if state.failed.is_some() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => state.lines += lines,
        Err(e) => stdout_failed(&mut state, e),
    }
}

/// Lines for standard output written a block of whole lines at a time (one write for about
/// 64 KiB, not one a line): a table of 100,000 tracks. What is left is written when the block
/// is dropped. A failed write is handled as [`line`]'s.
pub(crate) struct Block {
    text: String,
    lines: u64,
}

impl Block {
    /// An empty block.
    pub(crate) fn new() -> Block {
        Block {
            text: String::new(),
            lines: 0,
        }
    }

    /// Adds one line, writing the block once it holds about 64 KiB.
    pub(crate) fn line(&mut self, args: std::fmt::Arguments) {
        use std::fmt::Write as _;
        // Writing into a String cannot fail.
        let _ = writeln!(self.text, "{args}");
        self.lines += 1;
        if self.text.len() >= 1 << 16 {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.lines > 0 {
            write_lines(&self.text, self.lines);
        }
        self.text.clear();
        self.lines = 0;
    }
}

impl Drop for Block {
    /// Writes the lines not written yet.
    fn drop(&mut self) {
        self.flush();
    }
}

/// Writes `value` to standard output as pretty-printed JSON and a newline, streamed through a
/// buffer: a fleet's description (`inspect --json` of 100,000 tracks) is tens of megabytes,
/// never built whole in memory. A failed write is handled as [`line`]'s; a value that cannot
/// be written as JSON is an error.
pub(crate) fn json(value: &impl serde::Serialize) -> Result<(), serde_json::Error> {
    let mut state = stdout_state();
    if state.failed.is_some() {
        return Ok(());
    }
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let written = serde_json::to_writer_pretty(&mut out, value)
        .and_then(|()| out.write_all(b"\n").map_err(serde_json::Error::io))
        .and_then(|()| out.flush().map_err(serde_json::Error::io));
    match written {
        Ok(()) => {
            state.lines += 1;
            Ok(())
        }
        Err(e) if e.is_io() => {
            stdout_failed(&mut state, e.into());
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The deferred failure of standard output, if a write failed, with the lines written whole
/// before it; taken, so it is reported once.
pub(crate) fn take_failure() -> Option<(std::io::Error, u64)> {
    let mut state = stdout_state();
    let lines = state.lines;
    state.failed.take().map(|e| (e, lines))
}

/// The command's result with a deferred standard-output failure folded in: a command that
/// succeeded fails (exit 1), one that failed keeps its own code and says both. Flushes
/// standard output first.
pub(crate) fn settle(result: Result<(), crate::Failure>) -> Result<(), crate::Failure> {
    {
        let mut state = stdout_state();
        if state.failed.is_none() {
            if let Err(e) = std::io::stdout().lock().flush() {
                stdout_failed(&mut state, e);
            }
        }
    }
    let Some((e, lines)) = take_failure() else {
        return result;
    };
    let what = format!(
        "writing to standard output failed after {lines} line(s): {e}; nothing more was printed"
    );
    Err(match result {
        Ok(()) => crate::Failure {
            code: 1,
            message: format!("{what}, but the command ran to its end (what it committed is durable: `inspect` shows it)"),
        },
        Err(f) => crate::Failure {
            code: f.code,
            message: format!("{}; and {what}", f.message),
        },
    })
}

/// Standard output for `rows`: a failed write ends the process as [`line`]'s does.
struct StdoutSink(std::io::BufWriter<std::io::Stdout>);

impl StdoutSink {
    fn checked<T>(&self, r: std::io::Result<T>) -> std::io::Result<T> {
        r.map_err(|e| {
            let mut state = stdout_state();
            let shown = std::io::Error::new(e.kind(), e.to_string());
            stdout_failed(&mut state, e);
            shown
        })
    }
}

impl Write for StdoutSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.0.write(buf);
        self.checked(r)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.0.flush();
        self.checked(r)
    }
}

/// Output formats of `rows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Comma-separated values with a header.
    Csv,
    /// One JSON object per line.
    Jsonl,
    /// A Parquet file (needs --out).
    Parquet,
}

/// Refuses an output file inside the archive (it could replace a manifest generation or a
/// data file: the archive would be destroyed by a typo), and an existing file unless
/// `force`. Checked before anything is read or written. A symbolic link is judged by where
/// it leads, also when that file does not exist yet (a dangling link into the archive).
pub fn check_target(archive: &Path, out: &Path, force: bool) -> Result<(), String> {
    if let Ok(root) = std::fs::canonicalize(archive) {
        if let Some((target, linked)) = resolved(out)? {
            if target.starts_with(&root) {
                return Err(format!(
                    "{}: is inside the archive {}{}; write output elsewhere (a file there could replace the archive's own)",
                    out.display(),
                    archive.display(),
                    if linked {
                        format!(" (a symbolic link to {})", target.display())
                    } else {
                        String::new()
                    }
                ));
            }
        }
    }
    if out.is_dir() {
        return Err(format!(
            "{}: is a directory; give a file name",
            out.display()
        ));
    }
    if !force && out.exists() {
        return Err(format!(
            "{}: exists; give --force to replace it, or another name",
            out.display()
        ));
    }
    Ok(())
}

/// Where writing to `path` would land: the file a chain of symbolic links leads to (each
/// relative target read against its link's directory), with its directory resolved, and
/// whether a link was followed. `None` when that directory does not exist (creating the
/// file fails then, writing nothing).
fn resolved(path: &Path) -> Result<Option<(PathBuf, bool)>, String> {
    /// Linux's own limit on links followed while resolving one path.
    const MAX_LINKS: usize = 40;
    let mut at = path.to_path_buf();
    for followed in 0..=MAX_LINKS {
        let is_link = std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            let Some(name) = at.file_name() else {
                // `..` or `/`: an existing directory, refused as one.
                return Ok(std::fs::canonicalize(&at).ok().map(|p| (p, followed > 0)));
            };
            let parent = match at.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            return Ok(std::fs::canonicalize(parent)
                .ok()
                .map(|d| (d.join(name), followed > 0)));
        }
        let target = std::fs::read_link(&at).map_err(|e| format!("{}: {e}", at.display()))?;
        at = match at.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    Err(format!(
        "{}: more than {MAX_LINKS} symbolic links lead on from it; give the file itself",
        path.display()
    ))
}

/// Writes `batch` in `format` to `out` (standard output when `None`).
pub fn write(batch: &RecordBatch, format: Format, out: Option<&Path>) -> Result<(), String> {
    let sink: Box<dyn Write + Send> = match out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
        )),
        None if format == Format::Parquet => {
            return Err("--format parquet writes a file: give --out FILE".into());
        }
        // A failed write ends the process (exit 141 quietly for a closed pipe, `| head`;
        // exit 1 naming the error otherwise): never a partial answer claimed whole.
        None => Box::new(StdoutSink(std::io::BufWriter::new(std::io::stdout()))),
    };
    let fail = |e: &dyn std::fmt::Display| format!("writing rows: {e}");
    match format {
        Format::Csv => {
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(sink);
            w.write(&series_archive::render::flat(batch).map_err(|e| fail(&e))?)
                .map_err(|e| fail(&e))?;
            w.into_inner().flush().map_err(|e| fail(&e))
        }
        Format::Jsonl => {
            let mut w = arrow::json::LineDelimitedWriter::new(sink);
            w.write(batch).map_err(|e| fail(&e))?;
            w.finish().map_err(|e| fail(&e))?;
            w.into_inner().flush().map_err(|e| fail(&e))
        }
        Format::Parquet => {
            let mut w = ArrowWriter::try_new(sink, batch.schema(), None).map_err(|e| fail(&e))?;
            w.write(batch).map_err(|e| fail(&e))?;
            w.close().map(|_| ()).map_err(|e| fail(&e))
        }
    }
}
