//! Which level answers a survey: the finest whose cells over the span fit the budget. Pure:
//! the bound comes from the span and the ladder alone.

use crate::archive::format::ladder::Ladder;
use serde::Serialize;

/// How a survey is answered: the level, how many of its cells make one bucket, and the span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The level read.
    pub level: usize,
    /// Cells of that level merged into one bucket (1 unless past the coarsest level).
    pub merge: u64,
    /// Width of one answered bucket in axis units (`width(level) × merge`).
    pub cell_width: u64,
    /// First and last answered cell index at that width.
    pub cells: [u64; 2],
}

/// Chooses the finest level whose cells over the inclusive axis span `[lo, hi]` fit
/// `cells_per_field`; past the coarsest level, the smallest grid-aligned merge that fits.
/// The bound comes from the span alone: no read.
pub fn plan(ladder: &Ladder, lo: u64, hi: u64, cells_per_field: u64) -> Plan {
    plan_from(ladder, lo, hi, cells_per_field, 0)
}

/// [`plan`], choosing among levels `from` and coarser only (a finer level's floor is above the
/// span).
pub fn plan_from(ladder: &Ladder, lo: u64, hi: u64, cells_per_field: u64, from: usize) -> Plan {
    assert!(
        cells_per_field >= 1 && lo <= hi,
        "plan needs a budget and a span"
    );
    let touched = |w: u64| hi / w - lo / w + 1;
    for k in from.min(ladder.levels as usize - 1)..ladder.levels as usize {
        let w = ladder.width(k);
        if touched(w) <= cells_per_field {
            return Plan {
                level: k,
                merge: 1,
                cell_width: w,
                cells: [lo / w, hi / w],
            };
        }
    }
    let k = ladder.levels as usize - 1;
    let w = ladder.width(k);
    let mut merge = touched(w).div_ceil(cells_per_field).max(1);
    loop {
        let width = w.saturating_mul(merge);
        if touched(width) <= cells_per_field {
            return Plan {
                level: k,
                merge,
                cell_width: width,
                cells: [lo / width, hi / width],
            };
        }
        merge += 1;
    }
}
