use serde::{Deserialize, Serialize};

#[series_archive::stream(id = "tuple", window = 4096)]
#[derive(Serialize, Deserialize)]
pub struct Tuple(pub u32, pub i64);

#[series_archive::stream(id = "kind", window = 4096)]
#[derive(Serialize, Deserialize)]
pub enum Kind {
    Run(u32),
}

#[series_archive::stream(id = "bits", window = 4096)]
pub union Bits {
    pub int: u64,
    pub float: f64,
}

fn main() {}
