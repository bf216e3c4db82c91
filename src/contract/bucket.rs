//! Buckets: what one numeric field did across one stretch of the axis, as a mergeable fold.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// A value together with the axis coordinate it occurred at.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    /// The axis coordinate (axis units, e.g. an ordinal or nanoseconds).
    pub axis: u64,
    /// The value of the measured field there.
    #[serde(with = "super::json_float")]
    pub value: f64,
}

impl Placed {
    /// Places `value` at `axis`.
    pub const fn new(axis: u64, value: f64) -> Self {
        Placed { axis, value }
    }
}

/// True M4 of one measured field across one bucket of the axis, plus the three accumulators
/// that make the remaining statistics a fold.
///
/// - `first` is the leftmost row of the minimal axis, `last` the rightmost row of the maximal
///   axis (an axis tie keeps the earlier row for `first`, the later row for `last`);
/// - `min` and `max` are the extreme values with where they occurred; a tie of values keeps
///   the earlier row. Values compare by IEEE total order ([`f64::total_cmp`]), so a NaN is
///   larger than every number (DuckDB orders NaN the same way) and `-0.0 < 0.0`;
/// - `count`, `sum` and `sum_sq` are stored; mean and variance are derived, never stored,
///   because a stored mean cannot be merged.
///
/// [`Bucket::merge`] is associative and deliberately not commutative: folding a run of rows
/// gives the same bucket as merging any grouping of its sub-buckets **in order**.
/// Floating addition remains floating addition: `sum` and `sum_sq` round like any sum.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Index of the measured field in the adapter's declared field order.
    pub field: u32,
    /// The leftmost row of the minimal axis.
    pub first: Placed,
    /// The rightmost row of the maximal axis.
    pub last: Placed,
    /// The smallest value (earliest on a tie).
    pub min: Placed,
    /// The largest value (earliest on a tie).
    pub max: Placed,
    /// Rows folded.
    pub count: u64,
    /// Sum of the values.
    #[serde(with = "super::json_float")]
    pub sum: f64,
    /// Sum of the squared values.
    #[serde(with = "super::json_float")]
    pub sum_sq: f64,
}

impl Bucket {
    /// The bucket of a single row.
    pub fn of(field: u32, axis: u64, value: f64) -> Self {
        let at = Placed::new(axis, value);
        Bucket {
            field,
            first: at,
            last: at,
            min: at,
            max: at,
            count: 1,
            sum: value,
            sum_sq: value * value,
        }
    }

    /// Folds one more row, published after every row already folded.
    pub fn push(&mut self, axis: u64, value: f64) {
        *self = self.merge(Bucket::of(self.field, axis, value));
    }

    /// Folds a run of `(axis, value)` rows in publish order; `None` for an empty run.
    pub fn fold(field: u32, rows: impl IntoIterator<Item = (u64, f64)>) -> Option<Self> {
        let mut rows = rows.into_iter();
        let (axis, value) = rows.next()?;
        let mut bucket = Bucket::of(field, axis, value);
        for (axis, value) in rows {
            bucket.push(axis, value);
        }
        Some(bucket)
    }

    /// Merges `self` with the bucket of the rows published after it.
    ///
    /// # Panics
    /// When the two buckets measure different fields: that is an authoring error.
    #[must_use]
    pub fn merge(self, later: Bucket) -> Bucket {
        assert_eq!(
            self.field, later.field,
            "Bucket::merge of two different fields ({} and {}) is an authoring error",
            self.field, later.field
        );
        Bucket {
            field: self.field,
            first: if later.first.axis < self.first.axis {
                later.first
            } else {
                self.first
            },
            last: if later.last.axis >= self.last.axis {
                later.last
            } else {
                self.last
            },
            min: if later.min.value.total_cmp(&self.min.value) == Ordering::Less {
                later.min
            } else {
                self.min
            },
            max: if later.max.value.total_cmp(&self.max.value) == Ordering::Greater {
                later.max
            } else {
                self.max
            },
            count: self.count + later.count,
            sum: self.sum + later.sum,
            sum_sq: self.sum_sq + later.sum_sq,
        }
    }

    /// `sum / count`.
    pub fn mean(&self) -> f64 {
        self.sum / self.count as f64
    }

    /// Population variance, `sum_sq / count - mean²`, clamped at zero against rounding.
    pub fn variance(&self) -> f64 {
        let mean = self.mean();
        (self.sum_sq / self.count as f64 - mean * mean).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Values that are small integers, so every sum in a test is exact.
    fn rows() -> impl Strategy<Value = Vec<(u64, f64)>> {
        prop::collection::vec((0u64..50, (-1000i32..1000).prop_map(f64::from)), 1..60)
    }

    fn fold(rows: &[(u64, f64)]) -> Bucket {
        Bucket::fold(0, rows.iter().copied()).expect("non-empty")
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5e41e5), ..ProptestConfig::default() })]

        #[test]
        fn folding_equals_merging_any_grouping_in_order(rows in rows(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6)) {
            let whole = fold(&rows);
            let mut points: Vec<usize> = cuts.iter().map(|c| 1 + c.index(rows.len())).filter(|&c| c < rows.len()).collect();
            points.sort_unstable();
            points.dedup();
            let mut parts = Vec::new();
            let mut start = 0;
            for p in points.into_iter().chain([rows.len()]) {
                parts.push(fold(&rows[start..p]));
                start = p;
            }
            // Left to right.
            let left = parts.iter().copied().reduce(Bucket::merge).expect("parts");
            prop_assert_eq!(left, whole);
            // Right to left: associativity, order kept.
            let right = parts.iter().rev().copied().reduce(|acc, earlier| earlier.merge(acc)).expect("parts");
            prop_assert_eq!(right, whole);
        }

        #[test]
        fn m4_points_are_placed_where_they_occurred(rows in rows()) {
            let b = fold(&rows);
            let min_axis = rows.iter().map(|r| r.0).min().expect("rows");
            let max_axis = rows.iter().map(|r| r.0).max().expect("rows");
            prop_assert_eq!(b.first, rows.iter().map(|&(a, v)| Placed::new(a, v)).find(|p| p.axis == min_axis).expect("first"));
            prop_assert_eq!(b.last, rows.iter().rev().map(|&(a, v)| Placed::new(a, v)).find(|p| p.axis == max_axis).expect("last"));
            let min = rows.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
            let max = rows.iter().map(|r| r.1).fold(f64::NEG_INFINITY, f64::max);
            prop_assert_eq!(b.min, rows.iter().map(|&(a, v)| Placed::new(a, v)).find(|p| p.value == min).expect("min"));
            prop_assert_eq!(b.max, rows.iter().map(|&(a, v)| Placed::new(a, v)).find(|p| p.value == max).expect("max"));
            prop_assert_eq!(b.count, rows.len() as u64);
            prop_assert_eq!(b.sum, rows.iter().map(|r| r.1).sum::<f64>());
        }
    }

    #[test]
    fn merge_is_not_commutative() {
        let a = Bucket::of(0, 5, 1.0);
        let b = Bucket::of(0, 5, 2.0);
        assert_eq!(a.merge(b).first.value, 1.0);
        assert_eq!(a.merge(b).last.value, 2.0);
        assert_eq!(b.merge(a).first.value, 2.0);
    }

    #[test]
    fn ties_of_value_keep_the_earlier_row() {
        let b = Bucket::fold(0, [(1, 3.0), (2, 3.0)]).expect("rows");
        assert_eq!(b.min.axis, 1);
        assert_eq!(b.max.axis, 1);
    }

    #[test]
    fn mean_and_variance_are_derived() {
        let b = Bucket::fold(0, [(0, 1.0), (1, 2.0), (2, 3.0), (3, 4.0)]).expect("rows");
        assert_eq!(b.mean(), 2.5);
        assert_eq!(b.variance(), 1.25);
    }

    #[test]
    #[should_panic(expected = "authoring error")]
    fn merging_two_fields_panics() {
        let _ = Bucket::of(0, 1, 1.0).merge(Bucket::of(1, 2, 1.0));
    }
}
