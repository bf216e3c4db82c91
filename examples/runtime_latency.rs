//! Read latency under sustained publish, at two sealing cadences: the trade the spec
//! describes (a read waits behind the drain and behind a barrier's fsyncs on the same
//! supervisor; a slower cadence means fewer barriers in the way but more staged rows a crash
//! loses).
//!
//! ```sh
//! cargo run --release --example runtime_latency [-- --seconds 5 --rate 200000]
//! ```
//!
//! A publisher thread publishes `--rate` rows/s (16 tracks, an ordinal axis) into `Streams`
//! with the archive attached; the main task reads the newest 1 000 positions of one track
//! (`query(..).track(..)`, spliced) and a budget-400 survey of it, back to back, for
//! `--seconds` at each cadence (50 ms and 1 s). Prints p50, p99 and max per read kind.

use serde::{Deserialize, Serialize};
use series_archive::archive::{Archive, Config};
use series_archive::host::Streams;
use series_archive::{Application, Position};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[series_archive::stream(id = "capture", window = 4096, track = (run, probe), axis = ordinal)]
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Capture {
    run: String,
    probe: String,
    ordinal: u64,
    value: i64,
    noise: f64,
}

struct App;
impl Application for App {}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds = arg("--seconds", 5);
    let rate = arg("--rate", 200_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "read latency under sustained publish ({rate} rows/s, 16 tracks, {seconds} s per cadence)"
    );
    println!();
    println!("| cadence | read | reads | p50 | p99 | max | rows published |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for cadence in [Duration::from_millis(50), Duration::from_secs(1)] {
        let dir = tempfile::tempdir()?;
        let archive = Archive::open(dir.path(), Config::new().select::<Capture>()?)?;
        let streams: Streams<App> = runtime.block_on(
            Streams::assemble()
                .stream::<Capture>()
                .series(archive)
                .cadence(cadence)
                .boot(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let published = Arc::new(AtomicU64::new(0));
        let publisher = {
            let (streams, stop, published) = (streams.clone(), stop.clone(), published.clone());
            std::thread::spawn(move || {
                let began = Instant::now();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Publish in steps of 1 000 rows, paced to the rate.
                    for _ in 0..1_000 {
                        let row = Capture {
                            run: format!("run_{}", i % 4),
                            probe: format!("probe.{:02}", (i / 4) % 4),
                            ordinal: i,
                            value: i as i64,
                            noise: (i as f64).sin(),
                        };
                        let _ = streams.publish(Position(i / 16 + 1), row);
                        i += 1;
                    }
                    published.store(i, Ordering::Relaxed);
                    let due = Duration::from_secs_f64(i as f64 / rate as f64);
                    if let Some(wait) = due.checked_sub(began.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
            })
        };
        let (mut rows_lat, mut survey_lat) = (Vec::new(), Vec::new());
        let track = ("run_1".to_owned(), "probe.02".to_owned());
        let deadline = Instant::now() + Duration::from_secs(seconds);
        runtime.block_on(async {
            while Instant::now() < deadline {
                let newest = published.load(Ordering::Relaxed) / 16 + 1;
                let from = Position(newest.saturating_sub(1_000));
                let began = Instant::now();
                let rows = streams.query::<Capture>(from..).track(track.clone()).await;
                rows_lat.push(began.elapsed());
                if let Err(e) = rows {
                    eprintln!("query refused: {e}");
                }
                let began = Instant::now();
                let survey = streams
                    .survey::<Capture>(..)
                    .track(track.clone())
                    .budget(400)
                    .await;
                survey_lat.push(began.elapsed());
                if let Err(e) = survey {
                    eprintln!("survey refused: {e}");
                }
            }
        });
        stop.store(true, Ordering::Relaxed);
        publisher.join().map_err(|_| "publisher panicked")?;
        let total = published.load(Ordering::Relaxed);
        runtime.block_on(streams.stop())?;
        for (kind, mut lat) in [
            ("query (newest 1 000 positions)", rows_lat),
            ("survey @400", survey_lat),
        ] {
            lat.sort();
            println!(
                "| {:?} | {kind} | {} | {:.2?} | {:.2?} | {:.2?} | {total} |",
                cadence,
                lat.len(),
                percentile(&lat, 0.5),
                percentile(&lat, 0.99),
                lat.last().copied().unwrap_or_default()
            );
        }
    }
    Ok(())
}
