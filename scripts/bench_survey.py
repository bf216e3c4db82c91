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
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
STREAM = "capture"
TRACK = ("run_0", "probe.00")
TRACK_COLUMNS = ("run", "probe")
AXIS = "ordinal"
BUDGET = 400
RUNS = 5
REL = 1e-9


def target_dir() -> Path:
    env = os.environ.get("CARGO_TARGET_DIR")
    return Path(env) if env else ROOT / "target"


def median_time(fn, runs: int = RUNS) -> tuple[float, object]:
    """One untimed warm-up, then the median wall time (seconds) of `runs` calls."""
    result = fn()
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def close(a: float, b: float) -> bool:
    scale = max(abs(a), abs(b))
    return a == b or abs(a - b) <= REL * scale


def rel_diff(a: float, b: float) -> float:
    scale = max(abs(a), abs(b))
    return 0.0 if a == b else abs(a - b) / scale


def criterion_median(group: str, function: str, rows: int) -> float | None:
    """Criterion's median estimate in seconds, or None when that benchmark has not run."""
    path = target_dir() / "criterion" / group / function / f"{rows}_rows" / "new" / "estimates.json"
    try:
        return json.loads(path.read_text())["median"]["point_estimate"] / 1e9
    except (OSError, KeyError, ValueError):
        return None


def sql_text(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


class Cli:
    def __init__(self, path: Path):
        if not path.is_file():
            sys.exit(
                f"bench_survey: {path} not found; build it first: cargo build --release --bin series-archive"
            )
        self.path = path

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.path), *args], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            sys.exit(
                f"bench_survey: {self.path.name} {' '.join(args)} failed "
                f"({done.returncode}): {done.stderr}"
            )
        return done.stdout

    def json(self, *args: str):
        return json.loads(self.run(*args, "--json"))


def m4_query(src: str, where: str, fields: list[str], width: int) -> str:
    cols = [
        f"{AXIS} // {width} AS cell",
        "count(*) AS n",
        f"min({AXIS}) AS first_axis",
        f"max({AXIS}) AS last_axis",
    ]
    key = f"({AXIS}, _seq)"
    for f in fields:
        cols += [
            f"arg_min({f}, {key}) AS {f}_first",
            f"arg_max({f}, {key}) AS {f}_last",
            f"min({f}) AS {f}_min",
            f"max({f}) AS {f}_max",
            f"count({f}) AS {f}_count",
            f"sum({f}) AS {f}_sum",
        ]
    return f"SELECT {', '.join(cols)} FROM {src} WHERE {where} GROUP BY cell ORDER BY cell"


def check_m4(survey: dict, rows: list[tuple], fields: list[str]) -> tuple[list[str], float]:
    """Mismatches between the archive's buckets and DuckDB's M4 rows; max relative sum diff."""
    plan = survey["plan"]
    width = plan["cell_width"]
    problems: list[str] = []
    worst = 0.0
    cells = [r[0] for r in rows]
    if cells and (cells[0] < plan["cells"][0] or cells[-1] > plan["cells"][1]):
        problems.append(f"DuckDB cells {cells[0]}..{cells[-1]} outside the plan's {plan['cells']}")
    for fi, name in enumerate(fields):
        ours = [b for b in survey["buckets"] if b["field"] == fi]
        by_cell = {b["first"]["axis"] // width: b for b in ours}
        if len(by_cell) != len(ours):
            problems.append(f"{name}: two archive buckets in one cell")
        if sorted(by_cell) != cells:
            problems.append(f"{name}: archive cells {sorted(by_cell)[:5]}.. ≠ DuckDB cells {cells[:5]}..")
            continue
        base = 4 + 6 * fi
        for r in rows:
            cell, n, first_axis, last_axis = r[0], r[1], r[2], r[3]
            first, last, lo, hi, count, total = r[base : base + 6]
            b = by_cell[cell]
            want = {
                "count": (b["count"], count),
                "first.axis": (b["first"]["axis"], first_axis),
                "first": (b["first"]["value"], float(first)),
                "last.axis": (b["last"]["axis"], last_axis),
                "last": (b["last"]["value"], float(last)),
                "min": (b["min"]["value"], float(lo)),
                "max": (b["max"]["value"], float(hi)),
            }
            for what, (a, d) in want.items():
                if a != d:
                    problems.append(f"{name} cell {cell}: {what} archive {a!r} ≠ DuckDB {d!r}")
            if not close(b["sum"], float(total)):
                problems.append(f"{name} cell {cell}: sum archive {b['sum']!r} ≠ DuckDB {total!r}")
            worst = max(worst, rel_diff(b["sum"], float(total)))
            if count != n:
                problems.append(f"{name} cell {cell}: count {count} ≠ rows {n} (nulls?)")
    return problems, worst


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
