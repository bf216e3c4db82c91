#!/usr/bin/env python3
"""Cost along the columns axis, through the CLI, beside DuckDB in the same run.

    .venv/bin/python scripts/bench_columns.py                       # 10,100,1000 fields, 20M values
    .venv/bin/python scripts/bench_columns.py --fields 4,40 --values 40000 --runs 1 \\
        --bin target/debug/series-archive --data /tmp/x             # the smoke check (tests/columns_smoke.rs)

Needs duckdb, pyarrow and numpy (`requirements-test.txt`). Unless --bin is given, uses
`target/release/series-archive`, building it first when it is missing.

The same number of values (`--values`) each time, spread over more or fewer float fields: a
stream of 16 tracks (`probe`, `p00`…`p15`), a nanosecond axis `ts` (one track's rows 10 s
apart, rows interleaved tick-major) and N float fields (`f0000`…, random walks from numpy's
PCG64 seeded 1), `--values / N` rows, written by pyarrow as zstd Parquet and cached under
DATA. Per field count:

1. `series-archive ingest ARCHIVE FILE --stream s --track probe --axis ts --ladder
   1000000000,8,8` as one whole process (its end-of-ingest compaction included) beside DuckDB
   `COPY (SELECT * FROM file) TO … (FORMAT parquet, COMPRESSION zstd)`; bytes under
   `ARCHIVE/streams/` and `ARCHIVE/manifest/` beside DuckDB's file;
2. `survey` of one track at a budget of 100 buckets a field (the contract spends a survey's
   budget on every measured field: `4 × 100 × N` points), checked cell for cell against
   DuckDB's M4 of that track over the plain file in the archive's cells, beside that query;
3. `rows` of that track (`--format parquet`), its row count and every field's sum checked
   against DuckDB's, beside DuckDB copying the same rows to a zstd Parquet file.

CLI commands are timed as whole processes (spawn to exit); reads are the median of `--runs`
after one untimed warm-up, ingest and COPY once after DuckDB's warm-up. A disagreement prints
what differs and exits 1 without writing the report. Writes `--out` (default
`target/bench-columns.md`).
"""

from __future__ import annotations

import argparse
import json
import datetime
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ROOT, check_m4, close, fmt, host, m4_query, median_time, reusable, sh, sql_text, target_dir  # noqa: E402

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

TRACKS = 16
STREAM = "s"
AXIS = "ts"
LADDER = "1000000000,8,8"
T0 = 1_764_000_000_000_000_000
STEP_NS = 10_000_000_000
GENERATOR = "bench_columns.py v1"
PROBE = "p05"
BUCKETS_A_FIELD = 100


def say(msg: str) -> None:
    print(f"bench_columns: {msg}", file=sys.stderr, flush=True)


def fail(msg: str) -> None:
    say(msg)
    sys.exit(1)


def count(text: str) -> int:
    units = {"k": 1_000, "m": 1_000_000}
    text = text.strip().lower()
    n = int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{text}: a positive count")
    return n


def field_names(n: int) -> list[str]:
    return [f"f{i:04d}" for i in range(n)]


def dataset(path: Path, fields: int, rows: int) -> Path:
    if reusable(path, rows, b"columns.generator", GENERATOR):
        say(f"reusing {path}")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    tick = np.arange(rows, dtype=np.uint64) // np.uint64(TRACKS)
    columns = {
        "probe": pa.array([f"p{i % TRACKS:02d}" for i in range(rows)]),
        AXIS: pa.array(np.uint64(T0) + tick * np.uint64(STEP_NS), pa.uint64()),
    }
    for name in field_names(fields):
        columns[name] = pa.array(np.cumsum(rng.standard_normal(rows)))
    table = pa.table(columns).replace_schema_metadata({"columns.generator": GENERATOR})
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.rename(path)
    return path


def whole(argv: list[str]) -> tuple[float, str]:
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    secs = time.perf_counter() - began
    if done.returncode != 0:
        fail(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return secs, done.stdout


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(fields: int, args, con) -> dict:
    rows = args.values // fields
    names = field_names(fields)
    data = dataset(args.data / f"{fields}-fields-{rows}.parquet", fields, rows)
    src = f"read_parquet({sql_text(str(data))})"
    r: dict = {"fields": fields, "rows": rows}

    copied = args.data / f"copy-{fields}.parquet"
    con.execute(f"COPY (SELECT * FROM {src}) TO {sql_text(str(copied))} (FORMAT parquet, COMPRESSION zstd)")
    began = time.perf_counter()
    con.execute(f"COPY (SELECT * FROM {src}) TO {sql_text(str(copied))} (FORMAT parquet, COMPRESSION zstd)")
    r["duck_copy"] = time.perf_counter() - began
    r["duck_bytes"] = copied.stat().st_size

    archive = args.data / f"archive-{fields}"
    shutil.rmtree(archive, ignore_errors=True)
    say(f"{fields} fields: ingest of {rows:,} rows ...")
    r["ingest"], _ = whole([args.bin, "ingest", str(archive), str(data), "--stream", STREAM, "--track", "probe",
                            "--axis", AXIS, "--ladder", LADDER])
    r["streams_bytes"] = tree_bytes(archive / "streams")
    r["manifest_bytes"] = tree_bytes(archive / "manifest")

    where = f"probe = {sql_text(PROBE)}"
    budget = 4 * BUCKETS_A_FIELD * fields
    survey_argv = [args.bin, "survey", str(archive), "--stream", STREAM, "--track", PROBE,
                   "--budget", str(budget), "--json"]
    r["survey"], out = median_time(lambda: whole(survey_argv), args.runs)
    survey = json.loads(out[1])
    width = survey["plan"]["cell_width"]
    q = m4_query(src, where, names, width, order=AXIS, axis=AXIS)
    r["duck_m4"], m4 = median_time(lambda: con.execute(q).fetchall(), args.runs)
    if args.tamper:
        # One DuckDB count off by one: the check must refuse the run (tests/columns_smoke.rs).
        first = list(m4[0])
        first[4 + 4] += 1
        m4 = [tuple(first), *m4[1:]]
    bad, _ = check_m4(survey, m4, names)
    if bad:
        fail(f"{fields} fields: survey ≠ DuckDB M4: " + "; ".join(bad[:5]))
    r["buckets"] = len(survey["buckets"])

    out_file = args.data / f"rows-{fields}.parquet"
    rows_argv = [args.bin, "rows", str(archive), "--stream", STREAM, "--track", PROBE, "--format", "parquet",
                 "--out", str(out_file), "--force"]
    r["rows_cli"], _ = median_time(lambda: whole(rows_argv), args.runs)
    sums = ", ".join(f"sum({f})" for f in names)
    ours = con.execute(f"SELECT count(*), {sums} FROM read_parquet({sql_text(str(out_file))})").fetchone()
    theirs = con.execute(f"SELECT count(*), {sums} FROM {src} WHERE {where}").fetchone()
    if ours[0] != theirs[0] or not all(close(a, b) for a, b in zip(ours[1:], theirs[1:])):
        fail(f"{fields} fields: rows of {PROBE}: {ours[0]} rows ≠ DuckDB's {theirs[0]}, or a field's sum differs")
    r["track_rows"] = ours[0]
    duck_out = args.data / f"duck-rows-{fields}.parquet"
    rows_q = f"COPY (SELECT * FROM {src} WHERE {where}) TO {sql_text(str(duck_out))} (FORMAT parquet, COMPRESSION zstd)"
    r["duck_rows"], _ = median_time(lambda: con.execute(rows_q), args.runs)
    shutil.rmtree(archive, ignore_errors=True)
    return r


def report(results: list[dict], args) -> str:
    commit = sh(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    m = host()
    cols = " | ".join(f"{r['fields']:,} fields" for r in results)
    lines = [
        "# Cost against the number of fields: the columns benchmark",
        "",
        f"Generated by `scripts/bench_columns.py` in one run on {datetime.date.today()}, with "
        f"`{sh([args.bin, '--version'])}` at commit {commit}; {m['cpus']} cores ({m['cpu']}), {m['memory']}, {m['os']}.",
        "",
        "```sh",
        " ".join(["scripts/bench_columns.py", *sys.argv[1:]]),
        "```",
        "",
        f"The same {args.values:,} values each time, 16 tracks, spread over more or fewer float fields. "
        "Every answer was checked against DuckDB over the plain file before its time was kept (the survey "
        "cell for cell, the rows by count and every field's sum). CLI commands are whole processes; reads "
        f"the median of {args.runs} after a warm-up.",
        "",
        f"| | {cols} |",
        "|---|" + "---:|" * len(results),
    ]

    def row(label: str, f) -> None:
        lines.append(f"| {label} | " + " | ".join(f(r) for r in results) + " |")

    row("rows", lambda r: f"{r['rows']:,}")
    row("`ingest` (with its compaction)", lambda r: fmt(r["ingest"]))
    row("DuckDB `COPY` to zstd Parquet", lambda r: fmt(r["duck_copy"]))
    row("ingest ÷ DuckDB `COPY` (time)", lambda r: f"{r['ingest'] / r['duck_copy']:.2f}×")
    row("bytes per value: archive streams/ (DuckDB's file)",
        lambda r: f"{r['streams_bytes'] / args.values:.2f} ({r['duck_bytes'] / args.values:.2f})")
    row("manifest", lambda r: f"{r['manifest_bytes'] / 1024:.1f} KiB")
    row(f"`survey` of one track, {BUCKETS_A_FIELD} buckets a field", lambda r: f"{fmt(r['survey'])} ({r['buckets']:,} buckets)")
    row("DuckDB M4 of the track (same cells)", lambda r: fmt(r["duck_m4"]))
    row("DuckDB M4 ÷ `survey`", lambda r: f"{r['duck_m4'] / r['survey']:.1f}×")
    row("`rows` of one track (`--format parquet`)", lambda r: f"{fmt(r['rows_cli'])} ({r['track_rows']:,} rows)")
    row("DuckDB: the track's rows to zstd Parquet", lambda r: fmt(r["duck_rows"]))
    row("DuckDB ÷ `rows`", lambda r: f"{r['duck_rows'] / r['rows_cli']:.2f}×")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fields", default="10,100,1000", help="field counts (default 10,100,1000)")
    parser.add_argument("--values", type=count, default=count("20M"), help="values in all (default 20M)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each read (default 3)")
    parser.add_argument("--bin", help="the series-archive binary (default target/release/series-archive)")
    parser.add_argument("--data", type=Path, default=target_dir() / "bench-columns", help="datasets and archives")
    parser.add_argument("--out", type=Path, default=target_dir() / "bench-columns.md", help="the report")
    parser.add_argument("--tamper", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    fields = [count(f) for f in args.fields.split(",")]
    if args.bin is None:
        args.bin = str(target_dir() / "release" / "series-archive")
        if not Path(args.bin).is_file():
            subprocess.run(["cargo", "build", "--release", "--bin", "series-archive"], cwd=ROOT, check=True)
    args.data.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    results = [measure(n, args, con) for n in fields]
    text = report(results, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    say(f"answers agree at {len(results)} field count(s); wrote {args.out}")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
