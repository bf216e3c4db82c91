use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096, track = (run))]
#[derive(Serialize, Deserialize)]
pub struct Capture<T> {
    pub run: u32,
    pub value: T,
}

fn main() {}
