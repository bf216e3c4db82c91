//! The bucket as a whole archive (issue 26), against a real S3-compatible server on loopback
//! (moto, started here): `replicate ARCHIVE s3://…` declares a replica once and every later
//! command that commits replicates to it; `restore` makes an archive from the bucket alone that
//! answers every read exactly as the original, and so does a read-only open of the URL itself
//! (`rows s3://…`); each engine's default reader reads the bucket's
//! Delta tables exactly; a bucket that is down never stops a commit; a restore fences the
//! archive it came from; and a replication process killed at each of its steps leaves the
//! bucket a whole archive as of some commit, which the next pass brings up to date.

#[path = "common/http.rs"]
mod http;
#[path = "common/process.rs"]
mod process;
#[path = "common/replica.rs"]
mod replica;
#[path = "common/s3.rs"]
mod s3;

use replica::{
    bucket_now, csv, ingest, ingest_with, ok, ok_env, pointed_at, reads, restored_reads, sa_env,
    status, Env, BUCKET, CHECK,
};
use series_archive::archive::cold::ColdTier;
use series_archive::archive::replicate;
use series_archive::archive::{FaultPoint, Faults};
use std::path::Path;
use std::process::Command;

/// Runs `args`, which must be refused with exit `code` and a message holding `needle`.
fn refused(env: &[(&'static str, String)], args: &[&str], code: i32, needle: &str) {
    let out = sa_env(env, args);
    let shown = process::show(&format!("series-archive {}", args.join(" ")), &out);
    assert_eq!(out.status.code(), Some(code), "{shown}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(needle),
        "{shown}"
    );
}

/// Each engine's default reader (DuckDB over httpfs, deltalake, Polars, Daft, and DataFusion's
/// own Parquet reader over the files the Delta log lists) reads the bucket's Delta table of
/// the `capture` rows under `url` exactly as `rows_csv` (what `rows --format csv` printed):
/// row count and every column's checksum.
fn engines_read_exactly(moto: &s3::Moto, dir: &Path, url: &str, rows_csv: &str) {
    let expected = dir.join("expected.csv");
    std::fs::write(&expected, rows_csv).expect("write");
    let python = process::python("duckdb, polars, deltalake, datafusion, daft, boto3");
    let engines = Command::new(&python)
        .args([
            CHECK,
            "engines",
            &moto.endpoint,
            &format!("{url}/streams/capture/rows"),
            expected.to_str().expect("utf-8"),
        ])
        .output()
        .expect("run the engines");
    assert!(
        engines.status.success(),
        "{}",
        process::show("engines", &engines)
    );
    let engines_said = String::from_utf8_lossy(&engines.stdout);
    for engine in [
        "duckdb ok",
        "deltalake ok",
        "polars ok",
        "datafusion ok",
        "daft ok",
    ] {
        assert!(engines_said.contains(engine), "{engines_said}");
    }
}

/// The environment of a bucket that does not answer (nothing listens on port 9), with a
/// short request deadline.
fn down(moto: &s3::Moto) -> Env {
    pointed_at(moto, "http://127.0.0.1:9", "2")
}

#[test]
fn the_bucket_is_a_whole_archive_any_machine_restores() {
    let dir = process::scratch("replicate");
    let moto = s3::Moto::start(&[BUCKET]);
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    let url = format!("s3://{BUCKET}/site-a");
    ingest(&moto.env(), a, &csv(dir.path(), "first.csv", 0, 400));

    // Declared once: the first pass uploads everything; the status says caught up.
    let said = ok(&moto.env(), &["replicate", a, &url]);
    assert!(said.contains("caught up"), "{said}");
    let status = status(&moto.env(), a);
    assert_eq!(status["records_behind"], 0, "{status}");
    assert_eq!(status["url"], url.as_str());

    // Every later commit replicates without a flag (ingest, compact).
    let out = ingest_with(
        &moto.env(),
        a,
        &csv(dir.path(), "second.csv", 400, 700),
        &["--requests"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("replicated to {url}")), "{stderr}");
    // `--requests` says where the command left its replica.
    assert!(
        stderr.contains(&format!("requests: replica {url}: "))
            && stderr.contains("0 commit(s) behind"),
        "{stderr}"
    );
    let out = ok_env(&moto.env(), &["compact", a]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("replicated to {url}")) && stderr.contains("caught up"),
        "{stderr}"
    );
    let want = reads(&moto.env(), a);

    // Each engine's default reader, over the bucket's Delta table alone.
    engines_read_exactly(&moto, dir.path(), &url, &want[0]);

    // A bucket that is down never stops a commit: the lag is reported and worked off.
    let out = ingest(&down(&moto), a, &csv(dir.path(), "third.csv", 700, 900));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("WARNING: replication"), "{stderr}");
    let behind = ok(&moto.env(), &["replicate", a, "--status"]);
    assert!(behind.contains("behind"), "{behind}");
    let inspected = ok(&moto.env(), &["inspect", a]);
    assert!(
        inspected.contains(&format!("replica   {url}: ")) && inspected.contains("behind"),
        "{inspected}"
    );
    // While the bucket is still down, the lag is estimated from where the last pass left it:
    // an upper bound, here exactly what the bucket says once it answers.
    let exact = replica::status(&moto.env(), a);
    let offline = ok(&down(&moto), &["inspect", a, "--json"]);
    let offline: serde_json::Value = serde_json::from_str(&offline).expect("json");
    let seen = &offline["replica"]["last_seen"];
    assert!(offline["replica"]["error"].is_string(), "{offline}");
    assert_eq!(seen["records_behind"], exact["records_behind"], "{offline}");
    assert!(
        seen["records_behind"].as_u64().unwrap_or(0) > 0,
        "{offline}"
    );
    assert!(seen["as_of_ns"].as_u64().is_some(), "{offline}");
    let inspected = ok(&down(&moto), &["inspect", a]);
    assert!(
        inspected.contains("not reachable")
            && inspected.contains(&format!(
                "now at most {} record(s)",
                exact["records_behind"]
            )),
        "{inspected}"
    );
    let out = sa_env(&down(&moto), &["replicate", a, "--status"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("at most"), "{said}");
    let said = ok(&moto.env(), &["replicate", a]);
    assert!(said.contains("caught up"), "{said}");
    let inspected = ok(&moto.env(), &["inspect", a]);
    assert!(
        inspected.contains(&format!("replica   {url}: caught up")),
        "{inspected}"
    );
    let want = reads(&moto.env(), a);

    // Read-only from the URL, with no local archive: the same answers, every file verified.
    assert_eq!(reads(&moto.env(), &url), want);
    let verify = ok(&moto.env(), &["verify", &url]);
    assert!(verify.starts_with("ok:"), "{verify}");
    let files = ok(&moto.env(), &["files", &url, "--stream", "capture"]);
    assert!(
        files
            .lines()
            .all(|l| l.starts_with(&format!("{url}/streams/capture/rows/"))),
        "{files}"
    );

    // A restore from the bucket alone answers exactly what the archive does.
    let got = restored_reads(&moto.env(), dir.path(), "site-a", "b");
    assert_eq!(got, want);

    // The restore took the prefix over: the original is fenced, and a second archive may
    // not declare the same prefix.
    refused(&moto.env(), &["replicate", a], 1, "fenced");
    let other = dir.path().join("other");
    let o = other.to_str().expect("utf-8");
    ingest(&moto.env(), o, &csv(dir.path(), "other.csv", 0, 50));
    refused(
        &moto.env(),
        &["replicate", o, &url],
        1,
        "belongs to another archive",
    );
    assert!(!other.join("REPLICA").exists());

    // The restored archive carries on: a commit there replicates to the same prefix.
    let b = dir.path().join("b");
    let out = ingest(
        &moto.env(),
        b.to_str().expect("utf-8"),
        &csv(dir.path(), "fourth.csv", 900, 950),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("replicated to {url}")), "{stderr}");

    // Bad input: restore into a directory that holds something, from a prefix that holds
    // no replica; each refused with what and where, nothing written.
    refused(&moto.env(), &["restore", &url, a], 1, "is not empty");
    let empty = dir.path().join("empty");
    let nothing = format!("s3://{BUCKET}/nothing-here");
    let e = empty.to_str().expect("utf-8");
    refused(
        &moto.env(),
        &["restore", &nothing, e],
        1,
        "no replicated manifest",
    );
    assert!(!empty.exists());
    refused(&moto.env(), &["replicate", o], 2, "has no replica");

    // A replica and a cold tier never share a prefix (the cold tier's sweep would take the
    // replica's objects for orphans), whichever is declared first.
    let cold = format!("s3://{BUCKET}/cold-other");
    ok(
        &moto.env(),
        &["--cold", &cold, "offload", o, "--local-budget", "0B"],
    );
    for inside in [cold.clone(), format!("{cold}/replica")] {
        refused(
            &moto.env(),
            &["replicate", o, &inside],
            1,
            "shares a prefix",
        );
    }
    assert!(!other.join("REPLICA").exists());
    let b = b.to_str().expect("utf-8");
    let offload = ["--cold", &url, "offload", b, "--local-budget", "0B"];
    refused(&moto.env(), &offload, 1, "share a prefix");
}

const DIR_VAR: &str = "REPLICA_CRASH_DIR";
const AT_VAR: &str = "REPLICA_CRASH_AT";
const URL_VAR: &str = "REPLICA_CRASH_URL";
const CHILD: &str = "replication_crash_child";

/// The child: one replication pass of the archive at `DIR_VAR` to `URL_VAR`, aborting the
/// process at `AT_VAR`. Returns at once in a normal run.
#[test]
fn replication_crash_child() {
    let (Ok(dir), Ok(at), Ok(url)) = (
        std::env::var(DIR_VAR),
        std::env::var(AT_VAR),
        std::env::var(URL_VAR),
    ) else {
        return;
    };
    let point = FaultPoint::parse(&at).unwrap_or_else(|| panic!("unknown fault point {at:?}"));
    let tier = ColdTier::from_url(&url).expect("the tier");
    let outcome = replicate::replicate(
        Path::new(&dir),
        &tier,
        &Faults::abort_at(point),
        |_, _, _| {},
    );
    eprintln!("the pass returned instead of crashing at {at}: {outcome:?}");
    std::process::exit(3);
}

/// Runs one replication pass of `archive` to `url` in a child process (this test binary's
/// [`CHILD`]), which aborts itself at `point`; the child must die of that abort.
fn killed_pass(moto: &s3::Moto, archive: &Path, url: &str, point: FaultPoint) {
    let name = point.name();
    let exe = std::env::current_exe().expect("current exe");
    let out = Command::new(exe)
        .args(["--exact", CHILD, "--nocapture", "--test-threads=1"])
        .env(DIR_VAR, archive)
        .env(AT_VAR, name)
        .env(URL_VAR, url)
        .envs(moto.env())
        .output()
        .expect("run the child");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(6),
        "{}",
        process::show(&format!("child at {name}"), &out)
    );
}

/// A replication killed at each of its steps: the bucket is a whole archive as of the commit
/// it held before (files and Delta objects uploaded, no part) or as of the new one (the part
/// written, deletions pending), never anything between; the next pass resumes and leaves
/// exactly the archive's state.
#[test]
fn a_replication_killed_at_each_step_leaves_a_whole_archive_and_resumes() {
    let dir = process::scratch("replicate-crash");
    let moto = s3::Moto::start(&[BUCKET]);
    for point in [
        FaultPoint::AfterReplicaFile,
        FaultPoint::AfterReplicaDelta,
        FaultPoint::AfterReplicaPart,
    ] {
        let name = point.name();
        let archive = dir.path().join(name);
        let a = archive.to_str().expect("utf-8");
        let prefix = format!("crash-{name}");
        let url = format!("s3://{BUCKET}/{prefix}");
        ingest(&moto.env(), a, &csv(dir.path(), "first.csv", 0, 400));
        ok(&moto.env(), &["replicate", a, &url]);
        let old = reads(&moto.env(), a);
        // Commits while the bucket is down: the lag a pass then works off, with files to
        // upload and (after the compaction) objects to delete.
        ingest(&down(&moto), a, &csv(dir.path(), "second.csv", 400, 800));
        ok_env(&down(&moto), &["compact", a]);
        let new = reads(&moto.env(), a);
        assert_ne!(old, new);

        killed_pass(&moto, &archive, &url, point);
        // What the bucket holds right after the crash, restored from a copy.
        let got = bucket_now(&moto, dir.path(), &prefix, &format!("{name}-after-crash"));
        let expected = if point == FaultPoint::AfterReplicaPart {
            &new
        } else {
            &old
        };
        assert_eq!(&got, expected, "{name}: the bucket after the crash");

        // The next pass resumes: caught up, and the bucket restores to the archive's state.
        let said: serde_json::Value =
            serde_json::from_str(&ok(&moto.env(), &["replicate", a, "--json"])).expect("json");
        assert_eq!(said["status"]["records_behind"], 0, "{name}: {said}");
        if point == FaultPoint::AfterReplicaPart {
            assert_eq!(said["parts"], 0, "{name}: {said}");
            assert!(
                said["deleted"].as_u64() > Some(0),
                "{name}: the pending deletions: {said}"
            );
        }
        let got = bucket_now(&moto, dir.path(), &prefix, &format!("{name}-resumed"));
        assert_eq!(got, new, "{name}: the bucket after the resumed pass");
    }
}

/// A pass killed after it uploaded files for commits the bucket never got (a lost machine)
/// leaves objects no record names, under names the bucket's state has not given out yet. A
/// restore takes the prefix over and removes them, since the restored archive gives those
/// names to files of its own and a later pass finds an object by name and size: every object
/// left under `streams/` is one the restored state names or a Delta log's, and what the
/// restored archive commits next restores again exactly.
#[test]
fn a_restore_clears_what_a_lost_pass_left_under_names_it_will_give_out() {
    let dir = process::scratch("replicate-leftovers");
    let moto = s3::Moto::start(&[BUCKET]);
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    let prefix = "leftovers";
    let url = format!("s3://{BUCKET}/{prefix}");
    ingest(&moto.env(), a, &csv(dir.path(), "first.csv", 0, 400));
    ok(&moto.env(), &["replicate", a, &url]);
    ingest(&down(&moto), a, &csv(dir.path(), "second.csv", 400, 800));
    killed_pass(&moto, &archive, &url, FaultPoint::AfterReplicaFile);
    let tier =
        ColdTier::new(std::sync::Arc::new(moto.store(BUCKET)), prefix, url.clone()).expect("tier");
    let data_files = |tier: &ColdTier| -> std::collections::BTreeSet<String> {
        tier.list("streams")
            .expect("list")
            .into_iter()
            .map(|(path, _)| path)
            .filter(|p| p.ends_with(".parquet") && !p.contains("_delta_log"))
            .collect()
    };
    let before = data_files(&tier);
    let restored = dir.path().join("restored");
    let r = restored.to_str().expect("utf-8");
    let said = ok(&moto.env(), &["restore", &url, r]);
    assert!(said.contains("verified"), "{said}");
    let named: std::collections::BTreeSet<String> = ["--manifest", "--levels"]
        .iter()
        .flat_map(|which| {
            let mut args = vec!["files", r, "--stream", "capture", "--manifest"];
            if *which == "--levels" {
                args.push("--levels");
            }
            ok(&moto.env(), &args)
                .lines()
                .map(|l| {
                    l.strip_prefix(&format!("{r}/"))
                        .expect("a path under the archive")
                        .to_owned()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let after = data_files(&tier);
    assert!(
        before.len() > after.len(),
        "the lost pass left objects: {before:?}"
    );
    assert_eq!(
        after, named,
        "the bucket holds what the restored state names"
    );
    // The restored archive carries on, and the bucket restores to it.
    ingest(&moto.env(), r, &csv(dir.path(), "third.csv", 450, 850));
    let want = reads(&moto.env(), r);
    assert_eq!(bucket_now(&moto, dir.path(), prefix, "carried-on"), want);
}

/// Objects by name, with their bytes.
type Objects = Vec<(String, Vec<u8>)>;

/// Every regular file under `dir`, as `/`-separated paths relative to it, with its bytes.
fn tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("list").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path
                    .strip_prefix(dir)
                    .expect("under")
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(relative, std::fs::read(&path).expect("read"));
            }
        }
    }
    out
}

/// The replica's layout, locked (`docs/format.md`, "Replicas"), on a `file://` prefix: the
/// archive's own paths for its files and Delta logs, `OWNER` as beside the archive, `REPLICA`
/// naming the prefix, and the manifest as parts `manifest/gen-N/OFFSET.part` (12 and 20
/// digits) whose bytes, concatenated, are the local generation's; a checkpoint's new
/// generation replaces the old one's parts.
#[test]
fn the_replica_layout_is_the_archives_own_paths_and_manifest_parts() {
    let dir = process::scratch("replicate-layout");
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    let bucket = dir.path().join("bucket");
    let url = format!("file://{}", bucket.display());
    let env: Vec<(&'static str, String)> = Vec::new();
    let part = |g: u64, o: u64| format!("manifest/gen-{g:012}/{o:020}.part");
    // What the bucket must hold: the archive's streams/ and OWNER as they are, and `parts`.
    let expected = |parts: Vec<(String, Vec<u8>)>| {
        let mut want: std::collections::BTreeMap<String, Vec<u8>> = tree(&archive.join("streams"))
            .into_iter()
            .map(|(k, v)| (format!("streams/{k}"), v))
            .collect();
        let owner = std::fs::read(archive.join("OWNER")).expect("OWNER");
        want.insert("OWNER".into(), owner);
        want.extend(parts);
        want
    };

    ingest(&env, a, &csv(dir.path(), "first.csv", 0, 200));
    ok_env(&env, &["replicate", a, &url]);
    assert_eq!(
        std::fs::read_to_string(archive.join("REPLICA")).expect("REPLICA"),
        format!("{url}\n")
    );
    let first_log = std::fs::read(archive.join("manifest/gen-000000000001.log")).expect("log");
    let first = (part(1, 0), first_log.clone());
    assert_eq!(tree(&bucket), expected(vec![first.clone()]));

    // Later commits: more parts, from where the first ends, each starting where the one
    // before it ends (the archive's replicator writes one a pass, and a pass carries every
    // commit made since the last: how many parts depends on how fast the bucket answers).
    ingest(&env, a, &csv(dir.path(), "second.csv", 200, 300));
    let log = std::fs::read(archive.join("manifest/gen-000000000001.log")).expect("log");
    let (parts, held): (Objects, Objects) = tree(&bucket)
        .into_iter()
        .partition(|(k, _)| k.starts_with("manifest/"));
    let held: std::collections::BTreeMap<String, Vec<u8>> = held.into_iter().collect();
    assert!(
        parts.len() >= 2,
        "{:?}",
        parts.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    assert_eq!(parts[0], first);
    let mut end = 0;
    for (name, bytes) in &parts {
        assert_eq!(name, &part(1, end), "parts follow each other");
        end += bytes.len() as u64;
    }
    let joined: Vec<u8> = parts.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    assert_eq!(joined, log, "the parts are the local generation");
    assert_eq!(held, expected(Vec::new()));

    // A checkpoint: generation 2's part 0, generation 1's parts gone.
    ok_env(&env, &["checkpoint", a]);
    let log = std::fs::read(archive.join("manifest/gen-000000000002.log")).expect("log");
    assert_eq!(tree(&bucket), expected(vec![(part(2, 0), log)]));
}

/// An archive under `dir` replicating to a `file://` bucket beside it, after three ingests
/// (the first before `replicate`): (archive, bucket directory, bucket URL).
fn replicated_thrice(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let archive = dir.join("a");
    let a = archive.to_str().expect("utf-8");
    let bucket = dir.join("bucket");
    let url = format!("file://{}", bucket.display());
    let env: Vec<(&'static str, String)> = Vec::new();
    ingest(&env, a, &csv(dir, "first.csv", 0, 200));
    ok_env(&env, &["replicate", a, &url]);
    ingest(&env, a, &csv(dir, "second.csv", 200, 300));
    ingest(&env, a, &csv(dir, "third.csv", 300, 400));
    (archive, bucket, url)
}

/// A manifest part lost from the bucket (deleted from outside: a lifecycle rule, a hand)
/// while the parts after it remain is damage, and the parts past the gap are evidence of
/// commits the bucket acknowledged: a read of the URL, a restore and the writer's own pass
/// refuse it, naming the missing part, and never answer the shorter history before the gap.
#[test]
fn a_part_lost_from_the_bucket_is_refused_never_read_short() {
    let dir = process::scratch("replicate-gap");
    let (archive, bucket, url) = replicated_thrice(dir.path());
    let a = archive.to_str().expect("utf-8");
    let env: Vec<(&'static str, String)> = Vec::new();
    let generation = bucket.join("manifest/gen-000000000001");
    let mut parts: Vec<_> = std::fs::read_dir(&generation)
        .expect("generation 1")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "part"))
        .collect();
    parts.sort();
    assert!(parts.len() >= 3, "{parts:?}");
    // Whole, the bucket reads as the archive does.
    let whole = ok(
        &env,
        &["rows", &url, "--stream", "capture", "--format", "csv"],
    );
    assert_eq!(
        whole,
        ok(&env, &["rows", a, "--stream", "capture", "--format", "csv"])
    );
    let lost = &parts[1];
    let at: u64 = lost
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("a part's name is its offset");
    std::fs::remove_file(lost).expect("lose a part");
    let needle = format!("lacks the part at byte {at}");
    let cache = dir.path().join("cache");
    let c = cache.to_str().expect("utf-8");
    refused(
        &env,
        &["rows", &url, "--stream", "capture", "--cache", c],
        1,
        &needle,
    );
    let restored = dir.path().join("restored");
    refused(
        &env,
        &["restore", &url, restored.to_str().expect("utf-8")],
        1,
        &needle,
    );
    assert!(
        !restored.join("manifest").exists(),
        "a refused restore makes no archive"
    );
    refused(&env, &["replicate", a, "--status"], 1, &needle);
}

/// A repair drops the records past mid-log damage; when the replica holds them whole, the
/// repair is refused (its next pass would replace the bucket's copy with the shorter
/// history), the bucket is left as it was, and a restore from it brings back every row. With
/// the replica removed from the archive, the repair goes ahead as without one.
#[test]
fn a_repair_never_erases_what_the_replica_holds_past_the_damage() {
    let dir = process::scratch("replicate-repair");
    let (archive, bucket, url) = replicated_thrice(dir.path());
    let a = archive.to_str().expect("utf-8");
    let env: Vec<(&'static str, String)> = Vec::new();
    let every = |archive: &str| {
        ok(
            &env,
            &["rows", archive, "--stream", "capture", "--format", "csv"],
        )
    };
    let before = every(a);
    assert_eq!(every(&url), before, "the bucket caught up");
    let manifest = archive.join("manifest/gen-000000000001.log");
    let mut bytes = std::fs::read(&manifest).expect("manifest");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(&manifest, &bytes).expect("damage the manifest mid-log");
    let held = tree(&bucket);
    refused(
        &env,
        &["repair", a, "--yes"],
        1,
        "it holds, whole, records this repair would drop",
    );
    assert_eq!(tree(&bucket), held, "the bucket is as it was");
    let restored = dir.path().join("restored");
    let r = restored.to_str().expect("utf-8");
    ok_env(&env, &["restore", &url, r]);
    assert_eq!(every(r), before, "the restore holds every row");
    // Without the replica, the repair is the operator's to make.
    std::fs::remove_file(archive.join("REPLICA")).expect("forget the replica");
    ok_env(&env, &["repair", a, "--yes"]);
}

/// A clone of the archive's directory (a restored VM snapshot, a copied disk) holds the same
/// owner token: once the two histories part, the second to replicate is refused, naming the
/// manifest part that differs, and the bucket keeps the first's history whole.
#[test]
fn a_clone_that_took_another_history_is_refused_not_merged() {
    let dir = process::scratch("replicate-clone");
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    let bucket = dir.path().join("bucket");
    let url = format!("file://{}", bucket.display());
    let env: Vec<(&'static str, String)> = Vec::new();
    ingest(&env, a, &csv(dir.path(), "first.csv", 0, 200));
    ok_env(&env, &["replicate", a, &url]);
    let clone = dir.path().join("clone");
    let status = Command::new("cp")
        .args(["-a", a, clone.to_str().expect("utf-8")])
        .status()
        .expect("cp");
    assert!(status.success());
    ingest(&env, a, &csv(dir.path(), "second.csv", 200, 260));
    let clone_csv = csv(dir.path(), "clone.csv", 200, 330);
    let out = ingest(&env, clone.to_str().expect("utf-8"), &clone_csv);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Refused whichever way the clone meets the bucket: its manifest shorter than the
    // bucket's (the clone's first pass), or as long and different (a later one).
    assert!(
        stderr.contains("another history") || stderr.contains("not this archive's past"),
        "{stderr}"
    );
    let restored = dir.path().join("restored");
    let r = restored.to_str().expect("utf-8");
    ok_env(&env, &["restore", &url, r]);
    let rows = |archive: &str| {
        String::from_utf8(
            ok_env(
                &env,
                &["rows", archive, "--stream", "capture", "--format", "csv"],
            )
            .stdout,
        )
        .expect("utf-8")
    };
    assert_eq!(rows(r), rows(a));
}

/// What every server is asked, again after each commit: the archive's streams, surveys of the
/// stream and of a run, a level fold and a percentile, rows of one track (a page and the
/// whole range as CSV).
const MIX: &[&str] = &[
    "/api/streams",
    "/api/survey?stream=capture&budget=200",
    "/api/survey?stream=capture&track=run_1&budget=64",
    "/api/fold?stream=capture&aggregate=mean",
    "/api/fold?stream=capture&track=run_2&aggregate=p95",
    "/api/rows?stream=capture&track=run_0&track=p1&limit=50",
    "/api/rows?stream=capture&track=run_2&format=csv",
];

/// `/api/streams` of `server`, as JSON.
fn streams_of(server: &http::Server) -> serde_json::Value {
    let reply = server.get("/api/streams");
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()
}

/// Two `serve` processes on one bucket (one with a cache directory of its own, as on another
/// machine) follow the replica as a writer commits, compacts and replicates, and answer every
/// request of a mix byte for byte alike, and as a server of the archive itself does; the
/// archive's own server names where its replica stands.
#[test]
fn two_servers_of_one_bucket_answer_alike_while_a_writer_commits() {
    let dir = process::scratch("replicate-serve");
    let moto = s3::Moto::start(&[BUCKET]);
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    let url = format!("s3://{BUCKET}/served");
    ingest(&moto.env(), a, &csv(dir.path(), "first.csv", 0, 400));
    ok(&moto.env(), &["replicate", a, &url]);

    let local = http::Server::start_env(process::BIN, &archive, &[], &moto.env());
    let first = http::Server::start_env(process::BIN, Path::new(&url), &[], &moto.env());
    let elsewhere = dir.path().join("elsewhere-tmp");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let mut env = moto.env();
    env.push(("TMPDIR", elsewhere.to_str().expect("utf-8").to_owned()));
    let second = http::Server::start_env(process::BIN, Path::new(&url), &[], &env);

    let compare = |phase: &str| {
        // The archive's own server is level with the archive at once; the bucket's servers
        // within a few of their refresh periods.
        let want = streams_of(&local);
        assert_eq!(want["replica"]["records_behind"], 0, "{phase}: {want}");
        assert_eq!(want["replica"]["url"], url.as_str(), "{phase}");
        let barriers = want["barriers"].clone();
        for server in [&first, &second] {
            let began = std::time::Instant::now();
            while streams_of(server)["barriers"] != barriers {
                assert!(
                    began.elapsed() < std::time::Duration::from_secs(30),
                    "{phase}: a server of the bucket did not reach barrier {barriers}: {}",
                    streams_of(server)
                );
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        for path in MIX {
            let (one, two, own) = (first.get(path), second.get(path), local.get(path));
            assert_eq!(one.status, 200, "{phase} {path}: {}", one.text());
            assert!(one.complete && two.complete, "{phase} {path}");
            assert_eq!(
                one.body, two.body,
                "{phase} {path}: the two servers of the bucket"
            );
            if *path == "/api/streams" {
                let mut own = own.json();
                own.as_object_mut().expect("object").remove("replica");
                assert_eq!(
                    one.json(),
                    own,
                    "{phase} {path}: the bucket's and the archive's"
                );
            } else {
                assert_eq!(
                    one.body, own.body,
                    "{phase} {path}: the bucket's and the archive's"
                );
            }
        }
    };
    compare("first commit");
    ingest(&moto.env(), a, &csv(dir.path(), "second.csv", 400, 700));
    compare("after an ingest");
    // A compaction: the files it replaced leave the bucket with the pass that carries it, so a
    // server still on the older snapshot finds them gone and reads again on the new one.
    ok_env(&moto.env(), &["compact", a]);
    compare("after a compaction");
    let said = ok(&moto.env(), &["inspect", a, "--json"]);
    let inspected: serde_json::Value = serde_json::from_str(&said).expect("json");
    assert_eq!(inspected["replica"]["records_behind"], 0, "{said}");
    assert_eq!(inspected["replica"]["seconds_behind"], 0.0, "{said}");
}

/// Offload becomes eviction: with a replica and no cold tier, `offload` drops the local copies
/// of data files the bucket holds (no second upload), and everything reads as before, from
/// the bucket: the CLI's reads, `verify`, `files`, and every engine over the bucket's Delta
/// table (whose paths stay relative). A compaction of evicted files reads them from the
/// bucket; the objects it replaced leave with the replica pass, and the bucket restores to
/// exactly the archive at every step.
#[test]
fn offload_evicts_what_the_replica_holds_and_everything_still_reads() {
    let dir = process::scratch("replicate-evict");
    let moto = s3::Moto::start(&[BUCKET]);
    let env = moto.env();
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    let prefix = "evicted";
    let url = format!("s3://{BUCKET}/{prefix}");
    let local_data = || {
        std::fs::read_dir(archive.join("streams/capture/rows"))
            .expect("rows dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
            .count()
    };

    // Without a cold tier or a replica there is nothing to evict into.
    ingest(&env, a, &csv(dir.path(), "first.csv", 0, 400));
    refused(
        &env,
        &["offload", a, "--local-budget", "0B"],
        2,
        "or a replica whose copies it evicts",
    );
    ok(&env, &["replicate", a, &url]);
    let want = reads(&env, a);
    let before = local_data();
    assert!(before > 0);

    let dry = ok(&env, &["offload", a, "--local-budget", "0B", "--dry-run"]);
    assert!(dry.contains("would evict streams/capture/rows/"), "{dry}");
    assert!(
        dry.contains(&format!("held at {url}/streams/capture/rows/")),
        "{dry}"
    );
    assert_eq!(local_data(), before, "a dry run changes nothing");

    let said = ok(&env, &["offload", a, "--local-budget", "0B"]);
    assert!(
        said.contains(&format!("evicted capture: {before} file(s)")),
        "{said}"
    );
    assert_eq!(local_data(), 0, "every data file's local copy is gone");
    assert_eq!(reads(&env, a), want, "served from the bucket, the same");
    let verify = ok(&env, &["verify", a]);
    assert!(verify.starts_with("ok:"), "{verify}");
    let files = ok(&env, &["files", a, "--stream", "capture"]);
    assert!(
        files
            .lines()
            .all(|l| l.starts_with(&format!("{url}/streams/capture/rows/"))),
        "{files}"
    );
    assert_eq!(bucket_now(&moto, dir.path(), prefix, "after-evict"), want);
    engines_read_exactly(&moto, dir.path(), &url, &want[0]);

    // New rows beside evicted ones, then a compaction that rewrites both.
    ingest(&env, a, &csv(dir.path(), "second.csv", 400, 700));
    let out = ok_env(&env, &["compact", a]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        stdout.contains("capture: ") && stdout.contains(" data file(s)"),
        "{stdout}"
    );
    assert!(stderr.contains("caught up"), "{stderr}");
    let want = reads(&env, a);
    assert_eq!(bucket_now(&moto, dir.path(), prefix, "after-compact"), want);
    // The replaced objects left with the pass: the bucket holds the live data files only.
    let tier =
        ColdTier::new(std::sync::Arc::new(moto.store(BUCKET)), prefix, url.clone()).expect("tier");
    let mut held: Vec<String> = tier
        .list("streams/capture/rows")
        .expect("list")
        .into_iter()
        .map(|(path, _)| path)
        .filter(|p| p.ends_with(".parquet") && !p.contains("_delta_log"))
        .map(|p| format!("{url}/{p}"))
        .collect();
    held.sort();
    let files = ok(&env, &["files", a, "--stream", "capture", "--manifest"]);
    let mut live: Vec<String> = files
        .lines()
        .map(
            |l| match l.strip_prefix(&format!("{}/", archive.display())) {
                Some(local) => format!("{url}/{local}"),
                None => l.to_owned(),
            },
        )
        .collect();
    live.sort();
    assert_eq!(held, live);
    engines_read_exactly(&moto, dir.path(), &url, &want[0]);
    assert_eq!(status(&env, a)["records_behind"], 0);
}

/// What `--requests` said of the bucket at `url`: its GETs and the ranges the cache answered.
fn bucket_requests(stderr: &[u8], url: &str) -> (u64, u64) {
    let stderr = String::from_utf8_lossy(stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&format!("requests: {url}: ")))
        .unwrap_or_else(|| panic!("no requests line for {url}: {stderr}"));
    let number = |after: &str| -> u64 {
        let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
        let at = words
            .iter()
            .position(|w| *w == after)
            .unwrap_or_else(|| panic!("{after:?} in {line}"));
        words[at - 1]
            .parse()
            .unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    (number("GET"), number("read"))
}

/// The bytes of every file under `dir` (0 when it is absent).
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .map(|e| {
            let e = e.expect("entry");
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                bytes_under(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

#[test]
fn a_url_read_keeps_a_bounded_cache_and_fetches_only_what_is_new() {
    let dir = process::scratch("replicate-cache");
    let moto = s3::Moto::start(&[BUCKET]);
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    let url = format!("s3://{BUCKET}/cached");
    ingest(&moto.env(), a, &csv(dir.path(), "first.csv", 0, 600));
    ok_env(&moto.env(), &["replicate", a, &url]);
    let cache = dir.path().join("cache");
    let c = cache.to_str().expect("utf-8");
    let survey_in = |archive: &str, cache: &str, extra: &[&str]| {
        let mut args = vec!["--requests", "--cache", cache];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[
            "survey", archive, "--stream", "capture", "--track", "run_1", "--budget", "64",
            "--json",
        ]);
        let out = ok_env(&moto.env(), &args);
        (String::from_utf8(out.stdout.clone()).expect("utf-8"), out)
    };
    let survey = |archive: &str, extra: &[&str]| survey_in(archive, c, extra);
    let local = |archive: &str| {
        ok(
            &moto.env(),
            &[
                "survey", archive, "--stream", "capture", "--track", "run_1", "--budget", "64",
                "--json",
            ],
        )
    };

    // Cold: the manifest part and the files' footers and row groups come from the bucket.
    let (cold, out) = survey(&url, &[]);
    assert_eq!(cold, local(a));
    let (cold_gets, _) = bucket_requests(&out.stderr, &url);
    assert!(cold_gets >= 3, "{}", String::from_utf8_lossy(&out.stderr));
    // Warm: the same answer with no GET at all (one LIST asks whether the bucket moved).
    let (warm, out) = survey(&url, &[]);
    assert_eq!(warm, cold);
    let (gets, cached) = bucket_requests(&out.stderr, &url);
    assert_eq!(gets, 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(cached >= 2, "{}", String::from_utf8_lossy(&out.stderr));

    // The writer commits: the next read follows, fetching the new part and what it names.
    ingest(&moto.env(), a, &csv(dir.path(), "second.csv", 600, 900));
    let (moved, out) = survey(&url, &[]);
    assert_eq!(moved, local(a));
    assert_ne!(moved, cold);
    let (gets, _) = bucket_requests(&out.stderr, &url);
    assert!(gets >= 1, "{}", String::from_utf8_lossy(&out.stderr));

    // Damage in the cache is never an answer: every cached range and the cached manifest
    // altered on this machine, the read is still exact (fetched again from the bucket).
    let url_dir = std::fs::read_dir(&cache)
        .expect("cache dir")
        .next()
        .expect("a directory for the URL")
        .expect("entry")
        .path();
    let mut damaged = 0;
    for entry in std::fs::read_dir(url_dir.join("ranges")).expect("ranges") {
        let path = entry.expect("entry").path();
        let mut raw = std::fs::read(&path).expect("read");
        let last = raw.len() - 1;
        raw[last] ^= 0x5a;
        std::fs::write(&path, raw).expect("write");
        damaged += 1;
    }
    assert!(damaged > 0);
    for entry in std::fs::read_dir(url_dir.join("manifest")).expect("manifest") {
        let path = entry.expect("entry").path();
        let mut raw = std::fs::read(&path).expect("read");
        raw[20] ^= 0x5a;
        std::fs::write(&path, raw).expect("write");
    }
    let (after_damage, out) = survey(&url, &[]);
    assert_eq!(after_damage, moved);
    let (gets, _) = bucket_requests(&out.stderr, &url);
    assert!(gets >= 3, "{}", String::from_utf8_lossy(&out.stderr));

    // Bounded: a cache of 48 KiB keeps some ranges and never holds more; 0 keeps none, so
    // every read GETs.
    let small = dir.path().join("small");
    let s = small.to_str().expect("utf-8");
    for _ in 0..2 {
        let (answer, _) = survey_in(&url, s, &["--cache-size", "48KiB"]);
        assert_eq!(answer, moved);
        assert!(bytes_under(&small) > 0);
    }
    let ranges: u64 = std::fs::read_dir(&small)
        .expect("small cache")
        .map(|e| bytes_under(&e.expect("entry").path().join("ranges")))
        .sum();
    assert!(
        ranges > 0 && ranges <= 48 * 1024,
        "{ranges} bytes of ranges"
    );
    let none = dir.path().join("none");
    let n = none.to_str().expect("utf-8");
    for _ in 0..2 {
        let (answer, out) = survey_in(&url, n, &["--cache-size", "0"]);
        assert_eq!(answer, moved);
        let (gets, cached) = bucket_requests(&out.stderr, &url);
        assert!(
            gets >= 2 && cached == 0,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Many passes make many manifest parts; a pass consolidates them as a counter in base 16
/// does its digits (sixteen parts into one object, sixteen of those into one, …), so a fresh
/// reader of the bucket fetches as many objects as the digits of the number of parts add up
/// to, not every part: the objects an open reads stay bounded however long the history, and
/// no pass uploads the generation again from its start each time. The answers are exact, a
/// restore from it is whole, and a checkpoint's pass removes the old generation's
/// consolidations with its parts.
#[test]
fn an_open_from_the_bucket_reads_a_bounded_number_of_manifest_objects() {
    let dir = process::scratch("replicate-whole");
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    let bucket = dir.path().join("bucket");
    let url = format!("file://{}", bucket.display());
    let env: Vec<(&'static str, String)> = Vec::new();
    ingest(&env, a, &csv(dir.path(), "t0.csv", 0, 40));
    ok_env(&env, &["replicate", a, &url]);
    // Each ingest commits and its closing pass writes at least one part (no compaction, so
    // no checkpoint starts a new generation meanwhile).
    for i in 1..40u64 {
        let input = csv(dir.path(), &format!("t{i}.csv"), i * 40, i * 40 + 40);
        ingest_with(&env, a, &input, &["--no-compact"]);
    }
    let manifest = bucket.join("manifest/gen-000000000001");
    let names: Vec<String> = std::fs::read_dir(&manifest)
        .expect("manifest dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let parts: Vec<u64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".part")?.parse().ok())
        .collect();
    // Consolidations: `E.whole` holds [0, E), `S-E.span` holds [S, E).
    let mut spans: Vec<(u64, u64, &String)> = names
        .iter()
        .filter_map(|n| {
            if let Some(end) = n.strip_suffix(".whole") {
                return Some((0, end.parse().ok()?, n));
            }
            let (start, end) = n.strip_suffix(".span")?.split_once('-')?;
            Some((start.parse().ok()?, end.parse().ok()?, n))
        })
        .collect();
    spans.sort_unstable();
    assert!(parts.len() >= 40, "{names:?}");
    assert!(
        spans.iter().any(|s| s.0 == 0) && spans.iter().any(|s| s.0 > 0),
        "{names:?}"
    );
    let log = std::fs::read(archive.join("manifest/gen-000000000001.log")).expect("log");
    for &(start, end, name) in &spans {
        let bytes = std::fs::read(manifest.join(name)).expect("consolidation");
        assert_eq!(
            bytes[..],
            log[start as usize..end as usize],
            "{name} holds the generation's bytes in its range"
        );
        for at in [start, end] {
            assert!(
                at == 0 || parts.contains(&at) || at == log.len() as u64,
                "{at} is not where a part starts or ends: {names:?}"
            );
        }
    }
    // Sixteen parts a digit: n parts read as n / 16 / 16 + (n / 16) % 16 + n % 16 objects.
    let n = parts.len() as u64;
    let expected = n / 256 + (n / 16) % 16 + n % 16;

    // A fresh reader (no cache): the consolidations and the parts after them, nothing more.
    let cache = dir.path().join("cache");
    let out = ok_env(
        &env,
        &[
            "--requests",
            "--cache",
            cache.to_str().expect("utf-8"),
            "--cache-size",
            "0",
            "inspect",
            &url,
        ],
    );
    // And, since format 11, each file recorded by its row groups: its magic, its footer and
    // each row group, whose rows the open reads the file's slices from.
    let rows_form: u64 = {
        let local = series_archive::archive::Archive::open(
            &archive,
            series_archive::archive::Config::new().read_only(true),
        )
        .expect("open the archive");
        local
            .state()
            .streams
            .values()
            .flat_map(|s| &s.files)
            .filter(|f| f.format == Some(series_archive::archive::manifest::ROWS_FORMAT))
            .map(|f| 2 + f.row_groups().len() as u64)
            .sum()
    };
    let (gets, _) = bucket_requests(&out.stderr, &url);
    assert_eq!(
        gets,
        expected + rows_form,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(reads(&env, &url), reads(&env, a));
    let restored = dir.path().join("restored");
    let r = restored.to_str().expect("utf-8");
    ok_env(&env, &["restore", &url, r]);
    assert_eq!(reads(&env, r), reads(&env, a));

    // A checkpoint's pass: generation 2 alone, the old consolidations gone with the parts.
    ok_env(&env, &["checkpoint", r]);
    let left: Vec<String> = tree(&bucket.join("manifest")).into_keys().collect();
    assert_eq!(
        left,
        vec![format!("gen-000000000002/{:020}.part", 0)],
        "{left:?}"
    );
}

/// The Delta log objects under `dir` (a table's `_delta_log/`), here or in the bucket: names.
fn log_names(names: impl IntoIterator<Item = String>) -> std::collections::BTreeSet<String> {
    names
        .into_iter()
        .filter_map(|n| n.rsplit('/').next().map(str::to_owned))
        .filter(|n| n.ends_with(".json") || n.ends_with(".parquet") || n == "_last_checkpoint")
        .collect()
}

/// A long history keeps bounded Delta logs, here and in the bucket: after a checkpoint a log
/// drops the versions before its previous checkpoint (and never the newest hundred), a pass
/// deletes the bucket's copies of them once the new checkpoint is up, and every engine still
/// reads the bucket's table exactly. A log written anew (`publish`, which numbers versions from
/// 0 again) replaces the bucket's copy whole: none of the old log's versions is left for a
/// reader to mix in.
#[test]
fn delta_logs_stay_bounded_here_and_in_the_bucket_and_a_rewritten_log_replaces_its_copy() {
    let dir = process::scratch("replicate-expire");
    let moto = s3::Moto::start(&[BUCKET]);
    let env = moto.env();
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    let prefix = "long";
    let url = format!("s3://{BUCKET}/{prefix}");
    ingest(&env, a, &csv(dir.path(), "t0.csv", 0, 40));
    ok(&env, &["replicate", a, &url]);
    // 252 barriers of 300 rows: a Delta commit each, checkpoints at versions 100 and 200.
    ingest_with(
        &env,
        a,
        &csv(dir.path(), "long.csv", 40, 8440),
        &["--no-compact"],
    );
    let local_log = archive.join("streams/capture/rows/_delta_log");
    let here = || {
        log_names(
            std::fs::read_dir(&local_log)
                .expect("the log")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()),
        )
    };
    let tier =
        ColdTier::new(std::sync::Arc::new(moto.store(BUCKET)), prefix, url.clone()).expect("tier");
    let there = || {
        log_names(
            tier.list("streams/capture/rows/_delta_log")
                .expect("list")
                .into_iter()
                .map(|(name, _)| name),
        )
    };
    let commits = |names: &std::collections::BTreeSet<String>| {
        names.iter().filter(|n| n.ends_with(".json")).count()
    };
    let names = here();
    assert!(!names.contains("00000000000000000000.json"), "{names:?}");
    assert!(
        names.contains(&format!("{:020}.json", 100))
            && names.contains(&format!("{:020}.json", 252)),
        "{names:?}"
    );
    assert!(commits(&names) <= 160, "{} commits kept", commits(&names));
    ok(&env, &["replicate", a, &url]);
    assert_eq!(there(), here(), "the bucket's log is the local log");
    let want = reads(&env, a);
    engines_read_exactly(&moto, dir.path(), &url, &want[0]);

    // Written anew: version 0 again, and the bucket's copy follows it whole.
    ok(&env, &["publish", a]);
    let names = here();
    assert!(names.contains("00000000000000000000.json"), "{names:?}");
    assert!(commits(&names) <= 2, "{names:?}");
    let said = ok(&env, &["replicate", a, &url]);
    assert!(said.contains("caught up"), "{said}");
    assert_eq!(
        there(),
        here(),
        "nothing of the old log is left in the bucket"
    );
    assert_eq!(reads(&env, a), want);
    engines_read_exactly(&moto, dir.path(), &url, &want[0]);
}
