#!/usr/bin/env python3
"""series-archive side by side with DuckDB, Polars, SQLite and arrow-rs's ArrowWriter.

    .venv/bin/python scripts/compare.py                      # 1M, 10M and 50M rows; writes BENCHMARKS.md
    .venv/bin/python scripts/compare.py --rows 1M,10M        # other sizes
    .venv/bin/python scripts/compare.py --rows 16000 --quick --bin target/debug/series-archive \\
        --helper target/debug/examples/compare              # the smoke check (tests/compare_smoke.rs)

(`mise run compare` runs the first line.) Needs duckdb, polars and pyarrow
(`requirements-test.txt`; `scripts/test` installs them into `.venv`); sqlite3 is the stdlib's.

Unless --bin and --helper are given, builds the release CLI and the in-process helper
(`cargo build --release --bin series-archive --example compare`). Then, per size (rows
over 16 tracks, under `target/compare-data/<rows>/`):

1. generates the capture dataset, deterministically (SplitMix64 as in `benches/survey.rs`,
   vectorised with pyarrow and Polars): 4 runs × 4 probes, one row per track per tick, in
   publish (tick) order; `ordinal = tick × 4 + jitter` (an axis with gaps), `position = tick
   + 1` (shared by the 16 rows of a tick: not unique), `value` an integer random walk per
   track, `noise` a noisy float; written once as plain Parquet by pyarrow (zstd level 1,
   pyarrow's default dictionary and row groups) and reused while it holds the same rows;
2. `series-archive ingest` of that file with `--seal-rows` (levels and syncs included), end
   to end; the last ingest is the archive every read below uses;
3. `examples/compare.rs seal`: archive `stage_batch` + `seal_all` against `ArrowWriter` +
   fsync on the same in-memory batches, same process;
4. `examples/compare.rs probe`: open, survey at budget 400 (warm, and open + first survey),
   the level folds and p95 over the track `run_0 / probe.00`, `read_rows` over the middle
   10% of its positions (Arrow path) and `typed_rows` (serde into a `#[stream]` type);
5. the same questions to DuckDB and Polars over the plain Parquet (M4 per cell of the
   archive's plan, min/max/avg/sum/count, `quantile_disc(.., 0.95)`, the range read), the
   CLI end to end (`survey --json`, `fold --json`, `rows --format parquet`), and SQLite with
   the peer metric store's schema (`series`, `samples`, its indexes; two samples per row:
   `value` and `noise`), ingest committed every `--seal-rows` rows with
   `synchronous=FULL`, and the range read.

Every answer is checked before any time is reported (M4 cells exactly, sums within 1e-9
relative; statistics; row counts and checksums of range reads); a disagreement prints what
disagrees and exits 1 without writing the report. Times: median of `--runs` after one
untimed warm-up (ingests: `--ingest-runs`; SQLite ingest: `--sqlite-runs`, no warm-up).
Writes `BENCHMARKS.md` (figures, ratios against the targets of issue 5, machine, versions,
commands) and `docs/compare-survey.svg` (survey latency against archive size); with
--quick, both under the data directory instead, and fewer runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchlib import ROOT, reusable, Cli, check_m4, close, fmt, host, m4_query, sh, sql_text, target_dir

STREAM = "capture"
RUNS_N, PROBES_N = 4, 4
TRACKS = RUNS_N * PROBES_N
TRACK = ("run_0", "probe.00")
FIELDS = ["value", "noise"]
BUDGET = 400
SEED = 0x5EED
GENERATOR = "compare-1"  # bump when the dataset changes
CHUNK_TICKS = 65_536  # rows per generated chunk: 1 Mi
M64 = (1 << 64) - 1
FOLDS = ["min", "max", "mean", "sum", "count"]
DUCK_AGG = {"min": "min", "max": "max", "mean": "avg", "sum": "sum", "count": "count"}
PROG = "compare"


def say(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def parse_rows(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip().replace("_", "")
        if not part:
            continue
        mult = {"k": 1_000, "m": 1_000_000}.get(part[-1].lower(), 1)
        n = int(float(part[:-1]) * mult) if mult > 1 else int(part)
        if n <= 0 or n % TRACKS:
            raise argparse.ArgumentTypeError(f"{part}: a positive multiple of {TRACKS} rows")
        sizes.append(n)
    return sizes


# ---------------------------------------------------------------- the dataset

SCHEMA = pa.schema(
    [
        pa.field("run", pa.string(), nullable=False),
        pa.field("probe", pa.string(), nullable=False),
        pa.field("ordinal", pa.uint64(), nullable=False),
        pa.field("value", pa.int64(), nullable=False),
        pa.field("noise", pa.float64(), nullable=False),
        pa.field("position", pa.uint64(), nullable=False),
    ],
    metadata={"compare.generator": GENERATOR},
)


def u64(v: int):
    return pa.scalar(v & M64, pa.uint64())


def splitmix(k: pa.Array) -> pa.Array:
    """The k-th output (1-based) of SplitMix64 seeded with SEED: `Mix` in benches/survey.rs."""
    z = pc.add(pc.multiply(k, u64(0x9E3779B97F4A7C15)), u64(SEED))
    z = pc.multiply(pc.bit_wise_xor(z, pc.shift_right(z, u64(30))), u64(0xBF58476D1CE4E5B9))
    z = pc.multiply(pc.bit_wise_xor(z, pc.shift_right(z, u64(27))), u64(0x94D049BB133111EB))
    return pc.bit_wise_xor(z, pc.shift_right(z, u64(31)))


def chunk(first_tick: int, ticks: int, carry: list[int]) -> pa.Table:
    n = ticks * TRACKS
    j0 = first_tick * TRACKS
    k = pl.int_range(j0 + 1, j0 + n + 1, dtype=pl.UInt64, eager=True).to_arrow()
    m = pl.from_arrow(splitmix(k)).alias("m")
    df = pl.DataFrame({"m": m}).with_row_index("j", offset=j0)
    df = df.with_columns(
        t=(pl.col("j") // TRACKS).cast(pl.UInt64),
        i=(pl.col("j") % TRACKS).cast(pl.Int64),
        step=(pl.col("m") % 7).cast(pl.Int64) - 3,
    ).with_columns(
        walk=pl.col("step").cum_sum().over("i")
        + pl.col("i").replace_strict(dict(enumerate(carry)), return_dtype=pl.Int64),
    )
    out = df.select(
        run=pl.concat_str([pl.lit("run_"), (pl.col("i") // PROBES_N).cast(pl.String)]),
        probe=pl.concat_str([pl.lit("probe."), (pl.col("i") % PROBES_N).cast(pl.String).str.zfill(2)]),
        ordinal=pl.col("t") * 4 + (pl.col("m") // (1 << 60)) % 4,
        value=pl.col("walk"),
        noise=((pl.col("m") // 2048).cast(pl.Float64) / float(1 << 53) - 0.5) * 2.0
        + (pl.col("t").cast(pl.Float64) / 500.0).sin(),
        position=pl.col("t") + 1,
    )
    last = df.group_by("i").agg(pl.col("walk").last()).sort("i")["walk"].to_list()
    carry[:] = last
    return out.to_arrow().cast(SCHEMA)


def dataset(path: Path, rows: int) -> Path:
    if reusable(path, rows, b"compare.generator", GENERATOR):
        say(f"reusing {path} ({rows:,} rows)")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    began = time.perf_counter()
    ticks = rows // TRACKS
    carry = [0] * TRACKS
    with pq.ParquetWriter(tmp, SCHEMA, compression="zstd", compression_level=1) as w:
        for t in range(0, ticks, CHUNK_TICKS):
            w.write_table(chunk(t, min(CHUNK_TICKS, ticks - t), carry))
    tmp.rename(path)
    say(f"generated {path} ({rows:,} rows) in {time.perf_counter() - began:.1f} s")
    return path


# ---------------------------------------------------------------- runners


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        sys.exit(f"{PROG}: {' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stderr}")
    return done


def timed_runs(fn, runs: int, warm: bool = True):
    """`runs` timed calls (after one untimed warm-up when `warm`): (median, all, last answer)."""
    result = fn() if warm else None
    times = []
    for _ in range(max(runs, 1)):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    times_sorted = sorted(times)
    mid = len(times) // 2
    med = times_sorted[mid] if len(times) % 2 else (times_sorted[mid - 1] + times_sorted[mid]) / 2
    return med, times, result


# ---------------------------------------------------------------- SQLite, the peer's schema

PEER_SCHEMA = """
CREATE TABLE series (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    labels TEXT NOT NULL,
    type INTEGER NOT NULL,
    label_hash INTEGER NOT NULL,
    boundaries_hash INTEGER,
    boundaries BLOB,
    UNIQUE(name, labels, boundaries_hash)
);
CREATE TABLE samples (
    id INTEGER PRIMARY KEY,
    series_id INTEGER NOT NULL REFERENCES series(id),
    boot_id BLOB NOT NULL,
    timestamp INTEGER NOT NULL,
    value REAL NOT NULL,
    histogram_data BLOB
);
CREATE INDEX idx_samples_series_timestamp ON samples(series_id, timestamp, id);
CREATE INDEX idx_series_name ON series(name);
CREATE INDEX idx_series_label_hash ON series(label_hash);
"""
BOOT_ID = bytes(range(16))


def fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M64
    return h & 0x7FFF_FFFF_FFFF_FFFF


def labels_of(i: int) -> str:
    # Canonical: sorted by key, `key=value` joined by commas.
    return f"probe=probe.{i % PROBES_N:02},run=run_{i // PROBES_N}"


def series_id(track: int, field: int) -> int:
    return 1 + track * len(FIELDS) + field


def sqlite_ingest(db: Path, data: Path, seal_rows: int) -> float:
    """Rows of the dataset as samples (one per measured field) in the peer's schema,
    committed every `seal_rows` rows; answers the seconds spent in SQLite (executemany and
    commits; turning Arrow batches into Python tuples is not counted)."""
    for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        p.unlink(missing_ok=True)
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.executescript(PEER_SCHEMA)
    con.execute("BEGIN")
    for i in range(TRACKS):
        for f, name in enumerate(FIELDS):
            labels = labels_of(i)
            con.execute(
                "INSERT INTO series (id, name, labels, type, label_hash) VALUES (?, ?, ?, 1, ?)",
                (series_id(i, f), f"{STREAM}.{name}", labels, fnv1a(labels.encode())),
            )
    con.execute("COMMIT")
    insert = "INSERT INTO samples (series_id, boot_id, timestamp, value) VALUES (?, ?, ?, ?)"
    spent = 0.0
    pending = 0
    began = time.perf_counter()
    con.execute("BEGIN")
    spent += time.perf_counter() - began
    for batch in pq.ParquetFile(data).iter_batches(batch_size=min(seal_rows, 65_536)):
        df = pl.from_arrow(batch).with_columns(
            track=(pl.col("run").str.slice(4).cast(pl.Int64) * PROBES_N
                   + pl.col("probe").str.slice(6).cast(pl.Int64)),
        )
        offset = 0
        while offset < df.height:
            take = min(df.height - offset, seal_rows - pending)
            part = df.slice(offset, take)
            tracks = part["track"].to_list()
            ts = part["ordinal"].to_list()
            vals = part["value"].cast(pl.Float64).to_list()
            noise = part["noise"].to_list()
            params = []
            for tr, t, v, n in zip(tracks, ts, vals, noise):
                params.append((series_id(tr, 0), BOOT_ID, t, v))
                params.append((series_id(tr, 1), BOOT_ID, t, n))
            began = time.perf_counter()
            con.executemany(insert, params)
            pending += take
            if pending >= seal_rows:
                con.execute("COMMIT")
                con.execute("BEGIN")
                pending = 0
            spent += time.perf_counter() - began
            offset += take
    began = time.perf_counter()
    con.execute("COMMIT")
    spent += time.perf_counter() - began
    con.close()
    return spent


def sqlite_range(con, track: int, lo: int, hi: int) -> dict:
    out = {}
    for f, name in enumerate(FIELDS):
        rows = con.execute(
            "SELECT timestamp, value FROM samples WHERE series_id = ? AND timestamp >= ? "
            "AND timestamp < ? ORDER BY timestamp, id",
            (series_id(track, f), lo, hi),
        ).fetchall()
        out[name] = rows
    return out


# ---------------------------------------------------------------- one size


def checksum_table(t: pa.Table) -> dict:
    n = t.num_rows
    ordinal = t.column("ordinal")
    return {
        "rows": n,
        "value_sum": str(pc.sum(t.column("value")).as_py() or 0),
        "noise_sum": pc.sum(t.column("noise")).as_py() or 0.0,
        "first_ordinal": ordinal[0].as_py() if n else None,
        "last_ordinal": ordinal[n - 1].as_py() if n else None,
    }


def same_checksum(what: str, ours: dict, theirs: dict, problems: list[str]) -> None:
    for k in ("rows", "value_sum", "first_ordinal", "last_ordinal"):
        if k in ours and k in theirs and ours[k] != theirs[k]:
            problems.append(f"{what}: {k} {ours[k]!r} ≠ {theirs[k]!r}")
    if not close(float(ours["noise_sum"]), float(theirs["noise_sum"])):
        # Sums of floats in another order: within 1e-9 relative, or 1e-9 absolute near 0.
        if abs(float(ours["noise_sum"]) - float(theirs["noise_sum"])) > 1e-9 * max(1, ours["rows"]):
            problems.append(f"{what}: noise sum {ours['noise_sum']!r} ≠ {theirs['noise_sum']!r}")


def polars_m4(lf: pl.LazyFrame, width: int) -> list[tuple]:
    aggs = [
        pl.len().alias("n"),
        pl.col("ordinal").min().alias("first_axis"),
        pl.col("ordinal").max().alias("last_axis"),
    ]
    for f in FIELDS:
        aggs += [
            pl.col(f).sort_by(["ordinal", "rn"]).first().alias(f"{f}_first"),
            pl.col(f).sort_by(["ordinal", "rn"]).last().alias(f"{f}_last"),
            pl.col(f).min().alias(f"{f}_min"),
            pl.col(f).max().alias(f"{f}_max"),
            pl.col(f).count().alias(f"{f}_count"),
            pl.col(f).sum().alias(f"{f}_sum"),
        ]
    df = (
        lf.with_columns(cell=pl.col("ordinal") // width)
        .group_by("cell")
        .agg(aggs)
        .sort("cell")
        .collect()
    )
    return df.rows()


def p95_index(n: int) -> int:
    # quantile_disc(x, 0.95): the value at 1-based rank ceil(0.95 n).
    return (n * 95 + 99) // 100 - 1


def measure(rows: int, args, cli: Cli, helper: Path, con) -> dict:
    root = args.data / str(rows)
    root.mkdir(parents=True, exist_ok=True)
    data = dataset(root / "capture.parquet", rows)
    seal_rows = args.seal_rows or max(TRACKS, (rows // 4) // TRACKS * TRACKS)
    runs = args.runs
    problems: list[str] = []
    r: dict = {"rows": rows, "seal_rows": seal_rows, "plain_bytes": data.stat().st_size}
    ticks = rows // TRACKS
    lo_t, hi_t = ticks * 45 // 100, ticks * 55 // 100
    pos = (lo_t + 1, hi_t + 1)  # positions [from, to)
    axis = (lo_t * 4, hi_t * 4)  # the same rows on the axis (ordinal = tick × 4 + 0..3)
    r["range"] = {"positions": pos, "axis": axis}

    # -- ingest with the CLI (end to end: read, check, stage, seal with syncs, levels).
    archive = root / "archive"

    def ingest():
        if archive.exists():
            shutil.rmtree(archive)
        run([str(cli.path), "ingest", str(archive), "--stream", STREAM, "--track", "run,probe",
             "--axis", "ordinal", "--position", "position", "--seal-rows", str(seal_rows),
             "--no-compact", str(data)])

    say(f"{rows:,}: ingest (CLI) × {args.ingest_runs} after a warm-up ...")
    r["cli_ingest"], r["cli_ingest_all"], _ = timed_runs(ingest, args.ingest_runs)
    # What `ingest` does after its last barrier unless told `--no-compact`, timed apart: the
    # automatic maintenance (`compact --auto`: level runs merged size-tiered, raw files past
    # the threshold compacted, a checkpoint once the log is mostly history). Every read
    # below is of the archive as a user's `ingest` leaves it.
    began = time.perf_counter()
    run([str(cli.path), "compact", str(archive), "--auto"])
    r["cli_maintain"] = time.perf_counter() - began
    desc = cli.json("inspect", str(archive))
    stream = next(s for s in desc["streams"] if s["id"] == STREAM)
    if stream["rows"] != rows or len(stream["tracks"]) != TRACKS:
        problems.append(f"ingest: the archive holds {stream['rows']} rows in {len(stream['tracks'])} tracks")
    r["archive_bytes"], r["level_bytes"] = stream["bytes"], stream["level_bytes"]
    r["barriers"], r["fields"] = desc["barriers"], stream["measured"]
    if stream["measured"] != FIELDS:
        problems.append(f"measured fields {stream['measured']} ≠ {FIELDS}")

    # -- stage + seal against ArrowWriter, in process, on the same batches.
    say(f"{rows:,}: archive seal vs ArrowWriter (helper) × {args.ingest_runs} after a warm-up ...")
    out = run([str(helper), "seal", str(data), "--scratch", str(root / "scratch"),
               "--seal-rows", str(seal_rows), "--runs", str(args.ingest_runs)])
    r["seal"] = json.loads(out.stdout)
    if r["seal"]["rows"] != rows:
        problems.append(f"seal helper staged {r['seal']['rows']} rows")

    # -- the archive's in-process reads.
    say(f"{rows:,}: archive reads (helper) ...")
    out = run([str(helper), "probe", str(archive), "--track", *TRACK, "--from", str(pos[0]),
               "--to", str(pos[1]), "--budget", str(BUDGET), "--runs", str(runs)])
    probe = json.loads(out.stdout)
    r["probe"] = {k: v for k, v in probe.items() if k != "survey"}

    # -- CLI end to end.
    d = str(archive)
    track_args = ["--stream", STREAM, "--track", *TRACK]
    r["cli_survey"], _, text = timed_runs(
        lambda: cli.run("survey", d, *track_args, "--budget", str(BUDGET), "--json"), runs)
    survey = json.loads(text)
    cli_folds = {}
    for kind in FOLDS + ["p95"]:
        t, _, text = timed_runs(lambda: cli.run("fold", d, *track_args, "--aggregate", kind, "--json"), runs)
        cli_folds[kind] = (t, json.loads(text))
    r["cli_fold"] = {k: v[0] for k, v in cli_folds.items()}
    rows_out = root / "rows.parquet"
    r["cli_rows"], _, _ = timed_runs(
        lambda: cli.run("rows", d, *track_args, "--from", str(pos[0]), "--to", str(pos[1]),
                        "--format", "parquet", "--out", str(rows_out), "--force"), runs)
    cli_range = checksum_table(pq.read_table(rows_out))

    # -- DuckDB over the plain Parquet.
    say(f"{rows:,}: DuckDB and Polars ...")
    plan = survey["plan"]
    width = plan["cell_width"]
    src = f"read_parquet({sql_text(str(data))}, file_row_number = true)"
    where = " AND ".join(f"{c} = {sql_text(v)}" for c, v in zip(("run", "probe"), TRACK))
    q_m4 = m4_query(src, where, FIELDS, width, order="file_row_number")
    r["duck_m4"], _, duck_m4 = timed_runs(lambda: con.execute(q_m4).fetchall(), runs)
    if args.tamper:
        # The smoke test's proof that the checks bite: one cell's minimum of `value` off by one.
        first = list(duck_m4[0])
        first[6] -= 1
        duck_m4[0] = tuple(first)
    for what, s in (("CLI survey", survey), ("in-process survey", probe["survey"])):
        bad, worst = check_m4(s, duck_m4, FIELDS)
        problems += [f"{what} vs DuckDB M4: {m}" for m in bad[:10]]
        r.setdefault("worst_sum", 0.0)
        r["worst_sum"] = max(r["worst_sum"], worst)
    if probe["survey"]["plan"] != plan or probe["survey"]["buckets"] != survey["buckets"]:
        problems.append("in-process survey ≠ CLI survey")
    r["plan"] = plan
    r["buckets"] = len(survey["buckets"])
    if problems:  # no point timing the rest against a disagreement
        r["problems"] = problems
        return r

    duck_fold = {}
    for kind in FOLDS:
        q = f"SELECT {', '.join(f'{DUCK_AGG[kind]}({f})' for f in FIELDS)} FROM {src} WHERE {where}"
        duck_fold[kind] = timed_runs(lambda: con.execute(q).fetchone(), runs)
    q = f"SELECT {', '.join(f'quantile_disc({f}, 0.95)' for f in FIELDS)} FROM {src} WHERE {where}"
    duck_fold["p95"] = timed_runs(lambda: con.execute(q).fetchone(), runs)
    r["duck_fold"] = {k: v[0] for k, v in duck_fold.items()}
    for kind, (_, _, ans) in duck_fold.items():
        for fi, name in enumerate(FIELDS):
            d_ = float(ans[fi])
            for what, a in (
                ("in-process fold", probe["folds"][kind]["values"][fi]),
                ("CLI fold", cli_folds[kind][1]["answers"][fi]["value"]),
            ):
                ok = a == d_ if kind in ("min", "max", "count", "p95") else close(a, d_)
                if not ok:
                    problems.append(f"{what} {kind} {name}: archive {a!r} ≠ DuckDB {d_!r}")

    q_rows = (f"SELECT * EXCLUDE (file_row_number) FROM {src} WHERE {where} "
              f"AND position >= {pos[0]} AND position < {pos[1]}")
    r["duck_rows"], _, duck_range = timed_runs(lambda: con.execute(q_rows).fetch_arrow_table(), runs)
    duck_sum = checksum_table(duck_range)
    same_checksum("archive rows (in-process) vs DuckDB", probe["rows"], duck_sum, problems)
    same_checksum("archive typed rows vs DuckDB", probe["typed"], duck_sum, problems)
    same_checksum("CLI rows vs DuckDB", cli_range, duck_sum, problems)
    r["range_rows"] = duck_sum["rows"]

    # -- Polars over the plain Parquet.
    track_filter = (pl.col("run") == TRACK[0]) & (pl.col("probe") == TRACK[1])
    lf = pl.scan_parquet(data).with_row_index("rn").filter(track_filter)
    r["polars_m4"], _, pm4 = timed_runs(lambda: polars_m4(lf, width), runs)
    bad, _ = check_m4(survey, pm4, FIELDS)
    problems += [f"CLI survey vs Polars M4: {m}" for m in bad[:10]]
    base = pl.scan_parquet(data).filter(track_filter)
    pexpr = {
        "min": lambda f: pl.col(f).min(), "max": lambda f: pl.col(f).max(),
        "mean": lambda f: pl.col(f).mean(), "sum": lambda f: pl.col(f).sum(),
        "count": lambda f: pl.col(f).count(),
        "p95": lambda f: pl.col(f).sort().gather((pl.len() * 95 + 99) // 100 - 1).first(),
    }
    r["polars_fold"] = {}
    for kind, make in pexpr.items():
        q = base.select([make(f).alias(f) for f in FIELDS])
        t, _, ans = timed_runs(lambda: q.collect().row(0), runs)
        r["polars_fold"][kind] = t
        for fi, name in enumerate(FIELDS):
            a, p_ = probe["folds"][kind]["values"][fi], float(ans[fi])
            ok = a == p_ if kind in ("min", "max", "count", "p95") else close(a, p_)
            if not ok:
                problems.append(f"fold {kind} {name}: archive {a!r} ≠ Polars {p_!r}")
    prange = base.filter((pl.col("position") >= pos[0]) & (pl.col("position") < pos[1]))
    r["polars_rows"], _, pr = timed_runs(lambda: prange.collect(), runs)
    same_checksum("archive rows vs Polars", probe["rows"], checksum_table(pr.to_arrow()), problems)

    # -- SQLite with the peer's schema (two samples per row: slow; capped by --sqlite-max-rows).
    if rows > args.sqlite_max_rows:
        say(f"{rows:,}: SQLite skipped (above --sqlite-max-rows {args.sqlite_max_rows:,})")
        r["sqlite_ingest"] = None
    else:
        say(f"{rows:,}: SQLite ingest × {args.sqlite_runs} (no warm-up) ...")
        db = root / "sqlite" / "peer.db"
        db.parent.mkdir(exist_ok=True)
        times = [sqlite_ingest(db, data, seal_rows) for _ in range(max(1, args.sqlite_runs))]
        r["sqlite_ingest"] = sorted(times)[len(times) // 2]
        r["sqlite_ingest_all"] = times
        r["sqlite_bytes"] = sum(p.stat().st_size for p in db.parent.iterdir())
        scon = sqlite3.connect(db)
        (samples,) = scon.execute("SELECT count(*) FROM samples").fetchone()
        if samples != rows * len(FIELDS):
            problems.append(f"SQLite holds {samples} samples, not {rows * len(FIELDS)}")
        track_no = int(TRACK[0][4:]) * PROBES_N + int(TRACK[1][6:])
        r["sqlite_rows"], _, srange = timed_runs(lambda: sqlite_range(scon, track_no, *axis), runs)
        scon.close()
        s_sum = {
            "rows": len(srange["value"]),
            "value_sum": str(int(sum(v for _, v in srange["value"]))),
            "noise_sum": math.fsum(v for _, v in srange["noise"]),
            "first_ordinal": srange["value"][0][0] if srange["value"] else None,
            "last_ordinal": srange["value"][-1][0] if srange["value"] else None,
        }
        if [t for t, _ in srange["value"]] != [t for t, _ in srange["noise"]]:
            problems.append("SQLite: value and noise samples of the range differ in timestamps")
        same_checksum("archive rows vs SQLite", probe["rows"], s_sum, problems)

    r["problems"] = problems
    return r


# ---------------------------------------------------------------- the report


def machine() -> dict:
    return {
        **host(),
        "rustc": sh(["rustc", "-V"]),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "polars": pl.__version__,
        "pyarrow": pa.__version__,
        "sqlite": sqlite3.sqlite_version,
        "commit": sh(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
        + (" (dirty)" if sh(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src", "examples", "scripts", "benches"]) else ""),
    }


def rate(rows: int, secs: float) -> str:
    v = rows / secs
    return f"{v / 1e6:.2f} M rows/s" if v >= 1e5 else f"{v / 1e3:.1f} k rows/s"


def ratio(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}×"
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


def targets(results: list[dict]) -> list[tuple]:
    """(target, figure, peer figure, ratio, pass) rows, at the largest size measured."""
    big, small = results[-1], results[0]
    n = f"{big['rows'] // 1_000_000}M" if big["rows"] >= 1_000_000 else f"{big['rows']:,}"
    p = big["probe"]
    out = []
    flat = p["survey_secs"] / small["probe"]["survey_secs"]
    out.append((f"Survey @400 flat: {n} rows ≤ 2× the {small['rows']:,}-row time",
                fmt(p["survey_secs"]), fmt(small["probe"]["survey_secs"]), ratio(flat), flat <= 2))
    x = big["duck_m4"] / p["survey_secs"]
    out.append((f"Survey @400 ≥ 100× faster than DuckDB M4 ({n})", fmt(p["survey_secs"]),
                fmt(big["duck_m4"]), ratio(x), x >= 100))
    for kind in FOLDS:
        x = big["duck_fold"][kind] / p["folds"][kind]["secs"]
        out.append((f"Level fold `{kind}` ≥ 30× faster than DuckDB ({n})", fmt(p["folds"][kind]["secs"]),
                    fmt(big["duck_fold"][kind]), ratio(x), x >= 30))
    x = p["folds"]["p95"]["secs"] / big["duck_fold"]["p95"]
    out.append((f"p95 within 1.5× of DuckDB quantile_disc ({n}; archive/DuckDB)",
                fmt(p["folds"]["p95"]["secs"]), fmt(big["duck_fold"]["p95"]), ratio(x), x <= 1.5))
    s = big["seal"]
    x = s["floor_secs"] / s["archive_secs"]
    out.append((f"Sealing ≥ 0.7× ArrowWriter's rows/s ({n})", rate(s["rows"], s["archive_secs"]),
                rate(s["rows"], s["floor_secs"]), ratio(x), x >= 0.7))
    lite = [r for r in results if r["sqlite_ingest"] is not None]
    if lite:
        q = lite[-1]
        x = q["sqlite_ingest"] / q["seal"]["archive_secs"]
        out.append((f"Sealing ≥ 10× SQLite's rows/s ({q['rows']:,} rows: the largest SQLite ran at)",
                    rate(q["rows"], q["seal"]["archive_secs"]), rate(q["rows"], q["sqlite_ingest"]),
                    ratio(x), x >= 10))
    x = big["duck_rows"] / p["rows_secs"]
    out.append((f"`rows` (Arrow path) ≥ DuckDB's rows/s, middle 10% of a track ({n})",
                rate(big["range_rows"], p["rows_secs"]), rate(big["range_rows"], big["duck_rows"]),
                ratio(x), x >= 1))
    x = big["archive_bytes"] / big["plain_bytes"]
    out.append((f"Bytes/row ≤ 1.15× plain zstd Parquet ({n}; archive/plain)",
                f"{big['archive_bytes'] / big['rows']:.2f} B/row", f"{big['plain_bytes'] / big['rows']:.2f} B/row",
                ratio(x), x <= 1.15))
    x = big["level_bytes"] / big["archive_bytes"]
    out.append((f"Levels ≤ 10% on top of the rows, default ladder ({n})", f"{big['level_bytes']:,} B",
                f"{big['archive_bytes']:,} B", f"{100 * x:.1f}%", x <= 0.10))
    return out


def svg_plot(results: list[dict], path: Path) -> None:
    """Survey latency against archive size, log-log, as a plain SVG."""
    series = [
        ("archive survey @400, warm (in-process)", "#1f77b4", [r["probe"]["survey_secs"] for r in results]),
        ("archive open + first survey (in-process)", "#2ca02c", [r["probe"]["cold_survey_secs"] for r in results]),
        ("series-archive survey CLI, end to end", "#9467bd", [r["cli_survey"] for r in results]),
        ("DuckDB M4 over the raw Parquet", "#d62728", [r["duck_m4"] for r in results]),
        ("Polars M4 over the raw Parquet", "#ff7f0e", [r["polars_m4"] for r in results]),
    ]
    xs = [r["rows"] for r in results]
    W, H, L, R, T, B = 760, 460, 80, 300, 40, 60
    ys = [y for _, _, v in series for y in v]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    if x1 == x0:
        x1 += 1
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if y1 == y0:
        y1 += 1

    def px(x):
        return L + (math.log10(x) - x0) / (x1 - x0) * (W - L - R)

    def py(y):
        return H - B - (math.log10(y) - y0) / (y1 - y0) * (H - T - B)

    e = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L}" y="22" font-size="14">Survey of one track at budget {BUDGET} against archive size (log-log)</text>']
    for k in range(x0, x1 + 1):
        x = px(10**k)
        e.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H - B}" stroke="#ddd"/>')
        e.append(f'<text x="{x:.1f}" y="{H - B + 16}" text-anchor="middle">{fmt_rows(10**k)}</text>')
    for k in range(y0, y1 + 1):
        y = py(10**k)
        e.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        e.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt(10**k)}</text>')
    e.append(f'<text x="{(L + W - R) / 2}" y="{H - 18}" text-anchor="middle">rows in the archive (16 tracks)</text>')
    e.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#333"/>')
    for i, (name, colour, vals) in enumerate(series):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, vals))
        e.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in zip(xs, vals):
            e.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{colour}"><title>{name}: {fmt(y)} at {x:,} rows</title></circle>')
        ly = T + 10 + i * 36
        e.append(f'<line x1="{W - R + 14}" y1="{ly}" x2="{W - R + 34}" y2="{ly}" stroke="{colour}" stroke-width="3"/>')
        words = name.split(", ", 1) if len(name) > 32 else [name]
        for j, w in enumerate(words):
            e.append(f'<text x="{W - R + 40}" y="{ly + 4 + 14 * j}">{w}</text>')
    e.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(e) + "\n")


def fmt_rows(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:g}M"
    if n >= 1_000:
        return f"{n / 1e3:g}k"
    return str(n)


def report(results: list[dict], args, run_: dict, plot: Path) -> str:
    info, command = run_["info"], run_["command"]
    L = [
        "# Benchmarks: series-archive beside DuckDB, Polars, SQLite and ArrowWriter",
        "",
        f"Generated by `scripts/compare.py` in one run on {run_['date']} (commit {info['commit']}). "
        "Every answer below was checked against DuckDB (and Polars, SQLite, the CLI) before its time "
        "was kept: M4 cells exactly (sums within 1e-9 relative), min/max/count/p95 exactly, mean/sum "
        "within 1e-9, range reads by row count, value sum, noise sum and first/last axis.",
        "",
        "## Targets (issue 5)",
        "",
        f"At the largest size measured ({results[-1]['rows']:,} rows); every figure from the same run.",
        "",
        "| target | series-archive | peer | ratio | |",
        "|---|---:|---:|---:|---|",
    ]
    for name, ours, peer, rt, ok in targets(results):
        L.append(f"| {name} | {ours} | {peer} | {rt} | {'pass' if ok else '**miss**'} |")
    L += [
        "",
        "Ratios are peer time / archive time (higher is better for the archive) except where the "
        "target names archive/peer. Survey and level folds: the archive opened once, level view "
        "built (warm, in-process: `examples/compare.rs probe`); p95 scans the raw values.",
        "",
        "## Figures by size",
        "",
        "One track (`run_0 / probe.00`, 1/16 of the rows) unless said. Times: median of "
        f"{args.runs} after one untimed warm-up, OS page cache warm; ingests: median of "
        f"{args.ingest_runs} after a warm-up; SQLite ingest: {args.sqlite_runs} run(s), no warm-up, "
        f"only up to {args.sqlite_max_rows:,} rows (`--sqlite-max-rows`).",
        "",
        "| | " + " | ".join(f"{r['rows']:,} rows" for r in results) + " |",
        "|---|" + "---:|" * len(results),
    ]

    def row(label, f):
        L.append(f"| {label} | " + " | ".join(f(r) for r in results) + " |")

    row("survey plan: level, cell width, buckets", lambda r: f"{r['plan']['level']}, {r['plan']['cell_width']:,}, {r['buckets']}")
    row("archive survey @400, warm (in-process)", lambda r: fmt(r["probe"]["survey_secs"]))
    row("archive open + first survey (in-process)", lambda r: fmt(r["probe"]["cold_survey_secs"]))
    row("archive survey, CLI end to end", lambda r: fmt(r["cli_survey"]))
    row("DuckDB M4 (same cells)", lambda r: fmt(r["duck_m4"]))
    row("Polars M4 (same cells)", lambda r: fmt(r["polars_m4"]))
    row("DuckDB M4 / archive warm survey", lambda r: ratio(r["duck_m4"] / r["probe"]["survey_secs"]))
    for kind in FOLDS + ["p95"]:
        row(f"`{kind}`: archive (in-process) / CLI / DuckDB / Polars",
            lambda r, k=kind: f"{fmt(r['probe']['folds'][k]['secs'])} / {fmt(r['cli_fold'][k])} / "
            f"{fmt(r['duck_fold'][k])} / {fmt(r['polars_fold'][k])}")
    row("mean: DuckDB avg / archive", lambda r: ratio(r["duck_fold"]["mean"] / r["probe"]["folds"]["mean"]["secs"]))
    row("p95: archive / DuckDB quantile_disc", lambda r: ratio(r["probe"]["folds"]["p95"]["secs"] / r["duck_fold"]["p95"]))
    row("range: rows (middle 10% of positions)", lambda r: f"{r['range_rows']:,}")
    row("range: archive `read_rows` (Arrow)", lambda r: f"{fmt(r['probe']['rows_secs'])} ({rate(r['range_rows'], r['probe']['rows_secs'])})")
    row("range: archive typed (serde into `Capture`)", lambda r: f"{fmt(r['probe']['typed_secs'])} ({rate(r['range_rows'], r['probe']['typed_secs'])})")
    row("range: serde decoding cost per row", lambda r: f"{(r['probe']['typed_secs'] - r['probe']['rows_secs']) / r['range_rows'] * 1e9:.0f} ns")
    row("range: CLI `rows --format parquet` end to end", lambda r: fmt(r["cli_rows"]))
    row("range: DuckDB (to Arrow)", lambda r: f"{fmt(r['duck_rows'])} ({rate(r['range_rows'], r['duck_rows'])})")
    row("range: Polars", lambda r: f"{fmt(r['polars_rows'])} ({rate(r['range_rows'], r['polars_rows'])})")
    row("range: SQLite (both series, by timestamp)", lambda r: "not run" if r["sqlite_ingest"] is None else f"{fmt(r['sqlite_rows'])} ({rate(r['range_rows'], r['sqlite_rows'])})")
    row("seal cadence (rows per barrier) / barriers", lambda r: f"{r['seal_rows']:,} / {r['seal']['barriers']}")
    row("archive stage + seal, in-process (levels, syncs)", lambda r: f"{fmt(r['seal']['archive_secs'])} ({rate(r['rows'], r['seal']['archive_secs'])})")
    row("… of which staging / sealing", lambda r: f"{fmt(r['seal']['archive_stage_secs'])} / {fmt(r['seal']['archive_seal_secs'])}")
    row("ArrowWriter + fsync per barrier, same batches", lambda r: f"{fmt(r['seal']['floor_secs'])} ({rate(r['rows'], r['seal']['floor_secs'])})")
    row("archive / ArrowWriter rows/s", lambda r: ratio(r["seal"]["floor_secs"] / r["seal"]["archive_secs"]))
    row("CLI `ingest` end to end (read, check, seal)", lambda r: f"{fmt(r['cli_ingest'])} ({rate(r['rows'], r['cli_ingest'])})")
    row("… then its automatic maintenance (`compact --auto`, one run)", lambda r: fmt(r["cli_maintain"]) if "cli_maintain" in r else "n/a")
    row("SQLite ingest, peer schema (2 samples/row)", lambda r: "not run" if r["sqlite_ingest"] is None else f"{fmt(r['sqlite_ingest'])} ({rate(r['rows'], r['sqlite_ingest'])})")
    row("archive / SQLite rows/s", lambda r: "n/a" if r["sqlite_ingest"] is None else ratio(r["sqlite_ingest"] / r["seal"]["archive_secs"]))
    row("bytes/row: archive rows", lambda r: f"{r['archive_bytes'] / r['rows']:.2f}")
    row("bytes/row: plain Parquet (pyarrow, zstd 1)", lambda r: f"{r['plain_bytes'] / r['rows']:.2f}")
    row("bytes/row: ArrowWriter floor files", lambda r: f"{r['seal']['floor_bytes'] / r['rows']:.2f}")
    row("bytes/row: SQLite (db + wal)", lambda r: "n/a" if r["sqlite_ingest"] is None else f"{r['sqlite_bytes'] / r['rows']:.2f}")
    row("levels: bytes on top of the rows", lambda r: f"{r['level_bytes']:,} ({100 * r['level_bytes'] / r['archive_bytes']:.1f}%)")
    row("archive open (read-only, in-process)", lambda r: f"{fmt(r['probe']['open_secs'])} ({r['probe']['barriers']} barriers)")
    L += [
        "",
        f"![survey latency against archive size]({os.path.relpath(plot, args.out.parent)})",
        "",
        "## What is compared",
        "",
        "- **Dataset**: 4 runs × 4 probes = 16 tracks, one row per track per tick, written in publish "
        "(tick) order; `ordinal = tick × 4 + (0..3)` (an axis with gaps), `position = tick + 1` "
        "(shared by the 16 rows of a tick), `value` an i64 random walk per track, `noise` a noisy "
        "f64 (SplitMix64 seeded 0x5eed, as `benches/survey.rs`). Plain Parquet by pyarrow "
        f"{pa.__version__}: zstd level 1, default dictionary encoding and row groups (1 Mi rows).",
        "- **Archive**: `series-archive ingest --track run,probe --axis ordinal --position position "
        "--seal-rows N` (default ladder `1024,8,8`); reads through `examples/compare.rs probe` "
        "(in-process, release) and the CLI.",
        "- **Sealing floor**: `ArrowWriter` with the archive's writer properties (zstd 1, page "
        "statistics, one row group per flush, position delta-encoded), one file per barrier, "
        "`sync_all` + directory sync per barrier, on the same in-memory batches in the same process "
        "(`examples/compare.rs seal`). The archive additionally splits rows by track, computes the "
        "level partials, writes a second (levels) file, renames both and appends a synced manifest "
        "record per barrier.",
        "- **DuckDB / Polars**: over the plain Parquet file, filtered to the track; M4 over the "
        "archive's plan (`ordinal // cell_width`; first/last by `(ordinal, file row number)`); "
        "`min max avg sum count` and `quantile_disc(x, 0.95)` (Polars: the value at rank "
        "ceil(0.95 n), the same definition); the range read as `position >= from AND position < to`, "
        f"all columns, to Arrow. DuckDB with its default {duck_threads()} threads.",
        "- **SQLite**: the peer metric store's schema (`series`, `samples`, "
        "`idx_samples_series_timestamp`, `idx_series_name`, `idx_series_label_hash`; the `rollups` "
        "and `metadata` tables are not involved), WAL, `synchronous=FULL`, one gauge series per "
        "track and field (32), two samples per row (`timestamp` = ordinal), a commit every "
        "N rows (the archive's seal cadence), via Python's `sqlite3.executemany` — only the time "
        "inside SQLite calls is counted, not building the Python tuples. Range read: both series "
        "of the track over the same rows' axis span, `ORDER BY timestamp, id`.",
        "",
        "## Machine and versions",
        "",
        f"- {info['cpus']} CPUs ({info['cpu']}), {info['memory']} memory, {info['os']}",
        f"- {info['rustc']}; Python {info['python']}; DuckDB {info['duckdb']}; Polars {info['polars']}; "
        f"pyarrow {info['pyarrow']}; SQLite {info['sqlite']}",
        "",
        "## Commands",
        "",
        "```sh",
        "python3 -m venv .venv && .venv/bin/pip install -r requirements-test.txt   # or: scripts/test",
        command,
        "mise run compare    # the same, default sizes",
        "cargo bench --bench archive   # the library's own criterion figures (seal, rows, open)",
        "SERIES_ARCHIVE_BENCH_ROWS=1000000,10000000,50000000 cargo bench --bench survey",
        "```",
        "",
    ]
    return "\n".join(L)


def duck_threads() -> str:
    return str(duckdb.connect().execute("SELECT current_setting('threads')").fetchone()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=parse_rows, default=parse_rows("1M,10M,50M"),
                        help="comma list of sizes (multiples of 16; 1M, 10M, 20000 ...); default 1M,10M,50M")
    parser.add_argument("--runs", type=int, help="timed runs per read (default 5; --quick 1)")
    parser.add_argument("--ingest-runs", type=int, help="timed ingests/seals per size (default 3; --quick 1)")
    parser.add_argument("--sqlite-runs", type=int, default=1, help="SQLite ingests per size (default 1)")
    parser.add_argument("--sqlite-max-rows", type=parse_rows, default=parse_rows("10M"),
                        help="skip SQLite above this size (default 10M: ~70k samples/s here)")
    parser.add_argument("--seal-rows", type=int, default=None,
                        help="rows per barrier (default 500000; --quick: a quarter of the rows)")
    parser.add_argument("--quick", action="store_true",
                        help="one run each; report and plot under the data directory, not the repository")
    parser.add_argument("--bin", type=Path, help="series-archive binary (default: build the release one)")
    parser.add_argument("--helper", type=Path, help="examples/compare binary (default: build the release one)")
    parser.add_argument("--data", type=Path, default=target_dir() / "compare-data", help="data directory")
    parser.add_argument("--out", type=Path, help="report (default BENCHMARKS.md; --quick: DATA/BENCHMARKS.md)")
    parser.add_argument("--tamper", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite the report and plot from DATA/results.json (a finished run) without measuring")
    parser.add_argument("--plot", type=Path, help="plot (default docs/compare-survey.svg; --quick: DATA/)")
    args = parser.parse_args()
    args.runs = args.runs or (1 if args.quick else 5)
    args.ingest_runs = args.ingest_runs or (1 if args.quick else 3)
    args.sqlite_max_rows = args.sqlite_max_rows[0]
    if args.seal_rows is None and not args.quick:
        args.seal_rows = 500_000
    args.out = args.out or (args.data / "BENCHMARKS.md" if args.quick else ROOT / "BENCHMARKS.md")
    plot = args.plot or (args.data / "compare-survey.svg" if args.quick else ROOT / "docs" / "compare-survey.svg")
    if bool(args.bin) != bool(args.helper):
        parser.error("give both --bin and --helper, or neither (then both are built)")
    if not args.bin and not args.report_only:
        say("cargo build --release --bin series-archive --example compare")
        subprocess.run(["cargo", "build", "--release", "--bin", "series-archive", "--example", "compare"],
                       cwd=ROOT, check=True)
        args.bin = target_dir() / "release" / "series-archive"
        args.helper = target_dir() / "release" / "examples" / "compare"
    saved = args.data / "results.json"
    if args.report_only:
        run_ = json.loads(saved.read_text())
    else:
        cli = Cli(args.bin)
        if not args.helper.is_file():
            sys.exit(f"{PROG}: {args.helper} not found; build it: cargo build --example compare")
        con = duckdb.connect()
        results = []
        for rows in sorted(args.rows):
            began = time.perf_counter()
            r = measure(rows, args, cli, args.helper, con)
            say(f"{rows:,}: done in {time.perf_counter() - began:.0f} s")
            if r["problems"]:
                print(f"{PROG}: ANSWERS DISAGREE at {rows:,} rows; no time is reported:", file=sys.stderr)
                for m in r["problems"][:40]:
                    print(f"  - {m}", file=sys.stderr)
                return 1
            results.append(r)
        run_ = {
            "results": results,
            "info": machine(),
            "date": time.strftime("%Y-%m-%d"),
            "command": " ".join([".venv/bin/python", *(shlex.quote(a) for a in sys.argv)]),
            "runs": args.runs,
            "ingest_runs": args.ingest_runs,
            "sqlite_runs": args.sqlite_runs,
            "sqlite_max_rows": args.sqlite_max_rows,
        }
        saved.write_text(json.dumps(run_, indent=1, default=str))
    for k in ("runs", "ingest_runs", "sqlite_runs", "sqlite_max_rows"):
        setattr(args, k, run_[k])
    results = run_["results"]
    svg_plot(results, plot)
    text = report(results, args, run_, plot)
    notes = ROOT / "docs" / "compare-notes.md"
    if notes.is_file() and not args.quick:
        text += "\n" + notes.read_text()
    args.out.write_text(text)
    print(text)
    done = "rewrote the report of a finished run" if args.report_only else f"answers agree at {len(results)} size(s)"
    print(f"{PROG}: {done}; wrote {args.out} and {plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
