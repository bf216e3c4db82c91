//! `sweep`, `retire`, `compact`, `checkpoint` and `inspect` as a user runs them.

#[path = "common/process.rs"]
mod process;

use process::{cli, scratch, show, BIN};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the series-archive binary runs")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file under `root` with its bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).expect("under root");
                out.insert(
                    rel.to_string_lossy().into_owned(),
                    std::fs::read(&path).expect("read"),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Entries of `dir` (files and level directories), its Delta log aside.
fn count(root: &Path, dir: &str) -> usize {
    std::fs::read_dir(root.join(dir)).map_or(0, |d| {
        d.filter(|e| e.as_ref().map_or(true, |e| e.file_name() != "_delta_log"))
            .count()
    })
}

/// A demo archive: 2 runs × 2 probes, 4 000 ticks sealed every 200 (20 barriers), left
/// uncompacted.
fn demo(name: &str) -> (tempfile::TempDir, String) {
    let dir = scratch(name);
    let root = dir.path().join("archive");
    let root_s = root.to_string_lossy().into_owned();
    cli(&[
        "demo",
        &root_s,
        "--runs",
        "2",
        "--probes",
        "2",
        "--ticks",
        "4000",
        "--cadence",
        "200",
        "--no-compact",
    ]);
    (dir, root_s)
}

const TRACK: [&str; 2] = ["run_0", "probe.00"];

fn rows_csv(root: &str, from: Option<&str>) -> Output {
    let mut args = vec![
        "rows", root, "--stream", "capture", "--track", TRACK[0], TRACK[1],
    ];
    if let Some(f) = from {
        args.extend(["--from", f]);
    }
    run(&args)
}

#[test]
fn compact_rewrites_files_and_every_answer_stays_the_same() {
    let (_dir, root) = demo("cli-compact");
    let path = Path::new(&root);
    assert_eq!(count(path, "streams/capture/rows"), 20);
    let rows_before = text(&rows_csv(&root, None));
    let survey = |budget: &str| {
        text(&cli(&[
            "survey", &root, "--stream", "capture", "--track", "run_1", "--budget", budget, "--csv",
        ]))
    };
    let surveys: Vec<String> = ["16", "400", "4000"].into_iter().map(survey).collect();
    let out = cli(&["compact", &root]);
    assert!(
        text(&out).contains("20 data file(s)"),
        "{}",
        show("compact", &out)
    );
    assert!(
        text(&out).contains("→ 1 file(s)"),
        "{}",
        show("compact", &out)
    );
    // One packed file of the four tracks (185 KB of barrier files, under the 64 MiB target).
    assert_eq!(count(path, "streams/capture/rows"), 1);
    // One level table per level of the ladder (1024,8,8), each under `levels/level=K/`.
    assert_eq!(count(path, "streams/capture/levels"), 8);
    for k in 0..8 {
        assert_eq!(count(path, &format!("streams/capture/levels/level={k}")), 1);
    }
    assert_eq!(text(&rows_csv(&root, None)), rows_before);
    let again: Vec<String> = ["16", "400", "4000"].into_iter().map(survey).collect();
    assert_eq!(again, surveys);
    // Nothing left to gain: a second run says so and changes nothing.
    let before = tree(path);
    let out = cli(&["compact", &root]);
    assert!(
        text(&out).contains("nothing to compact"),
        "{}",
        show("compact", &out)
    );
    assert!(tree(path) == before);
    let out = cli(&["verify", &root]);
    assert!(
        text(&out).starts_with("ok: 9 file(s)"),
        "{}",
        show("verify", &out)
    );
}

#[test]
fn sweep_dry_run_changes_nothing_then_sweep_moves_floors_that_inspect_shows() {
    let (_dir, root) = demo("cli-sweep");
    let path = Path::new(&root);
    let before = tree(path);
    let out = cli(&[
        "sweep",
        &root,
        "--stream",
        "capture",
        "--raw",
        "behind:8000",
        "--level",
        "0=behind:12000",
        "--dry-run",
    ]);
    assert!(
        text(&out).contains("would retire in capture: 4 track(s)"),
        "{}",
        show("dry run", &out)
    );
    assert!(tree(path) == before, "a dry run wrote something");

    let out = cli(&[
        "sweep",
        &root,
        "--stream",
        "capture",
        "--raw",
        "behind:8000",
        "--level",
        "0=behind:12000",
    ]);
    assert!(
        text(&out).contains("retired in capture: 4 track(s)"),
        "{}",
        show("sweep", &out)
    );
    let inspect = text(&cli(&["inspect", &root]));
    assert!(inspect.contains("L0≥3072"), "{inspect}");
    let json: serde_json::Value =
        serde_json::from_slice(&cli(&["inspect", &root, "--json"]).stdout).expect("json");
    let track = &json["streams"][0]["tracks"][0];
    let floor = track["floor"].as_u64().expect("floor");
    assert!(floor > 1, "{track}");
    assert_eq!(track["level_floors"][0], 3072, "{track}");

    // Rows beneath the floor are refused (exit 3) with the floor to narrow to.
    let out = rows_csv(&root, None);
    assert_eq!(out.status.code(), Some(3), "{}", show("rows", &out));
    assert!(err(&out).contains("floor"), "{}", err(&out));
    let from = floor.to_string();
    let out = rows_csv(&root, Some(&from));
    assert!(
        out.status.success(),
        "{}",
        show("rows from the floor", &out)
    );
    // A mean still comes from the levels over the whole track; a p95 answers the raw floor.
    let fold = |agg: &str| {
        run(&[
            "fold",
            &root,
            "--stream",
            "capture",
            "--track",
            TRACK[0],
            TRACK[1],
            "--aggregate",
            agg,
        ])
    };
    let mean = fold("mean");
    assert!(mean.status.success(), "{}", show("mean", &mean));
    assert!(text(&mean).contains("from level 1"), "{}", text(&mean));
    let p95 = fold("p95");
    assert_eq!(p95.status.code(), Some(3), "{}", show("p95", &p95));
    assert!(
        err(&p95).contains("narrow the range to start at axis"),
        "{}",
        err(&p95)
    );
}

#[test]
fn retire_names_what_it_retires_and_bad_lifetimes_are_refused_before_anything_is_written() {
    let (_dir, root) = demo("cli-retire");
    let path = Path::new(&root);
    let before = tree(path);
    for (args, code, says) in [
        (vec!["retire", &root, "--stream", "capture"], 1, "--track"),
        (
            vec!["sweep", &root, "--stream", "capture", "--raw", "age:7y"],
            2,
            "unknown unit",
        ),
        (
            vec![
                "sweep",
                &root,
                "--stream",
                "capture",
                "--level",
                "0=bytes:1MiB",
            ],
            1,
            "raw rows only",
        ),
        (
            vec!["sweep", &root, "--stream", "capture", "--level", "9=age:1d"],
            1,
            "level 9",
        ),
        (
            vec!["sweep", &root, "--stream", "capture"],
            1,
            "no lifetime given",
        ),
        (
            vec!["sweep", &root, "--stream", "nope", "--raw", "1d"],
            1,
            "no stream",
        ),
        (
            vec![
                "retire", &root, "--stream", "capture", "--track", "a", "b", "c",
            ],
            1,
            "2 component",
        ),
        (
            vec!["compact", &root, "--target-size", "12XB"],
            2,
            "unknown unit",
        ),
    ] {
        let out = run(&args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            show(&args.join(" "), &out)
        );
        assert!(err(&out).contains(says), "{}", show(&args.join(" "), &out));
    }
    assert!(tree(path) == before, "a refused command wrote something");

    let out = cli(&["retire", &root, "--stream", "capture", "--track", "run_1"]);
    assert!(
        text(&out).contains("2 track(s) moved their floors (2 retired whole)"),
        "{}",
        text(&out)
    );
    let inspect = text(&cli(&["inspect", &root]));
    assert_eq!(inspect.matches("(retired)").count(), 2, "{inspect}");
    let out = run(&[
        "survey", &root, "--stream", "capture", "--track", "run_1", "--budget", "40",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", show("survey", &out));
    let out = cli(&["retire", &root, "--stream", "capture", "--track", "run_1"]);
    assert!(
        text(&out).contains("nothing left to retire"),
        "{}",
        text(&out)
    );
}

#[test]
fn checkpoint_starts_a_smaller_generation_and_the_archive_reads_the_same() {
    let (_dir, root) = demo("cli-checkpoint");
    let path = Path::new(&root);
    cli(&["compact", &root]);
    let rows_before = text(&rows_csv(&root, None));
    let manifest = |p: &Path| -> Vec<(String, u64)> {
        std::fs::read_dir(p.join("manifest"))
            .expect("manifest")
            .map(|e| {
                let e = e.expect("entry");
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().expect("meta").len(),
                )
            })
            .collect()
    };
    let old = manifest(path);
    let [(old_name, old_len)] = &old[..] else {
        panic!("one generation: {:?}", manifest(path))
    };
    let out = cli(&["checkpoint", &root]);
    assert!(
        text(&out).contains("manifest generation 2"),
        "{}",
        text(&out)
    );
    let new = manifest(path);
    let [(new_name, new_len)] = &new[..] else {
        panic!("the old generation is removed: {:?}", manifest(path))
    };
    assert_ne!(new_name, old_name);
    assert!(new_len < old_len, "{new_len} < {old_len}");
    assert_eq!(text(&rows_csv(&root, None)), rows_before);
}
