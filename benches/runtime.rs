//! The runtime's publish cost on the producer thread (criterion): rows/s published through
//! `Streams` with no adapter and with the archive attached (its supervisor staging and
//! sealing on its own thread). Only the publishing is timed; after each iteration a seal
//! (untimed) lets the supervisor catch up, so the feed never grows without bound.
//!
//! ```sh
//! cargo bench --bench runtime
//! ```
//!
//! The target (issue 12): attached within 2× of none. Read latency under sustained publish
//! at two cadences is `examples/runtime_latency.rs` (a distribution, not a criterion mean).

#[path = "common/mod.rs"]
mod common;

use common::Capture;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use series_archive::archive::{Archive, Config};
use series_archive::host::Streams;
use series_archive::{Application, Position, Stream};
use std::time::{Duration, Instant};

struct App;
impl Application for App {}

const ROWS: u64 = 20_000;

fn row(i: u64) -> Capture {
    Capture {
        run: format!("run_{}", i % 4),
        probe: format!("probe.{:02}", (i / 4) % 4),
        ordinal: i,
        value: i as i64,
        noise: i as f64 * 0.5,
    }
}

fn publish(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let rows: Vec<Capture> = (0..ROWS).map(row).collect();
    let mut group = c.benchmark_group("publish");
    group.throughput(Throughput::Elements(ROWS));
    group.measurement_time(Duration::from_secs(5));
    let dir = tempfile::tempdir().expect("tempdir");
    for attached in [false, true] {
        let streams: Streams<App> = runtime.block_on(async {
            let archive = attached.then(|| {
                Archive::open(
                    dir.path(),
                    Config::new().select::<Capture>().expect("select"),
                )
                .expect("open")
            });
            Streams::boot(archive, &[Capture::definition()]).await
        });
        let name = if attached { "archive" } else { "none" };
        let mut next = 0u64;
        group.bench_function(BenchmarkId::new(name, ROWS), |b| {
            b.iter_custom(|iters| {
                let mut took = Duration::ZERO;
                for _ in 0..iters {
                    // Untimed: the rows to publish, built beforehand.
                    let batch = rows.clone();
                    let began = Instant::now();
                    for r in batch {
                        next += 1;
                        streams.publish(Position(next), r).expect("publish");
                    }
                    took += began.elapsed();
                    // Untimed: the supervisor drains and seals what was published.
                    runtime.block_on(async { streams.seal::<Capture>().await });
                }
                took
            })
        });
        runtime.block_on(streams.stop()).expect("stop");
    }
    group.finish();
}

criterion_group!(benches, publish);
criterion_main!(benches);
