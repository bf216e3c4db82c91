//! Crash tests re-execute their own binary as a child that aborts inside the real write path:
//! the variables that tell the child what to do, and the parent's run of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

/// The signal `Faults::abort_at` dies of.
pub const SIGABRT: i32 = 6;

/// What a crash child is told, from `{prefix}_DIR`, `{prefix}_OP` and `{prefix}_AT`: the
/// archive, the operation and the fault point. `None` in a normal run of the suite, where the
/// child test returns at once.
pub fn told(prefix: &str) -> Option<(String, String, String)> {
    let var = |name: &str| std::env::var(format!("{prefix}_{name}")).ok();
    Some((var("DIR")?, var("OP")?, var("AT")?))
}

/// Runs this test binary's test `child` alone with `{prefix}_DIR`, `{prefix}_OP` and
/// `{prefix}_AT` set, and asserts it died of SIGABRT. The spawn takes `turn`: until the child
/// execs it holds a copy of every descriptor of this process, among them the `LOCK` of an
/// archive another test thread has open, so spawns and writable opens take turns.
pub fn crash(
    child: &str,
    prefix: &str,
    (dir, op, at): (&OsStr, &str, &str),
    turn: &Mutex<()>,
) -> Output {
    let running = {
        let _turn = turn.lock().unwrap_or_else(|p| p.into_inner());
        Command::new(std::env::current_exe().expect("current exe"))
            .args(["--exact", child, "--nocapture", "--test-threads=1"])
            .env(format!("{prefix}_DIR"), dir)
            .env(format!("{prefix}_OP"), op)
            .env(format!("{prefix}_AT"), at)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the child")
    };
    let out = running.wait_with_output().expect("run the child");
    assert_eq!(
        out.status.signal(),
        Some(SIGABRT),
        "the child {op} at {at} must die of abort: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
