#!/usr/bin/env python3
"""The CLI survey as a user runs it, at every archive size: a fresh process each time.

    cargo build --release --bin series-archive --example scale
    target/release/examples/scale 1000000 10000000 50000000 200000000 > /tmp/scale.txt
    python3 scripts/bench_scale.py $(cat /tmp/scale.txt)

For each archive (`examples/scale.rs` leaves it as `ingest` would: barriers of 250 000 rows,
then the automatic maintenance) it times `series-archive survey ARCHIVE --stream capture
--track run_0 probe.00 --budget 400 --json` end to end (process start, open, the reads, JSON
out; median of 9 after 2 warm-ups, the page cache warm) and its peak RSS (`wait4`), then runs
`series-archive compact ARCHIVE` and measures again. Prints a markdown table with each size's
ratio to the smallest, and writes it to `target/bench-scale.md`. Standard library only.
"""

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release" / "series-archive"
RUNS, WARM = 9, 2


def measure(archive):
    """Median seconds and peak RSS (KiB) over RUNS fresh processes."""
    times, rss = [], []
    answer = None
    for i in range(WARM + RUNS):
        began = time.perf_counter()
        child = subprocess.Popen(
            [str(BIN), "survey", archive, "--stream", "capture", "--track", "run_0",
             "probe.00", "--budget", "400", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = child.stdout.read()
        err = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.perf_counter() - began
        if status != 0:
            sys.exit(f"survey failed on {archive}: {err.decode()}")
        if answer is None:
            answer = out
        elif out != answer:
            sys.exit(f"survey answers differ between runs on {archive}")
        if i >= WARM:
            times.append(elapsed)
            rss.append(usage.ru_maxrss)
    return statistics.median(times), statistics.median(rss), answer


def level_files(archive):
    listed = subprocess.run([str(BIN), "files", archive, "--stream", "capture", "--levels"],
                            check=True, capture_output=True, text=True).stdout
    return len(listed.split())


def main():
    archives = sys.argv[1:]
    if not archives:
        sys.exit(__doc__)
    rows = []
    for archive in archives:
        size = int(Path(archive).name.split("-")[-1])
        ingest_t, ingest_rss, before = measure(archive)
        ingest_files = level_files(archive)
        subprocess.run([str(BIN), "compact", archive], check=True, capture_output=True)
        compact_t, compact_rss, after = measure(archive)
        if before != after:
            sys.exit(f"{archive}: compact changed the survey's answer")
        rows.append((size, ingest_t, ingest_rss, ingest_files, compact_t, compact_rss,
                     level_files(archive)))
        print(f"bench_scale: {size} rows: {ingest_t * 1e3:.2f} ms / {ingest_rss} KiB after "
              f"ingest, {compact_t * 1e3:.2f} ms / {compact_rss} KiB after compact",
              file=sys.stderr)
    base = rows[0]
    lines = [
        "| rows | after ingest: survey | ÷ smallest | peak RSS | ÷ smallest | level files "
        "| after compact: survey | ÷ smallest | peak RSS | ÷ smallest | level files |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r[0]:,} | {r[1] * 1e3:.2f} ms | {r[1] / base[1]:.2f}× | {r[2] / 1024:.1f} MiB "
            f"| {r[2] / base[2]:.2f}× | {r[3]} | {r[4] * 1e3:.2f} ms | {r[4] / base[4]:.2f}× "
            f"| {r[5] / 1024:.1f} MiB | {r[5] / base[5]:.2f}× | {r[6]} |")
    report = "\n".join(lines) + "\n"
    print(report)
    (ROOT / "target" / "bench-scale.md").write_text(report)


if __name__ == "__main__":
    main()
