"""Shared by the benchmark scripts (`bench_survey.py`, `compare.py`, `bench_cardinality.py`, `bench_serve.py`): timing,
formatting, the CLI runner, a `serve` process, and DuckDB's M4 query with its check against the archive's survey buckets."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AXIS = "ordinal"
RUNS = 5
CLK_TCK = os.sysconf("SC_CLK_TCK")
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
                f"{Path(sys.argv[0]).name}: {path} not found; build it first: "
                "cargo build --release --bin series-archive"
            )
        self.path = path

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.path), *args], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            sys.exit(
                f"{Path(sys.argv[0]).name}: {self.path.name} {' '.join(args)} failed "
                f"({done.returncode}): {done.stderr}"
            )
        return done.stdout

    def json(self, *args: str):
        return json.loads(self.run(*args, "--json"))


def m4_query(
    src: str, where: str, fields: list[str], width: int, order: str = "_seq", axis: str = AXIS
) -> str:
    """DuckDB M4 per cell `axis // width`: first/last (by `(axis, order)`: publish order
    breaks axis ties), min, max, count, sum per field. `axis` names the axis column."""
    cols = [
        f"{axis} // {width} AS cell",
        "count(*) AS n",
        f"min({axis}) AS first_axis",
        f"max({axis}) AS last_axis",
    ]
    key = f"({axis}, {order})"
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


def sh(cmd: list[str]) -> str:
    """A command's stdout, stripped ("n/a" when it cannot run)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "n/a"


def host() -> dict:
    """The machine a report was measured on: cores, CPU model, memory, OS."""
    import platform

    cpu = mem = "n/a"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {
        "cpus": sh(["nproc"]) or str(os.cpu_count()),
        "cpu": cpu,
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
    }


def reusable(path: Path, rows: int, key: bytes, generator: str) -> bool:
    """Whether the Parquet file at `path` is a dataset generated earlier with `rows` rows by
    the same generator (its schema metadata `key` says which)."""
    if not path.is_file():
        return False
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path)
    kv = meta.schema.to_arrow_schema().metadata or {}
    return meta.num_rows == rows and kv.get(key) == generator.encode()


class Server:
    """`series-archive serve ARCHIVE --listen 127.0.0.1:0`, its URL from the first stdout line."""

    def __init__(self, cli: Path, archive: Path, log: Path, extra: list[str] = (), prog: str = "bench"):
        self.log_path = log
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(
            [str(cli), "serve", str(archive), "--listen", "127.0.0.1:0", *extra],
            stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline().decode()
        m = re.search(r" at (http://[^ ]+/)", line)
        if not m:
            self.stop()
            sys.exit(f"{prog}: serve did not say where it listens: {line!r} "
                     f"({log.read_text()[-500:]})")
        self.url = m.group(1)
        u = urllib.parse.urlparse(self.url)
        self.host, self.port = u.hostname, u.port
        # Drain stdout so the server can never block on it.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def cpu(self) -> float:
        """The server process's CPU seconds (user + system, all threads)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / CLK_TCK

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode
