//! The cold tier's figures, side by side in one run against a real S3-compatible server on
//! loopback (moto, started from the test venv unless `--endpoint` names a running server):
//!
//! - offload throughput against a plain `object_store` put of the same bytes to the same
//!   server (target ≥ 0.8×);
//! - cold `rows` of a track, a survey at budget 400 and a p95, against the same reads of the
//!   same archive kept hot: median latency and requests per read;
//! - a whole replication pass of the archive (`replicate`: every data and level file, the
//!   Delta logs and the manifest, in commit order) against plain puts of the same files to the
//!   same server (issue 26's target ≥ 0.9×), each the median of `--runs` into fresh prefixes.
//!
//! ```sh
//! cargo run --release --example tier_bench -- --rows 1000000 --python .venv/bin/python
//! ```

#[path = "common/bench.rs"]
mod bench;

use bench::arg;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};
use series_archive::archive::cold::ColdTier;
use series_archive::archive::lifecycle::OffloadPolicy;
use series_archive::archive::{Archive, Config, StreamSpec};
use series_archive::Aggregate;
use std::ops::Bound::Unbounded;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let e = e.expect("entry");
        let (s, t) = (e.path(), to.join(e.file_name()));
        if e.file_type().expect("type").is_dir() {
            copy_tree(&s, &t);
        } else if e.file_name() != "LOCK" {
            std::fs::copy(&s, &t).expect("copy");
        }
    }
}

fn main() {
    let rows: u64 = arg("--rows")
        .and_then(|r| r.parse().ok())
        .unwrap_or(1_000_000);
    let runs: usize = arg("--runs").and_then(|r| r.parse().ok()).unwrap_or(5);
    let bucket = "tier-bench";
    // The server.
    let python = arg("--python").unwrap_or_else(|| ".venv/bin/python".into());
    let server = bench::Server::start(arg("--endpoint"), &python, bucket);
    let s3 = server.store(bucket);
    // What `ColdTier::from_url` reads (set before any request thread starts).
    server.export_env();

    // The archive: a 16-track capture workload, compacted into per-track segments.
    let dir = tempfile::tempdir().expect("tempdir");
    let hot = dir.path().join("hot");
    let cold = dir.path().join("cold");
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("run", arrow::datatypes::DataType::Utf8, false),
        arrow::datatypes::Field::new("probe", arrow::datatypes::DataType::Utf8, false),
        arrow::datatypes::Field::new("ordinal", arrow::datatypes::DataType::UInt64, false),
        arrow::datatypes::Field::new("value", arrow::datatypes::DataType::Float64, false),
    ]));
    let spec = StreamSpec::dynamic(
        "capture",
        schema.clone(),
        vec!["run".into(), "probe".into()],
        Some("ordinal".into()),
    )
    .expect("spec");
    {
        let mut archive = Archive::open(&hot, Config::new().stream(spec.clone())).expect("open");
        let per_barrier = 100_000u64;
        let mut done = 0u64;
        while done < rows {
            let n = per_barrier.min(rows - done);
            let ticks = n / 16;
            let mut run = Vec::new();
            let mut probe = Vec::new();
            let mut ordinal = Vec::new();
            let mut value = Vec::new();
            let mut positions = Vec::new();
            for t in 0..ticks {
                let tick = done / 16 + t;
                for r in 0..4 {
                    for p in 0..4 {
                        run.push(format!("run_{r}"));
                        probe.push(format!("p{p}"));
                        ordinal.push(tick * 1000);
                        // A noisy signal (as a sensor's): compresses like real data,
                        // not like a repeating pattern.
                        let mut x = tick * 16 + r * 4 + p + 0x9E37_79B9_7F4A_7C15;
                        x ^= x >> 33;
                        x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
                        x ^= x >> 33;
                        value.push((tick % 1000) as f64 + (x % 10_000) as f64 / 1e4);
                        positions.push(tick + 1);
                    }
                }
            }
            let batch = arrow::array::RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(arrow::array::StringArray::from(run)),
                    Arc::new(arrow::array::StringArray::from(probe)),
                    Arc::new(arrow::array::UInt64Array::from(ordinal)),
                    Arc::new(arrow::array::Float64Array::from(value)),
                ],
            )
            .expect("batch");
            archive
                .stage_batch("capture", &batch, &positions)
                .expect("stage");
            archive.seal_all().expect("seal");
            done += ticks * 16;
        }
        archive.compact(true, |_, _, _| {}).expect("compact");
    }
    copy_tree(&hot, &cold);
    let data: Vec<(String, u64)> = {
        let a = Archive::open(&hot, Config::new().read_only(true)).expect("open");
        a.state().streams["capture"]
            .files
            .iter()
            .map(|f| (f.path.clone(), f.bytes))
            .collect()
    };
    let total_bytes: u64 = data.iter().map(|(_, b)| b).sum();

    // Plain puts of the same bytes.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let began = Instant::now();
    for (path, _) in &data {
        let bytes = std::fs::read(hot.join(path)).expect("read");
        rt.block_on(s3.put(
            &ObjectPath::from(format!("plain/{path}")),
            PutPayload::from(bytes),
        ))
        .expect("put");
    }
    let plain = began.elapsed();

    // Offload, to the tier as the command line opens it (`ColdTier::from_url`: every upload
    // carries its SHA-256 for the server to check, so nothing is read back).
    let tier = || ColdTier::from_url(&format!("s3://{bucket}/site")).expect("tier");
    let mut archive =
        Archive::open(&cold, Config::new().stream(spec.clone()).cold(tier())).expect("open");
    let began = Instant::now();
    let report = archive
        .offload(
            Some(&OffloadPolicy::default().local_budget(0)),
            0,
            |_, _, _| {},
        )
        .expect("offload");
    let offload = began.elapsed();
    let offload_requests = archive.cold_requests().expect("tier");
    assert!(report[0].failed.is_empty(), "{report:?}");
    drop(archive);
    let mbps = |d: Duration| total_bytes as f64 / 1e6 / d.as_secs_f64();

    // Reads, hot against cold.
    let track = vec!["run_2".to_owned(), "p3".to_owned()];
    type Read = Box<dyn Fn(&Archive) -> usize>;
    let reads: Vec<(&str, Read)> = vec![
        (
            "rows of a track",
            Box::new({
                let t = track.clone();
                move |a: &Archive| {
                    a.read_rows("capture", &t, Unbounded, Unbounded)
                        .expect("rows")
                        .num_rows()
                }
            }),
        ),
        (
            "survey @400 of a track",
            Box::new({
                let t = track.clone();
                move |a: &Archive| {
                    a.survey("capture", &t, Unbounded, Unbounded, 400)
                        .expect("survey")
                        .buckets
                        .len()
                }
            }),
        ),
        (
            "p95 of a track",
            Box::new({
                let t = track.clone();
                move |a: &Archive| {
                    a.fold(
                        "capture",
                        &t,
                        Unbounded,
                        Unbounded,
                        Aggregate::parse("p95").expect("p95"),
                    )
                    .expect("p95")
                    .answers
                    .len()
                }
            }),
        ),
    ];
    println!(
        "## Cold tier, {rows} rows, {} data files, {total_bytes} bytes, moto on loopback\n",
        data.len()
    );
    println!("| | cold tier | peer | ratio |");
    println!("|---|---:|---:|---:|");
    println!(
        "| offload vs plain put of the same bytes | {:.1} MB/s ({:.2} s; {} puts, {} gets) | {:.1} MB/s ({:.2} s) | {:.2}× |",
        mbps(offload),
        offload.as_secs_f64(),
        offload_requests[0],
        offload_requests[1],
        mbps(plain),
        plain.as_secs_f64(),
        plain.as_secs_f64() / offload.as_secs_f64()
    );
    // Replication of the hot archive against plain puts of exactly the files it uploads.
    let replicated: Vec<String> = {
        let a = Archive::open(&hot, Config::new().read_only(true)).expect("open");
        let mut files: Vec<String> = a.state().live_files().map(|f| f.path.clone()).collect();
        for table in ["rows", "levels"] {
            let log = hot.join("streams/capture").join(table).join("_delta_log");
            for entry in std::fs::read_dir(&log).expect("delta log").flatten() {
                if entry.path().is_file() {
                    files.push(format!(
                        "streams/capture/{table}/_delta_log/{}",
                        entry.file_name().to_string_lossy()
                    ));
                }
            }
        }
        for entry in std::fs::read_dir(hot.join("manifest"))
            .expect("manifest")
            .flatten()
        {
            files.push(format!("manifest/{}", entry.file_name().to_string_lossy()));
        }
        files
    };
    let replicated_bytes: u64 = replicated
        .iter()
        .map(|p| std::fs::metadata(hot.join(p)).expect("stat").len())
        .sum();
    let disk: series_archive::archive::Disk = Arc::new(series_archive::archive::LocalDisk);
    let (mut plain_all, mut plain_at_once, mut passes) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let began = Instant::now();
        for path in &replicated {
            let bytes = std::fs::read(hot.join(path)).expect("read");
            rt.block_on(s3.put(
                &ObjectPath::from(format!("plain-{run}/{path}")),
                PutPayload::from(bytes),
            ))
            .expect("put");
        }
        plain_all.push(began.elapsed());
        // The same puts, as many at a time as the replicator keeps in flight.
        let began = Instant::now();
        let puts: Vec<_> = replicated
            .iter()
            .map(|path| {
                let bytes = std::fs::read(hot.join(path)).expect("read");
                let s3 = s3.clone();
                let at = ObjectPath::from(format!("plain-at-once-{run}/{path}"));
                async move { s3.put(&at, PutPayload::from(bytes)).await }
            })
            .collect();
        rt.block_on(async {
            use futures::StreamExt;
            let done: Vec<_> = futures::stream::iter(puts)
                .buffer_unordered(series_archive::archive::cold::UPLOADS_AT_ONCE)
                .collect()
                .await;
            for put in done {
                put.expect("put");
            }
        });
        plain_at_once.push(began.elapsed());
        let _ = std::fs::remove_file(hot.join("REPLICA"));
        let prefix = format!("replica-{run}");
        // As the command line opens it: from the URL, every upload carrying its checksum.
        let replica = ColdTier::from_url(&format!("s3://{bucket}/{prefix}")).expect("tier");
        series_archive::archive::replicate::declare(&hot, &disk, &replica, 1).expect("declare");
        let began = Instant::now();
        let pass = series_archive::archive::replicate::replicate(
            &hot,
            &replica,
            &Default::default(),
            |_, _, _| {},
        )
        .expect("replicate");
        passes.push(began.elapsed());
        assert!(pass.status.caught_up(), "{pass:?}");
    }
    let _ = std::fs::remove_file(hot.join("REPLICA"));
    let (plain_all, plain_at_once, pass) =
        (median(plain_all), median(plain_at_once), median(passes));
    let mb = |d: Duration| replicated_bytes as f64 / 1e6 / d.as_secs_f64();
    println!(
        "| replication pass vs plain puts of the same {} files ({replicated_bytes} bytes) | {:.1} MB/s ({:.3} s) | {:.1} MB/s ({:.3} s) | {:.2}× |",
        replicated.len(),
        mb(pass),
        pass.as_secs_f64(),
        mb(plain_all),
        plain_all.as_secs_f64(),
        plain_all.as_secs_f64() / pass.as_secs_f64()
    );
    println!(
        "| replication pass vs the same plain puts, {} at a time | {:.1} MB/s ({:.3} s) | {:.1} MB/s ({:.3} s) | {:.2}× |",
        series_archive::archive::cold::UPLOADS_AT_ONCE,
        mb(pass),
        pass.as_secs_f64(),
        mb(plain_at_once),
        plain_at_once.as_secs_f64(),
        plain_at_once.as_secs_f64() / pass.as_secs_f64()
    );
    for (name, read) in &reads {
        let mut hot_t = Vec::new();
        let mut cold_t = Vec::new();
        let mut cold_first = Duration::ZERO;
        let mut requests = 0;
        for run in 0..runs + 1 {
            let h = Archive::open(&hot, Config::new().read_only(true)).expect("open");
            let began = Instant::now();
            let n_hot = read(&h);
            let t_hot = began.elapsed();
            let c = Archive::open(&cold, Config::new().read_only(true).cold(tier())).expect("open");
            let began = Instant::now();
            let n_cold = read(&c);
            let t_cold = began.elapsed();
            assert_eq!(n_hot, n_cold, "{name}: cold answers the same");
            if run == 0 {
                cold_first = t_cold;
                requests = c.cold_requests().expect("tier")[1];
                continue;
            }
            hot_t.push(t_hot);
            cold_t.push(t_cold);
        }
        let (h, c) = (median(hot_t), median(cold_t));
        println!(
            "| {name}: cold (fresh open) vs hot | {:.2} ms, {requests} GETs (first: {:.2} ms) | {:.2} ms | {:.1}× slower |",
            c.as_secs_f64() * 1e3,
            cold_first.as_secs_f64() * 1e3,
            h.as_secs_f64() * 1e3,
            c.as_secs_f64() / h.as_secs_f64()
        );
    }
    drop(server);
}
