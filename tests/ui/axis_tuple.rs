use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096, axis = (ordinal))]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub ordinal: u64,
    pub value: i64,
}

fn main() {}
