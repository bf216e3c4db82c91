// A selection of the wrong component type implements no Prefix of the declaration.
use serde::{Deserialize, Serialize};
use series_archive::host::Streams;

struct App;
impl series_archive::Application for App {}

#[series_archive::stream(id = "capture", window = 64, track = (run, probe), axis = ordinal)]
#[derive(Serialize, Deserialize)]
pub struct Capture {
    pub run: String,
    pub probe: u32,
    pub ordinal: u64,
}

async fn read(streams: &Streams<App>) {
    // run is text, not a number; and the track is two deep, not three.
    let _ = streams.survey::<Capture>(..).track((7u32,)).budget(400).await;
    let _ = streams
        .seal::<Capture>()
        .track(("r".to_string(), 1u32, 2u32))
        .await;
}

fn main() {}
