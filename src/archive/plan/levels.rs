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

/// One run of whole cells a level fold reads: cells `cells[0] ..= cells[1]` of `level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Piece {
    /// The level whose cells the piece reads.
    pub level: usize,
    /// First and last cell index at that level.
    pub cells: [u64; 2],
}

/// Covers the whole level-`k` cells `first ..= last` with as few cells as the ladder allows,
/// in axis order: the edges that no coarser cell fits stay at the finer level, everything
/// between climbs. The pieces are disjoint and together cover exactly the axis span of the
/// level-`k` cells, so a fold of them folds exactly the rows a fold of those cells would.
///
/// Levels beneath `stored` (the stream's first stored level) are folded from the raw rows,
/// so the climb goes from `k` straight to `stored`: one raw piece an edge, never one per
/// unstored level. `usable(level, first)` says whether `level`'s cells from `first` on are
/// whole for every selected track (its floor lies at or beneath them); the climb stops at
/// the first level that is not.
pub fn fold_pieces(
    ladder: &Ladder,
    k: usize,
    [first, last]: [u64; 2],
    stored: usize,
    usable: impl Fn(usize, u64) -> bool,
) -> Vec<Piece> {
    let mut left = Vec::new();
    let mut right = Vec::new();
    let (mut level, mut a, mut b) = (k, first, last);
    loop {
        let next = if level < stored { stored } else { level + 1 };
        if next >= ladder.levels as usize || a > b {
            break;
        }
        // How many cells of `level` make one of `next`.
        let step = ladder.width(next) / ladder.width(level);
        // The whole cells of `next` inside `a ..= b`: `up ..= down`.
        let up = a.div_ceil(step);
        let Some(end) = b.checked_add(1).map(|e| e / step) else {
            break;
        };
        if end == 0 || up > end - 1 || !usable(next, up) {
            break;
        }
        let down = end - 1;
        if a < up * step {
            left.push(Piece {
                level,
                cells: [a, up * step - 1],
            });
        }
        if end * step <= b {
            right.push(Piece {
                level,
                cells: [end * step, b],
            });
        }
        (level, a, b) = (next, up, down);
    }
    left.push(Piece {
        level,
        cells: [a, b],
    });
    left.extend(right.into_iter().rev());
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The axis span `[lo, hi)` a piece covers.
    fn span(ladder: &Ladder, p: &Piece) -> (u128, u128) {
        let w = ladder.width(p.level) as u128;
        (p.cells[0] as u128 * w, (p.cells[1] as u128 + 1) * w)
    }

    /// Pieces written `(level, first, last)`.
    fn pieces(of: &[(usize, u64, u64)]) -> Vec<Piece> {
        of.iter()
            .map(|&(level, a, b)| Piece {
                level,
                cells: [a, b],
            })
            .collect()
    }

    #[test]
    fn a_long_range_climbs_to_the_coarsest_level_and_keeps_its_edges_fine() {
        let ladder = Ladder::new(10, 4, 3).expect("ladder");
        // Level-0 cells 3 ..= 70 (axis 30 .. 710): level 1 is 40 wide, level 2 160.
        assert_eq!(
            fold_pieces(&ladder, 0, [3, 70], 0, |_, _| true),
            pieces(&[(0, 3, 3), (1, 1, 3), (2, 1, 3), (1, 16, 16), (0, 68, 70)])
        );
    }

    #[test]
    fn unstored_levels_are_one_raw_piece_an_edge() {
        let ladder = Ladder::new(10, 4, 4).expect("ladder");
        // Stored from level 2 (160 wide): the raw edges are level-0 cells.
        assert_eq!(
            fold_pieces(&ladder, 0, [3, 70], 2, |_, _| true),
            pieces(&[(0, 3, 15), (2, 1, 3), (0, 64, 70)])
        );
        // A range narrower than one stored cell stays raw whole.
        assert_eq!(
            fold_pieces(&ladder, 0, [3, 20], 2, |_, _| true),
            pieces(&[(0, 3, 20)])
        );
    }

    #[test]
    fn a_level_beneath_its_floor_is_not_climbed_to() {
        let ladder = Ladder::new(10, 4, 3).expect("ladder");
        assert_eq!(
            fold_pieces(&ladder, 0, [3, 70], 0, |level, _| level < 2),
            pieces(&[(0, 3, 3), (1, 1, 16), (0, 68, 70)])
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, rng_seed: proptest::test_runner::RngSeed::Fixed(0xf01d), ..ProptestConfig::default() })]
        /// The pieces tile the level-k cells' span exactly, in axis order, each piece's
        /// cells whole at its level, and no piece at a level the caller refused.
        #[test]
        fn pieces_tile_the_span_exactly(
            base in 1u64..50,
            factor in 2u64..9,
            levels in 1u8..7,
            k in 0usize..6,
            stored in 0usize..7,
            first in 0u64..5000,
            len in 0u64..5000,
            refused in proptest::option::of(0usize..7),
        ) {
            let ladder = Ladder::new(base, factor, levels).expect("ladder");
            let k = k.min(levels as usize - 1);
            let stored = stored.min(levels as usize - 1);
            let last = first + len;
            let usable = |level: usize, _| refused.is_none_or(|r| level < r);
            let pieces = fold_pieces(&ladder, k, [first, last], stored, usable);
            let w = ladder.width(k) as u128;
            let mut at = first as u128 * w;
            for p in &pieces {
                prop_assert!(p.cells[0] <= p.cells[1], "{p:?}");
                prop_assert!(p.level == k || (p.level >= stored && usable(p.level, 0)), "{p:?}");
                let (lo, hi) = span(&ladder, p);
                prop_assert_eq!(lo, at, "{:?}", pieces);
                at = hi;
            }
            prop_assert_eq!(at, (last as u128 + 1) * w);
            // At most two pieces a level, and one level read whole at most once.
            for level in 0..levels as usize {
                prop_assert!(pieces.iter().filter(|p| p.level == level).count() <= 2);
            }
        }
    }
}
