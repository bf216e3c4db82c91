#!/usr/bin/env python3
"""What the Delta logs cost and what they buy, on archives `examples/scale` builds.

    cargo build --release --bin series-archive --example scale
    target/release/examples/scale 1000000 10000000 > /tmp/scale.txt
    .venv/bin/python scripts/bench_delta.py $(cat /tmp/scale.txt)

For each archive (barriers of 250 000 rows over 16 tracks, then the automatic maintenance
`ingest` runs) it reports

- the logs' bytes and commit count beside the data and level bytes;
- a full scan (`count(*), sum(value), sum(_seq)`) of the rows, median of 5 after a warm-up,
  by DuckDB over the plain glob against `delta_scan` (the delta extension), and by Polars
  over the glob against `scan_delta` (its native reader, no options) and against
  `scan_parquet` of the log's `file_uris()`. Every reader must give the same answer (exit 1
  otherwise); the ratios are against the glob measured in the same run;
- the cost of a retirement that leaves retired row groups inside live files: on a copy of
  the archive, two more barriers are sealed without compaction (barrier files hold every
  track), then `series-archive retire --track run_0` rewrites them; its wall time and the
  bytes it rewrote, beside the time of sealing those barriers.

Writes the table to `target/bench-delta.md`. Needs duckdb, duckdb-ext-delta, polars and
deltalake (requirements-test.txt).
"""

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "series-archive"
RUNS = 5


def median(fn):
    answer = fn()
    times = []
    for _ in range(RUNS):
        began = time.perf_counter()
        got = fn()
        times.append(time.perf_counter() - began)
        if got != answer:
            sys.exit(f"a reader's answer changed between runs: {answer} vs {got}")
    return statistics.median(times), answer


def duck():
    ext = Path(duckdb.__file__).parent.parent / "duckdb_ext" / "extensions"
    con = duckdb.connect(config={"extension_directory": str(ext)})
    con.execute("LOAD delta")
    return con


def du(path: Path, only=None) -> int:
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and (only is None or only(p)):
            total += p.stat().st_size
    return total


def scans(archive: Path) -> list[tuple[str, float, tuple]]:
    table = archive / "streams" / "capture" / "rows"
    glob = str(table / "*.parquet")
    con = duck()
    q = "SELECT count(*), sum(value), sum(_seq) FROM {}"
    agg = [pl.len(), pl.col("value").sum(), pl.col("_seq").sum()]

    def as_ints(row):
        return tuple(int(v) for v in row)

    out = [
        ("DuckDB read_parquet(glob)", *median(lambda: as_ints(con.execute(q.format(f"read_parquet('{glob}')")).fetchone()))),
        ("DuckDB delta_scan", *median(lambda: as_ints(con.execute(q.format(f"delta_scan('{table}')")).fetchone()))),
        ("Polars scan_parquet(glob)", *median(lambda: as_ints(pl.scan_parquet(glob).select(agg).collect().row(0)))),
        ("Polars scan_delta", *median(lambda: as_ints(pl.scan_delta(str(table)).select(agg).collect().row(0)))),
        ("Polars scan_parquet(file_uris)", *median(lambda: as_ints(pl.scan_parquet(DeltaTable(str(table)).file_uris()).select(agg).collect().row(0)))),
    ]
    answers = {a for _, _, a in out}
    if len(answers) != 1:
        sys.exit(f"readers disagree on {archive}: {out}")
    return out


def retire_cost(archive: Path) -> tuple[float, str]:
    copy = archive.parent / (archive.name + "-retire")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(archive, copy)
    # Two barrier files holding every track (no compaction), as a live archive has between
    # compactions; then retire one run: its groups in those files are rewritten away.
    csv = copy.parent / "retire-input.csv"
    with open(csv, "w") as f:
        f.write("run,probe,ordinal,value,noise\n")
        for tick in range(10**9, 10**9 + 15625):
            for run in range(4):
                for probe in range(4):
                    f.write(f"run_{run},probe.{probe:02},{tick},{tick % 97},0.5\n")
    began = time.perf_counter()
    subprocess.run([str(BIN), "ingest", str(copy), "--stream", "capture", "--track", "run,probe",
                    "--axis", "ordinal", "--seal-rows", "125000", "--no-compact", str(csv)],
                   check=True, capture_output=True)
    sealed = time.perf_counter() - began
    began = time.perf_counter()
    said = subprocess.run([str(BIN), "retire", str(copy), "--stream", "capture", "--track", "run_0"],
                          check=True, capture_output=True, text=True).stdout.strip()
    retired = time.perf_counter() - began
    shutil.rmtree(copy, ignore_errors=True)
    csv.unlink()
    return retired, f"{said} (sealing those 250 000 rows took {sealed * 1e3:.0f} ms with the CLI)"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lines = ["| archive | reader | median | × its glob |", "|---|---|---:|---:|"]
    notes = []
    for arg in sys.argv[1:]:
        archive = Path(arg)
        name = archive.name
        logs = du(archive / "streams", lambda p: "_delta_log" in p.parts)
        data = du(archive / "streams" / "capture" / "rows", lambda p: "_delta_log" not in p.parts)
        levels = du(archive / "streams" / "capture" / "levels", lambda p: "_delta_log" not in p.parts)
        commits = len(list((archive / "streams").rglob("_delta_log/*.json")))
        notes.append(f"- `{name}`: Delta logs {logs / 1024:.1f} KiB in {commits} commit files "
                     f"({100 * logs / (data + levels):.3f}% of {((data + levels) / 2**20):.1f} MiB of data and level files)")
        out = scans(archive)
        base = {"DuckDB": out[0][1], "Polars": out[2][1]}
        for reader, t, _ in out:
            engine = reader.split()[0]
            lines.append(f"| {name} | {reader} | {t * 1e3:.1f} ms | {t / base[engine]:.2f} |")
        retired, said = retire_cost(archive)
        notes.append(f"- `{name}`: retiring run_0 after two uncompacted barriers: {retired * 1e3:.0f} ms — {said}")
        print("\n".join(lines[-len(out):]), flush=True)
    text = "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"
    print(text)
    (ROOT / "target" / "bench-delta.md").write_text(text)


if __name__ == "__main__":
    main()
