//! What a read of an archive by its URL costs, beside the same read of the archive itself,
//! against a real S3-compatible server on loopback (moto, started from the test venv unless
//! `--endpoint` names a running server). For each history length an archive is written
//! through the library with its replicator on (the automatic compaction every 16 barriers, as
//! a host's sealing service runs it), the bucket caught up, and then the CLI, one whole process
//! per read, runs the same survey: of the local archive; of the URL on a cold cache (a fresh
//! `--cache` directory each time); and of the URL on a warm one (the directory of the run
//! before). Per read: the median wall time, and the requests `--requests` counted (GETs,
//! LISTs, ranges the cache answered). Every answer is checked equal to the local one.
//!
//! ```sh
//! cargo build --release
//! cargo run --release --example replica_read_bench -- --histories 50,200,800 --rows 2000 \
//!     --runs 5 --python .venv/bin/python
//! ```

#[path = "common/bench.rs"]
mod bench;
#[path = "common/metrics.rs"]
mod metrics;

use bench::arg;
use metrics::{batch, schema};

use series_archive::archive::cold::ColdTier;
use series_archive::archive::{Archive, Config, StreamSpec};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn number(name: &str, default: u64) -> u64 {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Writes `barriers` barriers into a fresh archive at `dir` replicating to `tier`, compacting
/// as a host would, and waits until the bucket holds every commit.
fn write(dir: &Path, tier: ColdTier, barriers: u64, rows: u64, tracks: u64) {
    let spec = StreamSpec::dynamic("metrics", schema(), vec!["host".into()], Some("ts".into()))
        .expect("spec")
        .with_ladder(Some(
            series_archive::archive::Ladder::new(1_000_000_000, 8, 8).expect("ladder"),
        ));
    let config = Config::new().stream(spec).replicate(tier);
    let mut archive = Archive::open(dir, config).expect("open");
    for b in 0..barriers {
        let (batch, positions) = batch(b, rows, tracks);
        archive
            .stage_batch("metrics", &batch, &positions)
            .expect("stage");
        archive.seal_all().expect("seal");
        if b % 16 == 15 {
            archive.compact(false, |_, _, _| {}).expect("compact");
        }
    }
    let began = Instant::now();
    while archive.replication().expect("replicating").behind > 0 {
        assert!(began.elapsed() < Duration::from_secs(300), "no catch-up");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One survey by the CLI: its answer, wall time, and (for a URL) the bucket's GETs, LISTs and
/// cached ranges.
fn survey(
    bin: &str,
    endpoint: &str,
    archive: &str,
    cache: &Path,
    track: Option<&str>,
) -> (String, Duration, [u64; 3]) {
    let mut args = vec![
        "--requests".to_owned(),
        "--cache".to_owned(),
        cache.display().to_string(),
        "survey".to_owned(),
        archive.to_owned(),
        "--stream".to_owned(),
        "metrics".to_owned(),
        "--budget".to_owned(),
        "400".to_owned(),
        "--json".to_owned(),
    ];
    if let Some(track) = track {
        args.extend(["--track".to_owned(), track.to_owned()]);
    }
    let began = Instant::now();
    let out = Command::new(bin)
        .args(&args)
        .env("AWS_ENDPOINT", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .output()
        .expect("run series-archive");
    let took = began.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut counts = [0; 3];
    if let Some(line) = stderr
        .lines()
        .find(|l| l.starts_with(&format!("requests: {archive}: ")))
    {
        let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
        for (i, name) in ["GET", "LIST", "read"].iter().enumerate() {
            if let Some(at) = words.iter().position(|w| w == name) {
                counts[i] = words[at - 1].parse().unwrap_or(0);
            }
        }
    }
    (String::from_utf8(out.stdout).expect("utf-8"), took, counts)
}

/// How many manifest parts and consolidations the bucket holds under `prefix`.
fn manifest_objects(store: &Arc<dyn object_store::ObjectStore>, prefix: &str) -> (usize, usize) {
    use futures::TryStreamExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let location = object_store::path::Path::from(format!("{prefix}/manifest"));
    let listed: Vec<object_store::ObjectMeta> = runtime
        .block_on(store.list(Some(&location)).try_collect())
        .expect("list");
    let count = |suffix: &str| {
        listed
            .iter()
            .filter(|m| m.location.as_ref().ends_with(suffix))
            .count()
    };
    (count(".part"), count(".whole"))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let histories: Vec<u64> = arg("--histories")
        .unwrap_or_else(|| "50,200,800".into())
        .split(',')
        .map(|h| h.parse().expect("--histories: barrier counts"))
        .collect();
    let rows = number("--rows", 2_000);
    let tracks = number("--tracks", 16).max(1);
    let runs = number("--runs", 5).max(1) as usize;
    let bin = arg("--bin").unwrap_or_else(|| "target/release/series-archive".into());
    let bucket = "replica-read-bench";
    let python = arg("--python").unwrap_or_else(|| ".venv/bin/python".into());
    let server = bench::Server::start(arg("--endpoint"), &python, bucket);
    let store = server.store(bucket);
    let scratch = tempfile::tempdir().expect("tempdir");
    println!(
        "## A survey from the bucket: {rows} rows a barrier over {tracks} tracks, budget 400, moto on loopback, median of {runs} CLI processes\n"
    );
    println!("| barriers | survey of | local archive | URL, cold cache | URL, warm cache | warm ÷ local |");
    println!("|---:|---|---:|---:|---:|---:|");
    for &barriers in &histories {
        let prefix = format!("h{barriers}");
        let url = format!("s3://{bucket}/{prefix}");
        let tier = ColdTier::new(store.clone(), &prefix, url.clone()).expect("tier");
        let local = scratch.path().join(&prefix);
        write(&local, tier, barriers, rows, tracks);
        let (parts, wholes) = manifest_objects(&store, &prefix);
        eprintln!("{barriers} barriers: the bucket's manifest holds {parts} part(s) and {wholes} consolidation(s)");
        let local = local.display().to_string();
        for track in [Some("h00003"), None] {
            let shown = track.map_or("the whole stream".to_owned(), |t| format!("track {t}"));
            let unused = scratch.path().join("unused-cache");
            let (want, _, _) = survey(&bin, &server.endpoint, &local, &unused, track);
            let mut times = [Vec::new(), Vec::new(), Vec::new()];
            let mut requests = [[0; 3]; 3];
            let warm = scratch
                .path()
                .join(format!("warm-{prefix}-{}", track.is_some()));
            // The warm cache is filled once, untimed.
            survey(&bin, &server.endpoint, &url, &warm, track);
            for run in 0..runs {
                let cold = scratch
                    .path()
                    .join(format!("cold-{prefix}-{run}-{}", track.is_some()));
                let reads = [
                    (local.as_str(), unused.clone()),
                    (url.as_str(), cold),
                    (url.as_str(), warm.clone()),
                ];
                for (i, (archive, cache)) in reads.iter().enumerate() {
                    let (got, took, counts) = survey(&bin, &server.endpoint, archive, cache, track);
                    assert_eq!(got, want, "{archive} answered otherwise");
                    times[i].push(took);
                    requests[i] = counts;
                }
            }
            let [l, c, w] = times.map(median);
            let shown_requests =
                |r: [u64; 3]| format!("{} GET, {} LIST, {} from the cache", r[0], r[1], r[2]);
            println!(
                "| {barriers} | {shown} | {:.1} ms | {:.1} ms ({}) | {:.1} ms ({}) | {:.2}× |",
                l.as_secs_f64() * 1e3,
                c.as_secs_f64() * 1e3,
                shown_requests(requests[1]),
                w.as_secs_f64() * 1e3,
                shown_requests(requests[2]),
                w.as_secs_f64() / l.as_secs_f64()
            );
        }
    }
    drop(server);
}
