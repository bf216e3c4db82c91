//! Background work yields to the writer: the replicator's thread, and the requests it makes,
//! run at a lower scheduling priority than the thread that seals barriers.
//!
//! Replication runs off the delivery path, but on a machine whose cores are busy it still
//! takes CPU from the writer (reading files, hashing, signing and sending uploads). At a lower
//! priority it takes what the writer leaves (a barrier's fsyncs, the gaps between deliveries)
//! and, when the core is saturated, a bounded share (about a tenth at [`BACKGROUND_NICE`]):
//! the lag grows and is reported (`replicate --status`, `inspect`), and a barrier that must
//! not outrun the bucket says so with a lag bound, under which the writer waits and the
//! replicator has the core to itself.
//!
//! Linux only, where the nice value is a thread's own (`setpriority(PRIO_PROCESS, tid)`);
//! elsewhere nothing changes. Raising one's own nice value needs no privilege.

use std::cell::Cell;

/// The nice value background threads run at (the writer's is the process's, usually 0).
pub const BACKGROUND_NICE: i32 = 10;

thread_local! {
    /// Whether the calling thread is background work (see [`is_background`]).
    static BACKGROUND: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as background work, and lowers its priority to
/// [`BACKGROUND_NICE`] where the platform allows (never raises it). Requests it sends to a
/// cold tier run on that tier's background threads ([`is_background`]).
pub fn become_background() {
    BACKGROUND.with(|b| b.set(true));
    lower_priority();
}

/// Whether the calling thread was marked by [`become_background`].
pub fn is_background() -> bool {
    BACKGROUND.with(Cell::get)
}

/// Lowers the calling thread's priority to [`BACKGROUND_NICE`] (a thread already lower keeps
/// its own); a failure is logged and otherwise ignored: priority is never correctness.
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{getpriority_process, setpriority_process};
        let tid = Some(rustix::thread::gettid());
        match getpriority_process(tid) {
            Ok(nice) if nice >= BACKGROUND_NICE => {}
            _ => {
                if let Err(e) = setpriority_process(tid, BACKGROUND_NICE) {
                    tracing::debug!(error = %e, "could not lower a background thread's priority");
                }
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_background_thread_runs_at_the_background_nice_and_others_keep_theirs() {
        let before = rustix::process::getpriority_process(Some(rustix::thread::gettid()))
            .expect("getpriority");
        let (nice, marked) = std::thread::spawn(|| {
            become_background();
            (
                rustix::process::getpriority_process(Some(rustix::thread::gettid()))
                    .expect("getpriority"),
                is_background(),
            )
        })
        .join()
        .expect("thread");
        assert_eq!(nice, BACKGROUND_NICE.max(before));
        assert!(marked);
        assert!(!is_background());
        let after = rustix::process::getpriority_process(Some(rustix::thread::gettid()))
            .expect("getpriority");
        assert_eq!(
            after, before,
            "only the background thread's priority changes"
        );
    }
}
