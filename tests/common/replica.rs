//! The replica tests' shared steps (tests/replicate.rs, tests/replicate_faults.rs): the CLI run
//! with an environment (a run that hangs is killed and fails the test), the 3 runs × 3 probes
//! workload and its ingest, what a reader is served, and snapshots and restores of the replica
//! on moto. The including test file declares `mod process;` and `mod s3;` beside this one.
#![allow(dead_code)]

use crate::{process, s3};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The bucket the replica tests create on moto.
pub const BUCKET: &str = "replica";
/// The Python side of the replica tests (copies of a prefix, each engine's reader).
pub const CHECK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/s3/replica_check.py");
/// A command still running after this hangs (each command here needs seconds at most).
pub const HANG: Duration = Duration::from_secs(90);

/// A process's environment: what the CLI is run with.
pub type Env = Vec<(&'static str, String)>;

/// Moto's environment with the CLI pointed at `endpoint` instead (`AWS_ENDPOINT`: a proxy in
/// front of moto, or a port where nothing listens), with a request deadline of `deadline`
/// seconds (`SERIES_ARCHIVE_COLD_TIMEOUT`).
pub fn pointed_at(moto: &s3::Moto, endpoint: &str, deadline: &str) -> Env {
    let mut env = moto.env();
    for (k, v) in &mut env {
        if *k == "AWS_ENDPOINT" {
            *v = endpoint.to_owned();
        }
    }
    env.push(("SERIES_ARCHIVE_COLD_TIMEOUT", deadline.to_owned()));
    env
}

/// Runs the CLI with `env`; a run past [`HANG`] is killed and fails the test.
pub fn sa_env(env: &[(&'static str, String)], args: &[&str]) -> Output {
    let mut child = Command::new(process::BIN)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env_remove("SERIES_ARCHIVE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run series-archive");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped")));
    let began = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if began.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            let err = stderr.join().expect("stderr");
            panic!(
                "series-archive {} hung: killed after {HANG:?}\n--- stderr\n{}",
                args.join(" "),
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    }
}

/// Runs the CLI with `env` (as [`sa_env`]); fails the test, showing its output, unless it
/// exits 0.
pub fn ok_env(env: &[(&'static str, String)], args: &[&str]) -> Output {
    let out = sa_env(env, args);
    assert!(
        out.status.success(),
        "{}",
        process::show(&format!("series-archive {}", args.join(" ")), &out)
    );
    out
}

/// The stdout of a run that must exit 0 (as [`ok_env`]).
pub fn ok(env: &[(&'static str, String)], args: &[&str]) -> String {
    String::from_utf8(ok_env(env, args).stdout).expect("utf-8")
}

/// Rows `t0..t1` of ordinal time for 3 runs × 3 probes, as CSV.
pub fn csv(dir: &Path, name: &str, t0: u64, t1: u64) -> String {
    let mut text = String::from("run,probe,ordinal,value,noise\n");
    for t in t0..t1 {
        for r in 0..3u64 {
            for p in 0..3u64 {
                text.push_str(&format!(
                    "run_{r},p{p},{t},{},{}\n",
                    (t * 31 + r * 7 + p * 3) % 997,
                    (t as f64).sqrt() + r as f64 / 3.0
                ));
            }
        }
    }
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write csv");
    path.to_str().expect("utf-8").to_owned()
}

/// Ingests the CSV file `input` (made by [`csv`]) into `archive`'s stream `capture`, tracked by
/// run and probe along `ordinal`; must exit 0.
pub fn ingest(env: &[(&'static str, String)], archive: &str, input: &str) -> Output {
    ingest_with(env, archive, input, &[])
}

/// [`ingest`] with `extra` flags (`--no-compact`, …) before the input.
pub fn ingest_with(
    env: &[(&'static str, String)],
    archive: &str,
    input: &str,
    extra: &[&str],
) -> Output {
    let mut args = vec![
        "ingest",
        archive,
        "--stream",
        "capture",
        "--track",
        "run,probe",
        "--axis",
        "ordinal",
        "--seal-rows",
        "300",
    ];
    args.extend_from_slice(extra);
    args.push(input);
    ok_env(env, &args)
}

/// What a reader is served (asked through `env`): every row, a survey, a fold, one track's
/// rows.
pub fn reads(env: &[(&'static str, String)], archive: &str) -> Vec<String> {
    [
        vec!["rows", archive, "--stream", "capture", "--format", "csv"],
        vec![
            "survey", archive, "--stream", "capture", "--budget", "200", "--json",
        ],
        vec![
            "fold",
            archive,
            "--stream",
            "capture",
            "--aggregate",
            "sum",
            "--json",
        ],
        vec![
            "rows", archive, "--stream", "capture", "--track", "run_1", "p2", "--format", "csv",
        ],
    ]
    .iter()
    .map(|args| ok(env, args))
    .collect()
}

/// Where the replica of `archive` stands (`replicate --status --json`), asked through `env`.
pub fn status(env: &[(&'static str, String)], archive: &str) -> serde_json::Value {
    let text = ok(env, &["replicate", archive, "--status", "--json"]);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Copies the objects under `from` to `to` on moto (a snapshot of the replica as it is now,
/// to restore from without taking `from` over).
pub fn copy_prefix(moto: &s3::Moto, from: &str, to: &str) {
    let python = process::python("boto3");
    let out = Command::new(python)
        .args([CHECK, "copy", &moto.endpoint, BUCKET, from, to])
        .output()
        .expect("run the copy");
    assert!(out.status.success(), "{}", process::show("copy", &out));
}

/// Restores `s3://BUCKET/prefix` (through `env`) into the fresh directory `dir/name`,
/// checks that it verifies, and answers its reads.
pub fn restored_reads(
    env: &[(&'static str, String)],
    dir: &Path,
    prefix: &str,
    name: &str,
) -> Vec<String> {
    let target = dir.join(name);
    let t = target.to_str().expect("utf-8");
    let said = ok(env, &["restore", &format!("s3://{BUCKET}/{prefix}"), t]);
    assert!(said.contains("verified"), "{said}");
    let verify = ok(env, &["verify", t]);
    assert!(verify.starts_with("ok:"), "{verify}");
    reads(env, t)
}

/// What the bucket under `prefix` restores to right now: a snapshot copy of it, under
/// `{prefix}-{name}`, restored straight from moto into `dir/name` (as [`restored_reads`]).
pub fn bucket_now(moto: &s3::Moto, dir: &Path, prefix: &str, name: &str) -> Vec<String> {
    let snapshot = format!("{prefix}-{name}");
    copy_prefix(moto, prefix, &snapshot);
    restored_reads(&moto.env(), dir, &snapshot, name)
}
