use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "capture", window = 4096, track = (a, b, c, d, e))]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub a: u32,
    pub b: u32,
    pub c: u32,
    pub d: u32,
    pub e: u32,
}

fn main() {}
