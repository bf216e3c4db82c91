// A survey is not a read until `.budget(n)` or `.fold(kind)` says which: there is no
// unbudgeted display read, so awaiting a bare survey does not compile.
use serde::{Deserialize, Serialize};
use series_archive::host::Streams;

struct App;
impl series_archive::Application for App {}

#[series_archive::stream(id = "capture", window = 64, track = (run), axis = ordinal)]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub run: String,
    pub ordinal: u64,
    pub value: f64,
}

async fn read(streams: &Streams<App>) {
    let _ = streams.survey::<Capture>(..).await;
}

fn main() {}
