//! Links the command-line binary as a position-dependent executable on Linux.
//!
//! A position-independent executable is relocated by the dynamic loader at every start: this
//! binary's 124,000 relocations dirty 2.4 MB of `.data.rel.ro`, about 600 copy-on-write page
//! faults, 2.7 ms of a one-track `survey` whose whole process takes 7.4 ms. Linked at a fixed
//! address, the same pages are read from the page cache as they are touched, and a start
//! costs 2 ms instead of 4.7 ms (`perf stat -r 20 series-archive --version`; README,
//! "Performance"). Only the binaries are linked so; the library, the tests and the examples
//! are not.
//!
//! What it gives up is address-space randomisation of the executable's own image (the
//! stack, the heap and the shared libraries stay randomised). Set `SERIES_ARCHIVE_PIE=1`
//! when building to keep the default, position-independent link, for example for a `serve`
//! exposed beyond a trusted network.

fn main() {
    println!("cargo:rerun-if-env-changed=SERIES_ARCHIVE_PIE");
    println!("cargo:rerun-if-changed=build.rs");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let pie = std::env::var_os("SERIES_ARCHIVE_PIE").is_some_and(|v| !v.is_empty() && v != "0");
    if linux && !pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
