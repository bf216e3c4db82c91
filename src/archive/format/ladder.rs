//! The grid a stream's levels sit on, as declared and recorded.

use crate::archive::error::Invalid;
use serde::{Deserialize, Serialize};

/// The grid a stream's levels sit on: level k has cells `base × factor^k` axis units wide,
/// anchored at axis 0 (cell = axis / width).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ladder {
    /// Width of a level-0 cell, in axis units.
    pub base: u64,
    /// How many cells of level k make one of level k+1.
    pub factor: u64,
    /// Number of levels built.
    pub levels: u8,
}

impl Ladder {
    /// For an ordinal axis (one unit per row or a few): level 0 holds about a thousand rows a
    /// cell, so levels stay a small fraction of the raw bytes; 8 levels up to 2³⁰ units.
    pub const ORDINAL: Ladder = Ladder {
        base: 1024,
        factor: 8,
        levels: 8,
    };
    /// For a nanosecond timestamp axis: one-second cells at level 0, then ×8 up to about
    /// 24 days (8 s, 64 s, 8.5 min, 68 min, 9.1 h, 3 d, 24 d).
    pub const NANOSECONDS: Ladder = Ladder {
        base: 1_000_000_000,
        factor: 8,
        levels: 8,
    };

    /// A ladder, checked: `base ≥ 1`, `factor ≥ 2`, `1 ≤ levels ≤ 16`, no width overflows.
    pub fn new(base: u64, factor: u64, levels: u8) -> std::result::Result<Ladder, Invalid> {
        Ladder::checked(base, factor, levels).map_err(Invalid)
    }

    fn checked(base: u64, factor: u64, levels: u8) -> std::result::Result<Ladder, String> {
        if base == 0 {
            return Err("a ladder's base cell width must be at least 1 axis unit".into());
        }
        if factor < 2 {
            return Err("a ladder's factor must be at least 2".into());
        }
        if !(1..=16).contains(&levels) {
            return Err("a ladder has 1 to 16 levels".into());
        }
        let ladder = Ladder {
            base,
            factor,
            levels,
        };
        let mut w = base;
        for _ in 1..levels {
            w = w
                .checked_mul(factor)
                .ok_or("the coarsest cell width overflows u64")?;
        }
        Ok(ladder)
    }

    /// Parses `BASE,FACTOR,LEVELS`.
    pub fn parse(text: &str) -> std::result::Result<Ladder, Invalid> {
        Ladder::parsed(text).map_err(Invalid)
    }

    fn parsed(text: &str) -> std::result::Result<Ladder, String> {
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let [b, f, l] = parts[..] else {
            return Err(format!(
                "ladder {text:?}: write BASE,FACTOR,LEVELS (e.g. 1024,8,8)"
            ));
        };
        let num = |s: &str, what: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("ladder {text:?}: {what} {s:?} is not a whole number"))
        };
        let levels = u8::try_from(num(l, "levels")?)
            .map_err(|_| format!("ladder {text:?}: too many levels"))?;
        Ladder::checked(num(b, "base")?, num(f, "factor")?, levels)
    }

    /// Cell width of level `k`.
    pub fn width(&self, k: usize) -> u64 {
        self.base * self.factor.pow(k as u32)
    }
}
