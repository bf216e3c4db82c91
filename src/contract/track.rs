//! Tracks: the declared partition tuple of a stream, its labels, and the track key.
//!
//! A track is at most four components deep. Each component is a [`Label`]: a typed value
//! that hands the served tier a piece of text. The selection a caller narrows a read by is a
//! [`Prefix`] of the declared tuple — the whole tuple or any shorter one — and a tuple of the
//! wrong component type or depth implements no `Prefix` of the declaration, so it does not
//! compile.
//!
//! ## The track key
//!
//! A tuple of labels becomes bytes exactly once, here: each label followed by the unit
//! separator U+001F, the last one included (`("run_7", "p1")` → `run_7␟p1␟`). Two laws hold
//! and are property-tested:
//!
//! - **Encoded order is tuple order.** Comparing keys byte by byte compares label tuples
//!   component by component (each label by its UTF-8 bytes), and a shorter tuple sorts
//!   immediately before everything beneath it.
//! - **A prefix scan is a prefix selection.** A key starts with another key exactly when its
//!   tuple starts with that tuple, so `run_70` is not beneath `run_7`.
//!
//! Integer and boolean components are labels too, as their decimal (or `true`/`false`) text,
//! so they order as text: run `10` sorts before run `7`. The key is text on purpose (it is
//! what a glob, DuckDB and Polars see in the track columns' string form, and it never changes
//! with a column's width); order-sensitive callers zero-pad or sort the answer.
//!
//! Both laws rest on every label byte being above U+001F, which is why a label holding a control
//! character is refused where it is encoded. Everything else is a label: dots, hyphens,
//! spaces, any script, the empty string.

use std::borrow::Cow;
use std::fmt;

/// The separator that ends every label in a track key.
pub const UNIT_SEPARATOR: char = '\u{1f}';

/// The deepest a track may be declared.
pub const MAX_DEPTH: usize = 4;

/// A track's labels, outermost first, shared: one allocation per track, however many
/// barriers, row groups and catalog entries name it. A fleet of 100,000 tracks sealed ten
/// times names each track ten times; cloning this is a reference count, not three
/// allocations.
pub type Labels = std::sync::Arc<[String]>;

mod sealed {
    /// Only this crate implements [`super::Label`].
    pub trait StoredAsText {}
}

/// A typed track component and the durable text it carries.
///
/// Sealed: implemented for `String`, `&str`, `Arc<str>`, the integers and `bool`, and for no
/// other type. The window narrows a read by `label()`, while the served tier stores the
/// component's column and derives its label from that column's value as text; for these
/// types both are the same text (the decimal digits, `true`/`false`). A custom type could
/// label itself differently from how it is stored, and every narrowed read beneath the
/// window would then come back empty without a refusal. A component of another type is
/// stored as one of these (an enum as its name, say).
pub trait Label: sealed::StoredAsText {
    /// The text this component is stored and selected under.
    fn label(&self) -> Cow<'_, str>;
}

impl sealed::StoredAsText for String {}
impl sealed::StoredAsText for &str {}
impl sealed::StoredAsText for std::sync::Arc<str> {}

impl Label for String {
    fn label(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl Label for &str {
    fn label(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl Label for std::sync::Arc<str> {
    fn label(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

macro_rules! integer_labels {
    ($($t:ty),*) => {$(
        impl sealed::StoredAsText for $t {}
        impl Label for $t {
            fn label(&self) -> Cow<'_, str> {
                Cow::Owned(self.to_string())
            }
        }
    )*};
}
integer_labels!(u8, u16, u32, u64, i8, i16, i32, i64, bool);

/// A track tuple: one to four [`Label`] components.
pub trait TrackTuple {
    /// Depth of the tuple.
    const DEPTH: usize;
    /// The labels, outermost first.
    fn labels(&self) -> Vec<String>;
}

/// A selection that narrows a read of a stream tracked by `T`: `T` itself or any shorter
/// prefix of it, component types matching. Implemented for exactly those tuples.
pub trait Prefix<T: TrackTuple> {
    /// The labels of the selection, outermost first.
    fn labels(&self) -> Vec<String>;
}

macro_rules! tuples {
    ($(($($name:ident : $idx:tt),+)),+) => {$(
        impl<$($name: Label),+> TrackTuple for ($($name,)+) {
            const DEPTH: usize = [$($idx),+].len();
            fn labels(&self) -> Vec<String> {
                vec![$(self.$idx.label().into_owned()),+]
            }
        }
    )+};
}
tuples!((A: 0), (A: 0, B: 1), (A: 0, B: 1, C: 2), (A: 0, B: 1, C: 2, D: 3));

macro_rules! prefix {
    (<$($g:ident),+> $decl:ty => ($($name:ident : $idx:tt),+)) => {
        impl<$($g: Label),+> Prefix<$decl> for ($($name,)+) {
            fn labels(&self) -> Vec<String> {
                vec![$(self.$idx.label().into_owned()),+]
            }
        }
    };
}
prefix!(<A> (A,) => (A: 0));
prefix!(<A, B> (A, B) => (A: 0));
prefix!(<A, B> (A, B) => (A: 0, B: 1));
prefix!(<A, B, C> (A, B, C) => (A: 0));
prefix!(<A, B, C> (A, B, C) => (A: 0, B: 1));
prefix!(<A, B, C> (A, B, C) => (A: 0, B: 1, C: 2));
prefix!(<A, B, C, D> (A, B, C, D) => (A: 0));
prefix!(<A, B, C, D> (A, B, C, D) => (A: 0, B: 1));
prefix!(<A, B, C, D> (A, B, C, D) => (A: 0, B: 1, C: 2));
prefix!(<A, B, C, D> (A, B, C, D) => (A: 0, B: 1, C: 2, D: 3));

/// A row type that declares a track: the tuple type and the names of the row fields that
/// carry it. Generated by `#[stream(track = (..))]`.
pub trait Tracked {
    /// The declared partition tuple, e.g. `(Run, Probe)`.
    type Track: TrackTuple;
    /// The names of the row fields that carry the track, outermost first.
    const TRACK: &'static [&'static str];
    /// This row's track.
    fn track(&self) -> Self::Track;
}

/// A row type that declares its one u64 monotone axis field. Generated by
/// `#[stream(axis = ..)]`. Only an axial stream can be surveyed.
pub trait Axial {
    /// The name of the axis field.
    const AXIS: &'static str;
    /// This row's axis coordinate.
    fn axis(&self) -> u64;
}

/// The encoded form of a label tuple: each label followed by U+001F.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrackKey(String);

/// A label that cannot be encoded because it holds a control character.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("track label {label:?} (component {component}) holds the control character U+{code:04X} at byte {byte}; labels may hold any text but control characters")]
pub struct BadLabel {
    /// The refused label.
    pub label: String,
    /// Its index in the tuple, outermost 0.
    pub component: usize,
    /// The control character's code point.
    pub code: u32,
    /// Its byte offset within the label.
    pub byte: usize,
}

/// A selection deeper than [`MAX_DEPTH`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadTrack {
    /// A label holds a control character.
    #[error(transparent)]
    Label(#[from] BadLabel),
    /// More components than a track can have.
    #[error("a track has at most {MAX_DEPTH} components; {0} were given")]
    TooDeep(usize),
}

/// Checks one label for control characters.
pub fn check_label(label: &str, component: usize) -> Result<(), BadLabel> {
    match label.char_indices().find(|(_, c)| c.is_control()) {
        None => Ok(()),
        Some((byte, c)) => Err(BadLabel {
            label: label.to_owned(),
            component,
            code: u32::from(c),
            byte,
        }),
    }
}

impl TrackKey {
    /// The key of the empty selection: every track sorts at or after it and starts with it.
    pub fn root() -> TrackKey {
        TrackKey(String::new())
    }

    /// Encodes a label tuple, outermost first, refusing control characters and depth over 4.
    pub fn encode<S: AsRef<str>>(labels: &[S]) -> Result<TrackKey, BadTrack> {
        if labels.len() > MAX_DEPTH {
            return Err(BadTrack::TooDeep(labels.len()));
        }
        let mut key = String::with_capacity(labels.iter().map(|l| l.as_ref().len() + 1).sum());
        for (component, label) in labels.iter().enumerate() {
            let label = label.as_ref();
            check_label(label, component)?;
            key.push_str(label);
            key.push(UNIT_SEPARATOR);
        }
        Ok(TrackKey(key))
    }

    /// Decodes the labels back, outermost first.
    pub fn labels(&self) -> Vec<&str> {
        let mut parts: Vec<&str> = self.0.split(UNIT_SEPARATOR).collect();
        parts.pop(); // the empty remainder after the last separator
        parts
    }

    /// How many components the key holds.
    pub fn depth(&self) -> usize {
        self.0.matches(UNIT_SEPARATOR).count()
    }

    /// Whether this key's tuple starts with `prefix`'s tuple.
    pub fn starts_with(&self, prefix: &TrackKey) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// The smallest key sorting after every key that starts with `self`, for a range scan:
    /// `[self, upper)` holds exactly the keys beneath `self`. `None` for the root.
    pub fn upper(&self) -> Option<TrackKey> {
        let mut s = self.0.clone();
        // The last byte is the separator U+001F; bumping it to U+0020 bounds the subtree.
        s.pop()?;
        s.push('\u{20}');
        Some(TrackKey(s))
    }

    /// The encoded text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TrackKey {
    /// Labels joined by `/` for people; never parsed back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels = self.labels();
        if labels.is_empty() {
            return f.write_str("(untracked)");
        }
        f.write_str(&labels.join("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn label() -> impl Strategy<Value = String> {
        // Small alphabets make shared prefixes (run_7 / run_70) common; any script allowed.
        prop_oneof![
            "[a-c_7.0-]{0,4}",
            "[ab]{0,2}",
            "\\PC{0,3}",
            Just("run_7".to_owned()),
            Just("run_70".to_owned()),
        ]
    }

    fn tuple() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(label(), 0..=4)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, rng_seed: proptest::test_runner::RngSeed::Fixed(7), ..ProptestConfig::default() })]

        #[test]
        fn sorting_keys_equals_sorting_tuples(tuples in prop::collection::vec(tuple(), 0..24)) {
            let mut by_tuple = tuples.clone();
            by_tuple.sort();
            let mut by_key: Vec<(TrackKey, Vec<String>)> = tuples
                .iter()
                .map(|t| (TrackKey::encode(t).expect("no control characters"), t.clone()))
                .collect();
            by_key.sort();
            let by_key: Vec<Vec<String>> = by_key.into_iter().map(|(_, t)| t).collect();
            prop_assert_eq!(by_key, by_tuple);
        }

        #[test]
        fn key_prefix_equals_tuple_prefix(a in tuple(), b in tuple()) {
            let ka = TrackKey::encode(&a).expect("encodes");
            let kb = TrackKey::encode(&b).expect("encodes");
            prop_assert_eq!(ka.starts_with(&kb), a.starts_with(&b));
            // The range scan [kb, upper) selects exactly the keys beneath kb.
            let inside = match kb.upper() {
                Some(upper) => ka >= kb && ka < upper,
                None => true,
            };
            prop_assert_eq!(inside, a.starts_with(&b));
        }

        #[test]
        fn keys_decode_to_their_labels(a in tuple()) {
            let key = TrackKey::encode(&a).expect("encodes");
            prop_assert_eq!(key.labels(), a.iter().map(String::as_str).collect::<Vec<_>>());
            prop_assert_eq!(key.depth(), a.len());
        }

        #[test]
        fn a_label_with_a_control_character_is_refused(
            head in "[a-z]{0,3}", tail in "[a-z]{0,3}",
            c in prop_oneof![0u32..0x20, 0x7fu32..0xa0].prop_map(|c| char::from_u32(c).expect("valid")),
            at in 0usize..4
        ) {
            let bad = format!("{head}{c}{tail}");
            let mut labels = vec!["ok".to_owned(); at];
            labels.push(bad.clone());
            let err = TrackKey::encode(&labels).expect_err("refused");
            prop_assert!(matches!(&err, BadTrack::Label(BadLabel { component, .. }) if *component == at), "{err}");
            prop_assert!(err.to_string().contains("control character"));
        }
    }

    #[test]
    fn run_70_is_not_beneath_run_7() {
        let run7 = TrackKey::encode(&["run_7"]).expect("encodes");
        let run70 = TrackKey::encode(&["run_70", "p1"]).expect("encodes");
        let run7p = TrackKey::encode(&["run_7", "p1"]).expect("encodes");
        assert!(!run70.starts_with(&run7));
        assert!(run7p.starts_with(&run7));
        assert!(run7 < run7p && run7p < run70);
    }

    /// What the module documentation promises: integer components order as their text.
    #[test]
    fn integer_components_order_as_their_decimal_text() {
        let key = |run: u32| TrackKey::encode(&TrackTuple::labels(&(run,))).expect("a label");
        assert!(key(10) < key(7), "\"10\" sorts before \"7\"");
        assert!(key(7) < key(70));
        assert_eq!(TrackTuple::labels(&(true,)), vec!["true".to_owned()]);
        assert_eq!(
            TrackTuple::labels(&(-3i64, 0u8)),
            vec!["-3".to_owned(), "0".to_owned()]
        );
    }

    #[test]
    fn every_other_text_is_a_label() {
        for ok in [
            "probe.a.b",
            "run-2026-11-29",
            "プローブ",
            "zürich",
            "",
            "a b",
            "🦀",
        ] {
            TrackKey::encode(&[ok]).expect("a label");
        }
        assert!(matches!(
            TrackKey::encode(&["a", "b", "c", "d", "e"]),
            Err(BadTrack::TooDeep(5))
        ));
    }

    #[test]
    fn prefixes_hand_over_labels() {
        fn labels<T: TrackTuple, P: Prefix<T>>(p: P) -> Vec<String> {
            p.labels()
        }
        assert_eq!(labels::<(u32, String), _>((7u32,)), ["7"]);
        assert_eq!(
            labels::<(u32, String), _>((7u32, "p1".to_owned())),
            ["7", "p1"]
        );
        assert_eq!(<(u32, String, u8) as TrackTuple>::DEPTH, 3);
    }
}
