//! A bucket that is down, slow, throttling, resetting connections or losing answers never
//! stops a commit and never loses anything (issue 26, "Faults"): the real CLI, a real
//! S3-compatible server on loopback (moto) and, between them, a fault-injecting proxy
//! (`tests/s3/fault_proxy.py`) switched at run time between forwarding faithfully, answering
//! `503 SlowDown`, resetting connections, stalling, answering slowly, losing the server's
//! answers, and a mix of these on every Nth request.
//!
//! Throughout: every committing command exits 0 whatever the bucket does, saying so when its
//! replication pass failed; what the archive serves is exactly what an identical archive with
//! no replica serves (nothing lost locally); the lag grows and `replicate --status` reports it;
//! the bucket is at every moment a whole archive as of some commit (a restore of a snapshot of
//! it answers exactly what the archive answered at its last caught-up commit, or now); and once
//! the bucket is back a pass catches up, after which a restore answers exactly what the
//! archive answers and verifies.
//!
//! The CLI is pointed at the proxy (`AWS_ENDPOINT`) with a short request deadline
//! (`SERIES_ARCHIVE_COLD_TIMEOUT`), so a stalled bucket costs seconds; the test looks at the
//! bucket itself (status, snapshots) through moto directly. No assertion is on time except a
//! generous bound that turns a hang into a failure (`replica::HANG`, on every command).

#[path = "common/process.rs"]
mod process;
#[path = "common/replica.rs"]
mod replica;
#[path = "common/s3.rs"]
mod s3;

use replica::{
    bucket_now, csv, ingest, ok, ok_env, pointed_at, reads, restored_reads, sa_env, status, Env,
    BUCKET,
};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

const PROXY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/s3/fault_proxy.py");
/// The request deadline the CLI gets through the proxy, in seconds.
const DEADLINE: &str = "2";

/// The fault-injecting proxy, in front of moto; stopped when dropped.
struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// `http://127.0.0.1:PORT`.
    endpoint: String,
}

/// The proxy's counters: `requests`, `forwarded`, `slowdown`, `reset`, `stalled`, `lost`,
/// `hungup`, `upstream_errors`.
type Counts = BTreeMap<String, u64>;

impl Proxy {
    fn start(upstream: &str) -> Proxy {
        let python = process::python("asyncio");
        let mut child = Command::new(&python)
            .args([PROXY, upstream])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} {PROXY}: {e}", python.display()));
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        stdout
            .read_line(&mut line)
            .expect("read the proxy's endpoint");
        let endpoint = line.trim().to_owned();
        assert!(
            endpoint.starts_with("http://127.0.0.1:"),
            "the fault proxy did not start: {endpoint:?}"
        );
        Proxy {
            child,
            stdin,
            stdout,
            endpoint,
        }
    }

    /// Switches the proxy to `mode` (`pass`, `503`, `reset`, `stall`, `slow MS`, `lost`,
    /// `hangup`, `flaky N`, each optionally `only=KIND` and `times=K`; `stats` changes
    /// nothing); answers its counters once the mode is in effect.
    fn set(&mut self, mode: &str) -> Counts {
        let stdin = self.stdin.as_mut().expect("the proxy's stdin");
        writeln!(stdin, "{mode}").expect("write to the proxy");
        stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("the proxy answers");
        let want = format!("ok mode={} ", mode.split_whitespace().next().unwrap_or(""));
        assert!(
            line.starts_with(&want) || (mode == "stats" && line.starts_with("ok mode=")),
            "the proxy refused {mode:?}: {line:?}"
        );
        line.split_whitespace()
            .skip(2)
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.parse().expect("a count")))
            .collect()
    }

    fn counts(&mut self) -> Counts {
        self.set("stats")
    }

    /// The environment that points the CLI at the proxy, with a short request deadline.
    fn env(&self, moto: &s3::Moto) -> Env {
        pointed_at(moto, &self.endpoint, DEADLINE)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn count(counts: &Counts, key: &str) -> u64 {
    *counts
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {counts:?}"))
}

fn records_behind(direct: &Env, archive: &str) -> u64 {
    let s = status(direct, archive);
    s["records_behind"]
        .as_u64()
        .unwrap_or_else(|| panic!("records_behind: {s}"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The rows `rows --format csv` printed (its header left out).
fn row_count(rows_csv: &str) -> usize {
    rows_csv.lines().skip(1).filter(|l| !l.is_empty()).count()
}

/// The counter of the proxy that a fault mode moves.
fn counter(mode: &str) -> &'static str {
    match mode {
        "503" => "slowdown",
        "reset" => "reset",
        "stall" => "stalled",
        other => panic!("no counter for {other}"),
    }
}

/// A test's bucket and archives, as [`site`] sets them up. Fields drop in the order they are
/// declared: the proxy, then moto, then the scratch directory.
struct Site {
    proxy: Proxy,
    moto: s3::Moto,
    dir: tempfile::TempDir,
    /// The CLI's environment through the proxy (with the short request deadline).
    via: Env,
    /// Moto's own, to look at the bucket itself.
    direct: Env,
    /// No bucket at all, for the control.
    none: Env,
    /// The archive, replicating to `url`.
    a: String,
    /// The control: the same commits, with no replica (what the archive must serve).
    c: String,
    /// `s3://BUCKET/PREFIX`.
    url: String,
}

/// Moto and the fault proxy in front of it (forwarding), and in a scratch directory named
/// after `scratch`: the archive `a`, with ordinal steps `0..rows` of the workload ingested
/// through the proxy and then declared to replicate to `s3://BUCKET/prefix` (the declaring
/// pass caught up), and its control `c`, with the same rows and no replica.
fn site(scratch: &str, prefix: &str, rows: u64) -> Site {
    let dir = process::scratch(scratch);
    let moto = s3::Moto::start(&[BUCKET]);
    let proxy = Proxy::start(&moto.endpoint);
    let via = proxy.env(&moto);
    let direct = moto.env();
    let none: Env = Vec::new();
    let path = |name: &str| dir.path().join(name).to_str().expect("utf-8").to_owned();
    let (a, c) = (path("a"), path("control"));
    let url = format!("s3://{BUCKET}/{prefix}");

    let first = csv(dir.path(), "first.csv", 0, rows);
    ingest(&via, &a, &first);
    ingest(&none, &c, &first);
    let said = ok(&via, &["replicate", &a, &url]);
    assert!(said.contains("caught up"), "{said}");
    Site {
        proxy,
        moto,
        dir,
        via,
        direct,
        none,
        a,
        c,
        url,
    }
}

/// A bucket that throttles every request, resets every connection, or takes requests and
/// never answers: each command still commits and exits 0, saying its replication failed; the
/// bucket is not touched; the lag grows and is reported; the archive serves exactly what an
/// identical archive without a replica serves; a snapshot of the bucket restores to the last
/// caught-up commit. Back to forwarding, one pass catches up and the bucket restores to what
/// the archive serves now.
#[test]
fn a_bucket_throttling_resetting_or_stalling_never_stops_a_commit_and_loses_nothing() {
    let mut site = site("replicate-faults", "site-a", 200);
    let (a, c, url) = (site.a.as_str(), site.c.as_str(), site.url.as_str());
    assert_eq!(records_behind(&site.direct, a), 0);
    let through = site.proxy.counts();
    assert!(
        count(&through, "forwarded") > 0,
        "the declaration did not go through the proxy: {through:?}"
    );
    // What the archive served at its last caught-up commit.
    let caught = reads(&site.direct, a);
    assert_eq!(caught, reads(&site.none, c));

    let mut lag = 0;
    let mut t = 200;
    for mode in ["503", "reset", "stall"] {
        let before = site.proxy.set(mode);
        let batch = csv(site.dir.path(), &format!("{mode}.csv"), t, t + 150);
        t += 150;
        let began = Instant::now();
        let out = ingest(&site.via, a, &batch);
        let took = began.elapsed();
        ingest(&site.none, c, &batch);
        let said = stderr(&out);
        assert!(
            said.contains(&format!("WARNING: replication to {url} failed")),
            "{mode}: ingest said:\n{said}"
        );
        let mut commands = vec![("ingest", took)];
        if mode == "stall" {
            let began = Instant::now();
            let out = ok_env(&site.via, &["compact", a]);
            commands.push(("compact", began.elapsed()));
            ok_env(&site.none, &["compact", c]);
            let said = stderr(&out);
            assert!(
                said.contains(&format!("WARNING: replication to {url} failed")),
                "{mode}: compact said:\n{said}"
            );
        }
        // `inspect` through the failing bucket: it says so, and does not fail.
        let began = Instant::now();
        let inspected = ok(&site.via, &["inspect", a]);
        commands.push(("inspect", began.elapsed()));
        assert!(
            inspected.contains(&format!("replica   {url}: not reachable")),
            "{mode}: {inspected}"
        );
        println!("{mode}: {commands:?}");

        // The proxy did inject the fault, and nothing reached the bucket.
        let after = site.proxy.counts();
        assert!(
            count(&after, counter(mode)) > count(&before, counter(mode)),
            "{mode}: no fault injected: {before:?} -> {after:?}"
        );
        assert_eq!(
            count(&after, "forwarded"),
            count(&before, "forwarded"),
            "{mode}: a request reached the bucket"
        );

        // The lag grew, and is reported.
        let behind = records_behind(&site.direct, a);
        assert!(behind > lag, "{mode}: {behind} record(s) behind, was {lag}");
        lag = behind;
        let said = ok(&site.direct, &["replicate", a, "--status"]);
        assert!(said.contains("behind"), "{mode}: {said}");

        // Nothing lost locally: every row ingested, and exactly what the control serves.
        let now = reads(&site.direct, a);
        assert_eq!(row_count(&now[0]), 9 * t as usize, "{mode}");
        assert_eq!(
            now,
            reads(&site.none, c),
            "{mode}: the archive against its control"
        );

        // The bucket is a whole archive as of the last commit it caught up with.
        let got = bucket_now(
            &site.moto,
            site.dir.path(),
            "site-a",
            &format!("during-{mode}"),
        );
        assert_eq!(got, caught, "{mode}: the bucket while it is behind");
    }

    // A bucket that stalls under the default request deadline (60 s): the command is held
    // up once, by its replicator's last wait (10 s), not again by a pass of its own.
    site.proxy.set("stall");
    let batch = csv(site.dir.path(), "stall-patient.csv", t, t + 150);
    let patient = pointed_at(&site.moto, &site.proxy.endpoint, "60");
    let out = ingest(&patient, a, &batch);
    ingest(&site.none, c, &batch);
    let said = stderr(&out);
    assert!(
        said.contains(&format!("WARNING: replication to {url} failed"))
            && said.contains("still running"),
        "patient stall: ingest said:\n{said}"
    );

    // The bucket is back: one pass works the lag off.
    let before = site.proxy.set("pass");
    let said = ok(&site.via, &["replicate", a]);
    assert!(said.contains("caught up"), "{said}");
    assert_eq!(records_behind(&site.direct, a), 0);
    let after = site.proxy.counts();
    assert!(count(&after, "forwarded") > count(&before, "forwarded"));
    let now = reads(&site.direct, a);
    assert_eq!(now, reads(&site.none, c));
    assert_ne!(now, caught);

    // From the bucket alone, through the proxy: a read-only open, then a restore, answer
    // exactly what the archive answers, and the restore verifies.
    assert_eq!(reads(&site.via, url), now, "read-only from the bucket");
    let got = restored_reads(&site.via, site.dir.path(), "site-a", "restored");
    assert_eq!(got, now, "restored from the bucket");
}

/// A bucket that answers slowly, one that fails every third request (a 503, a reset, a lost
/// answer in turn), and one that acts on the commit point's write but whose answer is lost
/// (the connection reset, or closed once): commands exit 0; object_store's retries and the
/// next passes make progress until the bucket is caught up; the bucket is a whole archive as
/// of some commit at each step; once caught up it restores to exactly what the archive
/// serves; and a pass whose own write was retried does not report another replicator.
#[test]
fn a_slow_flaky_or_forgetful_bucket_is_worked_through() {
    let mut site = site("replicate-flaky", "site-b", 150);
    let (a, c, url) = (site.a.as_str(), site.c.as_str(), site.url.as_str());
    // Each batch is the next 150 ordinal steps, after the first 150 `site` ingested.
    let mut t = 150;
    let mut batch = |name: &str| {
        let path = csv(site.dir.path(), &format!("{name}.csv"), t, t + 150);
        t += 150;
        path
    };

    // Slow: every answer held 200 ms, well inside the request deadline (raised to 30 s here):
    // slowness is no failure, the command replicates and is caught up.
    let slow_env = pointed_at(&site.moto, &site.proxy.endpoint, "30");
    let before = site.proxy.set("slow 200");
    let second = batch("second");
    let began = Instant::now();
    let out = ingest(&slow_env, a, &second);
    println!("slow: ingest {:?}", began.elapsed());
    ingest(&site.none, c, &second);
    let said = stderr(&out);
    assert!(
        said.contains(&format!("replicated to {url}")) && said.contains("caught up"),
        "slow: {said}"
    );
    assert!(!said.contains("WARNING"), "slow: {said}");
    let after = site.proxy.counts();
    assert!(count(&after, "forwarded") > count(&before, "forwarded"));
    // Every upload carried its SHA-256 for the server to check (no read-back needed).
    let puts = count(&after, "puts") - count(&before, "puts");
    assert!(puts > 0, "slow: no upload seen");
    assert_eq!(
        count(&after, "checksummed") - count(&before, "checksummed"),
        puts,
        "slow: an upload without its checksum"
    );
    assert_eq!(records_behind(&site.direct, a), 0);

    // Flaky: every third request fails. Commands exit 0; passes are run until one catches up.
    let before = site.proxy.set("flaky 3");
    let third = batch("third");
    let out = ingest(&site.via, a, &third);
    ingest(&site.none, c, &third);
    println!("flaky: ingest said:\n{}", stderr(&out));
    let mut passes = Vec::new();
    let caught_up = loop {
        let out = sa_env(&site.via, &["replicate", a]);
        let said = format!(
            "exit {:?}: {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
        let done = out.status.success() && said.contains("caught up");
        passes.push(said);
        if done || passes.len() == 8 {
            break done;
        }
    };
    println!("flaky: {} pass(es):\n{}", passes.len(), passes.join("\n"));
    assert!(
        caught_up,
        "flaky: not caught up after {} passes:\n{}",
        passes.len(),
        passes.join("\n")
    );
    let after = site.proxy.counts();
    for key in ["slowdown", "reset", "lost", "forwarded"] {
        assert!(
            count(&after, key) > count(&before, key),
            "flaky: no {key}: {before:?} -> {after:?}"
        );
    }
    assert_eq!(records_behind(&site.direct, a), 0);
    let now = reads(&site.direct, a);
    assert_eq!(now, reads(&site.none, c));
    let got = bucket_now(&site.moto, site.dir.path(), "site-b", "after-flaky");
    assert_eq!(got, now, "flaky: the bucket once caught up");

    // The commit point's write lands but its answer is lost (a conditional PUT of a manifest
    // part, reset after moto stored it): the command exits 0; the bucket is a whole archive
    // as of the commit before or this one; the next pass catches up from there.
    let old = now;
    let before = site.proxy.set("lost only=create");
    let fourth = batch("fourth");
    let out = ingest(&site.via, a, &fourth);
    ingest(&site.none, c, &fourth);
    let after = site.proxy.counts();
    println!("lost: ingest said:\n{}", stderr(&out));
    assert!(
        count(&after, "lost") > count(&before, "lost"),
        "lost: no answer lost: {before:?} -> {after:?}"
    );
    let new = reads(&site.direct, a);
    assert_eq!(new, reads(&site.none, c));
    let got = bucket_now(&site.moto, site.dir.path(), "site-b", "after-lost");
    assert!(
        got == old || got == new,
        "lost: the bucket is not the archive as of any commit"
    );
    println!(
        "lost: the bucket holds the {} commit; status {}",
        if got == new { "new" } else { "old" },
        status(&site.direct, a)
    );
    site.proxy.set("pass");
    let said = ok(&site.via, &["replicate", a]);
    assert!(said.contains("caught up"), "{said}");
    assert_eq!(records_behind(&site.direct, a), 0);

    // The server hangs up once, cleanly, after storing the commit point (a FIN where its
    // answer should be): object_store takes the request for unsent and sends it again, and
    // the conditional PUT then finds the part in place, the part this very pass wrote. One
    // `replicate` pass (no replicator thread beside it, the commit made while the bucket
    // reset every connection) meets this: the bucket holds the commit; and no other replicator
    // exists, so the pass should succeed and report none (checked last, below, so that every
    // other check runs first).
    let old = new;
    let before = site.proxy.set("reset");
    let fifth = batch("fifth");
    let out = ingest(&site.via, a, &fifth);
    ingest(&site.none, c, &fifth);
    assert!(
        stderr(&out).contains(&format!("WARNING: replication to {url} failed")),
        "hangup: the ingest while the bucket resets: {}",
        stderr(&out)
    );
    assert!(count(&site.proxy.counts(), "reset") > count(&before, "reset"));
    assert!(records_behind(&site.direct, a) > 0);
    let before = site.proxy.set("hangup only=create times=1");
    let hangup_pass = sa_env(&site.via, &["replicate", a]);
    let hangup_shown = process::show("replicate (its commit point hung up once)", &hangup_pass);
    println!("hangup: {hangup_shown}");
    let after = site.proxy.counts();
    assert_eq!(
        count(&after, "hungup"),
        count(&before, "hungup") + 1,
        "hangup: {before:?} -> {after:?}"
    );
    let new = reads(&site.direct, a);
    assert_ne!(new, old);
    assert_eq!(new, reads(&site.none, c));
    assert_eq!(
        records_behind(&site.direct, a),
        0,
        "hangup: the part the pass wrote is the bucket's"
    );
    let got = bucket_now(&site.moto, site.dir.path(), "site-b", "after-hangup");
    assert_eq!(got, new, "hangup: the bucket");
    site.proxy.set("pass");
    let said = ok(&site.via, &["replicate", a]);
    assert!(said.contains("caught up"), "{said}");

    // Back to forwarding: a restore from the bucket, through the proxy, answers exactly what
    // the archive answers, and verifies.
    assert_eq!(records_behind(&site.direct, a), 0);
    let got = restored_reads(&site.via, site.dir.path(), "site-b", "restored");
    assert_eq!(got, new, "restored from the bucket");

    assert!(
        hangup_pass.status.success()
            && String::from_utf8_lossy(&hangup_pass.stdout).contains("caught up"),
        "hangup: the pass took the manifest part it wrote itself (its answer lost, the PUT \
         retried by object_store) for another replicator's:\n{hangup_shown}"
    );
}
