use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096, id = "again")]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub value: i64,
}

fn main() {}
