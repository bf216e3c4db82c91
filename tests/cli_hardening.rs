//! The command line under hostile conditions (issue 23), run as a user runs it: standard
//! output that fails (a full disk, `/dev/full`, a reader that closed the pipe) and an output
//! path that is a dangling symbolic link into the archive.

#[path = "common/process.rs"]
mod process;
#[path = "common/tree.rs"]
mod tree;

use process::{scratch, BIN};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What a run of the binary did.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn expect(self, code: i32, what: &str) -> Out {
        assert_eq!(
            self.code, code,
            "{what}: expected exit {code}\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    fn stderr_has(self, needles: &[&str], what: &str) -> Out {
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

/// Where a run's standard output goes.
#[derive(Clone, Copy, Debug)]
enum Sink {
    /// A pipe the test reads.
    Captured,
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
    /// A pipe whose read end is closed before the process starts: every write fails with
    /// EPIPE (what `| head` does once it has read its lines, without the race).
    Closed,
}

fn run_to<I, S>(sink: Sink, args: I) -> Out
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env_remove("SERIES_ARCHIVE_LOG")
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    match sink {
        Sink::Captured => {
            command.stdout(Stdio::piped());
        }
        Sink::Full => {
            let full = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full opens");
            command.stdout(full);
        }
        Sink::Closed => {
            let (reader, writer) = std::io::pipe().expect("a pipe");
            drop(reader);
            command.stdout(writer);
        }
    }
    let output = command.output().expect("run series-archive");
    // The command's writer end is dropped with `command`'s Stdio; nothing else holds the
    // closed pipe's read end.
    Out {
        code: output
            .status
            .code()
            .unwrap_or_else(|| panic!("exited, not killed: {}", output.status)),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn sa<I, S>(args: I) -> Out
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_to(Sink::Captured, args)
}

/// `series-archive VERB ARCHIVE REST…`.
fn run(verb: &str, archive: &Path, rest: &[&str]) -> Out {
    let mut args: Vec<&OsStr> = vec![verb.as_ref(), archive.as_os_str()];
    args.extend(rest.iter().map(OsStr::new));
    sa(args)
}

/// A CSV of `ticks` rows per track over 2 runs × 2 probes: `4 × ticks` rows of an integer
/// `value` and a float `noise` (never integral, so it is read as Float64).
fn csv(dir: &Path, name: &str, ticks: u64) -> PathBuf {
    let mut text = String::from("run,probe,ordinal,value,noise\n");
    for t in 0..ticks {
        for r in 0..2 {
            for p in 0..2 {
                let value = t as i64 * 3 - r * 7 + p;
                text.push_str(&format!(
                    "run_{r},p{p},{t},{value},{}\n",
                    value as f64 + 0.5
                ));
            }
        }
    }
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write csv");
    path
}

fn ingest_args<'a>(root: &'a Path, input: &'a Path, extra: &[&'a str]) -> Vec<&'a OsStr> {
    let mut args: Vec<&OsStr> = vec![
        "ingest".as_ref(),
        root.as_os_str(),
        "--stream".as_ref(),
        "capture".as_ref(),
        "--track".as_ref(),
        "run,probe".as_ref(),
        "--axis".as_ref(),
        "ordinal".as_ref(),
    ];
    args.extend(extra.iter().map(|s| OsStr::new(*s)));
    args.push(input.as_os_str());
    args
}

/// An archive of 800 rows in 8 barriers, ingested by the binary.
fn archive(dir: &Path) -> PathBuf {
    let root = dir.join("archive");
    let input = csv(dir, "rows.csv", 200);
    let out = sa(ingest_args(&root, &input, &["--seal-rows", "100"])).expect(0, "ingest");
    assert!(out.stdout.contains("barrier 8"), "{}", out.stdout);
    root
}

/// The archive's files, without the writable open's `LOCK` (which holds no data).
fn data(root: &Path) -> tree::Tree {
    let mut files = tree::tree(root);
    files.remove("LOCK");
    files
}

/// Asserts that `what` left every file of the archive byte for byte as `before` holds it.
fn unchanged(before: &tree::Tree, root: &Path, what: &str) {
    let after = data(root);
    assert_eq!(
        tree::listing(before),
        tree::listing(&after),
        "{what} changed the archive"
    );
    assert!(*before == after, "{what} changed a byte of the archive");
}

/// The rows a stream holds, as `inspect --json` counts them.
fn stored_rows(root: &Path) -> u64 {
    let out = run("inspect", root, &["--json"]).expect(0, "inspect --json");
    let d: serde_json::Value = serde_json::from_str(&out.stdout).expect("inspect JSON");
    d["streams"][0]["rows"].as_u64().expect("a row count")
}

/// An ingest whose barrier lines cannot be written finishes: every checked row is stored,
/// and it exits 1 saying so (the rows were acknowledged; a rerun would store them twice at
/// new automatic positions). Before, it stopped at the first failed line with exit 0: 200 of
/// 4 800 rows on `/dev/full`, a few hundred on a closed pipe.
#[test]
fn an_ingest_whose_output_fails_finishes_and_exits_1() {
    let dir = scratch("cli-hardening-ingest-out");
    let input = csv(dir.path(), "rows.csv", 1200);
    for sink in [Sink::Full, Sink::Closed] {
        let root = dir.path().join(format!("{sink:?}"));
        let out = run_to(sink, ingest_args(&root, &input, &["--seal-rows", "100"]))
            .expect(1, &format!("ingest onto {sink:?}"))
            .stderr_has(
                &[
                    "writing to standard output failed",
                    "all 4800 rows are durable",
                    "do not ingest these files again",
                ],
                &format!("ingest onto {sink:?}"),
            );
        let reason = match sink {
            Sink::Full => "No space left on device",
            _ => "Broken pipe",
        };
        assert!(out.stderr.contains(reason), "{sink:?}: {}", out.stderr);
        assert_eq!(stored_rows(&root), 4800, "{sink:?}: every checked row");
        run("verify", &root, &[]).expect(0, "verify after the ingest");
    }
}

/// A read command whose standard output fails never exits 0: a closed pipe ends it quietly
/// with 141 (as a shell reports a writer killed by SIGPIPE), any other failure (ENOSPC) is
/// exit 1 with the reason on stderr. `verify` of a damaged archive too. Before, every one of
/// them exited 0 with its output lost.
#[test]
fn a_reader_whose_output_fails_exits_non_zero() {
    let dir = scratch("cli-hardening-read-out");
    let root = archive(dir.path());
    let damaged = dir.path().join("damaged");
    tree::copy_tree(&root, &damaged);
    // One byte of one data file: `verify` reports it (exit 4 when its output is fine).
    let data_file = damaged.join("streams/capture/rows/000000000003.parquet");
    let mut bytes = std::fs::read(&data_file).expect("read a data file");
    bytes[200] ^= 0x10;
    std::fs::write(&data_file, bytes).expect("write");
    let verified = run("verify", &damaged, &[]).expect(4, "verify of the damaged copy");
    assert!(verified.stdout.contains("DAMAGED"), "{}", verified.stdout);

    let (r, d) = (
        root.to_str().expect("utf-8"),
        damaged.to_str().expect("utf-8"),
    );
    let commands: Vec<Vec<&str>> = vec![
        vec!["verify", r],
        vec!["verify", d],
        vec![
            "survey", r, "--stream", "capture", "--budget", "400", "--json",
        ],
        vec![
            "survey", r, "--stream", "capture", "--budget", "400", "--csv",
        ],
        vec!["fold", r, "--stream", "capture", "--aggregate", "p95"],
        vec![
            "fold",
            r,
            "--stream",
            "capture",
            "--aggregate",
            "mean",
            "--json",
        ],
        vec!["files", r, "--stream", "capture"],
        vec!["inspect", r],
        vec!["inspect", r, "--json"],
        vec!["rows", r, "--stream", "capture"],
    ];
    // Every command and sink is tried, and every miss listed.
    let mut missed = Vec::new();
    for args in &commands {
        let shown = args.join(" ");
        let out = run_to(Sink::Full, args);
        if out.code != 1 || !out.stderr.contains("No space left on device") {
            missed.push(format!(
                "{shown} > /dev/full: exit {}, stderr {:?} (want exit 1 naming ENOSPC)",
                out.code, out.stderr
            ));
        }
        let out = run_to(Sink::Closed, args);
        if out.code != 141 || !out.stderr.is_empty() {
            missed.push(format!(
                "{shown} into a closed pipe: exit {}, stderr {:?} (want exit 141, quietly)",
                out.code, out.stderr
            ));
        }
        // The same command with its output read whole succeeds (or reports the damage).
        let whole = run_to(Sink::Captured, args);
        assert_eq!(
            whole.code,
            if args[1] == d { 4 } else { 0 },
            "{shown}: {}",
            whole.stderr
        );
        assert!(!whole.stdout.is_empty(), "{shown} prints something");
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

/// `rows --out` through a symbolic link outside the archive that dangles into it (a
/// manifest generation that does not exist yet, directly or through a chain of relative
/// links) is refused, and nothing changes. Before, the check fell back to the unresolved path
/// when `canonicalize` failed on the dangling link, and the CSV became a new manifest
/// generation that every command then failed on. `survey --plot` takes the same check.
#[test]
fn output_through_a_dangling_link_into_the_archive_is_refused() {
    let dir = scratch("cli-hardening-link");
    let root = archive(dir.path());
    let before = data(&root);
    let generation = root
        .canonicalize()
        .expect("archive")
        .join("manifest/gen-000000000099.log");
    let direct = dir.path().join("direct.csv");
    std::os::unix::fs::symlink(&generation, &direct).expect("symlink");
    // A chain: outside/chain.csv -> ../hop.csv -> archive/manifest/gen-…99.log (relative).
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    let hop = dir.path().join("hop.csv");
    std::os::unix::fs::symlink("archive/manifest/gen-000000000099.log", &hop).expect("symlink");
    let chain = outside.join("chain.csv");
    std::os::unix::fs::symlink("../hop.csv", &chain).expect("symlink");
    for link in [&direct, &chain] {
        assert!(!link.exists(), "the link dangles");
        let out = run(
            "rows",
            &root,
            &[
                "--stream",
                "capture",
                "--out",
                link.to_str().expect("utf-8"),
                "--force",
            ],
        )
        .expect(1, "rows --out through a dangling link");
        assert!(
            out.stderr.contains("inside the archive") && out.stderr.contains("symbolic link"),
            "{}",
            out.stderr
        );
        unchanged(&before, &root, "rows --out through a dangling link");
    }
    let plot = dir.path().join("plot.svg");
    std::os::unix::fs::symlink(root.join("streams/capture/plot.svg"), &plot).expect("symlink");
    let out = run(
        "survey",
        &root,
        &[
            "--stream",
            "capture",
            "--budget",
            "40",
            "--plot",
            plot.to_str().expect("utf-8"),
        ],
    )
    .expect(1, "survey --plot through a dangling link");
    assert!(out.stderr.contains("inside the archive"), "{}", out.stderr);
    unchanged(&before, &root, "survey --plot through a dangling link");
    // Every command still reads the archive.
    run("verify", &root, &[]).expect(0, "verify");
    assert_eq!(stored_rows(&root), 800);
    // A link that leads outside the archive is written through, as before.
    let target = dir.path().join("elsewhere.csv");
    let fine = dir.path().join("fine.csv");
    std::os::unix::fs::symlink(&target, &fine).expect("symlink");
    run(
        "rows",
        &root,
        &[
            "--stream",
            "capture",
            "--out",
            fine.to_str().expect("utf-8"),
        ],
    )
    .expect(0, "rows --out through a link outside the archive");
    let written = std::fs::read_to_string(&target).expect("the link's target");
    assert_eq!(written.lines().count(), 1 + 800);
}
