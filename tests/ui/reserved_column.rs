use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096)]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub _position: u64,
    pub value: i64,
}

#[series_archive::stream(id = "other", window = 4096)]
#[derive(Serialize, Deserialize)]
pub struct Other {
    pub value: i64,
    pub _seq: u64,
}

fn main() {}
