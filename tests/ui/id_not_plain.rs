use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "cap ture", window = 4096)]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub value: i64,
}

#[series_archive::stream(id = "", window = 4096)]
#[derive(Serialize, Deserialize)]
pub struct Empty {
    pub value: i64,
}

fn main() {}
