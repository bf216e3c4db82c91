//! The command line under hostile conditions (issue 23), run as a user runs it: standard
//! output that fails (a full disk, `/dev/full`, a reader that closed the pipe), an output path
//! that is a dangling symbolic link into the archive, a CSV thousands of columns wide, and
//! input that used to be converted instead of refused.

#[path = "common/process.rs"]
mod process;
#[path = "common/tree.rs"]
mod tree;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use process::{run, sa, scratch, Out, BIN};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

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
    Out::of(&output)
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

/// The largest resident set (bytes) of any child this test process has waited for, from
/// `getrusage(RUSAGE_CHILDREN)`: the kernel's own peak, which polling `/proc` could miss.
/// Every other child of this test binary is an ordinary small command, so it bounds the
/// child measured from above.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn peak_rss_of_children() -> u64 {
    /// `struct rusage` on 64-bit Linux: two `struct timeval`, then 14 `long`s, the first of
    /// which is `ru_maxrss` in KiB.
    #[repr(C)]
    struct Rusage {
        utime: [i64; 2],
        stime: [i64; 2],
        maxrss: i64,
        rest: [i64; 13],
    }
    extern "C" {
        fn getrusage(who: i32, usage: *mut Rusage) -> i32;
    }
    const RUSAGE_CHILDREN: i32 = -1;
    let mut usage = Rusage {
        utime: [0; 2],
        stime: [0; 2],
        maxrss: 0,
        rest: [0; 13],
    };
    // SAFETY: `usage` is a valid, writable `struct rusage` for the duration of the call.
    let rc = unsafe { getrusage(RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    u64::try_from(usage.maxrss).expect("a size") * 1024
}

/// A CSV of one data row and `columns` columns: `run`, `ordinal`, then measured integers.
fn wide_csv(dir: &Path, columns: usize) -> PathBuf {
    let mut header = vec!["run".to_owned(), "ordinal".to_owned()];
    let mut row = vec!["r0".to_owned(), "1".to_owned()];
    for i in 0..columns - 2 {
        header.push(format!("c{i}"));
        row.push(i.to_string());
    }
    let path = dir.join(format!("wide-{columns}.csv"));
    std::fs::write(&path, format!("{}\n{}\n", header.join(","), row.join(","))).expect("write");
    path
}

/// A one-row CSV 10 000 columns wide (about 60 KB) ingests with memory that follows what it
/// holds, not batch rows × columns: the readers' batches are sized by columns. Before, one
/// such row took 10 GB (2 000 columns 2 GB; 100 000 aborted allocating 52 GB). One column
/// more than a stream may hold (10 000) is refused naming the file and the count, with
/// nothing written. Measured (debug build): peak 320 MB, most of it the Parquet writer's
/// per-column state at the seal.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
#[test]
fn a_wide_csv_ingests_with_bounded_memory_and_wider_is_refused() {
    const BOUND: u64 = 640 << 20;
    let dir = scratch("cli-hardening-wide");
    let root = dir.path().join("archive");
    let wide = wide_csv(dir.path(), 10_000);
    let ingest = |input: &Path| {
        sa([
            OsStr::new("ingest"),
            root.as_os_str(),
            OsStr::new("--stream"),
            OsStr::new("wide"),
            OsStr::new("--track"),
            OsStr::new("run"),
            OsStr::new("--axis"),
            OsStr::new("ordinal"),
            input.as_os_str(),
        ])
    };
    ingest(&wide).expect(0, "a 10 000-column row");
    let peak = peak_rss_of_children();
    println!("peak RSS of the 10 000-column ingest: {} MiB", peak >> 20);
    assert!(
        peak <= BOUND,
        "the 10 000-column ingest peaked at {} MiB (bound {} MiB)",
        peak >> 20,
        BOUND >> 20
    );
    let out = run("inspect", &root, &["--json"]).expect(0, "inspect");
    let d: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(d["streams"][0]["rows"], 1);
    assert_eq!(
        d["streams"][0]["columns"].as_array().map(Vec::len),
        Some(10_000)
    );

    let before = data(&root);
    let wider = wide_csv(dir.path(), 10_001);
    ingest(&wider).expect(1, "10 001 columns").stderr_has(
        &["wide-10001.csv", "10001 columns", "at most 10000"],
        "wider",
    );
    unchanged(&before, &root, "a refused wide file");
    let fresh = dir.path().join("fresh");
    sa([
        OsStr::new("ingest"),
        fresh.as_os_str(),
        OsStr::new("--stream"),
        OsStr::new("wide"),
        OsStr::new("--track"),
        OsStr::new("run"),
        OsStr::new("--axis"),
        OsStr::new("ordinal"),
        wider.as_os_str(),
    ])
    .expect(1, "10 001 columns, new archive");
    assert!(!fresh.exists(), "a refused first file creates no archive");
}

/// Writes one batch as Parquet with arrow's own writer.
fn write_parquet(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, c)| Field::new(*n, c.data_type().clone(), false))
        .collect();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, c)| c).collect(),
    )
    .expect("batch");
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(path).expect("create"),
        batch.schema(),
        None,
    )
    .expect("writer");
    w.write(&batch).expect("write");
    w.close().expect("close");
}

/// Values a new stream's inferred or declared types would store changed are refused, naming
/// file, row and column, and no archive is made: a number inside a JSON object or list that
/// its field's type would truncate, a key the object's struct lacks (it would be dropped), an
/// integer past what a float holds exactly, a CSV time whose fraction a coarser unit drops or
/// a date-time in a date column, a word other than true or false in a boolean column, a
/// decimal with more places than its scale, a number too near zero for its float type (it
/// would be stored as 0; a written zero is taken), an unsigned value past 2^63 - 1 inside a
/// list, and a Parquet integer that rounds past its type's maximum as a float.
#[test]
fn values_a_type_would_change_are_refused_in_a_new_stream() {
    let dir = scratch("cli-hardening-types");
    let bad = dir.path().join("bad");
    std::fs::create_dir(&bad).expect("mkdir");
    let write = |name: &str, text: String| {
        let path = bad.join(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    // 10,001 rows of `good`, past the 10,000 the columns are inferred from, then `last`.
    let late = |good: &str, last: &str| {
        let mut text: String = (0..10_001)
            .map(|i| format!(r#"{{"host":"a","ts":{i},{good}}}"#) + "\n")
            .collect();
        text.push_str(&format!(r#"{{"host":"a","ts":20000,{last}}}"#));
        text.push('\n');
        text
    };
    let big = bad.join("big.parquet");
    write_parquet(
        &big,
        vec![
            (
                "host",
                Arc::new(StringArray::from(vec!["a", "a"])) as ArrayRef,
            ),
            ("ts", Arc::new(UInt64Array::from(vec![1, 2]))),
            ("v", Arc::new(Int64Array::from(vec![1, i64::MAX]))),
        ],
    );
    let counts = bad.join("counts.parquet");
    write_parquet(
        &counts,
        vec![
            (
                "host",
                Arc::new(StringArray::from(vec!["a", "a"])) as ArrayRef,
            ),
            ("ts", Arc::new(UInt64Array::from(vec![1, 2]))),
            (
                "counts",
                Arc::new(arrow::array::ListArray::from_iter_primitive::<
                    arrow::datatypes::UInt64Type,
                    _,
                    _,
                >(vec![
                    Some(vec![Some(1), Some(2)]),
                    Some(vec![Some(3), Some(u64::MAX)]),
                ])),
            ),
        ],
    );
    // (name, input files, extra flags, what the refusal names)
    type Case<'a> = (&'a str, Vec<PathBuf>, Vec<&'a str>, Vec<&'a str>);
    let cases: Vec<Case> = vec![
        (
            "nested",
            vec![write(
                "nested.jsonl",
                late(r#""m":{"x":1}"#, r#""m":{"x":7.9}"#),
            )],
            vec![],
            vec!["row 10001", "column \"m.x\"", "7.9 is not an integer"],
        ),
        (
            "nested-key",
            vec![write(
                "nested-key.jsonl",
                late(r#""m":{"x":1}"#, r#""m":{"x":2,"y":5}"#),
            )],
            vec![],
            vec!["column \"m\"", "key \"y\" is not among its fields"],
        ),
        (
            "list",
            vec![write("list.jsonl", late(r#""l":[1,2]"#, r#""l":[1,2.5]"#))],
            vec![],
            vec!["column \"l[1]\"", "2.5 is not an integer"],
        ),
        (
            "integer-float",
            vec![write(
                "integer-float.jsonl",
                "{\"host\":\"a\",\"ts\":1,\"v\":1.5}\n{\"host\":\"a\",\"ts\":2,\"v\":9007199254740993}\n"
                    .to_owned(),
            )],
            vec![],
            vec!["row 1", "column \"v\"", "cannot hold exactly"],
        ),
        (
            "fraction",
            vec![
                write("t1.csv", "host,ts,t\na,1,2024-01-01T00:00:00\n".to_owned()),
                write("t2.csv", "host,ts,t\na,2,2024-01-01T00:00:00.987\n".to_owned()),
            ],
            vec![],
            vec![
                "t2.csv",
                "column \"t\"",
                "\"2024-01-01T00:00:00.987\" is not a valid Timestamp(s)",
            ],
        ),
        (
            "date-time",
            vec![
                write("d1.csv", "host,ts,d\na,1,2024-01-01\n".to_owned()),
                write("d2.csv", "host,ts,d\na,2,2024-01-01T23:59:59\n".to_owned()),
            ],
            vec![],
            vec!["d2.csv", "column \"d\"", "is not a valid Date32"],
        ),
        (
            "boolean-word",
            vec![
                write("b1.csv", "host,ts,b\na,1,true\n".to_owned()),
                write("b2.csv", "host,ts,b\na,2,FALSE\na,3,yes\n".to_owned()),
            ],
            vec![],
            vec![
                "b2.csv",
                "row 1",
                "column \"b\"",
                "\"yes\" is not a valid Boolean",
            ],
        ),
        (
            "decimal",
            vec![write("p.csv", "host,ts,p\na,1,1.25\na,2,1.239\n".to_owned())],
            vec!["--types", "p:Decimal128(10, 2)"],
            vec!["row 1", "column \"p\"", "would be stored as 1.24"],
        ),
        (
            "unsigned-in-a-list",
            vec![counts.clone()],
            vec![],
            vec!["row 1", "column \"counts\"", "18446744073709551615 is above"],
        ),
        (
            "json-underflow",
            vec![write(
                "under.jsonl",
                "{\"host\":\"a\",\"ts\":1,\"v\":0.0,\"s\":\"1e-400\"}\n{\"host\":\"a\",\"ts\":2,\"v\":-0e9,\"s\":\"x\"}\n{\"host\":\"a\",\"ts\":3,\"v\":2.5e-400,\"s\":\"y\"}\n"
                    .to_owned(),
            )],
            vec![],
            vec!["row 2", "column \"v\"", "2.5e-400 is too near zero"],
        ),
        (
            "json-underflow-in-a-list",
            vec![write(
                "under-list.jsonl",
                late(r#""l":[0.5,0.0]"#, r#""l":[0.5,1e-999]"#),
            )],
            vec![],
            vec!["row 10001", "column \"l\"", "1e-999 is too near zero"],
        ),
        (
            "json-underflow-float32",
            vec![write(
                "under32.jsonl",
                "{\"host\":\"a\",\"ts\":1,\"v\":1e-50}\n".to_owned(),
            )],
            vec!["--types", "v:Float32"],
            vec!["row 0", "column \"v\"", "1e-50 is too near zero"],
        ),
        (
            "csv-underflow",
            vec![write(
                "under.csv",
                "host,ts,v\na,1,0.0\na,2,-0e10\na,3,1e-400\n".to_owned(),
            )],
            vec![],
            vec!["row 2", "column \"v\"", "\"1e-400\" is too near zero for Float64"],
        ),
        (
            "csv-underflow-float32",
            vec![write(
                "under32.csv",
                "host,ts,v\na,1,1.5\na,2,1e-50\n".to_owned(),
            )],
            vec!["--types", "v:Float32"],
            vec!["row 1", "column \"v\"", "too near zero for Float32"],
        ),
        (
            "csv-integer-rounded",
            vec![write(
                "rounded.csv",
                "host,ts,v\na,1,1.5\na,2,9007199254740993\n".to_owned(),
            )],
            vec![],
            vec!["row 1", "column \"v\"", "cannot be held exactly by Float64"],
        ),
        (
            "json-underflow-integer",
            vec![write(
                "under-int.jsonl",
                "{\"host\":\"a\",\"ts\":1,\"n\":3}\n{\"host\":\"a\",\"ts\":2,\"n\":1e-400}\n"
                    .to_owned(),
            )],
            vec![],
            vec!["row 1", "column \"n\"", "1e-400 is too near zero"],
        ),
        (
            "json-float16-integer",
            vec![write(
                "half.jsonl",
                "{\"host\":\"a\",\"ts\":1,\"h\":1.5}\n{\"host\":\"a\",\"ts\":2,\"h\":2049}\n"
                    .to_owned(),
            )],
            vec!["--types", "h:Float16"],
            vec!["row 1", "column \"h\"", "2049 is an integer this float type cannot hold exactly"],
        ),
        (
            "parquet-max",
            vec![big.clone()],
            vec!["--types", "v:Float64"],
            vec!["row 1", "column \"v\"", "is not a valid Float64"],
        ),
    ];
    let mut missed = Vec::new();
    for (name, files, extra, needles) in &cases {
        let root = dir.path().join(format!("archive-{name}"));
        let mut args: Vec<&OsStr> = vec![
            "ingest".as_ref(),
            root.as_os_str(),
            "--stream".as_ref(),
            "s".as_ref(),
            "--track".as_ref(),
            "host".as_ref(),
            "--axis".as_ref(),
            "ts".as_ref(),
        ];
        args.extend(extra.iter().map(OsStr::new));
        args.extend(files.iter().map(|f| f.as_os_str()));
        let out = sa(args);
        if out.code != 1 || !needles.iter().all(|n| out.stderr.contains(n)) {
            missed.push(format!(
                "{name}: exit {}, stderr {:?} (want exit 1 naming {needles:?})",
                out.code, out.stderr
            ));
        } else if root.join("manifest").exists() {
            missed.push(format!("{name}: refused, but an archive was made"));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
    // A number too near zero written into a text column is stored as its text, beside a
    // float column holding a zero: nothing to refuse.
    let text = write(
        "text.jsonl",
        "{\"host\":\"a\",\"ts\":1,\"v\":0.0,\"note\":1e-400}\n".to_owned(),
    );
    let root = dir.path().join("archive-text");
    let out = sa([
        "ingest".as_ref(),
        root.as_os_str(),
        "--stream".as_ref(),
        "s".as_ref(),
        "--track".as_ref(),
        "host".as_ref(),
        "--axis".as_ref(),
        "ts".as_ref(),
        "--types".as_ref(),
        "note:text".as_ref(),
        text.as_os_str(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows = sa([
        "rows".as_ref(),
        root.as_os_str(),
        "--stream".as_ref(),
        "s".as_ref(),
    ]);
    assert!(rows.stdout.contains("a,1,0.0,1e-400,1"), "{}", rows.stdout);
}

/// Input that the readers used to convert silently is refused naming file, row and column,
/// and the archive is left byte for byte as it was: a JSON string `"7"` or `true` into a
/// number column, `7.5` into an integer column past the inference window (truncated to 7),
/// `1e400` (stored as infinity) in JSON and CSV, a Parquet text column into an integer
/// column, a Parquet `Timestamp(ns)` into the UInt64 axis, an empty header name, a 0-byte
/// or header-only file for an existing stream, and `retire --track` naming no track.
#[test]
fn input_that_would_be_changed_is_refused_and_nothing_is_written() {
    let dir = scratch("cli-hardening-input");
    let root = archive(dir.path());
    let before = data(&root);
    let bad = dir.path().join("bad");
    std::fs::create_dir(&bad).expect("mkdir");
    // The archive holds ordinal 0..199 per track; 1000 and up are ahead of every track.
    let line = |o: u64, value: &str, noise: &str| {
        format!(r#"{{"run":"run_0","probe":"p0","ordinal":{o},"value":{value},"noise":{noise}}}"#)
    };
    let two = |value: &str, noise: &str| {
        format!("{}\n{}\n", line(1000, "1", "0.5"), line(1001, value, noise))
    };
    // 10 001 good rows, past the 10 000 the columns are inferred from, then `last`.
    let late = |value: &str, noise: &str| {
        let mut text: String = (0..10_001)
            .map(|i| line(1000 + i, "1", "0.5") + "\n")
            .collect();
        text.push_str(&line(20_000, value, noise));
        text.push('\n');
        text
    };
    let at_1 = ["row 1 (line 2)"];
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "string-int.jsonl",
            two(r#""7""#, "0.5"),
            vec![at_1[0], "column \"value\"", "\"7\"", "JSON string"],
        ),
        (
            "string-float.jsonl",
            two("1", r#""2.5""#),
            vec![at_1[0], "column \"noise\"", "JSON string"],
        ),
        (
            "bool-int.jsonl",
            two("true", "0.5"),
            vec![at_1[0], "column \"value\"", "JSON boolean"],
        ),
        (
            "all-bool.jsonl",
            line(1001, "1", "true") + "\n",
            vec!["row 0 (line 1)", "column \"noise\"", "JSON boolean"],
        ),
        (
            "string-late.jsonl",
            late(r#""7""#, "0.5"),
            vec!["row 10001 (line 10002)", "column \"value\"", "JSON string"],
        ),
        (
            "fraction-late.jsonl",
            late("7.5", "0.5"),
            vec![
                "row 10001 (line 10002)",
                "column \"value\"",
                "7.5 is not an integer",
            ],
        ),
        (
            "huge.jsonl",
            two("1", "1e400"),
            vec![at_1[0], "column \"noise\"", "out of range"],
        ),
        (
            "huge-late.jsonl",
            late("1", "1e400"),
            vec!["row 10001 (line 10002)", "column \"noise\"", "out of range"],
        ),
        (
            "huge.csv",
            "run,probe,ordinal,value,noise\nrun_0,p0,1000,1,0.5\nrun_0,p0,1001,1,1e400\n"
                .to_owned(),
            vec![
                "row 1 (line 3)",
                "column \"noise\"",
                "\"1e400\"",
                "infinity",
            ],
        ),
        (
            "empty-name.csv",
            "run,probe,ordinal,value,noise,\nrun_0,p0,1000,1,0.5,3\n".to_owned(),
            vec!["column 6 (of 6) has no name"],
        ),
        ("empty.csv", String::new(), vec!["no rows"]),
        (
            "header-only.csv",
            "run,probe,ordinal,value,noise\n".to_owned(),
            vec!["no rows"],
        ),
    ];
    // Every case is tried on a fresh copy (an accepted one changes the archive), and every
    // miss listed.
    let mut missed = Vec::new();
    let mut attempt = |name: &str, path: &Path, needles: &[&str]| {
        let copy = dir.path().join(format!("copy-{name}"));
        tree::copy_tree(&root, &copy);
        let before = data(&copy);
        let out = sa(ingest_args(&copy, path, &[]));
        let shown = path.display().to_string();
        let named = needles
            .iter()
            .chain([&shown.as_str()])
            .all(|n| out.stderr.contains(n));
        if out.code != 1 || !named || !out.stdout.is_empty() {
            missed.push(format!(
                "{name}: exit {}, stderr {:?} (want exit 1 naming {needles:?})",
                out.code, out.stderr
            ));
        } else if data(&copy) != before {
            missed.push(format!("{name}: refused, but the archive changed"));
        }
        std::fs::remove_dir_all(&copy).expect("remove the copy");
    };
    for (name, content, needles) in &cases {
        let path = bad.join(name);
        std::fs::write(&path, content).expect("write");
        attempt(name, &path, needles);
    }

    // Parquet: a text column into the Int64 column, a Timestamp(ns) into the UInt64 axis.
    let labels = |n: usize| -> Vec<(&'static str, ArrayRef)> {
        vec![
            ("run", Arc::new(StringArray::from(vec!["run_0"; n]))),
            ("probe", Arc::new(StringArray::from(vec!["p0"; n]))),
        ]
    };
    let text = bad.join("text-value.parquet");
    let mut columns = labels(2);
    columns.push(("ordinal", Arc::new(UInt64Array::from(vec![1000, 1001]))));
    columns.push(("value", Arc::new(StringArray::from(vec!["7", "8"]))));
    columns.push(("noise", Arc::new(Float64Array::from(vec![0.5, 1.5]))));
    write_parquet(&text, columns);
    let timestamp = bad.join("timestamp-axis.parquet");
    let timestamp_type = DataType::Timestamp(TimeUnit::Nanosecond, None).to_string();
    let mut columns = labels(2);
    columns.push((
        "ordinal",
        Arc::new(arrow::array::TimestampNanosecondArray::from(vec![
            1000, 1001,
        ])),
    ));
    columns.push(("value", Arc::new(Int64Array::from(vec![1, 2]))));
    columns.push(("noise", Arc::new(Float64Array::from(vec![0.5, 1.5]))));
    write_parquet(&timestamp, columns);
    attempt(
        "text-value.parquet",
        &text,
        &["row 0", "column \"value\"", "Utf8", "Int64"],
    );
    attempt(
        "timestamp-axis.parquet",
        &timestamp,
        &["row 0", "column \"ordinal\"", &timestamp_type, "UInt64"],
    );

    // An empty header name in a new stream's first file creates nothing.
    let fresh = dir.path().join("fresh");
    let out = sa(ingest_args(&fresh, &bad.join("empty-name.csv"), &[]));
    if out.code != 1 || !out.stderr.contains("has no name") || fresh.exists() {
        missed.push(format!(
            "empty-name.csv into a new archive: exit {}, stderr {:?}, archive created: {}",
            out.code,
            out.stderr,
            fresh.exists()
        ));
    }

    // `retire --track` naming no track is refused (a label with a comma is one label).
    for label in ["nosuch", "run_0,p0"] {
        let copy = dir.path().join("copy-retire");
        tree::copy_tree(&root, &copy);
        let before = data(&copy);
        let out = run("retire", &copy, &["--stream", "capture", "--track", label]);
        if out.code != 1 || !out.stderr.contains("no track under") {
            missed.push(format!(
                "retire --track {label}: exit {}, stdout {:?}, stderr {:?} (want exit 1)",
                out.code, out.stdout, out.stderr
            ));
        } else if data(&copy) != before {
            missed.push(format!(
                "retire --track {label}: refused, but the archive changed"
            ));
        }
        std::fs::remove_dir_all(&copy).expect("remove the copy");
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
    unchanged(&before, &root, "every refusal");

    // What is allowed still is: a JSON integer into the Int64 column, 8.0 (exact), and an
    // integer into the Float64 column.
    let fine = bad.join("fine.jsonl");
    std::fs::write(
        &fine,
        concat!(
            r#"{"run":"run_0","probe":"p0","ordinal":1000,"value":7,"noise":1}"#,
            "\n",
            r#"{"run":"run_0","probe":"p0","ordinal":1001,"value":8.0,"noise":-2.5}"#,
            "\n",
        ),
    )
    .expect("write");
    sa(ingest_args(&root, &fine, &[])).expect(0, "good JSON");
    run(
        "retire",
        &root,
        &["--stream", "capture", "--track", "run_1"],
    )
    .expect(0, "retire a track that exists");
    run(
        "retire",
        &root,
        &["--stream", "capture", "--track", "run_1"],
    )
    .expect(0, "retire it again: nothing left");
    let rows = run("rows", &root, &["--stream", "capture", "--from", "801"]).expect(0, "rows");
    assert_eq!(
        rows.stdout,
        "run,probe,ordinal,value,noise,_position\nrun_0,p0,1000,7,1.0,801\nrun_0,p0,1001,8,-2.5,802\n"
    );
}
