//! Running the real binary and the interop Python, shared by the interop test files.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The series-archive binary built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_series-archive");

/// The interpreter from `SERIES_ARCHIVE_PYTHON`, checked to import `modules` (e.g.
/// `"duckdb, polars"`); panics (fails the test, never skips) with what to do otherwise.
pub fn python(modules: &str) -> PathBuf {
    let python = match std::env::var_os("SERIES_ARCHIVE_PYTHON") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!(
            "SERIES_ARCHIVE_PYTHON is not set. The interop tests need a Python with \
             {modules}: run the suite with `scripts/test` (it creates .venv from \
             requirements-test.txt and sets SERIES_ARCHIVE_PYTHON), or set \
             SERIES_ARCHIVE_PYTHON=/path/to/.venv/bin/python yourself."
        ),
    };
    let probe = Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "SERIES_ARCHIVE_PYTHON={} cannot be run ({e}); run `scripts/test`",
                python.display()
            )
        });
    assert!(
        probe.status.success(),
        "SERIES_ARCHIVE_PYTHON={} lacks {modules}; run `scripts/test` (installs \
         requirements-test.txt into .venv):\n{}",
        python.display(),
        String::from_utf8_lossy(&probe.stderr)
    );
    python
}

/// A process's status and output, for a failure message.
pub fn show(what: &str, out: &Output) -> String {
    format!(
        "{what}: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs the CLI; panics with its output unless it succeeds.
pub fn cli(args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("the series-archive binary runs");
    assert!(
        out.status.success(),
        "{}",
        show(&format!("series-archive {}", args.join(" ")), &out)
    );
    out
}

/// A scratch directory under cargo's per-target temporary directory.
pub fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(name)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("a scratch directory")
}

/// Runs the interop checker `script` (under the crate root) with `args` on `python`, prints
/// its report, and panics unless it exits 0 with its verdict line (`VERDICT: ok:` — a
/// checker that exits 0 without it has checked nothing). Answers its stdout.
pub fn run_checker(
    python: &std::path::Path,
    script: &str,
    args: &[&std::ffi::OsStr],
    verdict: &str,
) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python)
        .current_dir(root)
        .arg(root.join(script))
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let report = show(
        &format!("{} {script} {}", python.display(), shown.join(" ")),
        &out,
    );
    println!("{report}");
    assert!(out.status.success(), "{report}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains(&format!("{verdict}: ok:")),
        "{script} exited 0 without its verdict line:\n{stdout}"
    );
    stdout
}

/// `python ARGS…` (a script under the repository root and its arguments), run from the root
/// without writing bytecode, its output captured.
pub fn script(python: &Path, args: &[&str]) -> Output {
    Command::new(python)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs")
}

/// What a run of the binary did.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The run's status, stdout and stderr, as they came back.
    pub fn of(output: &Output) -> Out {
        Out {
            code: output
                .status
                .code()
                .unwrap_or_else(|| panic!("exited, not killed: {}", output.status)),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Fails the test unless the run exited `code`, showing both streams.
    pub fn expect(self, code: i32, what: &str) -> Out {
        assert_eq!(
            self.code, code,
            "{what}: expected exit {code}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Fails the test unless stderr holds every needle.
    pub fn stderr_has(self, needles: &[&str], what: &str) -> Out {
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "{what}: stderr should contain {n:?}\nstderr:\n{}",
                self.stderr
            );
        }
        self
    }
}

/// `series-archive ARGS…`, its log quiet, its output captured.
pub fn sa<I, S>(args: I) -> Out
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let output = Command::new(BIN)
        .args(args)
        .env_remove("SERIES_ARCHIVE_LOG")
        .output()
        .expect("run series-archive");
    Out::of(&output)
}

/// `series-archive VERB ARCHIVE REST…`.
pub fn run(verb: &str, archive: &Path, rest: &[&str]) -> Out {
    let mut args: Vec<&OsStr> = vec![verb.as_ref(), archive.as_os_str()];
    args.extend(rest.iter().map(OsStr::new));
    sa(args)
}

/// The rows of the Markdown table in `report` whose header line starts with `header`, each as
/// its cells (label first); every row must have `columns` cells, none empty.
pub fn table_rows(report: &str, header: &str, columns: usize) -> Vec<Vec<String>> {
    let rows: Vec<Vec<String>> = report
        .lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<String> = line
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect();
            assert_eq!(cells.len(), columns, "a label and its figures: {line}");
            assert!(cells.iter().all(|c| !c.is_empty()), "no empty cell: {line}");
            cells
        })
        .collect();
    rows
}
