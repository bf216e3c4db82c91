//! `serve`: the flags, then the library's server ([`series_archive::serve`]), which says
//! where it listens on standard output and when it stopped on standard error.

use crate::Failure;
use series_archive::serve::{self, Announce};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `serve` was asked for.
#[derive(clap::Args)]
pub struct Options {
    /// The archive directory, or a replica's URL (s3://bucket/prefix, file:///dir): served
    /// from the bucket alone, following each commit the replica receives.
    archive: PathBuf,
    /// The address to listen on (port 0: the system chooses; the line printed says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Require `Authorization: Bearer TOKEN` on every API request (needed to listen anywhere
    /// but loopback; at least 16 characters).
    #[arg(long, env = "SERIES_ARCHIVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The largest survey budget answered (points); larger is refused with 413.
    #[arg(long, default_value_t = 1 << 20)]
    max_budget: usize,
    /// Decoded level cells kept for surveys (about 100 bytes each), across commits: enough to
    /// hold a large stream's finest level whole.
    #[arg(long, default_value_t = 1 << 20)]
    level_cache: usize,
    /// Decoded data row groups kept for surveys and folds answered from raw rows (a fleet's
    /// fine levels, whose cells hold too few rows to be stored), across commits: a packed row
    /// group is read, checked and decoded once, and every later survey of any of its tracks
    /// is cut from it. 0 keeps none.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = series_archive::archive::lifecycle::parse_size)]
    raw_cache: u64,
    /// Connections open at once (lowered to fit the open-file limit). A connection past it
    /// closes the oldest one still waiting for a request head; when every open one is
    /// answering a request, the new one is answered 503.
    #[arg(long, default_value_t = 512)]
    max_connections: usize,
    /// How long a connection may take to send a request's head (line and headers), and may
    /// stay idle between requests, before it is closed: seconds, or with a unit (500ms, 10s).
    #[arg(long, default_value = "10s", value_parser = parse_timeout)]
    header_timeout: Duration,
}

/// `--header-timeout`: seconds, or a number with `ms` or `s`.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let parsed = if let Some(ms) = t.strip_suffix("ms") {
        ms.trim().parse::<u64>().ok().map(Duration::from_millis)
    } else {
        t.strip_suffix('s')
            .unwrap_or(t)
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64)
    };
    match parsed {
        Some(d) if d >= Duration::from_millis(100) => Ok(d),
        Some(_) => Err(format!(
            "{text:?} is under 100 ms: no client could send a request in it"
        )),
        None => Err(format!(
            "{text:?} is not a duration (write 10, 10s or 500ms)"
        )),
    }
}

/// Serves until Ctrl-C (or SIGTERM).
pub fn run(options: Options) -> Result<(), Failure> {
    let Options {
        archive,
        listen,
        token,
        max_budget,
        level_cache,
        raw_cache,
        max_connections,
        header_timeout,
    } = options;
    let options = serve::Options {
        archive,
        listen,
        token,
        max_budget,
        level_cache,
        raw_cache: usize::try_from(raw_cache).unwrap_or(usize::MAX),
        max_connections,
        header_timeout,
        open_files: open_file_limit(),
    };
    Ok(serve::run(options, &mut Said)?)
}

/// The soft limit on open files (`RLIMIT_NOFILE`), where the system says (Linux).
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The server's announcements, as lines: where it listens on standard output (a script
/// reads the address from it), the rest on standard error.
struct Said;

impl Announce for Said {
    fn lowered(&mut self, asked: usize, fitted: usize, open_files: u64) {
        eprintln!(
            "--max-connections {asked} lowered to {fitted}: this process may open {open_files} files (ulimit -n), and {} stay for the archive's own",
            open_files - fitted as u64
        );
    }

    fn listening(&mut self, archive: &Path, address: SocketAddr) {
        out!(
            "serving {} at http://{address}/ (read-only; Ctrl-C stops)",
            archive.display()
        );
    }

    fn stopped(&mut self, archive: &Path) {
        eprintln!("stopped serving {}", archive.display());
    }
}
