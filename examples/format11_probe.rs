//! What format 11's read path and open would cost, measured on today's files before it is
//! built (issue 25, `docs/format-11-design.md`, "Probed"). Format 11 records a packed data
//! file's row groups, not its track slices; a read then finds a track by searching inside a
//! row group, and an open rebuilds what it needs of each track from the rows of the files
//! sealed since the track table. Both are measured here on a fleet's archives as the
//! cardinality benchmark makes them, beside what today's build does with its slice entries:
//!
//! - `--part track --archive A --track h0500,m50`: one track's rows from a compacted
//!   archive, in this process, warm (footers and page indexes loaded once, as the footer
//!   cache keeps them): today's `read_rows` (the slice entries say where the rows lie) against
//!   a search of the track's row groups (chosen by the first label's statistics, as the row
//!   groups' `[first, last]` would choose them), their label columns decoded as dictionaries,
//!   a binary search of the sorted labels and a read of the rows found (a row selection over
//!   the page index). The two answers are checked equal.
//! - `--part open --archive A` and `--part scan --archive A`, one process each (peak RSS is
//!   the process's): today's read-only open of an uncompacted archive (the replay of every
//!   slice entry), against a decode of every live data file's label, axis and `_seq` columns
//!   into one entry per track (rows, last axis, last `_seq`): what an open would read when
//!   no track table covers those files.
//!
//! ```sh
//! cargo build --release --example format11_probe
//! target/release/examples/format11_probe --part track --archive COMPACTED --track h0500,m50
//! target/release/examples/format11_probe --part open --archive SEALED
//! target/release/examples/format11_probe --part scan --archive SEALED
//! ```

use arrow::array::{AsArray, DictionaryArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::statistics::Statistics;
use series_archive::archive::{Archive, Config};
use std::fs::File;
use std::ops::Bound::Unbounded;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One track's entry of the scan: its labels, and its rows, last axis and last `_seq`.
type TrackEntry = ((String, String), (u64, i64, i64));

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The process's peak resident set (VmHWM), in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The live data files of `stream`, as paths under `root`.
fn live_files(archive: &Archive, root: &Path, stream: &str) -> Vec<std::path::PathBuf> {
    archive.state().streams[stream]
        .files
        .iter()
        .map(|f| root.join(&f.path))
        .collect()
}

/// A data file opened once, its metadata and page index kept (the footer cache's part).
struct Opened {
    file: File,
    meta: ArrowReaderMetadata,
}

fn open(path: &Path, dictionary: bool) -> Opened {
    let file = File::open(path).expect("open data file");
    let plain = ArrowReaderMetadata::load(
        &file,
        ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required),
    )
    .expect("footer");
    if !dictionary {
        return Opened { file, meta: plain };
    }
    // The label columns read as dictionaries: a row group's labels are a few distinct
    // strings and a run-length key per row.
    let fields: Vec<Field> = plain
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 => Field::new(
                f.name(),
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                f.is_nullable(),
            ),
            _ => f.as_ref().clone(),
        })
        .collect();
    let meta = ArrowReaderMetadata::try_new(
        plain.metadata().clone(),
        ArrowReaderOptions::new()
            .with_page_index_policy(PageIndexPolicy::Required)
            .with_schema(Arc::new(Schema::new(fields))),
    )
    .expect("dictionary schema");
    Opened { file, meta }
}

/// The rows of track `labels` (two components) in `opened`, found by a search inside its row
/// groups: the groups whose first label's statistics hold `labels[0]`, each group's label
/// columns decoded, a binary search of its sorted labels, then the rows read.
fn search_track(opened: &Opened, labels: &[String]) -> Vec<RecordBatch> {
    let metadata = opened.meta.metadata();
    let schema = opened.meta.parquet_schema();
    let mut out = Vec::new();
    for (g, group) in metadata.row_groups().iter().enumerate() {
        let holds = match group.column(0).statistics() {
            Some(Statistics::ByteArray(s)) => {
                let lo = s.min_opt().map(|v| v.as_utf8().unwrap_or_default());
                let hi = s.max_opt().map(|v| v.as_utf8().unwrap_or_default());
                lo.is_none_or(|lo| lo <= labels[0].as_str())
                    && hi.is_none_or(|hi| labels[0].as_str() <= hi)
            }
            _ => true,
        };
        if !holds {
            continue;
        }
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(
            opened.file.try_clone().expect("file"),
            opened.meta.clone(),
        )
        .with_row_groups(vec![g])
        .with_projection(ProjectionMask::leaves(schema, [0, 1]))
        .with_batch_size(usize::MAX >> 1)
        .build()
        .expect("label reader");
        let batches: Vec<RecordBatch> = reader.map(|b| b.expect("labels")).collect();
        let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).expect("concat");
        let text = |c: usize| -> (Vec<i32>, StringArray) {
            let d: &DictionaryArray<Int32Type> = batch.column(c).as_dictionary();
            (
                d.keys().values().to_vec(),
                d.values().as_string::<i32>().clone(),
            )
        };
        let ((hk, hv), (mk, mv)) = (text(0), text(1));
        let at = |i: usize| (hv.value(hk[i] as usize), mv.value(mk[i] as usize));
        let want = (labels[0].as_str(), labels[1].as_str());
        let n = hk.len();
        let start = partition_point(n, |i| at(i) < want);
        let end = partition_point(n, |i| at(i) <= want);
        if start == end {
            continue;
        }
        let selection = RowSelection::from(vec![
            RowSelector::skip(start),
            RowSelector::select(end - start),
        ]);
        let rows = ParquetRecordBatchReaderBuilder::new_with_metadata(
            opened.file.try_clone().expect("file"),
            opened.meta.clone(),
        )
        .with_row_groups(vec![g])
        .with_row_selection(selection)
        .build()
        .expect("row reader");
        out.extend(rows.map(|b| b.expect("rows")));
    }
    out
}

fn partition_point(n: usize, below: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Rows and the sum of column `value` over `batches`.
fn digest(batches: &[RecordBatch]) -> (usize, f64) {
    let mut rows = 0;
    let mut sum = 0.0;
    for b in batches {
        rows += b.num_rows();
        if let Some(v) = b.column_by_name("value") {
            sum += v
                .as_primitive::<arrow::datatypes::Float64Type>()
                .values()
                .iter()
                .sum::<f64>();
        }
    }
    (rows, sum)
}

fn main() {
    let part = arg("--part").expect("--part track|open|scan");
    let root = std::path::PathBuf::from(arg("--archive").expect("--archive DIR"));
    let stream = arg("--stream").unwrap_or_else(|| "metrics".into());
    let runs: usize = arg("--runs").and_then(|r| r.parse().ok()).unwrap_or(20);
    match part.as_str() {
        "track" => {
            let track: Vec<String> = arg("--track")
                .unwrap_or_else(|| "h0500,m50".into())
                .split(',')
                .map(str::to_owned)
                .collect();
            let archive = Archive::open(&root, Config::new().read_only(true)).expect("open");
            let read = || {
                archive
                    .read_rows(&stream, &track, Unbounded, Unbounded)
                    .expect("read_rows")
            };
            let today_answer = read();
            let mut today = Vec::new();
            for _ in 0..runs {
                let began = Instant::now();
                std::hint::black_box(read());
                today.push(began.elapsed());
            }
            let files: Vec<Opened> = live_files(&archive, &root, &stream)
                .iter()
                .map(|p| open(p, true))
                .collect();
            let found: Vec<RecordBatch> =
                files.iter().flat_map(|f| search_track(f, &track)).collect();
            let mut searched = Vec::new();
            for _ in 0..runs {
                let began = Instant::now();
                for f in &files {
                    std::hint::black_box(search_track(f, &track));
                }
                searched.push(began.elapsed());
            }
            let (want, got) = (digest(&[today_answer]), digest(&found));
            assert_eq!(want, got, "the search answers what read_rows answers");
            let groups: usize = files
                .iter()
                .map(|f| f.meta.metadata().num_row_groups())
                .sum();
            println!(
                "one track ({}): {} rows in {} file(s), {groups} row groups; today's read_rows {:.3?}, a search inside the row groups {:.3?} ({:.2}×), medians of {runs}",
                track.join(" "),
                want.0,
                files.len(),
                median(today.clone()),
                median(searched.clone()),
                median(searched).as_secs_f64() / median(today).as_secs_f64()
            );
        }
        "open" => {
            let began = Instant::now();
            let archive = Archive::open(&root, Config::new().read_only(true)).expect("open");
            let took = began.elapsed();
            let s = &archive.state().streams[&stream];
            let entries: usize = s.files.iter().map(|f| f.groups.len()).sum();
            println!(
                "today's read-only open: {took:.2?}, peak RSS {:.0} MiB ({} files, {entries} slice entries, {} tracks)",
                peak_mib(),
                s.files.len(),
                s.tracks.len()
            );
        }
        "scan" => {
            // An uncompacted archive's live data files are its barrier files, every file of
            // the stream's rows directory (the manifest would name them; no open is timed or
            // held here).
            let mut paths: Vec<std::path::PathBuf> =
                std::fs::read_dir(root.join("streams").join(&stream).join("rows"))
                    .expect("rows directory")
                    .map(|e| e.expect("entry").path())
                    .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
                    .collect();
            paths.sort();
            let before = peak_mib();
            let began = Instant::now();
            // One entry per track in key order: (labels, rows, last axis, last _seq). Each
            // file is in key order, so it is merged in by one walk beside the entries; the
            // tracks it brings in are merged after it.
            let mut tracks: Vec<TrackEntry> = Vec::new();
            let mut rows = 0u64;
            for path in &paths {
                let opened = open(path, true);
                let schema = opened.meta.parquet_schema();
                let columns: Vec<usize> = ["host", "metric", "ts", "_seq"]
                    .iter()
                    .map(|name| {
                        (0..schema.num_columns())
                            .find(|&i| schema.column(i).name() == *name)
                            .expect("column")
                    })
                    .collect();
                let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(
                    opened.file.try_clone().expect("file"),
                    opened.meta.clone(),
                )
                .with_projection(ProjectionMask::leaves(schema, columns))
                .with_batch_size(65_536)
                .build()
                .expect("reader");
                let mut at = 0usize;
                let mut joining: Vec<TrackEntry> = Vec::new();
                for batch in reader {
                    let batch = batch.expect("batch");
                    let host: &DictionaryArray<Int32Type> = batch.column(0).as_dictionary();
                    let metric: &DictionaryArray<Int32Type> = batch.column(1).as_dictionary();
                    let (hv, mv) = (
                        host.values().as_string::<i32>(),
                        metric.values().as_string::<i32>(),
                    );
                    let (hk, mk) = (host.keys().values(), metric.keys().values());
                    let ts = batch.column(2).as_primitive::<Int64Type>().values();
                    let seq = batch.column(3).as_primitive::<Int64Type>().values();
                    let n = batch.num_rows();
                    let mut i = 0;
                    while i < n {
                        let mut j = i + 1;
                        while j < n && hk[j] == hk[i] && mk[j] == mk[i] {
                            j += 1;
                        }
                        let key = (hv.value(hk[i] as usize), mv.value(mk[i] as usize));
                        while at < tracks.len()
                            && (tracks[at].0 .0.as_str(), tracks[at].0 .1.as_str()) < key
                        {
                            at += 1;
                        }
                        let run = ((j - i) as u64, ts[j - 1], seq[j - 1]);
                        match tracks.get_mut(at) {
                            Some((k, e)) if (k.0.as_str(), k.1.as_str()) == key => {
                                e.0 += run.0;
                                e.1 = e.1.max(run.1);
                                e.2 = e.2.max(run.2);
                            }
                            _ => joining.push(((key.0.to_owned(), key.1.to_owned()), run)),
                        }
                        i = j;
                    }
                    rows += n as u64;
                }
                if !joining.is_empty() {
                    tracks.extend(joining);
                    tracks.sort_by(|a, b| a.0.cmp(&b.0));
                }
            }
            println!(
                "a scan of the live files' labels, axis and _seq: {:.2?}, peak RSS {:.0} MiB ({before:.0} MiB before it; {} files, {rows} rows, {} tracks)",
                began.elapsed(),
                peak_mib(),
                paths.len(),
                tracks.len()
            );
        }
        other => panic!("--part {other}: track, open or scan"),
    }
}
