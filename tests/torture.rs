//! The kill -9 torture script (`scripts/torture.py`) in its bounded CI form: the real binary
//! killed at random inside ingest and compaction, then verified and read back. The full form
//! is `scripts/torture.py --cycles 1000` against the release build.

#[path = "common/process.rs"]
mod process;

use std::process::Command;

#[test]
fn kill_9_cycles_lose_no_acknowledged_barrier() {
    let python = process::python("json");
    let dir = process::scratch("torture");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/torture.py");
    let out = Command::new(python)
        .args([
            script,
            "--binary",
            process::BIN,
            "--cycles",
            "16",
            "--rows",
            "12000",
            "--seal-rows",
            "1000",
            "--seed",
            "7",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run scripts/torture.py");
    let report = process::show("scripts/torture.py", &out);
    assert!(out.status.success(), "{report}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.lines().last().expect("a summary line");
    let field = |name: &str| -> u64 {
        summary
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name}= in {summary:?}"))
    };
    assert_eq!(field("cycles"), 16, "{report}");
    assert_eq!(field("acked_lost"), 0, "{report}");
    assert_eq!(field("failed_opens"), 0, "{report}");
    assert_eq!(field("wrong_rows"), 0, "{report}");
    assert!(
        // Kill times are random against real process timings (15 of 16 in the runs seen):
        // the bound only proves the cycles really kill, without making CI flaky.
        field("killed") >= 4,
        "cycles are killed mid-work: {report}"
    );
    assert!(field("rows") >= 12000, "{report}");
}
