//! The operations the failure-injection and power-loss suites break, the archive they start
//! from, and what it serves, as comparable text.
#![allow(dead_code)]

use super::{batch, capture_config, rows_of, workload};
use series_archive::archive::{Archive, ArchiveError};
use series_archive::Aggregate;
use std::ops::Bound::Unbounded;
use std::path::Path;

/// What the archive serves: rows of each selection (or the refusal), a survey and a mean.
pub fn served(archive: &Archive) -> Vec<String> {
    let mut out = Vec::new();
    for selection in [vec![], vec!["run_0".to_owned()], vec!["run_1".to_owned()]] {
        out.push(
            match archive.read_rows("capture", &selection, Unbounded, Unbounded) {
                Ok(batch) => format!("{selection:?}: {:?}", rows_of(&batch)),
                Err(e) => format!("{selection:?}: refused {e}"),
            },
        );
    }
    let run_1 = vec!["run_1".to_owned()];
    out.push(format!(
        "{:?}",
        archive
            .survey("capture", &run_1, Unbounded, Unbounded, 400)
            .map(|s| s.buckets)
    ));
    out.push(format!(
        "{:?}",
        archive
            .fold("capture", &run_1, Unbounded, Unbounded, Aggregate::Mean)
            .map(|f| f.answers)
    ));
    out.push(format!("watermark {}", archive.watermark("capture")));
    let mut files: Vec<&str> = archive
        .state()
        .live_files()
        .map(|f| f.path.as_str())
        .collect();
    files.sort_unstable();
    out.push(format!("live files {files:?}"));
    out
}

/// The first answer where two servings differ, for a readable failure.
pub fn first_difference(a: &[String], b: &[String]) -> String {
    a.iter()
        .zip(b)
        .find(|(x, y)| x != y)
        .map_or("(none)".into(), |(x, y)| {
            let cut = |s: &str| s.chars().take(300).collect::<String>();
            format!("{} … vs {} …", cut(x), cut(y))
        })
}

/// An operation under test, run on an open archive.
pub type Operation = fn(&mut Archive) -> Result<(), ArchiveError>;

pub fn stage(archive: &mut Archive, barrier: u64) {
    let (rows, positions) = workload(2, 2, 6, barrier * 6);
    archive
        .stage_batch("capture", &batch(&rows), &positions)
        .expect("stage");
}

pub const BASE_BARRIERS: u64 = 5;

pub fn operations() -> Vec<(&'static str, Operation)> {
    vec![
        ("seal", |a| {
            stage(a, BASE_BARRIERS);
            a.seal_all().map(|_| ())
        }),
        ("compact", |a| a.compact(true, |_, _, _| {}).map(|_| ())),
        ("retire", |a| {
            a.retire_track("capture", &["run_0".to_owned()]).map(|_| ())
        }),
        ("checkpoint", |a| a.checkpoint().map(|_| ())),
    ]
}

pub fn base(root: &Path) {
    let mut archive = Archive::open(root, capture_config()).expect("open");
    for b in 0..BASE_BARRIERS {
        stage(&mut archive, b);
        archive.seal_all().expect("seal");
    }
}
