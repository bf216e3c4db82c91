// `.track(..)` exists only on tracked streams: selecting a partition of a stream that
// declares none does not compile.
use serde::{Deserialize, Serialize};
use series_archive::host::Streams;

struct App;
impl series_archive::Application for App {}

#[series_archive::stream(id = "ticks", window = 64, axis = ordinal)]
#[derive(Serialize, Deserialize)]
pub struct Tick {
    pub ordinal: u64,
    pub value: f64,
}

async fn read(streams: &Streams<App>) {
    let _ = streams.query::<Tick>(..).track(("a".to_string(),)).await;
}

fn main() {}
