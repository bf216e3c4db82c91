// A custom track component type cannot be a `Label`: the served tier stores a component's
// column and derives its label from it, so a type labelling itself differently would make
// every narrowed read beneath the window come back empty.
use std::borrow::Cow;

struct Probe(u8);

impl series_archive::Label for Probe {
    fn label(&self) -> Cow<'_, str> {
        Cow::Owned(format!("probe-{}", self.0))
    }
}

fn main() {}
