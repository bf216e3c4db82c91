//! Restoring barriers a damaged manifest lost, from the files they wrote, where the evidence
//! is whole.
//!
//! A barrier's data file (and its level partials) is in place before its record is appended,
//! so a manifest that lost acknowledged barriers usually still has their files. A file is
//! taken back only when it proves itself: decoded and encoded again exactly as a barrier
//! encodes it (same name, same row-group bound, the level partials computed from the same
//! rows), it must come out **byte for byte** the file on disk, level file included; its rows
//! must continue the stream's `_seq` exactly where the state before it stops; and the
//! barrier record rebuilt from the encoding must apply to that state. The first file that
//! fails any of these ends its stream's chain: it and everything after it stay evidence (a
//! repair quarantines them). See `docs/format.md`, "Repair".

use crate::archive::error::Result;
use crate::archive::format::levels;
use crate::archive::format::manifest::{
    Barrier, BarrierStream, GroupEntry, Record, SegmentFile, Span, State,
};
use crate::archive::format::segment::{self, TrackRows};
use crate::archive::format::spec::stored_schema;
use crate::archive::io::local;
use crate::archive::layout::STREAMS_DIR;
use arrow::array::{Array, RecordBatch, StringArray, UInt64Array};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use std::collections::BTreeSet;
use std::path::Path;

/// A barrier rebuilt from its files, ready to apply.
#[derive(Clone, Debug)]
pub struct RestoredBarrier {
    /// The rebuilt record.
    pub record: Barrier,
    /// Its files, relative to the root.
    pub files: Vec<String>,
    /// Rows it restores.
    pub rows: u64,
}

/// The barriers that can be restored on top of `state`, in order, and why restoring stopped
/// where it did (when files were left).
pub(crate) fn restorable(
    root: &Path,
    state: &State,
    group_rows: usize,
) -> Result<(Vec<RestoredBarrier>, Vec<String>)> {
    // Candidate data files, by name across streams (names are claimed in barrier order).
    let mut candidates = Vec::new();
    for id in state.streams.keys() {
        for (name, _, _) in crate::archive::engine::beyond::orphans_past(root, state, id)? {
            candidates.push((name, id.clone()));
        }
    }
    candidates.sort();
    let mut state = state.clone();
    let mut restored = Vec::new();
    let mut stopped = Vec::new();
    let mut broken: BTreeSet<String> = BTreeSet::new();
    for (name, id) in candidates {
        if broken.contains(&id) || name < state.next_name {
            continue;
        }
        match rebuild(root, &state, &id, name, group_rows) {
            Ok(barrier) => {
                let record = Record::Barrier(barrier.record.clone());
                if let Err(e) = state.apply(&record) {
                    stopped.push(format!(
                        "stream {id}: {}: the rebuilt record does not apply ({e})",
                        segment::data_file_name(name)
                    ));
                    broken.insert(id);
                    continue;
                }
                restored.push(barrier);
            }
            Err(why) => {
                stopped.push(format!(
                    "stream {id}: {}: {why}",
                    segment::data_file_name(name)
                ));
                broken.insert(id);
            }
        }
    }
    Ok((restored, stopped))
}

/// A decoded row group cut into its runs of one track each (a packed group holds several,
/// in key order), each with its labels rendered as staging renders them.
fn runs_of(
    batch: &RecordBatch,
    track: &[String],
) -> std::result::Result<Vec<(Vec<String>, RecordBatch)>, String> {
    let texts: Vec<arrow::array::ArrayRef> = track
        .iter()
        .map(|name| {
            let column = batch
                .column_by_name(name)
                .ok_or_else(|| format!("no track column {name:?}"))?;
            cast(column, &DataType::Utf8).map_err(|e| e.to_string())
        })
        .collect::<std::result::Result<_, String>>()?;
    let texts: Vec<&StringArray> = texts
        .iter()
        .map(|t| {
            t.as_any()
                .downcast_ref::<StringArray>()
                .ok_or("a label does not render as text")
        })
        .collect::<std::result::Result<_, _>>()?;
    let labels =
        |row: usize| -> Vec<String> { texts.iter().map(|t| t.value(row).to_owned()).collect() };
    let same = |a: usize, b: usize| texts.iter().all(|t| t.value(a) == t.value(b));
    let mut runs = Vec::new();
    let mut start = 0;
    for row in 1..=batch.num_rows() {
        if row == batch.num_rows() || !same(start, row) {
            runs.push((labels(start), batch.slice(start, row - start)));
            start = row;
        }
    }
    Ok(runs)
}

fn span(batch: &RecordBatch, name: &str) -> std::result::Result<[u64; 2], String> {
    let c = batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
        .filter(|c| !c.is_empty())
        .ok_or_else(|| format!("no {name} values"))?;
    Ok([c.value(0), c.value(c.len() - 1)])
}

/// Rebuilds the barrier that wrote data file `name` of stream `id` on top of `state`.
fn rebuild(
    root: &Path,
    state: &State,
    id: &str,
    name: u64,
    group_rows: usize,
) -> std::result::Result<RestoredBarrier, String> {
    let stream = state.streams.get(id).ok_or("the stream is not declared")?;
    let decl = &stream.decl;
    let schema = stored_schema(decl)?;
    let rel = format!("{STREAMS_DIR}/{id}/rows/{}", segment::data_file_name(name));
    let path = root.join(&rel);
    let sealed_at_ns = local::modified_ns(&path);
    let (shared, tracks) = tracks_of(&path, decl, &schema)?;
    let first_seq = tracks.iter().map(|t| t.seq[0]).min().ok_or("no rows")?;
    if first_seq != stream.next_seq {
        return Err(format!(
            "its rows start at _seq {first_seq}, not where the stream stands ({})",
            stream.next_seq
        ));
    }
    let next_seq = tracks.iter().map(|t| t.seq[1]).max().unwrap_or(0) + 1;
    let watermark = tracks.iter().map(|t| t.position[1]).max().unwrap_or(0);
    let bounded: Vec<TrackRows> = tracks
        .iter()
        .flat_map(|t| segment::bounded(&t.labels, &t.batch, group_rows, decl.axis.as_deref()))
        .collect();
    let (again, footer, entries) =
        segment::encode_packed(id, &schema, name, &bounded, group_rows, 1)
            .map_err(|e| e.to_string())?;
    let rows: u64 = entries.iter().map(|e| e.rows).sum();
    let format = crate::archive::format::manifest::packed_format(
        rows,
        entries.len() as u64,
        crate::archive::format::physical::PACKED_FILE_VERSION,
    );
    if again[..] != shared[..] {
        return Err(
            "encoded again from its rows it is not the same bytes (damaged, or written by another build or row-group bound)"
                .into(),
        );
    }
    // The entry a barrier records for a file it wrote.
    let entry = |name: u64, path: String, len: usize, footer, groups, format| SegmentFile {
        name,
        path,
        bytes: len as u64,
        barrier: state.barriers + 1,
        sealed_at_ns,
        footer,
        groups: std::sync::Arc::new(groups),
        cold: None,
        run: None,
        format: Some(format),
        first_level: None,
        elided: None,
    };
    let file = entry(name, rel.clone(), shared.len(), footer, entries, format);
    let mut files = vec![rel];
    let mut next_name = name + 1;
    // The levels as the barrier judged them on the state before it (the first stored level
    // it decided, whether it deferred its partials): under this build's rule, or under the
    // earlier one when only that one makes what the barrier left (sealed by a build before
    // 2026-12-07).
    let level_rel = format!(
        "{STREAMS_DIR}/{id}/levels/{}",
        segment::data_file_name(name + 1)
    );
    let mut judged = None;
    for rule in [levels::LEVEL_RULE, levels::LEVEL_RULE_EARLIER] {
        let choice = crate::archive::engine::seal::stored_levels_under(stream, &tracks, rule);
        if judged.as_ref().is_some_and(
            |(earlier, _): &(crate::archive::engine::seal::LevelChoice, _)| {
                (earlier.decided, earlier.deferred) == (choice.decided, choice.deferred)
            },
        ) {
            continue;
        }
        let made = levels_as_sealed(root, &level_rel, decl, &tracks, name, &choice);
        let matched = made.is_ok();
        judged = Some((choice, made));
        if matched {
            break;
        }
    }
    let (choice, made) = judged.ok_or("no rule judged its levels")?;
    let levels = made?.map(|(found, footer, entries, first_level)| {
        let mut file = entry(
            name + 1,
            level_rel.clone(),
            found,
            footer,
            entries,
            crate::archive::format::physical::FILE_VERSION,
        );
        file.first_level = first_level;
        file
    });
    if levels.is_some() {
        next_name += 1;
        files.push(level_rel);
    }
    let rows = file.groups.iter().map(|g| g.rows).sum();
    Ok(RestoredBarrier {
        record: Barrier {
            barrier: state.barriers + 1,
            sealed_at_ns,
            next_name,
            streams: vec![BarrierStream {
                stream: id.to_owned(),
                watermark,
                next_seq,
                file,
                levels,
                levels_from: choice.decided,
                levels_deferred: choice.deferred,
            }],
        },
        files,
        rows,
    })
}

/// A barrier's level file as found: its length, footer, entries and first level.
type SealedLevels = (usize, Span, Vec<GroupEntry>, Option<u8>);

/// A barrier's level partials as `choice` makes them from its rows, checked against the
/// file at `rel`: its length, footer, entries and first level when they are the bytes found
/// (under this build's codec or the earlier one, which compressed every row group), `None`
/// when the choice writes none and none is there.
fn levels_as_sealed(
    root: &Path,
    rel: &str,
    decl: &crate::archive::format::manifest::StreamDecl,
    tracks: &[TrackRows],
    name: u64,
    choice: &crate::archive::engine::seal::LevelChoice,
) -> std::result::Result<Option<SealedLevels>, String> {
    let path = root.join(rel);
    let partials = if choice.deferred {
        None
    } else {
        levels::barrier_partials(decl, tracks, name + 1, choice.first).map_err(|e| e.to_string())?
    };
    let Some(partials) = partials else {
        // A barrier that writes no partials leaves no level file under its next name.
        return match local::len(&path) {
            Ok(_) => Err(format!(
                "its level partials {rel} are there, but its rows make none"
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("its level partials {rel} cannot be checked: {e}")),
        };
    };
    let first_level = partials.first_level;
    let (want, footer, entries) = partials.encoded;
    let found =
        local::read(&path).map_err(|e| format!("its level partials {rel} cannot be read: {e}"))?;
    if found == want {
        return Ok(Some((found.len(), footer, entries, first_level)));
    }
    // Sealed by a build before 2026-12-06, which compressed every row group of a barrier's
    // partials (`segment::PLAIN_GROUP_ROWS`): the same rows make those bytes under that rule.
    levels::barrier_partials_under(
        decl,
        tracks,
        name + 1,
        choice.first,
        segment::COMPRESS_EVERY_GROUP,
    )
    .map_err(|e| e.to_string())?
    .map(|p| p.encoded)
    .filter(|(bytes, _, _)| *bytes == found)
    .map(|(_, footer, entries)| Some((found.len(), footer, entries, first_level)))
    .ok_or_else(|| format!("its level partials {rel} are not what its rows make"))
}

/// A barrier's data file at `path`, its bytes and its rows as the barrier's tracks: row
/// groups in file order, joined per track (a barrier writes each track's rows as adjacent
/// groups, tracks in key order).
fn tracks_of(
    path: &Path,
    decl: &crate::archive::format::manifest::StreamDecl,
    schema: &arrow::datatypes::SchemaRef,
) -> std::result::Result<(bytes::Bytes, Vec<TrackRows>), String> {
    let bytes = local::read(path).map_err(|e| format!("cannot be read: {e}"))?;
    // The footer is decoded once and the bytes shared: each group's reader costs its group.
    let shared = bytes::Bytes::from(bytes);
    let metadata = ArrowReaderMetadata::load(&shared, ArrowReaderOptions::default())
        .map_err(|e| format!("not a Parquet file: {e}"))?;
    let groups = metadata.metadata().num_row_groups();
    let mut tracks: Vec<TrackRows> = Vec::new();
    let mut pending: Vec<(Vec<String>, Vec<RecordBatch>)> = Vec::new();
    for index in 0..groups {
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(shared.clone(), metadata.clone())
                .with_row_groups(vec![index])
                .build()
                .map_err(|e| format!("row group {index}: {e}"))?;
        let batches: Vec<RecordBatch> = reader
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| format!("row group {index}: {e}"))?;
        let read_schema = batches
            .first()
            .map(|b| b.schema())
            .ok_or(format!("row group {index} is empty"))?;
        let batch = arrow::compute::concat_batches(&read_schema, &batches)
            .map_err(|e| e.to_string())
            .and_then(|b| crate::archive::format::physical::from_disk(b, schema))
            .map_err(|e| format!("row group {index} does not hold the declared columns: {e}"))?;
        for (labels, run) in runs_of(&batch, &decl.track)? {
            match pending.last_mut() {
                Some((last, parts)) if *last == labels => parts.push(run),
                _ => pending.push((labels, vec![run])),
            }
        }
    }
    for (labels, parts) in pending {
        let batch = arrow::compute::concat_batches(schema, &parts).map_err(|e| e.to_string())?;
        tracks.push(TrackRows {
            position: span(&batch, crate::archive::format::spec::POSITION_COLUMN)?,
            seq: span(&batch, crate::archive::format::spec::SEQ_COLUMN)?,
            axis: decl.axis.as_deref().map(|a| span(&batch, a)).transpose()?,
            labels: labels.into(),
            batch: batch.into(),
        });
    }
    Ok((shared, tracks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::format::levels::Ladder;
    use crate::archive::{Archive, Config, StreamSpec};
    use arrow::array::{Float64Array, StringArray, UInt64Array};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    type Failed = Box<dyn std::error::Error>;

    /// Rows `from..from + n` of three hosts in turn, row `i` at axis `step × i`.
    fn rows(
        schema: &arrow::datatypes::SchemaRef,
        from: u64,
        n: u64,
        step: u64,
    ) -> (RecordBatch, Vec<u64>) {
        let i: Vec<u64> = (from..from + n).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(
                    i.iter().map(|i| format!("h{}", i % 3)),
                )),
                Arc::new(UInt64Array::from_iter_values(i.iter().map(|i| step * i))),
                Arc::new(Float64Array::from_iter_values(
                    i.iter().map(|i| ((i * 7919) % 201) as f64 - 100.0),
                )),
            ],
        )
        .expect("batch");
        (batch, i.iter().map(|i| i + 1).collect())
    }

    /// Repair on top of a trusted state: the barrier it restores, or why it stops.
    type Repair<'a> = Box<dyn Fn(&str) -> Result<Vec<RestoredBarrier>, Failed> + 'a>;

    /// An archive of stream `m` (three hosts, `ladder`) with a barrier of `first` rows 10
    /// axis units apart and then one of `second` rows `step` apart; answers the state before
    /// the second, and a check that repair on top of it restores the second (or why it stops).
    fn two_barriers(
        root: &Path,
        ladder: Ladder,
        first: u64,
        (second, step): (u64, u64),
    ) -> Result<(State, Repair<'_>), Failed> {
        let schema: arrow::datatypes::SchemaRef = Arc::new(Schema::new(vec![
            Field::new("host", DataType::Utf8, false),
            Field::new("ts", DataType::UInt64, false),
            Field::new("value", DataType::Float64, false),
        ]));
        let spec =
            StreamSpec::dynamic("m", schema.clone(), vec!["host".into()], Some("ts".into()))?
                .with_ladder(Some(ladder));
        let config = Config::new().stream(spec);
        let group_rows = config.compaction.group_rows;
        let mut archive = Archive::open(root, config)?;
        let (batch, positions) = rows(&schema, 0, first, 10);
        archive.stage_batch("m", &batch, &positions)?;
        archive.seal_all()?;
        // The trusted prefix: everything up to the first barrier.
        let before = archive.state().clone();
        let (batch, positions) = rows(&schema, first, second, step);
        archive.stage_batch("m", &batch, &positions)?;
        archive.seal_all()?;
        drop(archive);
        let trusted = before.clone();
        let restored = move |why: &str| -> Result<Vec<RestoredBarrier>, Failed> {
            let (restored, stopped) = restorable(root, &trusted, group_rows)?;
            if restored.len() == 1 && stopped.is_empty() {
                return Ok(restored);
            }
            assert!(
                restored.is_empty() && stopped.len() == 1,
                "{why}: {stopped:?}"
            );
            Err(stopped[0].clone().into())
        };
        Ok((before, Box::new(restored)))
    }

    /// The level file of the barrier after `state` in stream `m`, and the rows of its data
    /// file as the barrier's tracks.
    fn lost_barrier(
        root: &Path,
        state: &State,
    ) -> Result<(std::path::PathBuf, Vec<TrackRows>), Failed> {
        let name = state.next_name;
        let stream = &state.streams["m"];
        let data = root.join(format!(
            "{STREAMS_DIR}/m/rows/{}",
            segment::data_file_name(name)
        ));
        let (_, tracks) = tracks_of(&data, &stream.decl, &stored_schema(&stream.decl)?)?;
        let level = root.join(format!(
            "{STREAMS_DIR}/m/levels/{}",
            segment::data_file_name(name + 1)
        ));
        Ok((level, tracks))
    }

    /// The level partials of the barrier after `state` from level `first` up, as any build
    /// encodes them (this build's codec).
    fn partials(state: &State, tracks: &[TrackRows], first: usize) -> Result<Vec<u8>, Failed> {
        let decl = &state.streams["m"].decl;
        Ok(
            levels::barrier_partials(decl, tracks, state.next_name + 1, first)?
                .ok_or("partials")?
                .encoded
                .0,
        )
    }

    /// Puts at `level` what a build before 2026-12-07 left there for the barrier after
    /// `state` (its partials, or nothing when it deferred them); answers how it judged.
    fn sealed_by_the_earlier_rule(
        level: &Path,
        state: &State,
        tracks: &[TrackRows],
    ) -> Result<crate::archive::engine::seal::LevelChoice, Failed> {
        let earlier = crate::archive::engine::seal::stored_levels_under(
            &state.streams["m"],
            tracks,
            levels::LEVEL_RULE_EARLIER,
        );
        if !earlier.deferred {
            std::fs::write(level, partials(state, tracks, earlier.first)?)?;
        }
        Ok(earlier)
    }

    /// A lost barrier whose level partials were sealed by a build before 2026-12-06 (every row
    /// group compressed, `segment::PLAIN_GROUP_ROWS` not yet a rule) is restored as one sealed
    /// now is; a level file that neither rule makes of its rows is not.
    #[test]
    fn a_lost_barrier_sealed_under_the_earlier_level_codec_is_still_restored() -> Result<(), Failed>
    {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        let (before, restored) = two_barriers(root, Ladder::new(1, 4, 6)?, 300, (300, 10))?;
        restored("as sealed")?;

        // Its level file as an earlier build sealed it: the same rows, every group compressed.
        let (level, tracks) = lost_barrier(root, &before)?;
        let stream = &before.streams["m"];
        let choice = crate::archive::engine::seal::stored_levels(stream, &tracks);
        assert!(!choice.deferred, "the barrier wrote partials");
        let earlier = levels::barrier_partials_under(
            &stream.decl,
            &tracks,
            before.next_name + 1,
            choice.first,
            segment::COMPRESS_EVERY_GROUP,
        )?
        .ok_or("partials")?
        .encoded
        .0;
        let sealed = std::fs::read(&level)?;
        assert_ne!(
            earlier, sealed,
            "its small groups are stored uncompressed now"
        );
        std::fs::write(&level, &earlier)?;
        restored("sealed by an earlier build")?;

        // Neither rule's bytes: refused, and says why.
        let mut damaged = earlier;
        let at = damaged.len() / 2;
        damaged[at] ^= 0x40;
        std::fs::write(&level, &damaged)?;
        let why = restored("damaged").expect_err("refused").to_string();
        assert!(why.contains("are not what its rows make"), "{why}");
        Ok(())
    }

    /// A lost barrier that decided its stream's first stored level under the rule of the
    /// builds before 2026-12-07 (the first stored level alone at 16 rows a cell) is restored
    /// with the decision it recorded; partials from any other level are not.
    #[test]
    fn a_lost_barrier_that_decided_under_the_earlier_rule_is_restored_with_its_decision(
    ) -> Result<(), Failed> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        // Widths 1 to 16384; each of three hosts has a row every 30 units. The second barrier
        // (1,500 rows a host) is the first with enough rows to judge: stored from level 6 now
        // (4096-unit cells and up hold a cell per 64 rows), from level 5 (1024 units, 34 rows
        // a cell) under the earlier rule.
        let (before, restored) = two_barriers(root, Ladder::new(1, 4, 8)?, 300, (4_500, 10))?;
        assert_eq!(before.streams["m"].levels_from, None, "undecided before it");
        let decided = |barriers: &[RestoredBarrier]| barriers[0].record.streams[0].levels_from;
        assert_eq!(decided(&restored("as sealed")?), Some(6));

        let (level, tracks) = lost_barrier(root, &before)?;
        let earlier = sealed_by_the_earlier_rule(&level, &before, &tracks)?;
        assert_eq!((earlier.decided, earlier.deferred), (Some(5), false));
        let again = restored("decided by an earlier build")?;
        assert_eq!(decided(&again), Some(5));
        assert_eq!(
            again[0].record.streams[0]
                .levels
                .as_ref()
                .and_then(|l| l.first_level),
            Some(5)
        );

        // Partials from a level neither rule decides: refused.
        std::fs::write(&level, partials(&before, &tracks, 4)?)?;
        let why = restored("from level 4").expect_err("refused").to_string();
        assert!(why.contains("are not what its rows make"), "{why}");
        Ok(())
    }

    /// A lost barrier whose partials the builds before 2026-12-07 wrote (16 rows a cell over
    /// the stored levels) where this build defers them (64) is restored with its level file,
    /// as it was sealed; as this build seals it, deferred and with no level file.
    #[test]
    fn a_lost_barrier_that_wrote_partials_under_the_earlier_rule_is_restored_with_them(
    ) -> Result<(), Failed> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        // The first barrier decides levels 6 and 7 (4096- and 16384-unit cells). The second's
        // rows are 90 units apart on each host: about 43 cells a host for 1,500 rows, 35
        // rows a cell, worth writing at 16 rows a cell, not at 64.
        let (before, restored) = two_barriers(root, Ladder::new(1, 4, 8)?, 4_500, (4_500, 30))?;
        assert_eq!(
            before.streams["m"].levels_from,
            Some(6),
            "decided before it"
        );
        let (level, tracks) = lost_barrier(root, &before)?;
        assert!(!level.exists(), "this build deferred its partials");
        let as_sealed = restored("as sealed")?;
        let stream = &as_sealed[0].record.streams[0];
        assert!(stream.levels_deferred && stream.levels.is_none());

        let earlier = sealed_by_the_earlier_rule(&level, &before, &tracks)?;
        assert_eq!((earlier.first, earlier.deferred), (6, false));
        let again = restored("written by an earlier build")?;
        let stream = &again[0].record.streams[0];
        assert!(!stream.levels_deferred);
        assert_eq!(stream.levels.as_ref().and_then(|l| l.first_level), Some(6));
        assert_eq!(again[0].files.len(), 2, "its data file and its level file");
        Ok(())
    }
}
