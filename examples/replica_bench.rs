//! What replication costs a writer, side by side in one run against a real S3-compatible
//! server on loopback (moto, started from the test venv unless `--endpoint` names a running
//! server): the same barriers sealed with no replica, with the archive's own replicator
//! following on its thread (asynchronous; issue 26's target ≤ 1.05× the time), and under a
//! lag bound of 0 (each barrier waits until the bucket holds it). Modes alternate within each
//! run, each into a fresh archive and a fresh prefix; per barrier the stage-and-seal time, and
//! in the asynchronous mode how many commits the bucket lacked right after each barrier and how
//! long it took after the last one to catch up, and the replication's own CPU (its thread and
//! its tier's request threads) per barrier. `--modes off,async` runs a subset (under a
//! profiler, say); `--endpoint URL` reuses a running server (each run takes a prefix of its
//! own).
//!
//! ```sh
//! cargo run --release --example replica_bench -- --barriers 200 --rows 2000 --runs 3 \
//!     --python .venv/bin/python
//! ```
//!
//! `taskset -c 0` around it holds the writer and its replicator to one core (replication then
//! costs the writer its CPU); `--writer-core 0` holds only the writer's thread there, leaving
//! the replicator the machine's other cores, as a writer on a machine with cores to spare
//! has; `--replicator-core 1` besides holds the replicator's threads (and its requests') to
//! core 1 once its first pass is done, so that replication's threads are not scheduled on the
//! writer's core (a thread started later, or by the writer's thread, is not held).

#[path = "common/bench.rs"]
mod bench;
#[path = "common/metrics.rs"]
mod metrics;

use bench::arg;
use metrics::{batch, schema};

use series_archive::archive::cold::ColdTier;
use series_archive::archive::{Archive, Config, StreamSpec};
use std::time::{Duration, Instant};

fn number(name: &str, default: u64) -> u64 {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Off,
    Async,
    Bound0,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Off => "no replica",
            Mode::Async => "replicator (asynchronous)",
            Mode::Bound0 => "replicator, --max-lag 0",
        }
    }
}

/// One run of one mode.
struct Measured {
    total: Duration,
    barriers: Vec<Duration>,
    /// Commits the bucket lacked right after each barrier (asynchronous mode).
    behind: Vec<u64>,
    /// From the last barrier's return until the bucket held every commit.
    drain: Duration,
    passes: u64,
    /// This process's CPU time (user and system, every thread) over the sealing: the writer's
    /// and its replicator's, not the server's.
    cpu: Duration,
    /// The replication's own CPU time (its thread and its tier's request threads), from the
    /// archive's open until the bucket caught up.
    replication_cpu: Duration,
}

/// This process's CPU time so far (Linux: `/proc/self/stat`, in clock ticks of 10 ms).
fn cpu_time() -> Duration {
    stat_cpu(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default())
}

/// The CPU time so far of this process's live threads whose names start with one of `names`
/// (Linux: `/proc/self/task/*/stat`): the replicator's thread and its tier's request threads,
/// which a run starts and keeps until its archive is dropped.
fn threads_cpu(names: &[&str]) -> Duration {
    threads_named(names)
        .iter()
        .map(|(_, stat)| stat_cpu(stat))
        .sum()
}

/// The process's threads whose names start with one of `names` (`/proc/self/task`): each
/// one's id and `stat` line.
fn threads_named(names: &[&str]) -> Vec<(i32, String)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let tid = task.file_name().to_str()?.parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            let comm = stat
                .split_once('(')
                .and_then(|(_, rest)| rest.rsplit_once(')'))
                .map_or("", |(comm, _)| comm);
            names
                .iter()
                .any(|n| comm.starts_with(n))
                .then_some((tid, stat))
        })
        .collect()
}

/// Holds the process's threads whose names start with one of `names` (the replicator's and
/// its tier's) to `core` (`--replicator-core`): the writer then shares its core with nothing
/// replication runs, as on a machine with a core to spare for it. Answers how many it held.
fn pin_threads(names: &[&str], core: usize) -> usize {
    let mut only = rustix::thread::CpuSet::new();
    only.set(core);
    let mut held = 0;
    for (tid, _) in threads_named(names) {
        if let Some(tid) = rustix::process::Pid::from_raw(tid) {
            rustix::thread::sched_setaffinity(Some(tid), &only)
                .expect("--replicator-core: sched_setaffinity");
            held += 1;
        }
    }
    held
}

/// utime + stime of a `/proc/…/stat` line.
fn stat_cpu(stat: &str) -> Duration {
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    Duration::from_millis((tick(11) + tick(12)) * 10)
}

/// What every run seals, and where its threads run.
#[derive(Clone, Copy)]
struct Setup {
    barriers: u64,
    rows: u64,
    tracks: u64,
    maintain: bool,
    writer_core: Option<usize>,
    replicator_core: Option<usize>,
}

fn run(mode: Mode, tier: Option<ColdTier>, setup: Setup) -> Measured {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = StreamSpec::dynamic("metrics", schema(), vec!["host".into()], Some("ts".into()))
        .expect("spec");
    let mut config = Config::new().stream(spec);
    if let Some(tier) = tier {
        config = config.replicate(tier);
    }
    if mode == Mode::Bound0 {
        config = config.max_lag(0, Duration::from_secs(60));
    }
    let mut archive = Archive::open(dir.path(), config).expect("open");
    // Pinned after the open: the threads the archive started keep the process's cores.
    let _pinned = setup.writer_core.map(Pinned::to);
    if let (Some(core), true) = (setup.replicator_core, mode != Mode::Off) {
        // Once its first pass (of the open state) is done, its tier's request threads exist.
        let waited = Instant::now();
        while archive.replication().is_some_and(|p| p.passes == 0) {
            assert!(waited.elapsed() < Duration::from_secs(60), "no first pass");
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(
            pin_threads(REPLICATION_THREADS, core) > 0,
            "--replicator-core: no replication thread found"
        );
    }
    let prepared: Vec<_> = (0..setup.barriers)
        .map(|b| batch(b, setup.rows, setup.tracks))
        .collect();
    let mut times = Vec::with_capacity(setup.barriers as usize);
    let mut behind = Vec::new();
    let began = Instant::now();
    let cpu = cpu_time();
    for (batch, positions) in &prepared {
        let t = Instant::now();
        archive
            .stage_batch("metrics", batch, positions)
            .expect("stage");
        archive.seal_all().expect("seal");
        if setup.maintain {
            // What a host's sealing service does after each barrier: the declared
            // retirements, the compactions due, a checkpoint once the manifest is past its size.
            archive.maintain(now_ns()).expect("maintain");
        }
        times.push(t.elapsed());
        if let Some(p) = archive.replication() {
            behind.push(p.behind);
        }
    }
    let total = began.elapsed();
    let cpu = cpu_time() - cpu;
    let last = Instant::now();
    let mut passes = 0;
    if mode != Mode::Off {
        loop {
            let p = archive.replication().expect("replicating");
            passes = p.passes;
            if p.behind == 0 {
                break;
            }
            assert!(
                last.elapsed() < Duration::from_secs(300),
                "the bucket did not catch up: {p:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let drain = last.elapsed();
    Measured {
        total,
        barriers: times,
        behind,
        drain,
        passes,
        cpu,
        replication_cpu: threads_cpu(REPLICATION_THREADS),
    }
}

/// The threads replication runs on: the archive's replicator and its tier's requests.
const REPLICATION_THREADS: &[&str] = &["archive-replica", "archive-cold"];

/// The calling thread pinned to one core (`--writer-core`) until dropped, when it gets back
/// the cores it had: the writer alone is held to its core, and the threads the archive
/// started (its replicator, its requests) go where the scheduler puts them, as on a machine
/// whose other cores are not the writer's.
struct Pinned(rustix::thread::CpuSet);

impl Pinned {
    fn to(core: usize) -> Pinned {
        let before = rustix::thread::sched_getaffinity(None).expect("sched_getaffinity");
        let mut only = rustix::thread::CpuSet::new();
        only.set(core);
        rustix::thread::sched_setaffinity(None, &only).expect("--writer-core: sched_setaffinity");
        Pinned(before)
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = rustix::thread::sched_setaffinity(None, &self.0);
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn percentile(v: &[Duration], p: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let barriers = number("--barriers", 200);
    let rows = number("--rows", 2_000);
    let tracks = number("--tracks", 16).max(1);
    let runs = number("--runs", 3).max(1);
    // `--maintain`: the writer runs the archive's lifecycle after each barrier, as a host does
    // (compactions and checkpoints then count in the barrier's time).
    let maintain = std::env::args().any(|a| a == "--maintain");
    // `--writer-core N`: only the writer's thread (the one that stages and seals) is held to
    // core N; run the process unpinned, so that replication may use the machine's other cores.
    let writer_core = arg("--writer-core").map(|c| c.parse().expect("--writer-core: a core"));
    // `--replicator-core N`: the replicator's and its requests' threads held to core N (with
    // `--writer-core`, a writer whose replication has a core of its own).
    let replicator_core =
        arg("--replicator-core").map(|c| c.parse().expect("--replicator-core: a core"));
    let setup = Setup {
        barriers,
        rows,
        tracks,
        maintain,
        writer_core,
        replicator_core,
    };
    let bucket = "replica-bench";
    let python = arg("--python").unwrap_or_else(|| ".venv/bin/python".into());
    let server = bench::Server::start(arg("--endpoint"), &python, bucket);
    // The tier as `series-archive replicate s3://…` opens it (`ColdTier::from_url`: each
    // upload carries its SHA-256, which the server checks, so none is looked up after), from
    // what it reads of the environment (set before any request thread starts).
    server.export_env();
    // `--modes off,async,bound0` (the default: all three) runs a subset, e.g. one mode under a
    // profiler; the ratios are then against the first mode named.
    let modes: Vec<Mode> = arg("--modes")
        .unwrap_or_else(|| "off,async,bound0".into())
        .split(',')
        .map(|m| match m {
            "off" => Mode::Off,
            "async" => Mode::Async,
            "bound0" => Mode::Bound0,
            other => panic!("--modes: unknown mode {other:?} (off, async, bound0)"),
        })
        .collect();
    let mut measured: Vec<Vec<Measured>> = modes.iter().map(|_| Vec::new()).collect();
    // One untimed warm-up of each mode, then the runs, modes alternating.
    for round in 0..=runs {
        for (i, &mode) in modes.iter().enumerate() {
            let tier = (mode != Mode::Off).then(|| {
                // The process's id in the prefix: a server kept running between runs of the
                // benchmark (`--endpoint`) gets a fresh prefix each time.
                let prefix = format!("p{}-r{round}-m{i}", std::process::id());
                ColdTier::from_url(&format!("s3://{bucket}/{prefix}")).expect("tier")
            });
            let m = run(mode, tier, setup);
            if round > 0 {
                measured[i].push(m);
            }
        }
    }
    let median_total = |ms: &[Measured]| {
        let mut t: Vec<Duration> = ms.iter().map(|m| m.total).collect();
        t.sort();
        t[t.len() / 2]
    };
    let base = median_total(&measured[0]);
    println!(
        "## Replication's cost to a writer: {barriers} barriers × {rows} rows, {tracks} tracks{}, moto on loopback, {runs} runs\n",
        if maintain { ", lifecycle after each barrier" } else { "" }
    );
    println!(
        "| mode | sealing, median of runs | ÷ no replica | this process's CPU while sealing | replication's CPU a barrier | barrier p50 | barrier p99 | commits behind after a barrier (mean, max) | catch-up after the last | passes |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, &mode) in modes.iter().enumerate() {
        let all: Vec<Duration> = measured[i]
            .iter()
            .flat_map(|m| m.barriers.iter().copied())
            .collect();
        let behind: Vec<u64> = measured[i]
            .iter()
            .flat_map(|m| m.behind.iter().copied())
            .collect();
        let total = median_total(&measured[i]);
        let drain: Vec<Duration> = measured[i].iter().map(|m| m.drain).collect();
        let mut cpu: Vec<Duration> = measured[i].iter().map(|m| m.cpu).collect();
        cpu.sort();
        let mut replication: Vec<Duration> =
            measured[i].iter().map(|m| m.replication_cpu).collect();
        replication.sort();
        println!(
            "| {} | {:.2} s | {:.2}× | {:.2} s | {} | {:.2} ms | {:.2} ms | {} | {} | {} |",
            mode.name(),
            total.as_secs_f64(),
            total.as_secs_f64() / base.as_secs_f64(),
            cpu[cpu.len() / 2].as_secs_f64(),
            if mode == Mode::Off {
                "–".to_owned()
            } else {
                format!(
                    "{:.2} ms",
                    ms(replication[replication.len() / 2]) / barriers as f64
                )
            },
            ms(percentile(&all, 0.5)),
            ms(percentile(&all, 0.99)),
            if behind.is_empty() {
                "–".to_owned()
            } else {
                format!(
                    "{:.1}, {}",
                    behind.iter().sum::<u64>() as f64 / behind.len() as f64,
                    behind.iter().max().copied().unwrap_or(0)
                )
            },
            if mode == Mode::Off {
                "–".to_owned()
            } else {
                format!("{:.0} ms", ms(percentile(&drain, 0.5)))
            },
            if mode == Mode::Off {
                "–".to_owned()
            } else {
                let p: Vec<u64> = measured[i].iter().map(|m| m.passes).collect();
                format!("{:.0} a run", p.iter().sum::<u64>() as f64 / p.len() as f64)
            },
        );
    }
    drop(server);
}
