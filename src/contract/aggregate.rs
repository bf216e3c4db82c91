//! The aggregate vocabulary: one enum, one parse table, one arithmetic.

use super::Bucket;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A statistic a survey can fold.
///
/// | Kind | Names | Reads | Answers to |
/// |---|---|---|---|
/// | level folds | `min`, `max`, `mean`, `sum`, `count` | the finest stored level | the levels' floor |
/// | raw folds | `p0` … `p100` | the values the range holds | the raw floor |
///
/// There are exactly 106 names; [`Aggregate::name`] and [`Aggregate::parse`] are inverses over
/// them and `parse` answers `None` for anything else (`median`, `avg`, `P95`, `p095`, `p101`).
/// The median is `p50` and has no second spelling.
///
/// Percentiles are **discrete** and equal DuckDB's `quantile_disc(x, r / 100)` over the same
/// values: with the `n` values sorted ascending by IEEE total order, `pR` is the value at
/// zero-based index `max(1, n - trunc((1 - R/100) · n)) - 1` (double arithmetic, as DuckDB
/// does it), which is about `ceil(R/100 · n) - 1`: `p0` is the minimum, `p100` the maximum,
/// and no value is ever interpolated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Aggregate {
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// `sum / count`.
    Mean,
    /// The sum of the values.
    Sum,
    /// How many values there are.
    Count,
    /// A discrete percentile; build it with [`Aggregate::percentile`].
    Percentile(Rank),
}

/// A percentile rank, always within `0..=100`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank(u8);

impl Rank {
    /// The rank as a percentage.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl Aggregate {
    /// The five level folds, in table order.
    pub const LEVEL_FOLDS: [Aggregate; 5] = [
        Aggregate::Min,
        Aggregate::Max,
        Aggregate::Mean,
        Aggregate::Sum,
        Aggregate::Count,
    ];

    /// The percentile `p{rank}`.
    ///
    /// # Panics
    /// When `rank > 100`: a rank outside `0..=100` written in Rust is an authoring error.
    /// A rank that arrived over a wire goes through [`Aggregate::parse`] and is refused instead.
    pub fn percentile(rank: u8) -> Aggregate {
        assert!(
            rank <= 100,
            "percentile rank {rank} is outside 0..=100: an authoring error"
        );
        Aggregate::Percentile(Rank(rank))
    }

    /// Every aggregate, the five level folds first and then `p0..=p100`: all 106 names.
    pub fn all() -> impl Iterator<Item = Aggregate> {
        Self::LEVEL_FOLDS
            .into_iter()
            .chain((0..=100).map(|r| Aggregate::Percentile(Rank(r))))
    }

    /// The one name of this aggregate.
    pub fn name(&self) -> String {
        match self {
            Aggregate::Min => "min".into(),
            Aggregate::Max => "max".into(),
            Aggregate::Mean => "mean".into(),
            Aggregate::Sum => "sum".into(),
            Aggregate::Count => "count".into(),
            Aggregate::Percentile(rank) => format!("p{}", rank.0),
        }
    }

    /// The aggregate named `name`, or `None` when it is not one of the 106 names.
    pub fn parse(name: &str) -> Option<Aggregate> {
        match name {
            "min" => Some(Aggregate::Min),
            "max" => Some(Aggregate::Max),
            "mean" => Some(Aggregate::Mean),
            "sum" => Some(Aggregate::Sum),
            "count" => Some(Aggregate::Count),
            _ => {
                let digits = name.strip_prefix('p')?;
                let canonical = !digits.is_empty()
                    && digits.len() <= 3
                    && digits.bytes().all(|b| b.is_ascii_digit())
                    && (digits == "0" || !digits.starts_with('0'));
                if !canonical {
                    return None;
                }
                let rank: u8 = digits.parse().ok()?;
                (rank <= 100).then_some(Aggregate::Percentile(Rank(rank)))
            }
        }
    }

    /// Whether this statistic is folded out of stored levels (`true`) or scans raw values.
    /// The two halves answer to different floors.
    pub fn folds_levels(&self) -> bool {
        !matches!(self, Aggregate::Percentile(_))
    }

    /// Reads this statistic off a merged bucket. `None` for a percentile, which no bucket
    /// carries, and for the mean of nothing.
    pub fn folded(&self, bucket: &Bucket) -> Option<f64> {
        match self {
            Aggregate::Min => Some(bucket.min.value),
            Aggregate::Max => Some(bucket.max.value),
            Aggregate::Mean => (bucket.count > 0).then(|| bucket.mean()),
            Aggregate::Sum => Some(bucket.sum),
            Aggregate::Count => Some(bucket.count as f64),
            Aggregate::Percentile(_) => None,
        }
    }

    /// Reads this statistic off raw values (reordered in place). `None` when there are no
    /// values, except `count` (0) and `sum` (0).
    pub fn scanned(&self, values: &mut [f64]) -> Option<f64> {
        let n = values.len();
        match self {
            Aggregate::Count => Some(n as f64),
            // Not `Iterator::sum`: an empty f64 sum there is -0.0, and the sum of nothing is 0.
            Aggregate::Sum => Some(values.iter().fold(0.0, |acc, v| acc + v)),
            _ if n == 0 => None,
            Aggregate::Min => values.iter().copied().min_by(f64::total_cmp),
            Aggregate::Max => {
                values
                    .iter()
                    .copied()
                    .reduce(|a, b| if b.total_cmp(&a).is_gt() { b } else { a })
            }
            Aggregate::Mean => Some(values.iter().sum::<f64>() / n as f64),
            Aggregate::Percentile(rank) => {
                let index = disc_index(rank.0, n);
                let (_, value, _) = values.select_nth_unstable_by(index, f64::total_cmp);
                Some(*value)
            }
        }
    }
}

/// Zero-based index of the discrete percentile `rank` among `n > 0` sorted values:
/// `max(1, n - trunc((1 - q) · n)) - 1` with `q = rank / 100`, computed in double precision
/// exactly as DuckDB's `quantile_disc` computes it, so the two agree even where the double
/// product rounds.
fn disc_index(rank: u8, n: usize) -> usize {
    let q = f64::from(rank) / 100.0;
    let below = ((1.0 - q) * n as f64) as usize;
    n.saturating_sub(below).max(1) - 1
}

impl fmt::Display for Aggregate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl From<Aggregate> for String {
    fn from(value: Aggregate) -> Self {
        value.name()
    }
}

impl TryFrom<String> for Aggregate {
    type Error = UnknownAggregate;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Aggregate::parse(&value).ok_or(UnknownAggregate(value))
    }
}

impl std::str::FromStr for Aggregate {
    type Err = UnknownAggregate;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Aggregate::parse(s).ok_or_else(|| UnknownAggregate(s.to_owned()))
    }
}

/// A name outside the 106 the vocabulary holds.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown aggregate {0:?}: the names are min, max, mean, sum, count and p0..p100 (the median is p50)")]
pub struct UnknownAggregate(pub String);

/// One statistic of one measured field, with how many values it covers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Aggregated {
    /// Index of the measured field in the adapter's declared order.
    pub field: u32,
    /// Which statistic.
    pub kind: Aggregate,
    /// The answer; `None` when the range holds no value for this field.
    #[serde(with = "super::json_float::option")]
    pub value: Option<f64>,
    /// Values the answer covers.
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_106_names_round_trip() {
        let names: Vec<String> = Aggregate::all().map(|a| a.name()).collect();
        assert_eq!(names.len(), 106);
        let unique: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), 106);
        for aggregate in Aggregate::all() {
            assert_eq!(Aggregate::parse(&aggregate.name()), Some(aggregate));
        }
        assert_eq!(names[..5], ["min", "max", "mean", "sum", "count"]);
        assert_eq!(names[5], "p0");
        assert_eq!(names[105], "p100");
    }

    #[test]
    fn refused_spellings() {
        for bad in [
            "median", "avg", "average", "P95", "p095", "p00", "p101", "p-1", "p", "", " p5", "p5 ",
            "Mean", "MIN", "p1000", "p+5", "p٥", "p9.5", "stddev", "first", "last",
        ] {
            assert_eq!(Aggregate::parse(bad), None, "{bad:?} must be refused");
            let err = bad.parse::<Aggregate>().expect_err("refused");
            assert!(err.to_string().contains("p50"), "{err}");
        }
    }

    #[test]
    #[should_panic(expected = "authoring error")]
    fn a_rank_over_100_panics() {
        let _ = Aggregate::percentile(101);
    }

    #[test]
    fn folds_levels_splits_the_table() {
        assert_eq!(Aggregate::all().filter(|a| a.folds_levels()).count(), 5);
    }

    #[test]
    fn discrete_percentile_matches_quantile_disc() {
        // quantile_disc over 1..=10: q=0.5 -> 5, q=0.95 -> 10, q=0.1 -> 1, q=0 -> 1, q=0.11 -> 2.
        let mut v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let p = |r: u8, v: &mut Vec<f64>| Aggregate::percentile(r).scanned(v).expect("values");
        assert_eq!(p(50, &mut v), 5.0);
        assert_eq!(p(95, &mut v), 10.0);
        assert_eq!(p(10, &mut v), 1.0);
        assert_eq!(p(0, &mut v), 1.0);
        assert_eq!(p(11, &mut v), 2.0);
        assert_eq!(p(100, &mut v), 10.0);
        assert_eq!(Aggregate::percentile(50).scanned(&mut []), None);
        let empty_sum = Aggregate::Sum.scanned(&mut []).expect("a sum of nothing");
        assert!(
            empty_sum == 0.0 && empty_sum.is_sign_positive(),
            "{empty_sum}"
        );
    }

    #[test]
    fn folded_and_scanned_agree_on_level_folds() {
        let values = [3.0, -1.0, 4.0, 1.0, -5.0, 9.0];
        let bucket =
            Bucket::fold(0, values.iter().enumerate().map(|(i, &v)| (i as u64, v))).expect("rows");
        for kind in Aggregate::LEVEL_FOLDS {
            let mut scratch = values;
            assert_eq!(kind.folded(&bucket), kind.scanned(&mut scratch), "{kind}");
        }
    }
}
