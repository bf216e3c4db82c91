#!/usr/bin/env python3
"""Ingest speed against peers measured in the same run.

    cargo build --release --bin series-archive
    .venv/bin/python scripts/bench_ingest.py [--rows 10000000] [--samples 10000000] [--runs 3]

1. CSV: a ROWS-row CSV (run, probe, ordinal, value, level; 32 tracks) is made once with DuckDB.
   Then, alternating, `series-archive ingest` of it (fresh archive each time; with
   `--no-compact`, the ingest alone, at the default cadence of a barrier per 100 000 rows, at
   one per 1 000 000 and in one barrier, and with the default end-of-ingest maintenance) against
   DuckDB's `COPY (FROM read_csv(…)) TO '….parquet'` of the same file. Median wall time of
   RUNS each; the ratio is DuckDB's time over ours (above 1: we are faster).
2. Parquet, one barrier (`--bulk`): the cardinality benchmark's 16-track file of ROWS rows
   (nanosecond axis, made once by `bench_cardinality.dataset`), ingested whole in one barrier
   (`--seal-rows ROWS`, with and without the end-of-ingest maintenance, which finds nothing
   to do) against DuckDB's `COPY (FROM read_parquet(…)) TO '….parquet' (COMPRESSION zstd)`,
   alternating, median of RUNS. This is issue 25's bulk target (≥ 1× `COPY`).
3. eventd: a SAMPLES-sample database is made once by `scripts/gen_eventd.py` (200 series).
   Then, alternating, `series-archive import-eventd` of it (fresh archive each time) against
   a plain `SELECT * FROM samples` read to the end through Python's sqlite3 (the least any
   reader of the database pays), median of RUNS each.

Every run's row count is checked (ours from `inspect --json`, DuckDB's from the Parquet file)
before a time is kept. Prints a Markdown table (also written to target/bench-ingest.md).
Machines here are noisy: read the ratios, not the absolute times.
"""

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "series-archive"


def timed(fn):
    began = time.perf_counter()
    out = fn()
    return time.perf_counter() - began, out


def rows_in(archive: Path) -> int:
    out = subprocess.run([BIN, "inspect", archive, "--json"], check=True, capture_output=True, text=True)
    return sum(s["rows"] for s in json.loads(out.stdout)["streams"])


def bulk(work: Path, rows: int, runs: int) -> list[str]:
    """The one-barrier Parquet ingest against DuckDB's COPY of the same file, alternating."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import bench_cardinality

    tracks = 16
    rows = tracks * (rows // tracks)  # the dataset holds whole ticks of every track
    data = work / f"bulk-{tracks}-{rows}" / "metrics.parquet"
    bench_cardinality.dataset(data, tracks, rows // tracks)  # made once, then reused
    modes = ("ingest --no-compact", "ingest")
    times = {m: [] for m in modes} | {"duckdb": []}
    con = duckdb.connect()
    out = work / "bulk-duck.parquet"
    copy = f"copy (from read_parquet('{data}')) to '{out}' (format parquet, compression zstd)"
    con.execute(copy)  # warm the page cache for both
    for _ in range(runs):
        for mode in modes:
            archive = work / "bulk-archive"
            shutil.rmtree(archive, ignore_errors=True)
            cmd = [BIN, *mode.split(), archive, "--stream", "metrics", "--track", "host,metric", "--axis", "ts",
                   "--ladder", "1000000000,8,8", "--seal-rows", str(rows), data]
            t, _ = timed(lambda: subprocess.run(cmd, check=True, capture_output=True))
            assert rows_in(archive) == rows, "ingest lost rows"
            times[mode].append(t)
        t, _ = timed(lambda: con.execute(copy))
        assert con.execute(f"select count(*) from '{out}'").fetchone()[0] == rows
        times["duckdb"].append(t)
    duck = statistics.median(times["duckdb"])
    lines = []
    for mode in modes:
        ours = statistics.median(times[mode])
        lines.append(
            f"| Parquet {rows:,} rows, {tracks} tracks, one barrier: `{mode} --seal-rows {rows}` vs DuckDB "
            f"`COPY … (COMPRESSION zstd)` | {ours:.2f} s ({', '.join(f'{x:.2f}' for x in times[mode])}) | "
            f"{duck:.2f} s ({', '.join(f'{x:.2f}' for x in times['duckdb'])}) | {duck / ours:.2f}× |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=ROOT / "target" / "bench-ingest")
    ap.add_argument("--csv-only", action="store_true", help="skip the eventd comparison")
    ap.add_argument("--bulk", action="store_true", help="only the one-barrier Parquet comparison")
    args = ap.parse_args()
    if not BIN.exists():
        sys.exit(f"{BIN}: build it first (cargo build --release --bin series-archive)")
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    lines = ["| what | ours | peer | peer ÷ ours |", "|---|---|---|---|"]
    if args.bulk:
        lines += bulk(work, args.rows, args.runs)
        text = "\n".join(lines) + "\n"
        print(text)
        return 0

    csv = work / f"rows-{args.rows}.csv"
    if not csv.exists():
        print(f"making {csv} …", file=sys.stderr)
        duckdb.connect().execute(
            f"""copy (select 'run_' || (i % 4) as run, 'probe.' || lpad(((i // 4) % 8)::varchar, 2, '0') as probe,
                  (i // 32)::ubigint as ordinal, (hash(i) % 100000)::bigint - 50000 as value, (i * 0.25)::double as level
                from range({args.rows}) t(i)) to '{csv}' (header)"""
        )
    modes = ("ingest --no-compact", "ingest --no-compact --seal-rows 1000000",
             f"ingest --no-compact --seal-rows {args.rows}", "ingest")
    times = {m: [] for m in modes} | {"duckdb": []}
    for _ in range(args.runs):
        for mode in modes:
            archive = work / "csv-archive"
            shutil.rmtree(archive, ignore_errors=True)
            cmd = [BIN, "ingest", archive, "--stream", "s", "--track", "run,probe", "--axis", "ordinal", csv]
            cmd[-1:-1] = mode.split()[1:]
            t, _ = timed(lambda: subprocess.run(cmd, check=True, capture_output=True))
            assert rows_in(archive) == args.rows, "ingest lost rows"
            times[mode].append(t)
        out = work / "duck.parquet"
        con = duckdb.connect()
        t, _ = timed(lambda: con.execute(f"copy (from read_csv('{csv}')) to '{out}'"))
        assert con.execute(f"select count(*) from '{out}'").fetchone()[0] == args.rows
        times["duckdb"].append(t)
    duck = statistics.median(times["duckdb"])
    for mode in modes:
        ours = statistics.median(times[mode])
        lines.append(
            f"| CSV {args.rows:,} rows: `{mode}` vs DuckDB `COPY … TO parquet` | {ours:.2f} s "
            f"({args.rows / ours / 1e6:.2f} M rows/s) | {duck:.2f} s | {duck / ours:.2f}× |"
        )

    if args.csv_only:
        text = "\n".join(lines) + "\n"
        print(text)
        return 0
    db = work / f"eventd-{args.samples}.db"
    if not db.exists():
        print(f"making {db} …", file=sys.stderr)
        subprocess.run(
            [sys.executable, ROOT / "scripts" / "gen_eventd.py", db, "--samples", str(args.samples), "--series", "200"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    samples = sqlite3.connect(db).execute("select count(*) from samples").fetchone()[0]
    rollups = sqlite3.connect(db).execute("select count(*) from rollups").fetchone()[0]
    # Rollups of windows eventd's newest sample has not passed wait for a later run.
    closed = sqlite3.connect(db).execute(
        "select count(*) from rollups where window_start + window_seconds * 1000000000 "
        "<= (select max(timestamp) from samples)"
    ).fetchone()[0]
    times = {"import": [], "select": [], "select both": []}
    for _ in range(args.runs):
        archive = work / "eventd-archive"
        shutil.rmtree(archive, ignore_errors=True)
        t, _ = timed(lambda: subprocess.run([BIN, "import-eventd", db, archive], check=True, capture_output=True))
        held = rows_in(archive)
        # One ledger row (stream eventd_imports) per run.
        assert held == samples + closed + 1, f"import holds {held}, eventd {samples} + {closed} closed rollups"
        times["import"].append(t)

        def select(table):
            n = 0
            for _ in sqlite3.connect(db).execute(f"select * from {table}"):
                n += 1
            return n

        t, n = timed(lambda: select("samples"))
        assert n == samples
        times["select"].append(t)
        t2, n = timed(lambda: select("rollups"))
        assert n == rollups
        times["select both"].append(t + t2)
    ours = statistics.median(times["import"])
    for peer_name, what, n in (
        ("select", "`SELECT * FROM samples`", samples),
        ("select both", "`SELECT *` of samples and of rollups", samples + rollups),
    ):
        peer = statistics.median(times[peer_name])
        lines.append(
            f"| eventd {samples:,} samples + {rollups:,} rollups: `import-eventd` (both) vs {what} "
            f"(Python sqlite3) | {ours:.2f} s ({(samples + rollups) / ours / 1e6:.2f} M rows/s) | {peer:.2f} s "
            f"({n / peer / 1e6:.2f} M rows/s) | {peer / ours:.2f}× |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    (ROOT / "target" / "bench-ingest.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
