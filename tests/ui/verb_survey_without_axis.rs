// Only an axial stream can be surveyed.
use serde::{Deserialize, Serialize};
use series_archive::host::Streams;

struct App;
impl series_archive::Application for App {}

#[series_archive::stream(id = "events", window = 64, track = (kind))]
#[derive(Serialize, Deserialize)]
pub struct Event {
    pub kind: String,
    pub value: f64,
}

async fn read(streams: &Streams<App>) {
    let _ = streams.survey::<Event>(..).budget(400).await;
}

fn main() {}
