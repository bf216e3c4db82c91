//! `#[stream]` declarations: the generated consts and methods, and the refusals (trybuild).

use serde::{Deserialize, Serialize};
use series_archive::{Axial, Definition, Prefix, Stream, TrackTuple, Tracked};
use std::borrow::Cow;

/// The labels of a selection narrowing a read of `T`: compiles only for a prefix of `T::Track`.
fn labels<T: Tracked, P: Prefix<T::Track>>(p: P) -> Vec<String> {
    p.labels()
}

/// The full label tuple of one row.
fn row_labels<T: Tracked>(row: &T) -> Vec<String> {
    row.track().labels()
}

/// The spec's example: two-deep track and an axis.
#[series_archive::stream(id = "capture", window = 4096, track = (run, probe), axis = ordinal)]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Capture {
    pub run: u32,
    pub probe: String,
    pub ordinal: u64,
    pub value: i64,
}

/// One component written without a trailing comma.
#[series_archive::stream(id = "by-probe", window = 16, track = (probe))]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByProbe {
    pub probe: String,
    pub reading: f64,
}

/// One component written with a trailing comma; keys in another order.
#[series_archive::stream(axis = tick, track = (run,), window = 1, id = "by_run")]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByRun {
    pub tick: u64,
    pub run: u32,
}

/// Four deep, components in an order other than the fields', one of them a raw identifier.
#[series_archive::stream(id = "Deep4", window = 128, track = (site, r#type, shard, live))]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Deep {
    pub live: bool,
    pub shard: u16,
    pub site: String,
    pub r#type: i32,
    pub payload: Vec<u8>,
}

/// A type alias of u64 is an axis.
type Tick = u64;

/// Untracked, with an axis.
#[series_archive::stream(id = "heartbeat", window = 8, axis = at)]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Heartbeat {
    pub at: Tick,
    pub ok: bool,
}

/// Neither tracked nor axial.
#[series_archive::stream(id = "log", window = 32)]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Log {
    pub line: String,
}

fn capture() -> Capture {
    Capture {
        run: 7,
        probe: "p".to_owned(),
        ordinal: 42,
        value: -3,
    }
}

#[test]
fn depth_two_with_axis() {
    assert_eq!(Capture::ID, "capture");
    assert_eq!(Capture::WINDOW, 4096);
    assert_eq!(Capture::TRACK_FIELDS, &["run", "probe"]);
    assert_eq!(Capture::AXIS_FIELD, Some("ordinal"));
    assert_eq!(<Capture as Tracked>::TRACK, &["run", "probe"]);
    assert_eq!(<Capture as Axial>::AXIS, "ordinal");
    assert_eq!(<<Capture as Tracked>::Track as TrackTuple>::DEPTH, 2);

    let row = capture();
    let track: (u32, String) = row.track();
    assert_eq!(track, (7, "p".to_owned()));
    assert_eq!(row.axis(), 42);
    assert_eq!(row_labels(&row), ["7", "p"]);
    assert_eq!(
        Capture::definition(),
        Definition {
            id: Cow::Borrowed("capture"),
            window: 4096,
            track: vec![Cow::Borrowed("run"), Cow::Borrowed("probe")],
            axis: Some(Cow::Borrowed("ordinal")),
        }
    );
    assert_eq!(
        Capture::definition(),
        Definition::dynamic(
            "capture",
            4096,
            ["run".to_owned(), "probe".to_owned()],
            Some("ordinal".to_owned())
        )
    );
}

#[test]
fn prefixes_of_the_generated_track() {
    assert_eq!(labels::<Capture, _>((7u32,)), ["7"]);
    assert_eq!(labels::<Capture, _>((7u32, "p".to_string())), ["7", "p"]);
    assert_eq!(labels::<ByProbe, _>(("p".to_string(),)), ["p"]);
    assert_eq!(labels::<ByRun, _>((9u32,)), ["9"]);
    assert_eq!(
        labels::<Deep, _>(("eu".to_string(), -1i32, 3u16, true)),
        ["eu", "-1", "3", "true"]
    );
    assert_eq!(labels::<Deep, _>(("eu".to_string(), -1i32)), ["eu", "-1"]);
}

#[test]
fn depth_one_without_trailing_comma() {
    assert_eq!(ByProbe::ID, "by-probe");
    assert_eq!(ByProbe::WINDOW, 16);
    assert_eq!(ByProbe::TRACK_FIELDS, &["probe"]);
    assert_eq!(ByProbe::AXIS_FIELD, None);
    assert_eq!(<ByProbe as Tracked>::TRACK, &["probe"]);
    let row = ByProbe {
        probe: "p1".to_owned(),
        reading: 0.5,
    };
    let track: (String,) = row.track();
    assert_eq!(track, ("p1".to_owned(),));
    assert_eq!(row_labels(&row), ["p1"]);
    assert_eq!(
        ByProbe::definition(),
        Definition::dynamic("by-probe", 16, ["probe".to_owned()], None)
    );
}

#[test]
fn depth_one_with_trailing_comma() {
    assert_eq!(ByRun::ID, "by_run");
    assert_eq!(ByRun::WINDOW, 1);
    assert_eq!(ByRun::TRACK_FIELDS, &["run"]);
    assert_eq!(ByRun::AXIS_FIELD, Some("tick"));
    let row = ByRun { tick: 5, run: 70 };
    let track: (u32,) = row.track();
    assert_eq!(track, (70,));
    assert_eq!(row.axis(), 5);
    assert_eq!(<ByRun as Axial>::AXIS, "tick");
    assert_eq!(
        ByRun::definition(),
        Definition::dynamic("by_run", 1, ["run".to_owned()], Some("tick".to_owned()))
    );
}

#[test]
fn depth_four_in_declared_order() {
    assert_eq!(Deep::ID, "Deep4");
    assert_eq!(Deep::TRACK_FIELDS, &["site", "type", "shard", "live"]);
    assert_eq!(<Deep as Tracked>::TRACK, &["site", "type", "shard", "live"]);
    assert_eq!(Deep::AXIS_FIELD, None);
    assert_eq!(<<Deep as Tracked>::Track as TrackTuple>::DEPTH, 4);
    let row = Deep {
        live: false,
        shard: 2,
        site: "eu".to_owned(),
        r#type: -9,
        payload: vec![1, 2],
    };
    let track: (String, i32, u16, bool) = row.track();
    assert_eq!(track, ("eu".to_owned(), -9, 2, false));
    assert_eq!(row_labels(&row), ["eu", "-9", "2", "false"]);
    // The row is untouched by taking its track.
    assert_eq!(row.site, "eu");
    assert_eq!(row.payload, [1, 2]);
}

#[test]
fn untracked_with_aliased_axis() {
    assert_eq!(Heartbeat::ID, "heartbeat");
    assert_eq!(Heartbeat::WINDOW, 8);
    assert!(Heartbeat::TRACK_FIELDS.is_empty());
    assert_eq!(Heartbeat::AXIS_FIELD, Some("at"));
    let row = Heartbeat { at: 11, ok: true };
    assert_eq!(row.axis(), 11);
    assert_eq!(
        Heartbeat::definition(),
        Definition::dynamic("heartbeat", 8, [], Some("at".to_owned()))
    );
}

#[test]
fn untracked_and_axis_less() {
    assert_eq!(Log::ID, "log");
    assert_eq!(Log::WINDOW, 32);
    assert!(Log::TRACK_FIELDS.is_empty());
    assert_eq!(Log::AXIS_FIELD, None);
    assert_eq!(
        Log::definition(),
        Definition {
            id: Cow::Borrowed("log"),
            window: 32,
            track: Vec::new(),
            axis: None,
        }
    );
    // The struct is emitted unchanged.
    let row = Log {
        line: "hello".to_owned(),
    };
    assert_eq!(row.line, "hello");
}

#[test]
fn refusals() {
    // The refusals are compiled as a user's crate is, by plain rustc. `.ci/run` builds the
    // tests with clippy as the workspace's compiler (RUSTC_WORKSPACE_WRAPPER), and trybuild's
    // cargo inherits the environment: under clippy-driver rustc prints some paths in the
    // messages differently (`std::string::String` for `String`). (Edition 2021: std's own
    // lock guards the environment against the other tests' reads.)
    std::env::remove_var("RUSTC_WORKSPACE_WRAPPER");
    std::env::remove_var("CLIPPY_ARGS");
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
