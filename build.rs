//! Links the command-line binary as a position-dependent executable on Linux (glibc).
//!
//! A position-independent executable is relocated by the dynamic loader at every start: this
//! binary's 124,000 relocations dirty 2.4 MB of `.data.rel.ro`, about 600 copy-on-write page
//! faults. Linked at a fixed address, the same pages are read from the page cache as they are
//! touched: `series-archive --version` takes 1.6–1.7 ms instead of 3.1–3.3 ms, and a one-track
//! `survey` of a 100,000-track archive 4.3 ms instead of 5.5 ms (`perf stat -r 20`; README,
//! "Performance"). Only the binaries (with their own unit-test harness) are linked so; the
//! library, the integration tests and the examples are not.
//!
//! What it gives up is address-space randomisation of the executable's own image (the
//! stack, the heap and the shared libraries stay randomised). Set `SERIES_ARCHIVE_PIE=1`
//! when building to keep the default, position-independent link, for example for a `serve`
//! exposed beyond a trusted network. A static build (`+crt-static`, which links a static PIE)
//! and any target but Linux with glibc keep the default link too.

fn main() {
    println!("cargo:rerun-if-env-changed=SERIES_ARCHIVE_PIE");
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let linux_gnu = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let static_crt = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    let pie = std::env::var_os("SERIES_ARCHIVE_PIE").is_some_and(|v| !v.is_empty() && v != "0");
    if linux_gnu && !static_crt && !pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
