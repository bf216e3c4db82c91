//! The cold tier from the command line, against a real S3-compatible server on loopback
//! (moto, started here): `offload --cold s3://…` moves the data files, and `rows`, `survey`,
//! `fold`, `verify` answer exactly as before with no flag (the manifest records the URLs;
//! credentials and endpoint come from the AWS environment variables). `files` prints the
//! objects' URLs, and pyarrow and Polars read exactly the rows `rows` serves from them.

#[path = "common/process.rs"]
mod process;
#[path = "common/s3.rs"]
mod s3;
#[path = "common/tree.rs"]
mod tree;

use std::path::Path;
use std::process::{Command, Output};

fn sa(moto: &s3::Moto, args: &[&str]) -> Output {
    Command::new(process::BIN)
        .args(args)
        .envs(moto.env())
        .env_remove("SERIES_ARCHIVE_LOG")
        .output()
        .expect("run series-archive")
}

fn ok(moto: &s3::Moto, args: &[&str]) -> String {
    let out = sa(moto, args);
    assert!(
        out.status.success(),
        "{}",
        process::show(&format!("series-archive {}", args.join(" ")), &out)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn csv(dir: &Path) -> String {
    let mut text = String::from("run,probe,ordinal,value,noise\n");
    for t in 0..500u64 {
        for r in 0..2 {
            for p in 0..2 {
                text.push_str(&format!(
                    "run_{r},p{p},{t},{},{}\n",
                    (t * 37 + r * 11 + p) % 1000,
                    t as f64 / 7.0 + r as f64
                ));
            }
        }
    }
    let path = dir.join("rows.csv");
    std::fs::write(&path, text).expect("write csv");
    path.to_str().expect("utf-8").to_owned()
}

#[test]
fn offload_to_s3_and_every_read_answers_the_same() {
    let dir = process::scratch("cli-tiers");
    let moto = s3::Moto::start(&["cli-tier"]);
    let archive = dir.path().join("archive");
    let a = archive.to_str().expect("utf-8");
    let input = csv(dir.path());
    ok(
        &moto,
        &[
            "ingest",
            a,
            "--stream",
            "capture",
            "--track",
            "run,probe",
            "--axis",
            "ordinal",
            "--seal-rows",
            "400",
            &input,
        ],
    );
    let reads: Vec<Vec<&str>> = vec![
        vec!["rows", a, "--stream", "capture"],
        vec![
            "rows", a, "--stream", "capture", "--track", "run_1", "--from", "100", "--to", "900",
        ],
        vec![
            "survey", a, "--stream", "capture", "--budget", "400", "--json",
        ],
        vec![
            "fold",
            a,
            "--stream",
            "capture",
            "--aggregate",
            "p95",
            "--json",
        ],
        vec![
            "fold",
            a,
            "--stream",
            "capture",
            "--track",
            "run_0",
            "--aggregate",
            "mean",
            "--json",
        ],
    ];
    let before: Vec<String> = reads.iter().map(|r| ok(&moto, r)).collect();

    let dry = ok(
        &moto,
        &[
            "offload",
            a,
            "--cold",
            "s3://cli-tier/site-a",
            "--local-budget",
            "0",
            "--dry-run",
        ],
    );
    assert_eq!(
        dry.lines().filter(|l| l.starts_with("would move")).count(),
        5,
        "{dry}"
    );
    let out = sa(
        &moto,
        &[
            "offload",
            a,
            "--cold",
            "s3://cli-tier/site-a",
            "--local-budget",
            "0",
            "--requests",
        ],
    );
    assert!(out.status.success(), "{}", process::show("offload", &out));
    let moved = String::from_utf8(out.stdout).expect("utf-8");
    assert!(moved.contains("offloaded capture: 5 file(s)"), "{moved}");
    // What the move cost: one PUT per file (below the multipart threshold), carrying its
    // SHA-256 for the server to check, so nothing is read back; claiming the prefix at the
    // first writable open, one GET of `OWNER` (absent), one LIST (empty, reused by the orphan
    // sweep) and one conditional PUT.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("requests: s3://cli-tier/site-a: 1 GET, 6 PUT, 0 DELETE, 1 LIST"),
        "{stderr}"
    );
    let local: Vec<_> = std::fs::read_dir(archive.join("streams/capture/rows"))
        .expect("rows dir")
        .map(|e| e.expect("entry").file_name())
        .filter(|n| n != "_delta_log")
        .collect();
    assert!(local.is_empty(), "local copies deleted: {local:?}");
    // The Delta log names every file by its object URL now.
    let listed = ok(&moto, &["files", a, "--stream", "capture"]);
    assert_eq!(listed.lines().count(), 5, "{listed}");
    assert!(
        listed
            .lines()
            .all(|l| l.starts_with("s3://cli-tier/site-a/streams/capture/rows/")),
        "{listed}"
    );

    for (read, want) in reads.iter().zip(&before) {
        assert_eq!(&ok(&moto, read), want, "{read:?} answers the same from S3");
    }
    assert!(ok(&moto, &["verify", a]).starts_with("ok: "));
    // Requests per tier: a survey answers from the local level files alone; a track's rows
    // are ranged GETs of its cold files.
    let requests = |args: &[&str]| -> String {
        let out = sa(&moto, args);
        assert!(
            out.status.success(),
            "{}",
            process::show("--requests", &out)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let survey = requests(&[
        "survey",
        a,
        "--stream",
        "capture",
        "--budget",
        "400",
        "--requests",
    ]);
    assert!(survey.contains("(local): "), "{survey}");
    assert!(
        !survey.contains("s3://"),
        "a survey touches no cold object: {survey}"
    );
    let rows = requests(&["rows", a, "--stream", "capture", "--requests"]);
    let gets: u64 = rows
        .lines()
        .find_map(|l| l.strip_prefix("requests: s3://cli-tier/site-a: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("rows reports its cold GETs: {rows}"));
    assert!(gets >= 5, "at least one GET per cold file: {rows}");
    let inspect = ok(&moto, &["inspect", a]);
    assert!(
        inspect.contains("5 cold") && inspect.contains("in s3://cli-tier/site-a"),
        "{inspect}"
    );
    let files = ok(&moto, &["files", a, "--stream", "capture"]);
    let urls: Vec<&str> = files.lines().collect();
    assert_eq!(urls.len(), 5);
    assert!(urls
        .iter()
        .all(|u| u.starts_with("s3://cli-tier/site-a/streams/capture/rows/")));
    let levels = ok(&moto, &["files", a, "--stream", "capture", "--levels"]);
    assert!(
        levels.lines().all(|l| l.starts_with(a)),
        "level files stay local: {levels}"
    );

    // pyarrow, Polars and DuckDB read exactly what `rows` serves, from the URLs `files` prints.
    let python = process::python("pyarrow, polars, duckdb");
    let check = r#"
import sys, csv, io
import pyarrow.fs, pyarrow.parquet as pq, pyarrow as pa
endpoint, expected_csv = sys.argv[1], sys.argv[2]
fs = pyarrow.fs.S3FileSystem(endpoint_override=endpoint, scheme="http", access_key="test",
                             secret_key="test", region="us-east-1")
tables = [pq.read_table(u[len("s3://"):], filesystem=fs) for u in sys.stdin.read().split()]
t = pa.concat_tables(tables).sort_by("_seq")
rows = list(csv.DictReader(open(expected_csv)))
assert t.num_rows == len(rows), (t.num_rows, len(rows))
assert [str(v) for v in t.column("_position").to_pylist()] == [r["_position"] for r in rows]
assert [str(v) for v in t.column("value").to_pylist()] == [r["value"] for r in rows]
# Polars reads the same objects by their URLs.
import polars as pl
opts = {"aws_endpoint_url": endpoint, "aws_allow_http": "true", "aws_access_key_id": "test",
        "aws_secret_access_key": "test", "aws_region": "us-east-1"}
urls = open(sys.argv[3]).read().split()
p = pl.concat([pl.read_parquet(u, storage_options=opts) for u in urls]).sort("_seq")
assert p.height == len(rows), (p.height, len(rows))
assert [str(v) for v in p["value"].to_list()] == [r["value"] for r in rows]
# DuckDB reads them too, through httpfs (installed from the registry as duckdb-ext-httpfs).
import duckdb, os
ext = os.path.join(os.path.dirname(duckdb.__file__), "..", "duckdb_ext", "extensions")
con = duckdb.connect(config={"extension_directory": os.path.abspath(ext),
                             "autoinstall_known_extensions": False})
con.execute("LOAD httpfs")
host = endpoint.split("://", 1)[1]
con.execute(f"CREATE SECRET cold (TYPE s3, KEY_ID 'test', SECRET 'test', REGION 'us-east-1', "
            f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)")
d = con.execute("SELECT _position, value FROM read_parquet(?) ORDER BY _seq", [urls]).fetchall()
assert len(d) == len(rows), (len(d), len(rows))
assert [str(p) for p, _ in d] == [r["_position"] for r in rows]
assert [str(v) for _, v in d] == [r["value"] for r in rows]
print("ok", t.num_rows)
"#;
    let expected = dir.path().join("expected.csv");
    std::fs::write(&expected, &before[0]).expect("write");
    let url_list = dir.path().join("urls.txt");
    std::fs::write(&url_list, &files).expect("write");
    let mut child = Command::new(python)
        .args([
            "-c",
            check,
            &moto.endpoint,
            expected.to_str().expect("utf-8"),
            url_list.to_str().expect("utf-8"),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run python");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(files.as_bytes())
        .expect("write urls");
    let out = child.wait_with_output().expect("python");
    assert!(
        out.status.success(),
        "{}",
        process::show("pyarrow over S3", &out)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok 2000");

    // Retiring a run deletes its cold objects' rows from what is served, and the next
    // writable open with the tier finds no orphan.
    ok(
        &moto,
        &["retire", a, "--stream", "capture", "--track", "run_0"],
    );
    let out = sa(
        &moto,
        &["rows", a, "--stream", "capture", "--track", "run_1"],
    );
    assert!(out.status.success());
    let compacted = ok(&moto, &["compact", a, "--cold", "s3://cli-tier/site-a"]);
    assert!(!compacted.contains("error"), "{compacted}");
    assert!(ok(&moto, &["verify", a]).starts_with("ok: "));
}

/// `verify` checks a cold object's length (one HEAD), as it checks a local file's: two bytes
/// appended to an offloaded object are damage, even though every recorded range still reads
/// back whole. With the tier unreachable it says so once, naming the tier, reports every cold
/// file unverified without asking the tier again (one request timeout in all, not one per
/// file), and exits 3.
#[test]
fn verify_checks_a_cold_objects_length_and_fails_fast_when_the_tier_is_unreachable() {
    let dir = process::scratch("cli-tiers-verify");
    let moto = s3::Moto::start(&["cli-verify"]);
    let archive = dir.path().join("archive");
    let a = archive.to_str().expect("utf-8");
    let input = csv(dir.path());
    ok(
        &moto,
        &[
            "ingest",
            a,
            "--stream",
            "capture",
            "--track",
            "run,probe",
            "--axis",
            "ordinal",
            "--seal-rows",
            "400",
            "--no-compact",
            &input,
        ],
    );
    let cold = "s3://cli-verify/site-b";
    ok(
        &moto,
        &["offload", a, "--cold", cold, "--local-budget", "0"],
    );
    assert!(ok(&moto, &["verify", a]).starts_with("ok: "));
    let urls: Vec<String> = ok(&moto, &["files", a, "--stream", "capture"])
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(urls.len(), 5, "{urls:?}");

    // The tier unreachable: an endpoint on loopback that takes connections and never
    // answers, so every request runs into its timeout (3 s here; 60 s by default).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let nowhere = format!("http://{}", silent.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let held: Vec<_> = silent.incoming().take(64).collect();
        std::thread::sleep(std::time::Duration::from_secs(120));
        drop(held);
    });
    let began = std::time::Instant::now();
    let out = Command::new(process::BIN)
        .args(["verify", a])
        .envs(moto.env())
        .env("AWS_ENDPOINT", &nowhere)
        .env("SERIES_ARCHIVE_COLD_TIMEOUT", "3")
        .env_remove("SERIES_ARCHIVE_LOG")
        .output()
        .expect("run verify");
    let took = began.elapsed();
    let shown = process::show("verify with the tier unreachable", &out);
    println!("{shown}(took {took:?})");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{shown}");
    assert!(
        took < std::time::Duration::from_secs(9),
        "verify took {took:?} for 5 cold files with a 3 s request timeout (one timeout, not five):\n{shown}"
    );
    let unverified: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("UNVERIFIED "))
        .collect();
    assert_eq!(unverified.len(), 5, "{shown}");
    for url in &urls {
        assert!(
            unverified.iter().any(|l| l.contains(url.as_str())),
            "{url} is not reported:\n{shown}"
        );
    }
    let unreachable = format!("the cold tier {cold} is unreachable");
    assert_eq!(
        stdout.matches(&unreachable).count(),
        1,
        "the tier is named unreachable once:\n{shown}"
    );
    assert!(!stdout.contains("DAMAGED"), "{shown}");

    // Two bytes appended to one offloaded object: damaged, exit 4, naming it and its sizes.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let store = moto.store("cli-verify");
    let victim = urls[2].clone();
    let key = object_store::path::Path::from(
        victim
            .strip_prefix("s3://cli-verify/")
            .expect("in the bucket"),
    );
    let length = rt.block_on(async {
        use object_store::ObjectStoreExt;
        let mut bytes = store
            .get(&key)
            .await
            .expect("get")
            .bytes()
            .await
            .expect("bytes")
            .to_vec();
        let length = bytes.len();
        bytes.extend_from_slice(b"\n\n");
        store
            .put(&key, object_store::PutPayload::from(bytes))
            .await
            .expect("put");
        length
    });
    let out = sa(&moto, &["verify", a]);
    let shown = process::show("verify after two bytes appended", &out);
    assert_eq!(out.status.code(), Some(4), "{shown}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let damaged: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("DAMAGED "))
        .collect();
    assert_eq!(damaged.len(), 1, "{shown}");
    assert!(
        damaged[0].contains(&victim)
            && damaged[0].contains(&format!(
                "{} bytes in the cold tier, the manifest recorded {length}",
                length + 2
            )),
        "{shown}"
    );
}

/// Ingests 400 ticks of 2 tracks from `from`, one barrier.
fn ingest_ticks(moto: &s3::Moto, archive: &str, dir: &std::path::Path, from: u64) {
    let mut text = String::from("run,probe,ordinal,value\n");
    for t in from..from + 400 {
        for r in 0..2 {
            text.push_str(&format!("run_{r},p0,{t},{}\n", t * 3 + r));
        }
    }
    let input = dir.join(format!("rows-{from}.csv"));
    std::fs::write(&input, text).expect("write csv");
    ok(
        moto,
        &[
            "ingest",
            archive,
            "--stream",
            "capture",
            "--track",
            "run,probe",
            "--axis",
            "ordinal",
            "--seal-rows",
            "400",
            "--no-compact",
            input.to_str().expect("utf-8"),
        ],
    );
}

/// `offload` into a cold prefix that lost objects the manifest names there is refused,
/// naming the tier and an object, and changes nothing.
#[test]
fn offload_into_a_prefix_that_lost_its_objects_is_refused() {
    let dir = process::scratch("cli-tier-loss");
    let moto = s3::Moto::start(&["tier-loss"]);
    let archive = dir.path().join("archive");
    let a = archive.to_str().expect("utf-8");
    ingest_ticks(&moto, a, dir.path(), 0);
    let cold = "s3://tier-loss/site";
    ok(
        &moto,
        &["offload", a, "--cold", cold, "--local-budget", "0"],
    );
    let urls: Vec<String> = ok(&moto, &["files", a, "--stream", "capture"])
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(urls.iter().all(|u| u.starts_with(cold)), "{urls:?}");

    // One object lost from the bucket, then more rows to offload.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let store = moto.store("tier-loss");
    let lost = urls[0].clone();
    let key = object_store::path::Path::from(
        lost.strip_prefix("s3://tier-loss/").expect("in the bucket"),
    );
    rt.block_on(async {
        use object_store::ObjectStoreExt;
        store.delete(&key).await.expect("delete");
    });
    ingest_ticks(&moto, a, dir.path(), 400);
    let before = tree::tree(&archive);
    let out = sa(
        &moto,
        &["offload", a, "--cold", cold, "--local-budget", "0"],
    );
    let shown = process::show("offload into a prefix that lost an object", &out);
    assert_ne!(out.status.code(), Some(0), "{shown}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lost 1 object(s)"), "{shown}");
    assert!(stderr.contains(&lost), "{shown}");
    let mut after = tree::tree(&archive);
    after.remove("LOCK");
    let mut was = before;
    was.remove("LOCK");
    assert!(
        after == was,
        "the refused offload changed the archive:\n{shown}"
    );
}
