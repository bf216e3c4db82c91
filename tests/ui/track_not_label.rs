use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096, track = (run, gain))]
#[derive(Clone, Serialize, Deserialize)]
pub struct Capture {
    pub run: u32,
    pub gain: f64,
}

fn main() {}
