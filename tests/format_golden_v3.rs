//! Golden files lock the cold tier's records, format version 3 (`docs/format.md`, "Version 3:
//! the cold tier").
//!
//! - `tests/golden/offload-v3.{bin,jsonl}`: an `offload` record, framed byte for byte as
//!   `manifest::log::encode` writes it (frame version 3).
//! - `tests/golden/snapshot-v3.{bin,json}`: a snapshot naming a cold file (version 3).
//! - A file that never moved serializes exactly as before (no `cold` key), so an archive that
//!   never offloads stays a version-1 or version-2 archive; a version-2 build refuses one
//!   that did (unknown version), never misreads it.
//!
//! Regenerating: `UPDATE_GOLDEN=1 cargo test --test format_golden_v3` (only for a deliberate
//! format change, which also bumps the frame version and `docs/format.md`).

#[path = "common/golden.rs"]
mod golden_files;

use golden_files::golden;
use series_archive::archive::manifest::frame::{self, Decoded};
use series_archive::archive::manifest::{
    log, Offload, Offloaded, Record, SegmentFile, Snapshot, Span, State,
};

fn offload() -> Record {
    Record::Offload(Offload {
        stream: "capture".into(),
        files: vec![
            Offloaded {
                name: 1,
                url: "s3://archive-bucket/site-a/streams/capture/rows/000000000001.parquet".into(),
            },
            Offloaded {
                name: 3,
                url: "s3://archive-bucket/site-a/streams/capture/rows/000000000003.parquet".into(),
            },
        ],
    })
}

fn file(name: u64, cold: Option<&str>) -> SegmentFile {
    SegmentFile {
        name,
        path: format!("streams/capture/rows/{name:012}.parquet"),
        bytes: 4242,
        barrier: name,
        sealed_at_ns: 1_764_442_800_000_000_000,
        footer: Span {
            offset: 1500,
            len: 2742,
            crc32c: 0x0BAD_F00D,
        },
        groups: Vec::new().into(),
        cold: cold.map(str::to_owned),
        run: None,
        format: None,
        first_level: None,
        elided: None,
    }
}

#[test]
fn the_offload_record_is_locked() {
    let record = offload();
    assert_eq!(record.version(), 3);
    let framed = log::encode(&record);
    golden(3, "tests/golden/offload-v3.bin", &framed);
    let json = serde_json::to_string(&record).expect("serializes");
    golden(
        3,
        "tests/golden/offload-v3.jsonl",
        format!("{json}\n").as_bytes(),
    );
    let Decoded::Record { payload, next } = frame::decode(&framed, 0) else {
        panic!("the golden frame decodes");
    };
    assert_eq!(next, framed.len());
    assert_eq!(
        u16::from_le_bytes([framed[4], framed[5]]),
        3,
        "frame version 3"
    );
    let back: Record = serde_json::from_slice(payload).expect("decodes");
    assert_eq!(back, record);
}

#[test]
fn a_snapshot_naming_a_cold_file_is_version_3_and_a_local_file_is_unchanged() {
    let local = serde_json::to_string(&file(1, None)).expect("serializes");
    assert!(
        !local.contains("cold"),
        "a local file has no cold key: {local}"
    );
    let cold = file(
        3,
        Some("s3://archive-bucket/site-a/streams/capture/rows/000000000003.parquet"),
    );
    let text = serde_json::to_string(&cold).expect("serializes");
    assert!(
        text.ends_with(
            r#""cold":"s3://archive-bucket/site-a/streams/capture/rows/000000000003.parquet"}"#
        ),
        "{text}"
    );
    let snapshot: Snapshot = serde_json::from_str(&format!(
        r#"{{"generation":2,"next_name":4,"barriers":3,"streams":[{{"decl":{{"id":"capture","columns":[{{"name":"value","data_type":"Int64","nullable":false}}],"track":[],"axis":null,"measured":["value"]}},"watermark":30,"next_seq":30,"files":[{local},{text}]}}]}}"#
    ))
    .expect("a snapshot with a cold file parses");
    let record = Record::Snapshot(snapshot);
    assert_eq!(
        record.version(),
        3,
        "a snapshot naming a cold file is version 3"
    );
    let framed = log::encode(&record);
    golden(3, "tests/golden/snapshot-v3.bin", &framed);
    golden(
        3,
        "tests/golden/snapshot-v3.json",
        serde_json::to_string_pretty(&record)
            .expect("serializes")
            .as_bytes(),
    );
    let mut state = State::default();
    state.apply(&record).expect("applies");
    assert_eq!(
        state.streams["capture"].files[1].cold.as_deref(),
        Some("s3://archive-bucket/site-a/streams/capture/rows/000000000003.parquet")
    );
}

#[test]
fn an_offload_record_must_name_live_local_files_at_their_own_path() {
    let mut state = State::default();
    let snapshot: Snapshot = serde_json::from_str(
        r#"{"generation":1,"next_name":2,"barriers":1,"streams":[{"decl":{"id":"capture","columns":[{"name":"value","data_type":"Int64","nullable":false}],"track":[],"axis":null,"measured":["value"]},"watermark":10,"next_seq":10,"files":[]}]}"#,
    )
    .expect("parses");
    state.apply(&Record::Snapshot(snapshot)).expect("applies");
    // No such live file: an invariant, refused.
    let err = state.apply(&offload()).expect_err("file 1 is not live");
    assert!(err.contains("not live"), "{err}");
}
