//! Which data files move to the cold tier: a pure function of the files, the policy and a
//! time passed in.

use crate::archive::format::manifest::SegmentFile;
use std::time::Duration;

/// When a stream's data files move to the cold tier. Level files stay local: they are small
/// and answer every survey.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffloadPolicy {
    /// Files sealed longer ago than this move.
    pub older_than: Option<Duration>,
    /// Beyond this many bytes of local data files, the oldest move.
    pub local_budget: Option<u64>,
}

impl OffloadPolicy {
    /// Files sealed longer ago than `age` move.
    pub fn older_than(age: Duration) -> Self {
        OffloadPolicy {
            older_than: Some(age),
            local_budget: None,
        }
    }

    /// The oldest files move until at most `bytes` of data files stay local.
    pub fn local_budget(mut self, bytes: u64) -> Self {
        self.local_budget = Some(bytes);
        self
    }
}

/// The data files of a stream that `policy` moves at `now_ns`, oldest first: those sealed
/// longer ago than the age, then, while the local bytes exceed the budget, the oldest left.
pub fn plan_offload<'a>(
    files: &'a [SegmentFile],
    policy: &OffloadPolicy,
    now_ns: u64,
) -> Vec<&'a SegmentFile> {
    let mut local: Vec<&SegmentFile> = files.iter().filter(|f| f.cold.is_none()).collect();
    local.sort_by_key(|f| (f.sealed_at_ns, f.name));
    let mut moving = Vec::new();
    let mut kept_bytes: u64 = local.iter().map(|f| f.bytes).sum();
    for file in local {
        let old = policy.older_than.is_some_and(|age| {
            file.sealed_at_ns
                .saturating_add(u64::try_from(age.as_nanos()).unwrap_or(u64::MAX))
                <= now_ns
        });
        let over = policy.local_budget.is_some_and(|b| kept_bytes > b);
        if old || over {
            kept_bytes -= file.bytes;
            moving.push(file);
        }
    }
    moving
}
