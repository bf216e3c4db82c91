"""Checks an archive made by `series-archive import-eventd` against the eventd database.

usage: eventd_check.py METRICS.db ARCHIVE SERIES_ARCHIVE_BIN [--folds N]

Reads the database with Python's sqlite3 (no code of the crate) and the archive through the
CLI's own answers (`rows --format parquet`, `fold --json`), and asserts:

- every series is one track of its type's stream, named by its identity (two series whose
  label hashes collide stay two tracks), and no track is anything else;
- every sample comes back in its series' track in eventd's query order, (timestamp, id), with
  its timestamp, boot id, value or histogram (boundaries, counts, total count, sum) exact:
  nothing missing, nothing twice, nothing extra;
- every rollup of a window eventd's newest sample has passed comes back in the stream
  `rollups`, exact (a window still open may change, and waits for a later run);
- the database's rollups equal the archive's folds over the same windows (`fold --from
  window_start --to window_start + window`), for N windows chosen across functions, widths and
  types, among them windows holding duplicate timestamps and samples inserted out of order.
  Windows whose samples eventd has already deleted are not folded (the archive never had
  them); their rollups are still checked in the `rollups` stream.

Prints `VERDICT: ok: …` when every check holds.
"""

import bisect
import json
import math
import sqlite3
import struct
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import msgpack
import pyarrow.parquet as pq

STREAM = {0: "counters", 1: "gauges", 2: "histograms"}
KIND = {0: "counter", 1: "gauge", 2: "histogram"}
FOLD = {"min": "min", "max": "max", "sum": "sum", "count": "count", "avg": "mean"}


def boundaries_of(blob: bytes) -> list[float]:
    (n,) = struct.unpack_from("<I", blob)
    return list(struct.unpack_from(f"<{n}d", blob, 4))


def uuid_text(b: bytes) -> str:
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def archive_rows(sa: str, archive: str, stream: str, tmp: Path):
    out = tmp / f"{stream}.parquet"
    run = subprocess.run(
        [sa, "rows", archive, "--stream", stream, "--format", "parquet", "--out", str(out), "--force"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, f"rows --stream {stream}: {run.stderr}"
    table = pq.read_table(out).sort_by("_position")
    return table.to_pylist()


def main() -> int:
    db, archive, sa = sys.argv[1:4]
    folds = int(sys.argv[sys.argv.index("--folds") + 1]) if "--folds" in sys.argv else 60
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    series = {}
    for sid, name, labels, kind, blob in con.execute(
        "SELECT id, name, labels, type, boundaries FROM series ORDER BY id"
    ):
        track = (name, labels)
        if kind == 2:
            # Rust's `{:?}` of an f64 is Python's repr: the shortest text that reads back to it.
            track += (",".join(repr(b) for b in boundaries_of(blob)),)
        series[sid] = (kind, track)

    tmp = Path(tempfile.mkdtemp(prefix="eventd-check-"))
    checked = defaultdict(int)
    for kind, stream in STREAM.items():
        rows = archive_rows(sa, archive, stream, tmp)
        got = defaultdict(list)
        for r in rows:
            key = (r["name"], r["labels"]) + ((r["boundaries"],) if kind == 2 else ())
            got[key].append(r)
        want_tracks = {t for k, t in series.values() if k == kind}
        assert set(got) <= want_tracks, f"{stream}: tracks no series has: {set(got) - want_tracks}"
        for sid, (k, track) in series.items():
            if k != kind:
                continue
            samples = con.execute(
                "SELECT id, boot_id, timestamp, value, histogram_data FROM samples "
                "WHERE series_id = ? ORDER BY timestamp, id",
                (sid,),
            ).fetchall()
            mine = got.get(track, [])
            assert len(mine) == len(samples), (
                f"series {sid} {track}: {len(samples)} samples in eventd, {len(mine)} in the archive"
            )
            for i, ((id_, boot, ts, value, hist), r) in enumerate(zip(samples, mine)):
                where = f"series {sid} {track}, sample {id_} (#{i} in (timestamp, id) order)"
                assert r["timestamp"] == ts, f"{where}: timestamp {r['timestamp']} != {ts}"
                assert r["boot_id"] == uuid_text(boot), f"{where}: boot {r['boot_id']}"
                if kind == 2:
                    h = msgpack.unpackb(hist)
                    assert r["bucket_bounds"] == h["boundaries"], where
                    assert r["counts"] == h["counts"], where
                    assert r["total_count"] == h["total_count"], where
                    assert r["sum"] == h["sum"], where
                else:
                    assert r["value"] == value, f"{where}: value {r['value']} != {value}"
            checked[stream] += len(samples)
        assert sum(len(v) for v in got.values()) == checked[stream], f"{stream}: extra rows"

    # The colliding label hashes: two series, two tracks, each with its own samples.
    collisions = con.execute(
        "SELECT label_hash, group_concat(id) FROM series GROUP BY name, label_hash HAVING count(DISTINCT labels) > 1"
    ).fetchall()
    assert collisions, "the database holds no label-hash collision to keep apart"
    for _, ids in collisions:
        tracks = {series[int(i)][1] for i in ids.split(",")}
        assert len(tracks) == len(ids.split(",")), f"colliding series {ids} share a track"

    # Rollups: the stream holds every one, exact.
    rolled = archive_rows(sa, archive, "rollups", tmp)
    got = [
        (r["name"], r["labels"], r["function"], r["window_seconds"], r["window_start"], r["type"], r["value"])
        for r in rolled
    ]
    # A window eventd's newest sample has not passed may still change: the import leaves it
    # for a later run.
    (now,) = con.execute("SELECT coalesce(max(timestamp), 0) FROM samples").fetchone()
    want = []
    for sid, function, window, start, value in con.execute(
        "SELECT series_id, function, window_seconds, window_start, value FROM rollups "
        "ORDER BY series_id, function, window_seconds, window_start, id"
    ):
        if start + window * 1_000_000_000 > now:
            continue
        kind, track = series[sid]
        want.append((track[0], track[1], function, window, start, KIND[kind], value))
    key = lambda r: r[:5]
    assert sorted(got, key=key) == sorted(want, key=key), (
        f"rollups: {len(want)} in eventd, {len(got)} in the archive"
    )

    # Folds over rollup windows equal the rollups, where the archive holds the window's samples.
    first_kept = dict(con.execute("SELECT series_id, min(timestamp) FROM samples GROUP BY series_id"))
    # Samples whose timestamp another sample of the series shares, or that were inserted after a
    # later-stamped one (a larger id): the windows holding them are the ones to fold first.
    odd_at = defaultdict(set)
    last = {}
    for sid, id_, ts in con.execute("SELECT series_id, id, timestamp FROM samples ORDER BY series_id, timestamp, id"):
        prev = last.get(sid)
        if prev and (prev[1] == ts or prev[0] > id_):
            odd_at[sid].add(ts)
        last[sid] = (max(id_, prev[0]) if prev else id_, ts)
    odd_sorted = {sid: sorted(ts) for sid, ts in odd_at.items()}
    groups = defaultdict(lambda: ([], []))
    for sid, function, window, start, value in con.execute(
        "SELECT series_id, function, window_seconds, window_start, value FROM rollups "
        "ORDER BY series_id, function, window_seconds, window_start"
    ):
        if sid not in first_kept or start < first_kept[sid]:
            continue
        end = start + window * 1_000_000_000
        times = odd_sorted.get(sid, [])
        odd = bisect.bisect_left(times, end) - bisect.bisect_left(times, start)
        groups[(series[sid][0], function, window)][0 if odd else 1].append(
            (sid, function, window, start, value, odd)
        )
    # Across every type × function × window, half of each group's folds over windows with
    # duplicate or late samples where there are such windows.
    step = lambda xs, n: xs[:: max(1, len(xs) // max(1, n))][:n]
    per_group = max(2, folds // max(1, len(groups)))
    chosen = []
    for odd, plain in groups.values():
        half = step(odd, per_group // 2)
        chosen += half + step(plain, per_group - len(half))
    assert any(c[5] for c in chosen), "no rollup window with duplicate or out-of-order samples"
    covered = set()
    for sid, function, window, start, value, _ in chosen:
        kind, track = series[sid]
        end = start + window * 1_000_000_000
        run = subprocess.run(
            [sa, "fold", archive, "--stream", STREAM[kind], "--track", *track,
             "--from", str(start), "--to", str(end), "--aggregate", FOLD[function], "--json"],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, f"fold {track} {function} [{start}, {end}): {run.stderr}"
        answer = json.loads(run.stdout)
        assert answer["span"] == [start, end], f"fold answered cells {answer['span']}, not the window"
        folded = answer["answers"][0]["value"]
        where = f"series {sid} {track} {function} over {window} s from {start}"
        if function in ("min", "max", "count"):
            assert folded == value, f"{where}: fold {folded} != rollup {value}"
        else:
            assert math.isclose(folded, value, rel_tol=1e-12, abs_tol=1e-9), (
                f"{where}: fold {folded} != rollup {value}"
            )
        covered.add((KIND[kind], function, window))

    total = sum(checked.values())
    print(
        f"VERDICT: ok: {total} samples of {len(series)} series "
        f"({', '.join(f'{s} {n}' for s, n in checked.items())}) in (timestamp, id) order, "
        f"{len(want)} rollups, {len(chosen)} folds equal to rollups "
        f"({sum(1 for c in chosen if c[5])} over windows with duplicate or late samples; "
        f"{len(covered)} type×function×window kinds), {len(collisions)} hash collision(s) kept apart"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
