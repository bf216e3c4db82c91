use serde::{Deserialize, Serialize};

/// Looks like a tick, is not a u64.
pub type Tick = u32;

#[series_archive::stream(id = "capture", window = 4096, axis = ordinal)]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub ordinal: Tick,
    pub value: i64,
}

fn main() {}
