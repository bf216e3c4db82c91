//! The only code that touches the file system or an object store: local durable writes,
//! the lock, the manifest's files, ranged reads of local and cold blobs through the footer
//! cache, listings and deletes, and the fault points a test plugs into.
//!
//! Everything above this folder works on bytes and types (`format`), on plans (`plan`), or
//! calls in here (`engine`); `scripts/layers.py` checks that nothing else names `std::fs`,
//! `File` or `object_store`.

pub mod cache;
pub mod cold;
pub mod decoded;
pub(crate) mod durable;
pub mod faults;
pub(crate) mod local;
pub(crate) mod lock;
pub mod log;
pub mod priority;
pub mod rows;
pub(crate) mod segment;
pub mod storage;
pub mod store;
