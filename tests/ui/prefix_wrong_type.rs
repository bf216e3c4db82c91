use serde::{Deserialize, Serialize};

use series_archive::{Prefix, Tracked};

/// The labels of a selection narrowing a read of `T`.
fn labels<T: Tracked, P: Prefix<T::Track>>(p: P) -> Vec<String> {
    p.labels()
}

#[series_archive::stream(id = "capture", window = 4096, track = (run, probe), axis = ordinal)]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub run: u32,
    pub probe: String,
    pub ordinal: u64,
}

fn main() {
    // run is a u32, not a String.
    let _ = labels::<Capture, _>(("x".to_string(),));
}
