use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096, track = (run, ordinal), axis = ordinal)]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub run: u32,
    pub ordinal: u64,
    pub value: i64,
}

fn main() {}
