//! Injected faults: the named crash points of the write path, and failures of any durable
//! operation on the storage seam.

use std::fmt;
use std::sync::Arc;

use super::storage::{Crashing, Disk, FailHook, Failing, PointHook};
pub use super::storage::{FaultPoint, Op};

/// Injected faults. Production archives have none. Crash tests install a hook called at each
/// [`FaultPoint`] of the real write path (which aborts the process there); failure tests
/// install one consulted before every durable [`Op`], which answers an error (EIO, ENOSPC, a
/// timeout) to make that operation fail as a disk would.
#[derive(Clone, Default)]
pub struct Faults {
    point: Option<PointHook>,
    fail: Option<FailHook>,
}

impl Faults {
    /// A hook called at each fault point.
    pub fn new(hook: impl Fn(FaultPoint) + Send + Sync + 'static) -> Self {
        Faults {
            point: Some(Arc::new(hook)),
            fail: None,
        }
    }

    /// A hook that aborts the process (no unwinding, no destructors) at `point`.
    pub fn abort_at(point: FaultPoint) -> Self {
        Faults::new(move |at| {
            if at == point {
                std::process::abort();
            }
        })
    }

    /// A hook consulted before every durable operation: an error it answers is what the
    /// operation fails with.
    pub fn failing(
        hook: impl Fn(Op, &std::path::Path) -> Option<std::io::Error> + Send + Sync + 'static,
    ) -> Self {
        Faults {
            point: None,
            fail: Some(Arc::new(hook)),
        }
    }

    /// Calls the point hook, if one is set, at `point`: for write paths that do not go
    /// through the storage seam (a replication pass's uploads).
    pub fn reach(&self, point: FaultPoint) {
        if let Some(hook) = &self.point {
            hook(point);
        }
    }

    /// `base` with these faults on it: a [`Failing`] backend when a failure hook is set,
    /// inside a [`Crashing`] one when a point hook is.
    pub fn over(&self, base: Disk) -> Disk {
        let disk = match &self.fail {
            Some(hook) => std::sync::Arc::new(Failing::new(base, hook.clone())) as Disk,
            None => base,
        };
        match &self.point {
            Some(hook) => std::sync::Arc::new(Crashing::new(disk, hook.clone())),
            None => disk,
        }
    }
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Faults")
            .field("points", &self.point.is_some())
            .field("failures", &self.fail.is_some())
            .finish()
    }
}
