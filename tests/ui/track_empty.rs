use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096, track = ())]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub run: u32,
    pub value: i64,
}

fn main() {}
