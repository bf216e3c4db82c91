//! What a stream declares about how long its tiers live, and how long a track may idle.
//!
//! Declared where the archive is built ([`crate::archive::config::Config::retention`]), never
//! recorded: a lifetime is policy, and changing it changes what the next sweep retires, not
//! what was retired (floors are derived from retirement records only).

use crate::archive::error::Invalid;
use std::fmt;
use std::time::Duration;

/// How long one tier (raw rows, or one level) of a stream lives. A lifetime is a minimum:
/// nothing is retired before it says, and a retirement may come later (a row group or a
/// level cell retires whole, and never a track's newest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Lifetime {
    /// Kept forever.
    #[default]
    Forever,
    /// Retired once everything in it was sealed longer ago than this.
    Age(Duration),
    /// Retired once it lies more than this many axis units behind the track's newest axis
    /// value (an axial stream only).
    Behind(u64),
    /// The stream's raw rows are kept within this many bytes on disk, oldest retired first
    /// (raw rows only; see [`Retention::validate`]).
    Bytes(u64),
}

impl Lifetime {
    /// Parses `forever`, `age:DURATION` (`90s`, `15m`, `6h`, `7d`, `250ms`; a bare duration
    /// means age too), `behind:AXIS_UNITS` or `bytes:SIZE` (`5000000`, `512KiB`, `64MiB`,
    /// `10GiB`).
    pub fn parse(text: &str) -> Result<Lifetime, Invalid> {
        Lifetime::parsed(text).map_err(Invalid)
    }

    fn parsed(text: &str) -> Result<Lifetime, String> {
        let text = text.trim();
        if text == "forever" {
            return Ok(Lifetime::Forever);
        }
        let (kind, value) = text.split_once(':').unwrap_or(("age", text));
        match kind {
            "age" => duration(value).map(Lifetime::Age),
            "behind" => value
                .replace('_', "")
                .parse::<u64>()
                .map(Lifetime::Behind)
                .map_err(|_| {
                    format!("lifetime {text:?}: behind needs a whole number of axis units")
                }),
            "bytes" => size(value).map(Lifetime::Bytes),
            _ => Err(format!(
                "lifetime {text:?}: write forever, age:7d, behind:AXIS_UNITS or bytes:10GiB"
            )),
        }
        .map_err(|e| {
            if e.starts_with("lifetime") {
                e
            } else {
                format!("lifetime {text:?}: {e}")
            }
        })
    }
}

impl fmt::Display for Lifetime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lifetime::Forever => f.write_str("forever"),
            Lifetime::Age(d) => write!(f, "age:{}", show_duration(*d)),
            Lifetime::Behind(units) => write!(f, "behind:{units}"),
            Lifetime::Bytes(b) => write!(f, "bytes:{b}"),
        }
    }
}

fn show_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Parses `250ms`, `90s`, `15m`, `6h`, `7d`.
pub fn parse_duration(text: &str) -> Result<Duration, Invalid> {
    duration(text).map_err(Invalid)
}

fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("duration {text:?} needs a unit (ms, s, m, h, d)"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("duration {text:?} does not start with a whole number"))?;
    let ms = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "duration {text:?}: unknown unit {unit:?} (ms, s, m, h, d)"
            ))
        }
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("duration {text:?} is too long"))
}

/// Parses a byte size: `5000000`, `512KiB`, `64MiB`, `10GiB`, `1TiB` (also `KB`, `MB`, `GB`
/// as powers of ten).
pub fn parse_size(text: &str) -> Result<u64, Invalid> {
    size(text).map_err(Invalid)
}

fn size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("size {text:?} does not start with a whole number"))?;
    let scale: u64 = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "size {text:?}: unknown unit {unit:?} (B, KiB, MiB, GiB, TiB)"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("size {text:?} is too large"))
}

/// One stream's declared lifetimes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// How long raw rows live.
    pub raw: Lifetime,
    /// How long each level lives, by level index; a level past the end lives forever.
    pub levels: Vec<Lifetime>,
    /// A track that receives no rows for this long is retired whole.
    pub idle: Option<Duration>,
}

impl Retention {
    /// Keeps everything forever (the default).
    pub fn forever() -> Self {
        Retention::default()
    }

    /// With the raw rows' lifetime.
    pub fn raw(mut self, lifetime: Lifetime) -> Self {
        self.raw = lifetime;
        self
    }

    /// With level `k`'s lifetime.
    pub fn level(mut self, k: usize, lifetime: Lifetime) -> Self {
        if self.levels.len() <= k {
            self.levels.resize(k + 1, Lifetime::Forever);
        }
        self.levels[k] = lifetime;
        self
    }

    /// With every level's lifetime.
    pub fn all_levels(mut self, levels: usize, lifetime: Lifetime) -> Self {
        self.levels = vec![lifetime; levels];
        self
    }

    /// With a track idle time.
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }

    /// Level `k`'s lifetime.
    pub fn level_lifetime(&self, k: usize) -> Lifetime {
        self.levels.get(k).copied().unwrap_or_default()
    }

    /// Whether this retires anything, ever.
    pub fn is_forever(&self) -> bool {
        self.raw == Lifetime::Forever
            && self.levels.iter().all(|l| *l == Lifetime::Forever)
            && self.idle.is_none()
    }

    /// Checks the declaration against the stream: `behind` needs an axis; levels need a
    /// ladder with that many levels; a byte budget is for raw rows only. Levels are a few
    /// percent of the raw bytes and answer every survey: a byte budget would retire the fine
    /// levels exactly when the archive is busiest, so levels retire by age or axis distance.
    pub fn validate(&self, stream: &str, axial: bool, levels: usize) -> Result<(), Invalid> {
        self.valid(stream, axial, levels).map_err(Invalid)
    }

    fn valid(&self, stream: &str, axial: bool, levels: usize) -> Result<(), String> {
        let behind = |l: &Lifetime| matches!(l, Lifetime::Behind(_));
        if !axial && (behind(&self.raw) || self.levels.iter().any(behind)) {
            return Err(format!(
                "stream {stream:?} declares no axis, so nothing can be retired by axis distance"
            ));
        }
        if self.levels.len() > levels
            && self.levels[levels..]
                .iter()
                .any(|l| *l != Lifetime::Forever)
        {
            return Err(format!(
                "stream {stream:?} builds {levels} level(s); a lifetime was declared for level {}",
                self.levels.len() - 1
            ));
        }
        if let Some(k) = self
            .levels
            .iter()
            .position(|l| matches!(l, Lifetime::Bytes(_)))
        {
            return Err(format!(
                "stream {stream:?} level {k}: a byte budget is for raw rows only; declare levels by age or axis distance"
            ));
        }
        if let Some(d) = self.idle {
            if d.is_zero() {
                return Err(format!(
                    "stream {stream:?}: an idle time must be longer than zero"
                ));
            }
        }
        Ok(())
    }
}

/// How compaction shapes a stream's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compaction {
    /// A compacted single-track segment holds about this many bytes before a new one starts.
    pub target_bytes: u64,
    /// Rows per row group inside a compacted segment, at most.
    pub group_rows: usize,
    /// Compaction starts once a stream has this many files to rewrite (data or level).
    pub min_inputs: usize,
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction {
            target_bytes: 64 << 20,
            group_rows: 128 * 1024,
            min_inputs: 16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_parse_and_print_back() {
        for text in [
            "forever",
            "age:7d",
            "age:250ms",
            "age:90s",
            "behind:1000",
            "bytes:1024",
        ] {
            let l = Lifetime::parse(text).expect(text);
            assert_eq!(Lifetime::parse(&l.to_string()), Ok(l), "{text}");
        }
        assert_eq!(
            Lifetime::parse("6h"),
            Ok(Lifetime::Age(Duration::from_secs(21_600)))
        );
        assert_eq!(
            Lifetime::parse("bytes:64MiB"),
            Ok(Lifetime::Bytes(64 << 20))
        );
        for bad in [
            "",
            "age:",
            "age:7",
            "age:7y",
            "behind:x",
            "bytes:1PB",
            "keep:3",
            "bytes:-1",
        ] {
            let e = Lifetime::parse(bad).expect_err(bad);
            assert!(e.contains("lifetime"), "{bad}: {e}");
        }
    }

    #[test]
    fn declarations_are_checked_against_the_stream() {
        let r = Retention::forever().raw(Lifetime::Behind(10));
        assert!(r
            .validate("s", false, 0)
            .expect_err("no axis")
            .contains("no axis"));
        assert!(r.validate("s", true, 0).is_ok());
        let r = Retention::forever().level(3, Lifetime::Age(Duration::from_secs(1)));
        assert!(r
            .validate("s", true, 2)
            .expect_err("levels")
            .contains("level 3"));
        let r = Retention::forever().level(0, Lifetime::Bytes(10));
        assert!(r
            .validate("s", true, 8)
            .expect_err("bytes")
            .contains("raw rows only"));
        let r = Retention::forever().idle(Duration::ZERO);
        assert!(r.validate("s", true, 8).is_err());
    }
}
