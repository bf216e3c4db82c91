use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096, track = (run, probe, run))]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub run: u32,
    pub probe: String,
    pub value: i64,
}

fn main() {}
