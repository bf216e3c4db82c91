use serde::{Deserialize, Serialize};

#[series_archive::stream(window = 4096, track = (run))]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub run: u32,
    pub value: i64,
}

fn main() {}
