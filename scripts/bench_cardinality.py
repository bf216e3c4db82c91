#!/usr/bin/env python3
"""Cost along the track-count axis, through the CLI, beside DuckDB in the same run (issue 25).

    .venv/bin/python scripts/bench_cardinality.py                  # 16,1000,10000,100000 tracks, 10M rows
    .venv/bin/python scripts/bench_cardinality.py --rows 2M --bin /tmp/series-archive
    .venv/bin/python scripts/bench_cardinality.py --tracks 4,50 --rows 2000 --quick \\
        --bin target/debug/series-archive --data /tmp/x            # the smoke check (tests/cardinality_smoke.rs)

Needs duckdb, pyarrow, numpy and matplotlib (`requirements-test.txt`). Unless --bin is given,
uses `target/release/series-archive`, building it first when it is missing.

Per track count (the same `--rows` in total each time, under `DATA/<tracks>-tracks-<rows>/`):

1. the dataset, generated once and cached: tracks `(host, metric)` (`h0000`…, `m00`…; 100
   metrics per host from 1,000 tracks up, else the squarest split), a nanosecond axis `ts`
   (UInt64, from 1_764_000_000_000_000_000, one track's rows 10 s apart) and a float `value`
   (a random walk per track from SplitMix64 steps), rows interleaved tick-major as a scraper
   delivers them (every track's row of tick t, then tick t+1), written by pyarrow as zstd
   Parquet;
2. DuckDB `COPY (SELECT * FROM read_parquet(file)) TO … (FORMAT parquet, COMPRESSION zstd)`
   (median of `--copy-runs` after a warm-up), then `series-archive ingest FILE ARCHIVE
   --stream metrics --track host,metric --axis ts --ladder 1000000000,8,8 --seal-rows 100000
   --no-compact` as one whole process; bytes on disk under `ARCHIVE/streams/` (rows, levels,
   Delta logs) and `ARCHIVE/manifest/`, checked against `inspect --json` (rows, tracks);
3. `compact ARCHIVE`, bytes again; every read below runs on the compacted archive (on the
   archive as ingest left it when compact did not finish, and the table says so);
4. `survey` of one track at budget 400 beside DuckDB's M4 of that track over the plain file in
   the archive's cells (read from `survey --json`: cell width and range), cell for cell; `rows`
   of that track (`--format parquet`) beside DuckDB's rows of it, `ts` and `value` equal row for
   row; `fold count` and `fold sum` of its host prefix beside DuckDB's `WHERE host = …`; the
   survey of the whole stream at budget 4000 beside DuckDB's M4 of the whole file;
5. the one-track survey and rows again through `serve ARCHIVE --listen 127.0.0.1:0`, one warm
   server and one HTTP/1.1 keep-alive connection (median of `--served-runs` after a warm-up,
   each answer checked against the CLI's survey and DuckDB's rows): the like-for-like figure
   beside DuckDB's warm in-process connection, where step 4 also pays a process's start.

Each CLI command is timed as a whole process (spawn to exit) with its peak RSS (`wait4`), and
killed after `--timeout` seconds: it is then reported as "did not finish in N s" and what
depends on it as not measured. Reads: median of `--runs` after one untimed warm-up (fewer when
one run takes seconds: the table says how many). DuckDB runs in this process on one warm
connection, its default threads. Every answer is checked before its time is kept; a
disagreement prints what differs and exits 1 without writing the report. Writes
`docs/bench-cardinality.md` and `docs/bench-cardinality.svg` (with --quick: under DATA), and
DATA/results.json (`--report-only` rewrites the report from it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchlib import ROOT, Server, reusable, check_m4, close, fmt, host, m4_query, sh, sql_text, target_dir

PROG = "bench_cardinality"
STREAM = "metrics"
AXIS = "ts"
FIELDS = ["value"]
LADDER = "1000000000,8,8"
T0 = 1_764_000_000_000_000_000
STEP_NS = 10_000_000_000
SEED = 0xCA4D
GENERATOR = "cardinality-1"  # bump when the dataset changes
CHUNK_ROWS = 1 << 20
TRACK_BUDGET = 400
STREAM_BUDGET = 4000
MIB = 1024 * 1024


def say(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def fail(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def parse_count(part: str) -> int:
    part = part.strip().replace("_", "")
    mult = {"k": 1_000, "m": 1_000_000}.get(part[-1:].lower(), 1)
    n = int(float(part[:-1]) * mult) if mult > 1 else int(part)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{part}: a positive count")
    return n


def parse_list(text: str) -> list[int]:
    return [parse_count(p) for p in text.split(",") if p.strip()]


def split(tracks: int) -> tuple[int, int]:
    """(hosts, metrics per host): 100 metrics per host from 1,000 tracks, else the squarest split."""
    if tracks >= 1000 and tracks % 100 == 0:
        m = 100
    else:
        m = max(d for d in range(1, math.isqrt(tracks) + 1) if tracks % d == 0)
    return tracks // m, m


def labels(tracks: int) -> tuple[list[str], list[str]]:
    hosts, metrics = split(tracks)
    hw, mw = max(4, len(str(hosts - 1))), max(2, len(str(metrics - 1)))
    return [f"h{i:0{hw}d}" for i in range(hosts)], [f"m{j:0{mw}d}" for j in range(metrics)]


def probe_track(tracks: int) -> tuple[str, str]:
    """The track every one-track read asks for: one in the middle of key order."""
    hosts, metrics = labels(tracks)
    return hosts[len(hosts) // 2], metrics[len(metrics) // 2]


# ---------------------------------------------------------------- the dataset

SCHEMA = pa.schema(
    [
        pa.field("host", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field(AXIS, pa.uint64(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
    ],
    metadata={"cardinality.generator": GENERATOR},
)


def splitmix(k: np.ndarray) -> np.ndarray:
    """The k-th output (1-based, uint64) of SplitMix64 seeded with SEED (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = k * np.uint64(0x9E3779B97F4A7C15) + np.uint64(SEED)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def dataset(path: Path, tracks: int, per_track: int) -> Path:
    rows = tracks * per_track
    if reusable(path, rows, b"cardinality.generator", GENERATOR):
        say(f"reusing {path} ({rows:,} rows)")
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    began = time.perf_counter()
    host_names, metric_names = labels(tracks)
    metrics = len(metric_names)
    host_arr, metric_arr = pa.array(host_names), pa.array(metric_names)
    track = np.arange(tracks, dtype=np.int64)
    walk = np.full(tracks, 100.0)
    ticks_per_chunk = max(1, CHUNK_ROWS // tracks)
    with pq.ParquetWriter(tmp, SCHEMA, compression="zstd") as w:
        for t0 in range(0, per_track, ticks_per_chunk):
            ticks = min(ticks_per_chunk, per_track - t0)
            j0 = t0 * tracks
            k = np.arange(j0 + 1, j0 + ticks * tracks + 1, dtype=np.uint64)
            m = splitmix(k).reshape(ticks, tracks)
            steps = ((m >> np.uint64(11)).astype(np.float64) / float(1 << 53) - 0.5) * 2.0
            values = walk + np.cumsum(steps, axis=0)
            walk = values[-1].copy()
            tick = np.arange(t0, t0 + ticks, dtype=np.uint64)
            ts = np.repeat(np.uint64(T0) + tick * np.uint64(STEP_NS), tracks)
            tr = np.tile(track, ticks)
            w.write_table(
                pa.table(
                    [
                        host_arr.take(pa.array(tr // metrics)),
                        metric_arr.take(pa.array(tr % metrics)),
                        pa.array(ts, pa.uint64()),
                        pa.array(values.ravel(), pa.float64()),
                    ],
                    schema=SCHEMA,
                )
            )
    tmp.rename(path)
    say(f"generated {path} ({rows:,} rows) in {time.perf_counter() - began:.1f} s")
    return path


# ---------------------------------------------------------------- whole processes


# A process forked from this one (DuckDB loaded: 100+ MiB) starts with this one's peak RSS in
# its own `ru_maxrss`, so the peak RSS of a command is read by a small process between the two:
# GNU time when installed, else this launcher (a bare interpreter, some 10 MiB).
LAUNCHER = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(f"{usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status) & 255)
"""


def meter(rss_file: str) -> list[str]:
    if Path("/usr/bin/time").is_file():
        return ["/usr/bin/time", "-f", "%M", "-o", rss_file]
    return [sys.executable, "-S", "-c", LAUNCHER, rss_file]


class Proc:
    """One whole process: wall seconds (spawn to exit), exit code, output; with `rss`, its peak
    RSS (KiB) read through `meter` (that run's wall time then includes the meter's start)."""

    def __init__(self, argv: list[str], timeout: float, rss: bool = False):
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        rss_file = tempfile.NamedTemporaryFile(prefix="rss-", delete=False)
        rss_file.close()
        env = {k: v for k, v in os.environ.items() if k != "SERIES_ARCHIVE_LOG"}
        lock, state = threading.Lock(), {"reaped": False, "killed": False}
        full = [*meter(rss_file.name), *argv] if rss else argv
        began = time.perf_counter()
        child = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                 start_new_session=True)

        def kill() -> None:
            with lock:  # the leader is not reaped before `reaped` is set: its group is still its own
                if not state["reaped"]:
                    os.killpg(child.pid, signal.SIGKILL)
                    state["killed"] = True

        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        timer.start()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        self.secs = time.perf_counter() - began
        with lock:
            state["reaped"] = True
        timer.cancel()
        _, status, _ = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        self.argv = argv
        self.metered = rss
        self.code = child.returncode
        self.timed_out = state["killed"]
        self.rss_kib = None
        if rss and not self.timed_out:
            lines = Path(rss_file.name).read_text().split()
            self.rss_kib = int(lines[-1]) if lines and lines[-1].isdigit() else None
        os.unlink(rss_file.name)
        out.seek(0)
        err.seek(0)
        self.stdout = out.read().decode(errors="replace")
        self.stderr = err.read().decode(errors="replace")
        out.close()
        err.close()

    def check(self) -> "Proc":
        """Exits 1 when the command failed (other than by the timeout)."""
        if not self.timed_out and self.code != 0:
            fail(f"{shlex.join(self.argv)} failed ({self.code}):\n{self.stderr}")
        if self.metered and not self.timed_out and self.rss_kib is None:
            fail(f"{shlex.join(self.argv)}: no peak RSS from {meter('FILE')[0]}")
        return self


def timed(argv: list[str], args, runs: int | None = None) -> tuple[dict, Proc | None]:
    """One untimed warm-up (its peak RSS kept), then the median of `runs` (fewer when one run
    takes seconds). Answers ({"secs", "all", "rss_mib", "runs"} or {"timeout": N}, the last run)."""
    runs = runs or args.runs
    warm = Proc(argv, args.timeout, rss=True).check()
    if warm.timed_out:
        return {"timeout": args.timeout}, None
    if warm.secs > 10:
        runs = 1
    elif warm.secs > 2:
        runs = min(runs, 3)
    times, last = [], warm
    for _ in range(runs):
        p = Proc(argv, args.timeout).check()
        if p.timed_out:
            return {"timeout": args.timeout}, None
        if p.stdout != warm.stdout and "--out" not in argv:
            fail(f"{shlex.join(argv)}: two runs printed different answers")
        times.append(p.secs)
        last = p
    return {
        "secs": statistics.median(times),
        "all": times,
        "rss_mib": warm.rss_kib / 1024,
        "runs": runs,
    }, last


def once(argv: list[str], args) -> tuple[dict, Proc]:
    p = Proc(argv, args.timeout, rss=True).check()
    if p.timed_out:
        return {"timeout": args.timeout}, p
    return {"secs": p.secs, "all": [p.secs], "rss_mib": p.rss_kib / 1024, "runs": 1}, p


def duck_timed(fn, runs: int) -> tuple[float, object]:
    result = fn()
    times = []
    for _ in range(max(runs, 1)):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def disk(archive: Path, rows: int) -> dict:
    """Bytes under `streams/` (row files, level files, Delta logs) and `manifest/`."""
    base = archive / "streams" / STREAM
    out = {"files": {}, "bytes": {}}
    for kind in ("rows", "levels"):
        parquet = [p for p in (base / kind).rglob("*.parquet") if "_delta_log" not in p.parts]
        out["files"][kind] = len(parquet)
        out["bytes"][kind] = sum(p.stat().st_size for p in parquet)
    out["bytes"]["delta_logs"] = sum(tree_bytes(base / k / "_delta_log") for k in ("rows", "levels"))
    out["bytes"]["streams"] = tree_bytes(archive / "streams")
    out["bytes"]["manifest"] = tree_bytes(archive / "manifest")
    out["per_row"] = out["bytes"]["streams"] / rows
    return out


# ---------------------------------------------------------------- one track count


def measure(tracks: int, args, bin_: str, con) -> dict:
    rows = args.rows
    per_track = rows // tracks
    hosts, metrics = split(tracks)
    root = args.data / f"{tracks}-tracks-{rows}"
    data = dataset(root / "metrics.parquet", tracks, per_track)
    archive = root / "archive"
    host, metric = probe_track(tracks)
    r: dict = {
        "tracks": tracks, "hosts": hosts, "metrics": metrics, "per_track": per_track,
        "rows": rows, "track": [host, metric], "plain_bytes": data.stat().st_size,
        "problems": [], "notes": [],
    }
    problems = r["problems"]
    src = f"read_parquet({sql_text(str(data))}, file_row_number = true)"
    track_where = f"host = {sql_text(host)} AND metric = {sql_text(metric)}"
    host_where = f"host = {sql_text(host)}"
    say(f"{tracks:,} tracks ({hosts:,} hosts × {metrics} metrics, {per_track:,} rows each)")

    # -- DuckDB COPY to zstd Parquet: the write every ingest figure is held against.
    copy_out = root / "duckdb-copy.parquet"
    copy_sql = (f"COPY (SELECT * FROM read_parquet({sql_text(str(data))})) TO {sql_text(str(copy_out))} "
                "(FORMAT parquet, COMPRESSION zstd)")
    r["duck_copy"], _ = duck_timed(lambda: con.execute(copy_sql), args.copy_runs)
    r["duck_copy_bytes"] = copy_out.stat().st_size
    if pq.read_metadata(copy_out).num_rows != rows:
        problems.append(f"DuckDB COPY wrote {pq.read_metadata(copy_out).num_rows} rows, not {rows}")
    copy_out.unlink()

    # -- ingest, one whole process.
    if archive.exists():
        shutil.rmtree(archive)
    argv = [bin_, "ingest", str(archive), str(data), "--stream", STREAM, "--track", "host,metric",
            "--axis", AXIS, "--ladder", LADDER, "--seal-rows", str(args.seal_rows), "--no-compact"]
    r["ingest_cmd"] = shlex.join(["BIN", "ingest", "ARCHIVE", "FILE", *argv[4:]])
    say(f"{tracks:,} tracks: ingest ...")
    r["ingest"], p = once(argv, args)
    if "timeout" in r["ingest"]:
        durable = [ln for ln in p.stdout.splitlines() if "durable through position" in ln]
        r["ingest_durable"] = int(durable[-1].split("durable through position ")[1].split()[0]) if durable else 0
        r["skip"] = f"ingest did not finish in {args.timeout:g} s"
        say(f"{tracks:,} tracks: {r['skip']} ({r['ingest_durable']:,} rows durable by then)")
        shutil.rmtree(archive, ignore_errors=True)
        return r
    say(f"{tracks:,} tracks: ingest {fmt(r['ingest']['secs'])}")
    r["after_ingest"] = disk(archive, rows)

    r["inspect_ingest"], p = once([bin_, "inspect", str(archive), "--json"], args)
    if "secs" in r["inspect_ingest"]:
        desc = json.loads(p.stdout)
        stream = next(s for s in desc["streams"] if s["id"] == STREAM)
        if stream["rows"] != rows or len(stream["tracks"]) != tracks:
            problems.append(f"inspect: {stream['rows']} rows in {len(stream['tracks'])} tracks, "
                            f"not {rows} in {tracks}")
        if stream["measured"] != FIELDS:
            problems.append(f"inspect: measured fields {stream['measured']} ≠ {FIELDS}")
        on_disk = r["after_ingest"]["bytes"]
        if (stream["bytes"], stream["level_bytes"]) != (on_disk["rows"], on_disk["levels"]):
            problems.append(f"inspect: {stream['bytes']} row bytes and {stream['level_bytes']} level "
                            f"bytes, the disk {on_disk['rows']} and {on_disk['levels']}")
        if problems:
            return r

    # -- compact; the reads below run on what it leaves.
    say(f"{tracks:,} tracks: compact ...")
    r["compact"], p = once([bin_, "compact", str(archive)], args)
    if "timeout" in r["compact"]:
        r["notes"].append(f"compact did not finish in {args.timeout:g} s: the reads ran on the archive "
                          "as ingest left it")
        say(f"{tracks:,} tracks: compact did not finish in {args.timeout:g} s")
        r["reads_on"] = "ingested"
    else:
        r["after_compact"] = disk(archive, rows)
        r["reads_on"] = "compacted"
        say(f"{tracks:,} tracks: compact {fmt(r['compact']['secs'])}")
    r["inspect_reads"], p = once([bin_, "inspect", str(archive), "--json"], args)
    if "secs" in r["inspect_reads"]:
        stream = next(s for s in json.loads(p.stdout)["streams"] if s["id"] == STREAM)
        if stream["rows"] != rows or len(stream["tracks"]) != tracks:
            problems.append(f"inspect after compact: {stream['rows']} rows in {len(stream['tracks'])} tracks")
        on_disk = r.get("after_compact", r["after_ingest"])
        if (stream["bytes"], stream["level_bytes"]) != (on_disk["bytes"]["rows"], on_disk["bytes"]["levels"]):
            problems.append(f"inspect after compact: {stream['bytes']} row bytes and {stream['level_bytes']} "
                            f"level bytes, the disk {on_disk['bytes']['rows']} and {on_disk['bytes']['levels']}")
        if problems:
            return r

    # -- survey of one track @400 beside DuckDB's M4 of it, same cells.
    d = str(archive)
    say(f"{tracks:,} tracks: survey of {host}/{metric} ...")
    r["survey"], p = timed([bin_, "survey", d, "--stream", STREAM, "--track", host, metric,
                            "--budget", str(TRACK_BUDGET), "--json"], args)
    track_survey = None
    if p is not None:
        survey = track_survey = json.loads(p.stdout)
        width = survey["plan"]["cell_width"]
        r["survey_plan"] = {**survey["plan"], "buckets": len(survey["buckets"])}
        q = m4_query(src, track_where, FIELDS, width, order="file_row_number", axis=AXIS)
        r["duck_m4"], m4 = duck_timed(lambda: con.execute(q).fetchall(), args.runs)
        if args.tamper:  # the smoke test's proof that the checks bite: one cell's min off by one
            first = list(m4[0])
            first[6] -= 1.0
            m4[0] = tuple(first)
        if len(survey["buckets"]) * 4 > TRACK_BUDGET:
            problems.append(f"survey: {len(survey['buckets'])} buckets over budget {TRACK_BUDGET}")
        bad, _ = check_m4(survey, m4, FIELDS)
        problems += [f"survey {host}/{metric} vs DuckDB M4: {m}" for m in bad[:10]]
        if problems:
            return r

    # -- rows of that track beside DuckDB's, row for row.
    say(f"{tracks:,} tracks: rows of {host}/{metric} ...")
    out = root / "rows.parquet"
    r["rows_cmd"], p = timed([bin_, "rows", d, "--stream", STREAM, "--track", host, metric,
                              "--format", "parquet", "--out", str(out), "--force"], args)
    track_rows = None
    if p is not None:
        ours = pq.read_table(out)
        q = f"SELECT ts, value FROM {src} WHERE {track_where} ORDER BY file_row_number"
        r["duck_rows"], theirs = duck_timed(lambda: con.execute(q).fetch_arrow_table(), args.runs)
        r["rows_count"] = theirs.num_rows
        track_rows = theirs
        if ours.num_rows != theirs.num_rows or theirs.num_rows != per_track:
            problems.append(f"rows {host}/{metric}: archive {ours.num_rows} rows, DuckDB "
                            f"{theirs.num_rows}, generated {per_track}")
        else:
            for col in ("ts", "value"):
                if not ours.column(col).combine_chunks().equals(theirs.column(col).combine_chunks()):
                    problems.append(f"rows {host}/{metric}: column {col} differs from DuckDB's")
        out.unlink(missing_ok=True)
        if problems:
            return r

    # -- fold of the host prefix (count, sum) beside DuckDB's WHERE host = ….
    say(f"{tracks:,} tracks: fold count/sum of {host} ...")
    q = f"SELECT count(value), sum(value) FROM {src} WHERE {host_where}"
    r["duck_fold"], (d_count, d_sum) = duck_timed(lambda: con.execute(q).fetchone(), args.runs)
    (d_abs,) = con.execute(f"SELECT sum(abs(value)) FROM {src} WHERE {host_where}").fetchone()
    r["fold_rows"] = d_count
    if d_count != metrics * per_track:
        problems.append(f"DuckDB counts {d_count} rows of {host}, generated {metrics * per_track}")
    r["fold"] = {}
    for kind in ("count", "sum"):
        r["fold"][kind], p = timed([bin_, "fold", d, "--stream", STREAM, "--track", host,
                                    "--aggregate", kind, "--json"], args)
        if p is None:
            continue
        answer = json.loads(p.stdout)["answers"][0]
        if kind == "count" and (answer["value"] != d_count or answer["count"] != d_count):
            problems.append(f"fold count {host}: archive {answer['value']!r} ≠ DuckDB {d_count}")
        if kind == "sum" and abs(answer["value"] - d_sum) > 1e-9 * d_abs:
            problems.append(f"fold sum {host}: archive {answer['value']!r} ≠ DuckDB {d_sum!r} "
                            f"(beyond 1e-9 × Σ|value| = {1e-9 * d_abs:.3g})")
    if problems:
        return r

    # -- survey of the whole stream @4000, its peak RSS, beside DuckDB's M4 of the file.
    say(f"{tracks:,} tracks: survey of the whole stream ...")
    r["stream_survey"], p = timed([bin_, "survey", d, "--stream", STREAM, "--budget",
                                   str(STREAM_BUDGET), "--json"], args)
    if p is not None:
        survey = json.loads(p.stdout)
        r["stream_plan"] = {**survey["plan"], "buckets": len(survey["buckets"])}
        q = m4_query(src, "TRUE", FIELDS, survey["plan"]["cell_width"], order="file_row_number", axis=AXIS)
        r["duck_stream_m4"], m4 = duck_timed(lambda: con.execute(q).fetchall(), min(args.runs, 3))
        if len(survey["buckets"]) * 4 > STREAM_BUDGET:
            problems.append(f"stream survey: {len(survey['buckets'])} buckets over budget {STREAM_BUDGET}")
        bad, _ = check_m4(survey, m4, FIELDS)
        problems += [f"survey of the whole stream vs DuckDB M4: {m}" for m in bad[:10]]
    if problems:
        return r

    # -- the same one-track reads through `serve`: one warm server, one keep-alive connection,
    # as DuckDB's figures are one warm connection in this process.
    if track_survey is not None and track_rows is not None:
        say(f"{tracks:,} tracks: survey and rows of {host}/{metric} through serve ...")
        served(r, bin_, archive, root, [host, metric], track_survey, track_rows, args)
    if not args.keep:
        shutil.rmtree(archive, ignore_errors=True)
    return r


def served(r: dict, bin_: str, archive: Path, root: Path, track: list[str], survey: dict,
           rows: pa.Table, args) -> None:
    """`serve ARCHIVE` once; the track's survey @TRACK_BUDGET and its rows (Arrow IPC, whole
    range) over HTTP/1.1 keep-alive: one untimed warm-up each, then the median of
    `--served-runs`, each answer checked (the survey's buckets equal the CLI's `survey --json`,
    the rows equal DuckDB's row for row). Adds `served_survey`, `served_rows` (seconds, request
    sent to answer read) and the server's peak RSS; a refusal or a disagreement is a problem."""
    query = [("stream", STREAM)] + [("track", label) for label in track]
    survey_target = "/api/survey?" + urllib.parse.urlencode(query + [("budget", TRACK_BUDGET)])
    rows_target = "/api/rows?" + urllib.parse.urlencode(query + [("format", "arrow")])
    server = Server(Path(bin_), archive, root / "serve.log", prog=PROG)
    conn = http.client.HTTPConnection(server.host, server.port, timeout=args.timeout)
    problems = r["problems"]

    def get(target: str) -> tuple[float, bytes]:
        began = time.perf_counter()
        conn.request("GET", target)
        resp = conn.getresponse()
        body = resp.read()
        secs = time.perf_counter() - began
        if resp.status != 200:
            raise RuntimeError(f"GET {target}: {resp.status} {body[:300]!r}")
        return secs, body

    def timed_get(target: str, check) -> dict:
        _, body = get(target)  # warm-up
        check(body)
        times = []
        for _ in range(args.served_runs):
            secs, body = get(target)
            check(body)
            times.append(secs)
        return {"secs": statistics.median(times), "all": times, "runs": len(times)}

    def check_survey(body: bytes) -> None:
        answer = json.loads(body)
        if answer["plan"] != survey["plan"] or answer["buckets"] != survey["buckets"]:
            raise RuntimeError(f"GET {survey_target}: plan or buckets differ from `survey --json`")

    def check_rows(body: bytes) -> None:
        table = pa.ipc.open_stream(body).read_all()
        if table.num_rows != rows.num_rows:
            raise RuntimeError(f"GET {rows_target}: {table.num_rows} rows, DuckDB {rows.num_rows}")
        for col in ("ts", "value"):
            ours = table.column(col).cast(rows.schema.field(col).type).combine_chunks()
            if not ours.equals(rows.column(col).combine_chunks()):
                raise RuntimeError(f"GET {rows_target}: column {col} differs from DuckDB's")

    try:
        r["served_survey"] = timed_get(survey_target, check_survey)
        r["served_rows"] = timed_get(rows_target, check_rows)
        with open(f"/proc/{server.proc.pid}/status") as f:
            hwm = next(ln for ln in f if ln.startswith("VmHWM:"))
        r["served_rss_mib"] = int(hwm.split()[1]) / 1024
    except (RuntimeError, OSError, http.client.HTTPException) as e:
        problems.append(f"serve: {e} (log: {root / 'serve.log'})")
    finally:
        conn.close()
        code = server.stop()
        if code not in (0, -signal.SIGTERM) and not problems:
            problems.append(f"serve exited {code} (log: {root / 'serve.log'})")


# ---------------------------------------------------------------- the report


def machine(bin_: str) -> dict:
    import matplotlib

    return {
        **host(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "duckdb_threads": str(duckdb.connect().execute("SELECT current_setting('threads')").fetchone()[0]),
        "pyarrow": pa.__version__,
        "numpy": np.__version__,
        "matplotlib": matplotlib.__version__,
        "bin": bin_,
        "bin_version": sh([bin_, "--version"]),
        "commit": sh(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
        "nice": os.nice(0),
        "meter": "GNU time (`/usr/bin/time -f %M`)" if meter("x")[0] == "/usr/bin/time"
        else "a bare Python launcher (`wait4`)",
        "load_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def ok(m: dict | None) -> bool:
    return isinstance(m, dict) and "secs" in m


def rate(rows: int, secs: float) -> str:
    v = rows / secs
    return f"{v / 1e6:.2f} M rows/s" if v >= 1e5 else f"{v / 1e3:.1f} k rows/s"


def ratio(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}×"
    if x < 0.01:
        return f"{x:.1g}×"
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


def minutes(secs: float) -> str:
    return f"{secs / 60:.1f} min" if secs >= 60 else f"{secs:.1f} s"


def mib(b: float) -> str:
    return f"{b / MIB:.1f} MiB" if b >= MIB / 10 else f"{b / 1024:.1f} KiB"


def why(r: dict, m: dict | None = None) -> str:
    """Why a figure is absent: what it depends on did not finish."""
    if r.get("skip"):
        return f"not measured ({r['skip']})"
    if isinstance(m, dict) and "timeout" in m:
        return f"not measured (did not finish in {m['timeout']:g} s)"
    return "not measured"


def t(r: dict, m: dict | None) -> str:
    """A command's own time: its median, or that it did not finish."""
    if isinstance(m, dict) and "timeout" in m:
        return f"**did not finish in {m['timeout']:g} s**"
    if not ok(m):
        return why(r, m)
    runs = f" (median of {m['runs']})" if m["runs"] > 1 else " (1 run)"
    return fmt(m["secs"]) + runs


def rss(r: dict, m: dict | None) -> str:
    return f"{m['rss_mib']:.0f} MiB" if ok(m) else why(r, m)


def ingest_rate(r):
    return r["rows"] / r["ingest"]["secs"] if ok(r.get("ingest")) else None


def copy_rate(r):
    return r["rows"] / r["duck_copy"]


def bytes_row(r: dict, key: str, what: str) -> str:
    dsk = r.get(key)
    if not dsk:
        if key == "after_compact" and r.get("compact") and "timeout" in r["compact"]:
            return f"not measured (compact did not finish in {r['compact']['timeout']:g} s)"
        return why(r, r.get("ingest"))
    b = dsk["bytes"]
    if what == "total":
        s = b["streams"]
        return (f"{dsk['per_row']:.1f} (rows {b['rows'] / s:.0%}, levels {b['levels'] / s:.0%}, "
                f"Delta logs {b['delta_logs'] / s:.0%})")
    if what == "ratio":
        return ratio(dsk["per_row"] / (r["duck_copy_bytes"] / r["rows"]))
    if what == "manifest":
        return mib(b["manifest"])
    if what == "files":
        return f"{dsk['files']['rows']:,} + {dsk['files']['levels']:,}"
    raise ValueError(what)


def targets(results: list[dict]) -> tuple[list[str], list[tuple]]:
    """Header and (target, per-count cells) rows: each count's figure against the issue's target."""
    base = results[0]
    rest = results[1:] or results
    rows_out = []

    def cell(value, passed):
        return f"{value} {'pass' if passed else '**miss**'}"

    def line(name, fn):
        cells = []
        for r in rest:
            try:
                cells.append(fn(r))
            except (KeyError, TypeError, ZeroDivisionError):
                cells.append(why(r))
        rows_out.append((name, cells))

    b_rate = ingest_rate(base)

    def bound(r, peer, least):
        """An ingest past the timeout ran below rows / timeout: a miss when even that is short."""
        m = r.get("ingest")
        if isinstance(m, dict) and "timeout" in m and peer:
            x = r["rows"] / m["timeout"] / peer
            if x < least:
                return f"< {ratio(x)} (did not finish in {m['timeout']:g} s) **miss**"
        return why(r, m)

    def vs_base_rate(r):
        x = ingest_rate(r)
        if x is None or b_rate is None:
            return bound(r, b_rate, 0.8)
        return cell(ratio(x / b_rate), x / b_rate >= 0.8)

    def vs_copy(r):
        x = ingest_rate(r)
        if x is None:
            return bound(r, copy_rate(r), 0.5)
        return cell(ratio(x / copy_rate(r)), x / copy_rate(r) >= 0.5)

    def bytes_vs(key):
        def f(r):
            dsk = r.get(key)
            if not dsk:
                return bytes_row(r, key, "ratio")
            x = dsk["per_row"] / (r["duck_copy_bytes"] / r["rows"])
            return cell(ratio(x), x <= 1.2)
        return f

    def flat(key):
        def f(r):
            m, b = r.get(key), base.get(key)
            if not ok(m) or not ok(b):
                return why(r, m)
            x = m["secs"] / b["secs"]
            return cell(ratio(x), x <= 2)
        return f

    def faster(key, duck):
        def f(r):
            m = r.get(key)
            if not ok(m):
                return why(r, m)
            x = r[duck] / m["secs"]
            return cell(ratio(x), x >= 10)
        return f

    def stream_time(r):
        m = r.get("stream_survey")
        if isinstance(m, dict) and "timeout" in m:
            return f"> {m['timeout']:g} s (did not finish) **miss**"
        return cell(fmt(m["secs"]), m["secs"] < 1) if ok(m) else why(r, m)

    def stream_rss(r):
        m = r.get("stream_survey")
        return cell(f"{m['rss_mib']:.0f} MiB", m["rss_mib"] <= 256) if ok(m) else why(r, m)

    def compact_flat(r):
        m, b = r.get("compact"), base.get("compact")
        if not ok(m) or not ok(b):
            return why(r, m)
        return f"{ratio(m['secs'] / b['secs'])} (O(rows): ≈1×)"

    n0 = f"{base['tracks']:,}"
    line(f"ingest rows/s ≥ 0.8× the {n0}-track rate", vs_base_rate)
    line("ingest rows/s ≥ 0.5× DuckDB `COPY` to zstd Parquet", vs_copy)
    line("bytes/row after ingest ≤ 1.2× DuckDB's zstd file", bytes_vs("after_ingest"))
    line("bytes/row after `compact` ≤ 1.2× DuckDB's zstd file", bytes_vs("after_compact"))
    line(f"`compact` time ÷ the {n0}-track time (same rows)", compact_flat)
    # Twice each: the CLI as one whole process (spawn, open, read, exit), and `serve` warm (one
    # keep-alive connection), which is what DuckDB's figures are (one warm connection in this
    # process): the like-for-like comparison.
    line(f"one track's `survey` @400 ≤ 2× its {n0}-track time (CLI process)", flat("survey"))
    line(f"one track's `survey` @400 ≤ 2× its {n0}-track time (`serve`, warm)", flat("served_survey"))
    line("one track's `survey` @400 ≥ 10× faster than DuckDB M4 (CLI process)", faster("survey", "duck_m4"))
    line("one track's `survey` @400 ≥ 10× faster than DuckDB M4 (`serve`, warm)",
         faster("served_survey", "duck_m4"))
    line(f"one track's `rows` ≤ 2× its {n0}-track time (CLI process)", flat("rows_cmd"))
    line(f"one track's `rows` ≤ 2× its {n0}-track time (`serve`, warm)", flat("served_rows"))
    line("one track's `rows` ≥ 10× faster than DuckDB (CLI process)", faster("rows_cmd", "duck_rows"))
    line("one track's `rows` ≥ 10× faster than DuckDB (`serve`, warm)", faster("served_rows", "duck_rows"))
    line("whole-stream `survey` @4000 < 1 s", stream_time)
    line("whole-stream `survey` @4000 ≤ 256 MiB peak RSS", stream_rss)
    return [f"{r['tracks']:,} tracks" for r in rest], rows_out


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    xs = [r["tracks"] for r in results]
    a.plot(xs, [copy_rate(r) for r in results], "s-", color="tab:gray", label="DuckDB COPY to zstd Parquet")
    pts = [(r["tracks"], ingest_rate(r)) for r in results if ingest_rate(r)]
    if pts:
        a.plot(*zip(*pts), "o-", color="tab:blue", label="series-archive ingest --no-compact")
    cut = [(r["tracks"], r["rows"] / r["ingest"]["timeout"]) for r in results
           if isinstance(r.get("ingest"), dict) and "timeout" in r["ingest"]]
    if cut:
        a.plot(*zip(*cut), "v", color="tab:red", markersize=9, linestyle="none",
               label="ingest did not finish: below this")
    a.set(xscale="log", yscale="log", xlabel="tracks", ylabel="rows/s",
          title=f"ingest of {results[0]['rows']:,} rows")
    a.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=8)
    for key, duck, style, label in (("survey", "duck_m4", "o-", "series-archive survey @400 (whole process)"),):
        pts = [(r["tracks"], r[key]["secs"] * 1e3) for r in results if ok(r.get(key))]
        if pts:
            b.plot(*zip(*pts), style, color="tab:blue", label=label)
        pts = [(r["tracks"], r[duck] * 1e3) for r in results if ok(r.get(key)) and duck in r]
        if pts:
            b.plot(*zip(*pts), "s-", color="tab:gray", label="DuckDB M4 of the track (same cells)")
    b.set(xscale="log", yscale="log", xlabel="tracks", ylabel="ms", title="one track's survey latency")
    b.grid(True, which="both", alpha=0.3)
    if b.get_legend_handles_labels()[0]:
        b.legend(fontsize=8)
    for ax in (a, b):
        ax.set_xticks(xs, [f"{x:,}" for x in xs])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    fig.suptitle("cost against track count (issue 25)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def report(run_: dict, out: Path, plot_path: Path) -> str:
    results, info = run_["results"], run_["info"]
    rows = results[0]["rows"]
    L = [
        "# Cost against track count: the cardinality benchmark (issue 25)",
        "",
        f"Generated by `scripts/bench_cardinality.py` in one run on {run_['date']}, with "
        f"`{info['bin_version']}` at commit {run_['bin_commit']}. What the run was for is said below the "
        "command; earlier runs of the same script are kept beside this page (docs/bench-cardinality*.md).",
        "",
        "Every answer was checked against DuckDB over the plain Parquet file before its time was kept: "
        "one track's survey cell for cell (first/last/min/max and axes exactly, sums within 1e-9 relative) in "
        "the archive's own cells (width and range read from `survey --json`), `rows` of that track row for row "
        "(`ts` and `value` equal), `fold count` exactly and `fold sum` within 1e-9 × Σ|value| of the host "
        "prefix, the whole-stream survey cell for cell, and the row and track counts of `inspect --json`.",
        "",
        "Exact command:",
        "",
        "```sh",
        run_["command"],
        "```",
        "",
    ]
    if run_.get("what_ran"):
        L += [run_["what_ran"], ""]
    head, trows = targets(results)
    L += [
        "## Targets (issue 25)",
        "",
        f"The issue's targets are set at 100,000 tracks × 100 rows (10M rows); here each count holds "
        f"{rows:,} rows. Ratios are against the {results[0]['tracks']:,}-track archive or DuckDB measured "
        "in this same run.",
        "",
        "| target | " + " | ".join(head) + " |",
        "|---|" + "---:|" * len(head),
    ]
    for name, cells in trows:
        L.append(f"| {name} | " + " | ".join(cells) + " |")
    L += [
        "",
        "## Figures by track count",
        "",
        f"{rows:,} rows each time. CLI commands: one whole process each (spawn to exit); peak RSS read by "
        f"{info['meter']} around the command (for a read, around its warm-up run); "
        f"ingest and `compact` once each; reads the median of up to {run_['runs']} after one untimed warm-up "
        "(fewer when a run takes seconds, as noted). DuckDB: in this process, one warm connection, "
        f"{info['duckdb_threads']} threads; `COPY` the median of {run_['copy_runs']} after a warm-up; "
        "its reads the median of the same runs. Through `serve`: `serve ARCHIVE --listen 127.0.0.1:0` "
        f"started once on the compacted archive, one HTTP/1.1 keep-alive connection from this process, "
        f"each request the median of {run_.get('served_runs', 20)} after a warm-up (request sent to "
        "answer read), each answer checked (the survey equal to `survey --json`, the rows to DuckDB's). "
        "Timeout per command: "
        f"{run_['timeout']:g} s. Bytes: everything under `ARCHIVE/streams/` (row files, level files, both "
        "Delta logs) ÷ rows; files: row files + level files.",
        "",
        "| | " + " | ".join(f"{r['tracks']:,} tracks" for r in results) + " |",
        "|---|" + "---:|" * len(results),
    ]

    def row(label, f):
        cells = []
        for r in results:
            try:
                cells.append(f(r))
            except (KeyError, TypeError, ZeroDivisionError):
                cells.append(why(r))
        L.append(f"| {label} | " + " | ".join(cells) + " |")

    def dep(r, key, f):
        m = r.get(key)
        return f(m) if ok(m) else why(r, m)


    row("hosts × metrics, rows per track", lambda r: f"{r['hosts']:,} × {r['metrics']}, {r['per_track']:,}")
    row("plain input file (pyarrow, zstd)", lambda r: f"{r['plain_bytes'] / r['rows']:.1f} B/row")
    row("`ingest --no-compact`", lambda r: t(r, r["ingest"]) + (
        f"; {r['ingest_durable']:,} rows durable by then" if "ingest_durable" in r else ""))
    row("ingest rows/s", lambda r: dep(r, "ingest", lambda m: rate(r["rows"], m["secs"]))
        if "timeout" not in r["ingest"] else f"< {rate(r['rows'], r['ingest']['timeout'])} (did not finish)")
    row("ingest peak RSS", lambda r: rss(r, r["ingest"]))
    row("DuckDB `COPY` to zstd Parquet", lambda r: f"{fmt(r['duck_copy'])} ({rate(r['rows'], r['duck_copy'])})")
    row("ingest ÷ DuckDB `COPY` (rows/s)", lambda r: dep(r, "ingest", lambda m: ratio(ingest_rate(r) / copy_rate(r))))
    row("bytes/row after ingest", lambda r: bytes_row(r, "after_ingest", "total"))
    row("DuckDB's zstd file, bytes/row", lambda r: f"{r['duck_copy_bytes'] / r['rows']:.1f}")
    row("after ingest ÷ DuckDB's file", lambda r: bytes_row(r, "after_ingest", "ratio"))
    row("files after ingest (rows + levels)", lambda r: bytes_row(r, "after_ingest", "files"))
    row("manifest after ingest", lambda r: bytes_row(r, "after_ingest", "manifest"))
    row("`inspect --json` after ingest (open, describe)", lambda r: dep(
        r, "inspect_ingest", lambda m: f"{fmt(m['secs'])}, {m['rss_mib']:.0f} MiB"))
    row("`compact`", lambda r: t(r, r.get("compact")) + (
        f", {r['compact']['rss_mib']:.0f} MiB" if ok(r.get("compact")) else ""))
    row("bytes/row after `compact`", lambda r: bytes_row(r, "after_compact", "total"))
    row("after `compact` ÷ DuckDB's file", lambda r: bytes_row(r, "after_compact", "ratio"))
    row("files after `compact` (rows + levels)", lambda r: bytes_row(r, "after_compact", "files"))
    row("manifest after `compact`", lambda r: bytes_row(r, "after_compact", "manifest"))
    row("reads below ran on", lambda r: {"compacted": "the compacted archive",
                                         "ingested": "**the archive as ingest left it** (compact did not finish)"
                                         }.get(r.get("reads_on"), why(r)))
    row("one track (the reads below)", lambda r: f"`{r['track'][0]} {r['track'][1]}`")
    row("survey @400 plan: level, cell width (s), buckets", lambda r: (
        f"{r['survey_plan']['level']}, {r['survey_plan']['cell_width'] / 1e9:g}, {r['survey_plan']['buckets']}")
        if "survey_plan" in r else why(r, r.get("survey")))
    row("`survey` of one track @400", lambda r: t(r, r.get("survey")))
    row("its peak RSS", lambda r: rss(r, r.get("survey")))
    row("DuckDB M4 of the track (same cells)", lambda r: dep(r, "survey", lambda m: fmt(r["duck_m4"])))
    row("DuckDB M4 ÷ `survey`", lambda r: dep(r, "survey", lambda m: ratio(r["duck_m4"] / m["secs"])))
    row("`rows` of one track (`--format parquet`)", lambda r: t(r, r.get("rows_cmd")) + (
        f", {r['rows_count']:,} rows" if "rows_count" in r else ""))
    row("its peak RSS", lambda r: rss(r, r.get("rows_cmd")))
    row("DuckDB rows of the track", lambda r: dep(r, "rows_cmd", lambda m: fmt(r["duck_rows"])))
    row("DuckDB ÷ `rows`", lambda r: dep(r, "rows_cmd", lambda m: ratio(r["duck_rows"] / m["secs"])))
    row("through `serve` (warm, one keep-alive connection): `survey` of the track @400",
        lambda r: t(r, r.get("served_survey")))
    row("DuckDB M4 ÷ served `survey`", lambda r: dep(
        r, "served_survey", lambda m: ratio(r["duck_m4"] / m["secs"])))
    row("through `serve`: `rows` of the track (Arrow IPC)", lambda r: t(r, r.get("served_rows")))
    row("DuckDB ÷ served `rows`", lambda r: dep(
        r, "served_rows", lambda m: ratio(r["duck_rows"] / m["secs"])))
    row("`serve`'s peak RSS (after those reads)", lambda r: f"{r['served_rss_mib']:.0f} MiB"
        if "served_rss_mib" in r else why(r, r.get("served_survey")))
    row("host prefix folded (tracks, rows)", lambda r: f"`{r['track'][0]}` ({r['metrics']}, {r['fold_rows']:,})")
    row("`fold count` of the host prefix", lambda r: t(r, r["fold"]["count"]))
    row("`fold sum` of the host prefix", lambda r: t(r, r["fold"]["sum"]))
    row("DuckDB `count, sum … WHERE host =`", lambda r: fmt(r["duck_fold"]))
    row("DuckDB ÷ `fold count`", lambda r: dep(r["fold"], "count", lambda m: ratio(r["duck_fold"] / m["secs"])))
    row("whole-stream survey @4000 plan: level, cell width (s), buckets", lambda r: (
        f"{r['stream_plan']['level']}, {r['stream_plan']['cell_width'] / 1e9:g}, {r['stream_plan']['buckets']}")
        if "stream_plan" in r else why(r, r.get("stream_survey")))
    row("`survey` of the whole stream @4000", lambda r: t(r, r.get("stream_survey")))
    row("its peak RSS", lambda r: rss(r, r.get("stream_survey")))
    row("DuckDB M4 of the whole file (same cells)", lambda r: dep(r, "stream_survey", lambda m: fmt(r["duck_stream_m4"])))
    notes = [f"- {r['tracks']:,} tracks: {n}" for r in results for n in r.get("notes", [])]
    if notes:
        L += ["", *notes]
    L += [
        "",
        f"![ingest rows/s and one track's survey latency against track count]({os.path.relpath(plot_path, out.parent)})",
        "",
        "## The workload",
        "",
        f"Stream `{STREAM}`, tracks `(host, metric)`: 100 metrics per host from 1,000 tracks up (fewer, squarest "
        f"split below that), labels `h0000`…, `m00`…. Axis `ts`: UInt64 nanoseconds from {T0:_}, one track's "
        f"rows {STEP_NS // 10**9} s apart. `value`: Float64, a random walk per track from 100 with steps uniform "
        f"in [-1, 1) from SplitMix64 (seed {SEED:#x}). Rows interleaved tick-major, as a scraper delivers "
        "them: every track's row of tick t, then tick t+1. Written once by pyarrow as zstd Parquet "
        f"({CHUNK_ROWS:,}-row groups at most) and reused (`{run_['data']}`). Ingest: "
        f"`{results[0].get('ingest_cmd', '')}`. The one-track reads ask for the track in the middle of key "
        "order (host `hosts/2`, metric `metrics/2`), the fold its host. DuckDB reads the plain file with "
        "`read_parquet(file, file_row_number = true)`; publish order breaks axis ties as the file's row order.",
        "",
        "## Machine and versions",
        "",
        f"- {info['cpus']} × {info['cpu']}, {info['memory']}, {info['os']}; shared with another engineer's "
        f"builds: load average {info['load_start']} at the start, {run_.get('load_end', 'n/a')} at the end; "
        f"the run at niceness {info['nice']}",
        f"- series-archive: `{info['bin']}` (`{info['bin_version']}`, commit {run_['bin_commit']})",
        f"- Python {info['python']}, DuckDB {info['duckdb']} ({info['duckdb_threads']} threads), "
        f"pyarrow {info['pyarrow']}, numpy {info['numpy']}, matplotlib {info['matplotlib']}",
        f"- total wall time of the run: {minutes(run_['wall_secs'])}",
        "",
    ]
    return "\n".join(L)


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracks", type=parse_list, default=parse_list("16,1000,10000,100000"),
                        help="comma list of track counts (default 16,1000,10000,100000)")
    parser.add_argument("--rows", type=parse_count, default=parse_count("10M"),
                        help="rows in total at every track count (default 10M; 2M, 2000 ...)")
    parser.add_argument("--runs", type=int, help="timed runs per read (default 5; --quick 1)")
    parser.add_argument("--served-runs", type=int,
                        help="timed requests per read through `serve` (default 20; --quick 2)")
    parser.add_argument("--copy-runs", type=int, help="timed DuckDB COPYs per count (default 3; --quick 1)")
    parser.add_argument("--seal-rows", type=int, default=100_000, help="ingest --seal-rows (default 100000)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per command before it is killed (900)")
    parser.add_argument("--quick", action="store_true",
                        help="one run each; report and plot under the data directory, not docs/")
    parser.add_argument("--bin", type=Path, help="series-archive binary (default target/release/series-archive)")
    parser.add_argument("--data", type=Path, default=target_dir() / "cardinality-data", help="data directory")
    parser.add_argument("--out", type=Path, help="report (default docs/bench-cardinality.md; --quick: DATA/)")
    parser.add_argument("--plot", type=Path, help="plot, .svg (default docs/bench-cardinality.svg; --quick: DATA/)")
    parser.add_argument("--bin-commit", help="the commit --bin was built from, for the report (default: HEAD)")
    parser.add_argument("--keep", action="store_true", help="keep each archive (default: removed once measured)")
    parser.add_argument("--note", help="a sentence for the report saying what was run and why")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite the report and plot from DATA/results.json without measuring")
    parser.add_argument("--tamper", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.runs = args.runs or (1 if args.quick else 5)
    args.served_runs = args.served_runs or (2 if args.quick else 20)
    args.copy_runs = args.copy_runs or (1 if args.quick else 3)
    args.out = args.out or (args.data / "bench-cardinality.md" if args.quick else ROOT / "docs" / "bench-cardinality.md")
    plot_path = args.plot or (args.data / "bench-cardinality.svg" if args.quick
                              else ROOT / "docs" / "bench-cardinality.svg")
    saved = args.data / "results.json"
    if args.report_only:
        run_ = json.loads(saved.read_text())
        if args.note:
            run_["what_ran"] = args.note
    else:
        for n in args.tracks:
            if args.rows % n:
                parser.error(f"--rows {args.rows:,} is not a multiple of {n:,} tracks")
        if not args.bin:
            args.bin = target_dir() / "release" / "series-archive"
            if not args.bin.is_file():
                say(f"{args.bin} is missing: cargo build --release --bin series-archive")
                subprocess.run(["cargo", "build", "--release", "--bin", "series-archive"], cwd=ROOT, check=True)
        if not args.bin.is_file():
            fail(f"{args.bin} not found")
        bin_ = str(args.bin.resolve())
        args.data.mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        info = machine(bin_)
        con = duckdb.connect()
        results = []
        for n in sorted(args.tracks):
            t0 = time.perf_counter()
            r = measure(n, args, bin_, con)
            say(f"{n:,} tracks: done in {time.perf_counter() - t0:.0f} s")
            if r["problems"]:
                print(f"{PROG}: ANSWERS DISAGREE at {n:,} tracks (DuckDB vs the archive); no time is reported:",
                      file=sys.stderr)
                for m in r["problems"][:40]:
                    print(f"  - {m}", file=sys.stderr)
                return 1
            results.append(r)
        run_ = {
            "results": results,
            "info": info,
            "date": time.strftime("%Y-%m-%d"),
            "command": shlex.join([*(["nice", "-n", str(info["nice"])] if info["nice"] else []),
                                   sys.executable, *sys.argv]),
            "bin_commit": args.bin_commit or info["commit"],
            "runs": args.runs,
            "copy_runs": args.copy_runs,
            "served_runs": args.served_runs,
            "timeout": args.timeout,
            "data": os.path.relpath(args.data, ROOT) if args.data.resolve().is_relative_to(ROOT) else str(args.data),
            "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "wall_secs": time.perf_counter() - began,
            "what_ran": args.note,
        }
        saved.write_text(json.dumps(run_, indent=1, default=str))
    plot(run_["results"], plot_path)
    text = report(run_, args.out, plot_path)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    done = ("rewrote the report of a finished run" if args.report_only
            else f"answers agree at {len(run_['results'])} track count(s)")
    print(f"{PROG}: {done}; wrote {args.out} and {plot_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
