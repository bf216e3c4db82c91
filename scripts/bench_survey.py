#!/usr/bin/env python3
"""Survey latency beside DuckDB's M4 over the same Parquet files.

    cargo build --release --bin series-archive
    SERIES_ARCHIVE_BENCH_ROWS=1000000,10000000,50000000 cargo bench --bench survey
    .venv/bin/python scripts/bench_survey.py target/bench-data/survey-*

For each archive directory (as `benches/survey.rs` builds them) and one whole track
(`run_0`, `probe.00`):

1. `series-archive survey --json` at budget 400 gives the plan (level, cell width, cells) and
   the buckets;
2. DuckDB computes M4 over the raw Parquet of that track (`streams/capture/rows/*.parquet`
   filtered to the track), per cell `ordinal // cell_width`: first (`arg_min(v, (ordinal,
   _seq))`), last (`arg_max`), min, max, count and sum, for both measured fields; one
   connection, median of 5 runs after one warm-up;
3. the DuckDB answer is checked against the archive's buckets (cells, count, min, max, first
   and last values and axes exactly; sum within 1e-9 relative). A time is reported only
   when they agree;
4. DuckDB `avg` and `quantile_disc(.., 0.95)` over the track are timed the same way and
   compared with `series-archive fold --json` (mean within 1e-9 relative, p95 exactly);
5. the CLI survey is timed end to end (process start + open + level view build + survey +
   JSON out; median of 5 after one warm-up) as the "cold" figure.

The archive's warm figures come from criterion (`target/criterion/**/new/estimates.json`,
the median). Prints a markdown report and writes it to `target/bench-survey.md`. Exits 1
when any answer disagrees.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import duckdb

from benchlib import (
    RUNS,
    Cli,
    check_m4,
    close,
    criterion_median,
    fmt,
    median_time,
    m4_query,
    rel_diff,
    sql_text,
    target_dir,
)

STREAM = "capture"
TRACK = ("run_0", "probe.00")
TRACK_COLUMNS = ("run", "probe")
BUDGET = 400


def bench_archive(con, cli: Cli, directory: Path) -> dict:
    d = str(directory)
    described = cli.json("inspect", d)
    stream = next(s for s in described["streams"] if s["id"] == STREAM)
    rows = stream["rows"]
    fields = stream["measured"]
    track_args = ["--stream", STREAM, "--track", *TRACK]
    survey_args = ["survey", d, *track_args, "--budget", str(BUDGET), "--json"]

    cold, out = median_time(lambda: cli.run(*survey_args))
    survey = json.loads(out)
    plan = survey["plan"]

    src = f"read_parquet({sql_text(str(directory / 'streams' / STREAM / 'rows' / '*.parquet'))})"
    where = " AND ".join(f"{c} = {sql_text(v)}" for c, v in zip(TRACK_COLUMNS, TRACK))
    query = m4_query(src, where, fields, plan["cell_width"])
    duck_m4, m4_rows = median_time(lambda: con.execute(query).fetchall())
    problems, worst_sum = check_m4(survey, m4_rows, fields)

    # Statistics: fold --json beside DuckDB.
    mean = cli.json("fold", d, *track_args, "--aggregate", "mean")
    p95 = cli.json("fold", d, *track_args, "--aggregate", "p95")
    avg_q = f"SELECT {', '.join(f'avg({f})' for f in fields)} FROM {src} WHERE {where}"
    p95_q = f"SELECT {', '.join(f'quantile_disc({f}, 0.95)' for f in fields)} FROM {src} WHERE {where}"
    duck_avg, avg_row = median_time(lambda: con.execute(avg_q).fetchone())
    duck_p95, p95_row = median_time(lambda: con.execute(p95_q).fetchone())
    mean_problems, p95_problems = [], []
    worst_mean = 0.0
    for fi, name in enumerate(fields):
        a, d_ = mean["answers"][fi]["value"], float(avg_row[fi])
        worst_mean = max(worst_mean, rel_diff(a, d_))
        if not close(a, d_):
            mean_problems.append(f"mean {name}: archive {a!r} ≠ DuckDB avg {d_!r}")
        a, d_ = p95["answers"][fi]["value"], float(p95_row[fi])
        if a != d_:
            p95_problems.append(f"p95 {name}: archive {a!r} ≠ DuckDB quantile_disc {d_!r}")

    return {
        "rows": rows,
        "dir": d,
        "fields": fields,
        "plan": plan,
        "buckets": len(survey["buckets"]),
        "duck_cells": len(m4_rows),
        "warm": criterion_median("survey_warm", "budget_400", rows),
        "cold_inproc": criterion_median("survey_cold", "open_and_first_survey", rows),
        "cold_cli": cold,
        "duck_m4": duck_m4,
        "m4_problems": problems,
        "worst_sum": worst_sum,
        "mean_warm": criterion_median("fold_warm", "mean", rows),
        "p95_warm": criterion_median("fold_warm", "p95", rows),
        "duck_avg": duck_avg,
        "duck_p95": duck_p95,
        "mean_values": [a["value"] for a in mean["answers"]],
        "p95_values": [a["value"] for a in p95["answers"]],
        "mean_problems": mean_problems,
        "p95_problems": p95_problems,
        "worst_mean": worst_mean,
        "track_rows": mean["answers"][0]["count"],
    }


def report(results: list[dict], con) -> str:
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    lines = [
        f"# Survey at budget {BUDGET}: series-archive beside DuckDB's M4",
        "",
        f"One whole track ({', '.join(TRACK)}) of the `{STREAM}` stream (16 tracks; fields "
        f"{', '.join(results[0]['fields']) if results else '-'}). Archive warm figures: criterion "
        f"medians (`cargo bench --bench survey`). CLI and DuckDB: median of {RUNS} after one warm-up, "
        f"OS page cache warm. DuckDB {duckdb.__version__} ({threads} threads), Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs.",
        "",
        "| rows | track rows | plan: level, cell width, buckets | archive survey, warm | archive open + first survey (in-process) | CLI survey end to end | DuckDB M4 | DuckDB M4 / warm survey | answers |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        ok = not r["m4_problems"]
        p = r["plan"]
        merge = f" × {p['merge']}" if p["merge"] > 1 else ""
        ratio = (
            f"{r['duck_m4'] / r['warm']:,.0f}×" if ok and r["warm"] else "n/a"
        )
        lines.append(
            f"| {r['rows']:,} | {r['track_rows']:,} "
            f"| level {p['level']}{merge}, {p['cell_width']:,}, {r['buckets']} "
            f"| {fmt(r['warm'])} | {fmt(r['cold_inproc'])} | {fmt(r['cold_cli'])} "
            f"| {fmt(r['duck_m4']) if ok else 'disagrees'} | {ratio} "
            f"| {'agree' if ok else 'DISAGREE'} (max sum rel. diff {r['worst_sum']:.1e}) |"
        )
    lines += [
        "",
        "| rows | archive mean (level 0, warm) | DuckDB avg | mean agrees | archive p95 (raw scan, warm) | DuckDB quantile_disc 0.95 | p95 agrees |",
        "|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in results:
        mok, pok = not r["mean_problems"], not r["p95_problems"]
        lines.append(
            f"| {r['rows']:,} | {fmt(r['mean_warm'])} | {fmt(r['duck_avg']) if mok else 'disagrees'} "
            f"| {'yes' if mok else 'NO'} (rel. diff ≤ {r['worst_mean']:.1e}; "
            f"{', '.join(f'{v:.6g}' for v in r['mean_values'])}) "
            f"| {fmt(r['p95_warm'])} | {fmt(r['duck_p95']) if pok else 'disagrees'} "
            f"| {'yes' if pok else 'NO'} ({', '.join(f'{v:.6g}' for v in r['p95_values'])}) |"
        )
    problems = [m for r in results for m in r["m4_problems"] + r["mean_problems"] + r["p95_problems"]]
    if problems:
        lines += ["", "Disagreements (first 20):", ""] + [f"- {m}" for m in problems[:20]]
    missing = [r["rows"] for r in results if r["warm"] is None]
    if missing:
        lines += [
            "",
            f"No criterion figures for {missing}: "
            "run `SERIES_ARCHIVE_BENCH_ROWS=... cargo bench --bench survey`.",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "archives", nargs="+", type=Path, help="archive directories (target/bench-data/survey-*)"
    )
    parser.add_argument(
        "--cli", type=Path, help="the series-archive binary (default: target/release/series-archive)"
    )
    parser.add_argument("--out", type=Path, help="report file (default: target/bench-survey.md)")
    args = parser.parse_args()
    cli = Cli(args.cli or target_dir() / "release" / "series-archive")
    con = duckdb.connect()
    results = []
    for directory in args.archives:
        print(f"bench_survey: {directory} ...", file=sys.stderr)
        results.append(bench_archive(con, cli, directory))
    results.sort(key=lambda r: r["rows"])
    text = report(results, con)
    print(text)
    out = args.out or target_dir() / "bench-survey.md"
    out.write_text(text)
    print(f"bench_survey: wrote {out}", file=sys.stderr)
    bad = any(r["m4_problems"] or r["mean_problems"] or r["p95_problems"] for r in results)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
