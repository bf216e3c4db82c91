use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 0)]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub value: i64,
}

fn main() {}
