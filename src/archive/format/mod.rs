//! Pure bytes ⇄ types: the manifest's frames, records and the state they prove; the data
//! and level files' Parquet encoding and digests; a stream's declaration and schemas. No
//! file is opened here (that is `io/`), and nothing here decides what to do (`plan/`).

pub mod ladder;
pub mod levels;
pub mod manifest;
pub mod physical;
pub mod segment;
pub mod spec;
