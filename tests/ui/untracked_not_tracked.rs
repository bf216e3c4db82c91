use serde::{Deserialize, Serialize};

use series_archive::{Axial, Tracked};

/// Narrows by track: only a tracked stream can.
fn narrow<T: Tracked>(row: &T) -> Vec<String> {
    series_archive::TrackTuple::labels(&row.track())
}

/// Surveys by axis: only an axial stream can.
fn survey<T: Axial>(row: &T) -> u64 {
    row.axis()
}

#[series_archive::stream(id = "log", window = 32)]
#[derive(Serialize, Deserialize)]
pub struct Log {
    pub line: String,
}

fn main() {
    let row = Log {
        line: String::new(),
    };
    let _ = narrow(&row);
    let _ = survey(&row);
}
