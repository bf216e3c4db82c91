//! Golden files: what this build writes, compared byte for byte with what a format version
//! locked. `UPDATE_GOLDEN=1` rewrites them, only together with a deliberate format change
//! (a frame version bump and `docs/format.md`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Whether the run rewrites golden files instead of checking them.
pub fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

/// A path under the crate.
pub fn crate_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Checks `actual` against the golden file at `relative`, which format `version` locked.
pub fn golden(version: u16, relative: &str, actual: &[u8]) {
    let path = crate_path(relative);
    if updating() {
        std::fs::write(&path, actual).expect("write the golden file");
        return;
    }
    let expected = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; generate it with UPDATE_GOLDEN=1", path.display()));
    assert!(
        expected == actual,
        "{} differs from what this build writes: the version-{version} format changed; bump \
         the frame version and docs/format.md instead.\ngolden:  {}\nwritten: {}",
        path.display(),
        String::from_utf8_lossy(&expected),
        String::from_utf8_lossy(actual)
    );
}

/// The first ```LANG block of docs/format.md after the heading `section` (e.g. `"## A Python
/// reader"`): the snippet the page documents, run by the tests exactly as written.
pub fn docs_block(section: &str, lang: &str) -> String {
    let page = std::fs::read_to_string(crate_path("docs/format.md")).expect("docs/format.md");
    let at = page
        .find(&format!("\n{section}\n"))
        .unwrap_or_else(|| panic!("docs/format.md has no section {section:?}"));
    let fence = format!("```{lang}\n");
    let start = at
        + page[at..]
            .find(&fence)
            .unwrap_or_else(|| panic!("no {lang} block under {section:?}"))
        + fence.len();
    let len = page[start..].find("```").expect("the block ends");
    page[start..start + len].to_owned()
}

/// A span (and its CRC-32C) as the hand-built records of the golden tests name one.
pub fn span(offset: u64, len: u64, crc32c: u32) -> series_archive::archive::manifest::Span {
    series_archive::archive::manifest::Span {
        offset,
        len,
        crc32c,
    }
}

/// Runs the docs' Python reader (`## A Python reader`) on the archive at `root` for the
/// capture stream's track `run/probe`, and asserts it lists `files` (each verified) with
/// exactly the slices their entries give that track.
pub fn python_reader_lists(
    root: &Path,
    files: &[series_archive::archive::manifest::SegmentFile],
    [run, probe]: [&str; 2],
) {
    let script = root.join("committed_files.py");
    std::fs::write(&script, docs_block("## A Python reader", "python")).expect("write");
    let output = std::process::Command::new("python3")
        .arg(&script)
        .args([root.to_str().expect("utf-8"), "capture", run, probe])
        .output()
        .expect("python3 runs the docs' reader");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed = String::from_utf8(output.stdout).expect("utf-8");
    let mut expected = String::new();
    for file in files {
        expected.push_str(&format!("{} ok\n", file.path));
        if file.format == Some(series_archive::archive::manifest::ROWS_FORMAT) {
            // Version 11: the row groups whose first..last holds the track.
            let wanted = [run.to_string(), probe.to_string()];
            for (g, _, rows) in file.row_groups() {
                let slices: Vec<_> = file
                    .groups
                    .iter()
                    .filter(|e| e.slice.is_some_and(|s| s.group as usize == g))
                    .collect();
                let (first, last) = (&slices[0].track, &slices[slices.len() - 1].track);
                if first[..] <= wanted[..] && wanted[..] <= last[..] {
                    let lo = slices.iter().map(|e| e.position[0]).min().unwrap_or(0);
                    let hi = slices.iter().map(|e| e.position[1]).max().unwrap_or(0);
                    expected.push_str(&format!(
                        "  group {g} {}..{} tracks={} rows={rows} positions={lo}..={hi}\n",
                        first.join("/"),
                        last.join("/"),
                        slices.len()
                    ));
                }
            }
            continue;
        }
        for g in file.groups.iter().filter(|g| g.track[..] == [run, probe]) {
            let slice = g.slice.expect("a slice");
            expected.push_str(&format!(
                "  group {} from row {} {run}/{probe} rows={} positions={}..={}\n",
                slice.group, slice.row, g.rows, g.position[0], g.position[1]
            ));
        }
    }
    assert!(
        listed.starts_with(&expected),
        "listed:\n{listed}\nexpected:\n{expected}"
    );
}

/// A barrier record of the capture stream writing `file` alone, as the format tests frame
/// one (watermark and `next_seq` 15).
pub fn capture_barrier(
    file: series_archive::archive::manifest::SegmentFile,
    sealed_at_ns: u64,
) -> series_archive::archive::manifest::Record {
    use series_archive::archive::manifest::{Barrier, BarrierStream, Record};
    Record::Barrier(Barrier {
        barrier: 1,
        sealed_at_ns,
        next_name: 2,
        streams: vec![BarrierStream {
            stream: "capture".into(),
            watermark: 15,
            next_seq: 15,
            file,
            levels: None,
            levels_from: None,
            levels_deferred: false,
        }],
    })
}

/// The current manifest generation of the archive at `root`: its bytes, and each record's
/// kind (`"snapshot"`, `"barrier"`, ...) and frame version, in order. Every byte must belong
/// to a record that decodes.
pub fn generation_records(root: &Path) -> (Vec<u8>, Vec<(String, u16)>) {
    use series_archive::archive::manifest::frame::{self, Decoded};
    let generation = std::fs::read_dir(root.join("manifest"))
        .expect("manifest")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .max()
        .expect("a generation");
    let bytes = std::fs::read(&generation).expect("read");
    let mut at = 0;
    let mut out = Vec::new();
    while let Decoded::Record { payload, next } = frame::decode(&bytes, at) {
        let head: serde_json::Value = serde_json::Deserializer::from_slice(payload)
            .into_iter()
            .next()
            .expect("a record")
            .expect("JSON");
        let kind = head["record"].as_str().expect("a record kind").to_owned();
        out.push((kind, u16::from_le_bytes([bytes[at + 4], bytes[at + 5]])));
        at = next;
    }
    assert_eq!(at, bytes.len(), "every record decodes");
    (bytes, out)
}

/// An entry of the docs' examples (versions 9 and later): track `(run, probe)`, `rows` rows
/// from position `first` (`_seq` one less), the axis from `axis` by 10, in `span`, a slice
/// `(row group, first row)` of a packed file or none.
pub fn example_entry(
    (run, probe): (&str, &str),
    rows: u64,
    (first, axis): (u64, u64),
    span: series_archive::archive::manifest::Span,
    slice: Option<(u32, u64)>,
) -> series_archive::archive::manifest::GroupEntry {
    series_archive::archive::manifest::GroupEntry {
        track: [run, probe].map(String::from).into(),
        rows,
        position: [first, first + rows - 1],
        axis: Some([axis, axis + (rows - 1) * 10]),
        seq: [first - 1, first + rows - 2],
        span,
        last_track: None,
        slice: slice.map(|(group, row)| series_archive::archive::manifest::Slice { group, row }),
    }
}

/// The docs' example packed file (versions 9 to 11): four tracks of the capture stream, three
/// slices of row group 0 and one of row group 1, its entry of `format`.
pub fn example_packed_file(format: u16) -> series_archive::archive::manifest::SegmentFile {
    use series_archive::archive::manifest::{SegmentFile, Span};
    let entry = |probe: &str, rows: u64, first: u64, axis: u64, span: Span, slice: (u32, u64)| {
        example_entry(("run_0", probe), rows, (first, axis), span, Some(slice))
    };
    let (g0, g1) = (span(4, 700, 0x0A0B_0C0D), span(704, 300, 0x0102_0304));
    SegmentFile {
        name: 1,
        path: "streams/capture/rows/000000000001.parquet".into(),
        bytes: 2048,
        barrier: 1,
        sealed_at_ns: 1_764_442_800_000_000_000,
        footer: span(1004, 1044, 0x1122_3344),
        groups: vec![
            entry("p1", 3, 1, 0, g0, (0, 0)),
            entry("p2", 2, 4, 30, g0, (0, 3)),
            entry("p3", 4, 6, 50, g0, (0, 5)),
            entry("p4", 6, 10, 90, g1, (1, 0)),
        ]
        .into(),
        cold: None,
        run: None,
        format: Some(format),
        first_level: None,
        elided: None,
    }
}
