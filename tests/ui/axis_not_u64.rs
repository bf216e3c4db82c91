use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096, axis = ordinal)]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub ordinal: i64,
    pub value: i64,
}

#[series_archive::stream(id = "wrapped", window = 4096, axis = ordinal)]
#[derive(Serialize, Deserialize)]
pub struct Wrapped {
    pub ordinal: Option<u64>,
}

fn main() {}
