#!/usr/bin/env python3
"""`series-archive serve` under load: survey latency at 50 concurrent clients, and the page's
time from a zoom click to the end of its draw in headless Chromium.

    cargo build --release --bin series-archive --example scale
    .venv/bin/python scripts/bench_serve.py --screenshot docs/serve.png --out docs/bench-serve.md

The archive (`--archive`, default `target/bench-data/scale-50000000`) is the one
`scripts/bench_scale.py` measures; when it is missing it is built by `examples/scale.rs`
(the capture workload, 16 tracks in 4 runs, sealed in barriers of 250 000 rows, then the
automatic maintenance), which writes `<CARGO_TARGET_DIR>/bench-data/scale-<rows>`.

The script starts `series-archive serve ARCHIVE --listen 127.0.0.1:0` (the URL from its first
line of stdout) and stops it (SIGTERM) at the end. Then, in one run:

1. the request mix: what a page would ask for. A track prefix (the whole stream, one run or
   one track, a third each), a view window (its width the node's extent ÷ 1000^u, u uniform
   in [0, 1]: from the whole extent down to 1/1000 of it, at a uniform random position),
   budget 4 × 2 fields × 1200 px = 9600. Deterministic (`--seed`);
2. warm-up: `--warm` requests, untimed; then a repeat check (one request sent 5 times in a
   row for a few selections: does a repeat get cheaper?);
3. one client, sequential: `--single` requests over one keep-alive connection;
4. `--clients` clients (default 50) at once, each its own keep-alive connection and its
   own request sequence, `--requests` each (default 40), stopping at the first of that
   count or `--seconds` (default 60) of wall time. HTTP/1.1 over asyncio streams, one
   Python thread (its CPU time is reported: client and server share the machine's cores);
5. the peer: DuckDB computing the same M4 buckets (the cells the survey answered: its
   `plan.cell_width` over its `span`, the same track prefix) from the raw Parquet files
   (`series-archive files --manifest`), one client, for the first `--duck` requests of
   the sequential run; every DuckDB answer is checked against the survey's buckets
   (`benchlib.check_m4`: cells, count, first/last/min/max exactly, sum within 1e-9);
6. the page: headless Chromium (selenium; the flags of `tests/browser/page_check.py`) opens
   the page, clicks one run in the track tree, then `#zoom-in` `--zooms` times and
   `#zoom-out` as many, waiting for each draw (`seriesView.draws` up, `busy` false), in three
   modes: "at once" clicks as soon as a draw ends (the page starts a view's statistics 100 ms
   after its draw, so none start); "statistics running" clicks 150 ms after the draw (the
   view's mean and p95 folds were sent; the click aborts them in the browser); "idle" waits
   for the statistics panel to finish first. `seriesView.zoomToDraw` is the time from the
   click to the end of the draw; it includes the page's debounce (`scheduleSurvey`'s 50 ms),
   reported with and without it. `--screenshot` saves a zoomed view of one run at
   1400 × 900;
7. an abandoned scan: a p95 fold over the run (a raw scan) sent and its connection closed
   after 30 ms, and the server's CPU time watched until it stops rising, beside the same
   fold answered in full.

Every answer must be a 200 whose buckets × 4 ≤ budget (counted in the body; on the
sequential run every body is also parsed whole); any failure is reported and the script exits
1. Prints a markdown report; `--out` writes it too.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

from benchlib import CLK_TCK, ROOT, Cli, Server, check_m4, m4_query, sql_text, target_dir

STREAM = "capture"
FIELDS = 2
PLOT_PX = 1200
BUDGET = 4 * FIELDS * PLOT_PX
ZOOM_RANGE = 1000
TIMEOUT = 30.0
PAGE_SRC = ROOT / "src" / "bin" / "series-archive" / "serve" / "page" / "index.html"
LEVELS_SRC = ROOT / "src" / "archive" / "levels.rs"


def source_constant(path: Path, pattern: str, default: int) -> int:
    """A constant read from the source, so the report follows it."""
    try:
        m = re.search(pattern, path.read_text())
    except OSError:
        return default
    if not m:
        return default
    expr = m.group(1).replace("_", "").strip()
    shift = re.fullmatch(r"(\d+)\s*<<\s*(\d+)", expr)  # e.g. "1 << 18"
    if shift:
        return int(shift.group(1)) << int(shift.group(2))
    return int(expr) if expr.isdigit() else default


# The page's debounce: a view change waits this long before its survey is sent.
DEBOUNCE_MS = source_constant(PAGE_SRC, r"function scheduleSurvey\(delay = (\d+)\)", 50)
# The archive's level cache: decoded level row groups, bounded in cells.
LEVEL_CACHE_CELLS = source_constant(LEVELS_SRC, r"pub const LEVEL_CACHE_CELLS: usize = ([^;]+);", 1 << 18)
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
KINDS = ("stream", "run", "track")
MODES = ("at once", "statistics running", "idle")
PLAN_RE = re.compile(rb'"plan":\{"level":(\d+),"merge":(\d+),"cell_width":(\d+)')


def note(msg: str) -> None:
    print(f"bench_serve: {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------- archive, server


def ensure_archive(archive: Path, rows: int) -> None:
    if (archive / "manifest").exists():
        return
    if archive.name != f"scale-{rows}" or archive.parent.name != "bench-data":
        sys.exit(f"bench_serve: {archive} is not an archive, and examples/scale.rs only builds "
                 f".../bench-data/scale-<rows>: pass --archive .../bench-data/scale-{rows}")
    scale = target_dir() / "release" / "examples" / "scale"
    if not scale.is_file():
        sys.exit(f"bench_serve: {archive} is missing and {scale} is not built: "
                 "cargo build --release --example scale")
    note(f"building {archive} ({rows:,} rows) with {scale} ...")
    env = dict(os.environ, CARGO_TARGET_DIR=str(archive.parent.parent))
    subprocess.run([str(scale), str(rows)], check=True, env=env, stdout=subprocess.DEVNULL)


# ------------------------------------------------------------------------- the request mix


def nodes_of(streams: dict) -> dict[str, list[dict]]:
    stream = next(s for s in streams["streams"] if s["id"] == STREAM)
    runs = stream["tree"]
    tracks = [c for r in runs for c in r["children"]]
    whole = {"path": [], "first_axis": min(r["first_axis"] for r in runs),
             "last_axis": max(r["last_axis"] for r in runs), "rows": stream["rows"]}
    return {"stream": [whole], "run": runs, "track": tracks}


def request_mix(nodes: dict[str, list[dict]], rng: random.Random, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        kind = rng.choice(KINDS)
        node = rng.choice(nodes[kind])
        lo, hi = node["first_axis"], node["last_axis"] + 1
        extent = hi - lo
        width = max(8, round(extent / ZOOM_RANGE ** rng.random()))
        start = lo + round(rng.random() * (extent - width))
        q = [("stream", STREAM)] + [("track", label) for label in node["path"]]
        q += [("from", str(start)), ("to", str(start + width)), ("budget", str(BUDGET))]
        out.append({"kind": kind, "path": node["path"], "from": start, "to": start + width,
                    "zoom": extent / width, "target": "/api/survey?" + urllib.parse.urlencode(q)})
    return out


# ------------------------------------------------------------------------- the HTTP client


class Conn:
    """One HTTP/1.1 keep-alive connection over asyncio streams (Content-Length or chunked)."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self):
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    async def get(self, target: str) -> tuple[int, bytes]:
        if self.writer is None:
            await self.open()
        self.writer.write(f"GET {target} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            body = b"".join(parts)
        else:
            body = await self.reader.read()
            self.close()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, body


def judge(status: int, body: bytes) -> tuple[int, int | None, str | None]:
    """(buckets, level, problem): a 200 whose buckets × 4 ≤ budget, counted in the body."""
    if status != 200:
        return 0, None, f"status {status}: {body[:200]!r}"
    buckets = body.count(b'"field":')
    m = PLAN_RE.search(body, 0, 400)
    level = int(m.group(1)) if m else None
    if buckets * 4 > BUDGET:
        return buckets, level, f"{buckets} buckets for a budget of {BUDGET}"
    if m is None and buckets:
        return buckets, level, "buckets but no plan"
    return buckets, level, None


async def client(conn: Conn, reqs: list[dict], deadline: float, out: list, keep: set | None = None,
                 bodies: dict | None = None):
    for i, r in enumerate(reqs):
        if time.perf_counter() >= deadline:
            break
        began = time.perf_counter()
        try:
            status, body = await asyncio.wait_for(conn.get(r["target"]), TIMEOUT)
        except Exception as e:  # a timeout or a broken connection is a failure
            conn.close()
            out.append({**r, "ms": (time.perf_counter() - began) * 1e3, "buckets": 0,
                        "level": None, "bytes": 0, "problem": f"{type(e).__name__}: {e}"})
            continue
        ms = (time.perf_counter() - began) * 1e3
        buckets, level, problem = judge(status, body)
        out.append({**r, "ms": ms, "buckets": buckets, "level": level, "bytes": len(body),
                    "problem": problem})
        if bodies is not None and (keep is None or i in keep):
            bodies[i] = body


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine, all cores (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    idle = v[3] + v[4]
    return (sum(v) - idle) / CLK_TCK, idle / CLK_TCK


def usage() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


async def run_phase(server: Server, per_client: list[list[dict]], seconds: float,
                    keep: set | None = None, bodies: dict | None = None) -> dict:
    conns = [Conn(server.host, server.port) for _ in per_client]
    await asyncio.gather(*(c.open() for c in conns))
    out: list[list] = [[] for _ in per_client]
    cpu0, scpu0, m0, t0 = usage(), server.cpu(), machine_cpu(), time.perf_counter()
    deadline = t0 + seconds
    await asyncio.wait_for(
        asyncio.gather(*(client(c, reqs, deadline, o, keep, bodies)
                         for c, reqs, o in zip(conns, per_client, out))),
        seconds + TIMEOUT + 10)
    wall = time.perf_counter() - t0
    cpu, scpu, m1 = usage() - cpu0, server.cpu() - scpu0, machine_cpu()
    busy, idle = m1[0] - m0[0], m1[1] - m0[1]
    threads = server.threads()
    for c in conns:
        c.close()
    results = [x for o in out for x in o]
    return {"results": results, "wall": wall, "client_cpu": cpu, "server_cpu": scpu,
            "other_cpu": max(0.0, busy - cpu - scpu), "idle_cpu": idle,
            "clients": len(per_client), "capped": any(len(o) < len(r) for o, r in zip(out, per_client)),
            "server_threads": threads}


# ------------------------------------------------------------------------- statistics


def pct(xs: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def summary(phase: dict) -> dict:
    ms = [r["ms"] for r in phase["results"]]
    return {"n": len(ms), "p50": pct(ms, 50), "p90": pct(ms, 90), "p99": pct(ms, 99),
            "max": max(ms), "rps": len(ms) / phase["wall"], "wall": phase["wall"],
            "client_cpu": phase["client_cpu"], "server_cpu": phase["server_cpu"],
            "other_cpu": phase["other_cpu"], "idle_cpu": phase["idle_cpu"],
            "failures": [r for r in phase["results"] if r["problem"]],
            "mean_bytes": statistics.mean(r["bytes"] for r in phase["results"])}


def ms(x: float) -> str:
    return f"{x:.2f} ms" if x < 100 else f"{x:.0f} ms"


# ------------------------------------------------------------------------- DuckDB peer


def duck_peer(cli: Cli, archive: Path, sample: list[dict], bodies: dict, single: list[dict]):
    import duckdb

    files = cli.run("files", str(archive), "--stream", STREAM, "--manifest").split()
    src = "read_parquet([" + ", ".join(sql_text(f) for f in files) + "])"
    con = duckdb.connect()
    threads = con.execute("SELECT current_setting('threads')").fetchone()[0]
    rows_out, problems, worst = [], [], 0.0
    began_all = time.perf_counter()
    warmed = False
    for i, r in enumerate(sample):
        survey = json.loads(bodies[i])
        plan, span = survey["plan"], survey["span"]
        where = [f"ordinal >= {span[0]}", f"ordinal < {span[1]}"]
        where += [f"{c} = {sql_text(v)}" for c, v in zip(("run", "probe"), r["path"])]
        # Tracks merge in key order: on an axis tie the first is the lower track's, the last
        # the higher's; within a track publish order (`_seq`) breaks the tie.
        q = m4_query(src, " AND ".join(where), survey["fields"], plan["cell_width"],
                     order="run, probe, _seq")
        if not warmed:
            con.execute(q).fetchall()
            warmed = True
        t0 = time.perf_counter()
        got = con.execute(q).fetchall()
        secs = time.perf_counter() - t0
        bad, w = check_m4(survey, got, survey["fields"])
        worst = max(worst, w)
        problems += [f"request {i} ({r['kind']} {r['path']}): {m}" for m in bad[:3]]
        rows_out.append({"ms": secs * 1e3, "survey_ms": single[i]["ms"], "kind": r["kind"],
                         "level": plan["level"], "cells": len(got), "zoom": r["zoom"]})
    return {"rows": rows_out, "problems": problems, "worst": worst, "threads": threads,
            "version": duckdb.__version__, "files": len(files),
            "wall": time.perf_counter() - began_all}


# ------------------------------------------------------------------------- the page


def start_browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            sys.exit(f"bench_serve: {path} is missing (apt-get install -y chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="bench-serve-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1400,900",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(TIMEOUT)
    # The viewport itself 1400 × 900 (the window's frame would take some of it).
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    return driver, profile


def sv(driver) -> dict:
    return driver.execute_script(
        "const v = window.seriesView; if (!v) return null;"
        "return {busy: v.busy, draws: v.draws, error: v.error, zoomToDraw: v.zoomToDraw,"
        " url: v.lastSurvey && v.lastSurvey.url, plot: v.plot,"
        " plan: v.lastSurvey && v.lastSurvey.response && v.lastSurvey.response.plan,"
        " buckets: v.lastSurvey && v.lastSurvey.response ? v.lastSurvey.response.buckets.length : 0,"
        " budget: v.lastSurvey && v.lastSurvey.budget};")


def wait_draw(driver, after: int, what: str) -> dict:
    deadline = time.monotonic() + TIMEOUT
    last = None
    while time.monotonic() < deadline:
        last = sv(driver)
        if last and last.get("error"):
            raise RuntimeError(f"{what}: the page shows an error: {last['error']}")
        if last and last["draws"] > after and not last["busy"]:
            return last
        time.sleep(0.005)
    raise RuntimeError(f"{what}: no draw within {TIMEOUT:.0f} s ({json.dumps(last)[:300]})")


def wait_stats(driver) -> float:
    from selenium.webdriver.common.by import By

    t0 = time.monotonic()
    deadline = t0 + TIMEOUT
    while time.monotonic() < deadline:
        text = driver.find_element(By.ID, "stats").text
        if "…" not in text:
            return time.monotonic() - t0
        time.sleep(0.02)
    raise RuntimeError("the statistics panel did not finish")


def find_node(driver, path):
    from selenium.webdriver.common.by import By

    for el in driver.find_elements(By.CSS_SELECTOR, "#tracks .node"):
        if json.loads(el.get_attribute("data-path")) == path:
            return el if el.is_displayed() else None
    return None


def survey_fetches(driver, since: int) -> list[float]:
    """Durations (ms) of the page's /api/survey fetches, from resource timing, after `since`."""
    return driver.execute_script(
        "return performance.getEntriesByType('resource')"
        ".filter(e => e.name.includes('/api/survey')).slice(arguments[0])"
        ".map(e => Math.round(e.duration * 10) / 10);", since)


def survey_count(driver) -> int:
    return driver.execute_script(
        "return performance.getEntriesByType('resource')"
        ".filter(e => e.name.includes('/api/survey')).length;")


def page_bench(server: Server, run: list[str], zooms: int, screenshot: Path | None,
               shot_view: tuple[float, float]) -> dict:
    from selenium.webdriver.common.by import By

    driver, profile = start_browser()
    try:
        driver.get(server.url)
        v = wait_draw(driver, 0, "initial view")
        node = find_node(driver, run)
        if node is None:
            raise RuntimeError(f"no visible tree node {run}")
        node.click()
        v = wait_draw(driver, v["draws"], f"track {run}")
        wait_stats(driver)
        plot_width = v["plot"]["width"]
        modes = {}
        for mode in MODES:
            before = len(sv(driver)["zoomToDraw"])
            fetch0 = survey_count(driver)
            steps = []
            for direction in ("zoom-in", "zoom-out"):
                for k in range(zooms):
                    if mode == "idle":
                        wait_stats(driver)
                    elif mode == "statistics running":
                        time.sleep(0.15)
                    draws = sv(driver)["draws"]
                    driver.find_element(By.ID, direction).click()
                    v = wait_draw(driver, draws, f"{mode} {direction} {k + 1}")
                    steps.append({"direction": direction, "level": v["plan"]["level"] if v["plan"] else None,
                                  "buckets": v["buckets"], "budget": v["budget"]})
            ztd = sv(driver)["zoomToDraw"][before:]
            fetches = survey_fetches(driver, fetch0)
            if len(ztd) != 2 * zooms:
                raise RuntimeError(f"{mode}: zoomToDraw has {len(ztd)} entries for {2 * zooms} zooms")
            for s, t in zip(steps, ztd):
                s["ms"] = t
            modes[mode] = {"steps": steps, "fetch_ms": fetches}
            wait_stats(driver)
        over = [s for m in modes.values() for s in m["steps"] if s["buckets"] * 4 > s["budget"]]
        shot = None
        if screenshot is not None:
            lo, hi = shot_view
            driver.execute_script(
                "if (document.activeElement) document.activeElement.blur(); location.hash = arguments[0];",
                "#" + urllib.parse.urlencode([("stream", STREAM)] + [("track", l) for l in run]
                                             + [("from", str(int(lo))), ("to", str(int(hi))), ("live", "0")]))
            wait_draw(driver, sv(driver)["draws"], "screenshot view")
            wait_stats(driver)
            # The pointer off the buttons and the plot: no hover state in the picture.
            from selenium.webdriver.common.action_chains import ActionChains
            ActionChains(driver).move_to_element(
                driver.find_element(By.CSS_SELECTOR, "header .brand")).perform()
            time.sleep(0.3)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(screenshot))
            shot = str(screenshot)
        log = driver.get_log("browser")
        severe = [e["message"] for e in log if e.get("level") == "SEVERE"]
        version = driver.capabilities.get("browserVersion", "?")
        return {"modes": modes, "plot_width": plot_width, "over_budget": over, "severe": severe,
                "version": version, "screenshot": shot}
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# ------------------------------------------------------------------------- the report


def phase_row(name: str, s: dict) -> str:
    return (f"| {name} | {s['n']:,} | {ms(s['p50'])} | {ms(s['p90'])} | {ms(s['p99'])} "
            f"| {ms(s['max'])} | {s['rps']:,.0f} | {s['wall']:.1f} s "
            f"| {s['server_cpu']:.1f} s ({s['server_cpu'] / s['wall']:.2f} cores) "
            f"| {s['client_cpu']:.1f} s ({s['client_cpu'] / s['wall']:.2f} cores) "
            f"| {s['other_cpu'] / s['wall']:.2f} cores | {s['idle_cpu'] / s['wall']:.2f} cores "
            f"| {len(s['failures'])} |")


def breakdown(results: list[dict]) -> list[str]:
    lines = ["| selection | level 0 (cell 1,024) | level 1 (8,192) | level 2 (65,536) | all |",
             "|---|---:|---:|---:|---:|"]

    def cell(rs):
        if not rs:
            return "–"
        x = [r["ms"] for r in rs]
        return f"{ms(pct(x, 50))} / {ms(pct(x, 99))} (n={len(x)})"

    for kind in KINDS:
        rs = [r for r in results if r["kind"] == kind]
        lines.append(f"| {kind} | " + " | ".join(
            cell([r for r in rs if r["level"] == lv]) for lv in (0, 1, 2)) + f" | {cell(rs)} |")
    higher = [r for r in results if r["level"] is not None and r["level"] > 2]
    if higher:
        lines.append(f"\n({len(higher)} answers at level 3 or above not shown.)")
    return lines


def report(ctx: dict) -> str:
    s1, s50, duck, page = ctx["single"], ctx["multi"], ctx["duck"], ctx["page"]
    L = [
        "# `series-archive serve` under load: survey latency at 50 clients, and zoom to draw",
        "",
        f"Generated by `scripts/bench_serve.py` in one run on {ctx['date']} (commit {ctx['commit']}), "
        f"on this {os.cpu_count()}-core machine ({ctx['cpu']}, {ctx['mem']}; shared and noisy: "
        "read the ratios against peers measured in the same run, not the absolute times). "
        f"{ctx['version']}; Python {platform.python_version()}; DuckDB {duck['version'] if duck else '–'}"
        f" ({duck['threads'] if duck else '–'} threads); Chromium {page['version'] if page else '–'} headless "
        f"(selenium {ctx['selenium']}).",
        "",
        "```sh",
        *ctx["commands"],
        "```",
        "",
        f"Archive: `{ctx['archive']}`, {ctx['rows']:,} rows of the `capture` stream (16 tracks in 4 runs, "
        f"fields value and noise; {ctx['files']} raw files, {ctx['level_files']} level files, "
        f"{ctx['barriers']} barriers), as `examples/scale.rs` builds it for `scripts/bench_scale.py`. "
        f"OS page cache warm. Server: the release binary, `serve ARCHIVE --listen 127.0.0.1:0"
        f"{ctx['serve_args']}`, otherwise its defaults (tokio multi-thread runtime, reads on its "
        "blocking pool). Client: "
        "one Python process, HTTP/1.1 keep-alive over asyncio streams, one connection per client, "
        "on the same 2 cores as the server (its CPU time is in the tables).",
        "",
        f"Requests: what the page asks for. A track prefix (the whole stream, one of the 4 runs or "
        f"one of the 16 tracks, a third each), a view of width extent ÷ {ZOOM_RANGE}^u (u uniform "
        f"in [0, 1]: from the whole extent, 12.5M axis units, down to 1/{ZOOM_RANGE} of it) at a uniform "
        f"random position, `budget={BUDGET}` (4 × 2 fields × {PLOT_PX} px). Seed {ctx['seed']}. "
        f"Every answer is checked: status 200 and buckets × 4 ≤ budget.",
        "",
        "## Survey latency",
        "",
        "| clients | requests | p50 | p90 | p99 | max | req/s | wall | server CPU | client CPU "
        "| other processes | idle | failures |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        phase_row("1, sequential", s1),
        phase_row(f"{s50['clients']}, concurrent", s50),
        "",
        f"- {s50['clients']} clients: {ctx['per_client']} requests each or {ctx['seconds']:.0f} s, "
        f"whichever first ({'the time cap ended it' if s50['capped'] else 'every client finished its requests'}). "
        f"Mean answer {s50['mean_bytes'] / 1024:.0f} KiB. Server threads at the end: {s50['server_threads']}.",
        f"- Throughput, {s50['clients']} clients ÷ 1 client: **{s50['rps'] / s1['rps']:.2f}×**; "
        f"p50 latency, {s50['clients']} clients ÷ 1 client: {s50['p50'] / s1['p50']:.1f}×. "
        f"Server CPU per request: {s1['server_cpu'] / s1['n'] * 1e3:.2f} ms (1 client), "
        f"{s50['server_cpu'] / s50['n'] * 1e3:.2f} ms ({s50['clients']} clients); client CPU per request: "
        f"{s1['client_cpu'] / s1['n'] * 1e3:.2f} ms, {s50['client_cpu'] / s50['n'] * 1e3:.2f} ms. "
        "\"Other processes\" and \"idle\": the rest of the machine's CPU over the same wall time "
        "(`/proc/stat`), in cores of the 2: what the noise took, and whether the server left a "
        "core unused while requests waited.",
        "",
        f"By selection and the level the plan chose, {s50['clients']} concurrent clients (p50 / p99):",
        "",
        *breakdown(ctx["multi_results"]),
        "",
        "1 client, sequential (p50 / p99):",
        "",
        *breakdown(ctx["single_results"]),
        "",
        "Repeats: one request sent 5 times in a row, 1 client, after the warm-up (each time, ms):",
        "",
        "| request | answer | times |",
        "|---|---|---|",
    ]
    for r in ctx["repeats"]:
        L.append(f"| {r['label']} | level {r['level']}, {r['buckets']} buckets | "
                 + ", ".join(f"{t:.1f}" for t in r["ms"]) + " |")
    lt = [t for t in ctx["level_tables"] if t["level"] in (0, 1, 2)]
    if lt:
        cache, source = ctx["level_cache"]
        L += ["", "The level files these surveys read (cells of all 16 tracks, both fields; "
              "row groups as stored), beside the server's level cache, which keeps decoded row "
              f"groups up to {cache:,} cells in all ({source}), least recently used first out: "
              + "; ".join(f"level {t['level']}: {t['groups']} row group{'s' if t['groups'] != 1 else ''}, {t['cells']:,} cells "
                          f"(largest group {t['largest']:,})" for t in lt) + "."]
    if duck:
        d = duck["rows"]
        dms = [x["ms"] for x in d]
        sms = [x["survey_ms"] for x in d]
        ratios = [x["ms"] / x["survey_ms"] for x in d]
        ok = not duck["problems"]
        L += [
            "",
            "## Peer: DuckDB M4 over the raw Parquet, same cells",
            "",
            f"The first {len(d)} requests of the sequential run. For each, DuckDB computes M4 per cell "
            "`ordinal // plan.cell_width` over the survey's `span` and track prefix (`benchlib.m4_query`; "
            f"first/last by `(ordinal, run, probe, _seq)`) from the {duck['files']} raw files "
            "`series-archive files --manifest` lists, in-process, one connection, each query timed once "
            "after one warm-up query. The survey figure is the same request's end-to-end HTTP time "
            "(request sent to answer read) in the sequential run.",
            "",
            "| | p50 | p90 | max |",
            "|---|---:|---:|---:|",
            f"| survey over HTTP (1 client) | {ms(pct(sms, 50))} | {ms(pct(sms, 90))} | {ms(max(sms))} |",
            f"| DuckDB M4, same cells | {ms(pct(dms, 50))} | {ms(pct(dms, 90))} | {ms(max(dms))} |",
            f"| DuckDB ÷ survey, per request | {pct(ratios, 50):,.1f}× | {pct(ratios, 90):,.1f}× "
            f"| {max(ratios):,.1f}× |",
            "",
            f"p50 ÷ p50: **{pct(dms, 50) / pct(sms, 50):,.1f}×**; smallest per-request ratio "
            f"{min(ratios):,.1f}×. Answers: "
            + (f"all {len(d)} agree (cells, count, first/last/min/max exactly; max sum rel. diff "
               f"{duck['worst']:.1e})." if ok else "**DISAGREE**:"),
        ]
        if not ok:
            L += [""] + [f"- {m}" for m in duck["problems"][:20]]
        slower = [x for x in d if x["ms"] < x["survey_ms"] * 2]
        if slower:
            L += ["", f"Requests where DuckDB took less than twice the survey's time ({len(slower)} of {len(d)}): "
                  + "; ".join(f"{x['kind']}, 1/{x['zoom']:,.0f} of its extent, level {x['level']}, "
                              f"{x['cells']} cells: survey {ms(x['survey_ms'])}, DuckDB {ms(x['ms'])}"
                              for x in slower) + "."]
        L += ["", "| selection | requests | survey p50 | DuckDB p50 | ratio p50 |", "|---|---:|---:|---:|---:|"]
        for kind in KINDS:
            rs = [x for x in d if x["kind"] == kind]
            if rs:
                L.append(f"| {kind} | {len(rs)} | {ms(pct([x['survey_ms'] for x in rs], 50))} "
                         f"| {ms(pct([x['ms'] for x in rs], 50))} "
                         f"| {pct([x['ms'] / x['survey_ms'] for x in rs], 50):,.1f}× |")
    if page:
        L += [
            "",
            "## The page: zoom to draw, headless Chromium",
            "",
            f"The page at 1400 × 900 (plot {page['plot_width']} px wide, so surveys at budget "
            f"4 × 2 × {page['plot_width']}), run `{ctx['run'][0]}` ({ctx['run_rows']:,} rows) selected in the "
            f"tree, then `#zoom-in` clicked {ctx['zooms']} times and `#zoom-out` {ctx['zooms']} times, "
            "waiting for each draw. `seriesView.zoomToDraw`: from the click event to the end of the draw, "
            f"including the page's {DEBOUNCE_MS} ms debounce (`scheduleSurvey(delay = 50)` in "
            f"`serve/page/index.html`); \"without\" subtracts it. Fetch: the survey request's duration "
            "in the browser's resource timing. The page asks for a view's statistics (mean, a level fold; "
            "p95, a raw scan) 100 ms after its draw. \"At once\" clicks as soon as a draw ends, so no "
            "statistics start; \"statistics running\" clicks 150 ms after it, while they run (the click "
            "aborts them in the browser); \"idle\" waits for the statistics panel to finish first.",
            "",
            "| mode | zooms | zoom to draw p50 | max | without debounce p50 | max | survey fetch p50 | max |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for mode, m in page["modes"].items():
            t = [s["ms"] for s in m["steps"]]
            f = m["fetch_ms"] or [float("nan")]
            L.append(f"| {mode} | {len(t)} | {ms(pct(t, 50))} | {ms(max(t))} "
                     f"| {ms(pct(t, 50) - DEBOUNCE_MS)} | {ms(max(t) - DEBOUNCE_MS)} "
                     f"| {ms(pct(f, 50))} | {ms(max(f))} |")
        L += [""]
        for mode, m in page["modes"].items():
            L.append(f"Each zoom, {mode} (ms from click to draw): "
                     + ", ".join(f"{'+' if s['direction'] == 'zoom-in' else '−'}L{s['level']} {s['ms']:.0f}"
                                 for s in m["steps"])
                     + ".  ")
        L[-1] = L[-1].rstrip() + " (`+` in, `−` out, `L` the level drawn.)"
        if page["severe"]:
            L += ["", "Browser console errors: " + "; ".join(page["severe"][:5])]
        if page["screenshot"]:
            L += ["", f"![the page at {ctx['rows'] // 1_000_000}M rows: run {ctx['run'][0]} zoomed in]"
                  f"({Path(page['screenshot']).name})"]
    a = ctx.get("abandoned")
    if a:
        L += [
            "",
            "## An abandoned scan",
            "",
            f"`GET {a['target']}` (p95 over the run: a raw scan of {ctx['run_rows']:,} rows) answered in full: "
            f"{ms(a['full_wall'] * 1e3)}, {a['full_cpu']:.2f} s of server CPU. The same request with its "
            f"connection closed 30 ms after it was sent: the server went on using CPU for "
            f"{a['busy_after_close']:.2f} s after the close, {a['abandoned_cpu']:.2f} s of CPU in all "
            "(measured until it stopped rising for 0.5 s). A page that zooms away while a view's p95 "
            "is computing aborts its fetch; this is what the server then still spends.",
        ]
    fails = ctx["failures"]
    L += ["", "## Failures", ""]
    if fails:
        L += [f"**{len(fails)} FAILURES** (first 20):", ""] + [f"- {f}" for f in fails[:20]]
    else:
        L += ["None: every answer was a 200 within its budget"
              + (", the DuckDB answers agree" if duck else "")
              + (", the page drew within its budget" if page else "") + "; "
              f"the server logged {ctx['server_warnings']} warning/error line(s)."]
    return "\n".join(L) + "\n"


# ------------------------------------------------------------------------- main


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def machine() -> tuple[str, str]:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
        return cpu, f"{mem / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        return cpu, "?"


async def repeats(server: Server, nodes: dict) -> list[dict]:
    """One request five times in a row for a few selections: what a repeat costs."""
    whole = nodes["stream"][0]
    lo, hi = whole["first_axis"], whole["last_axis"] + 1
    mid = (lo + hi) // 2
    narrow = (mid, mid + (hi - lo) // 100)
    cases = [("whole stream, whole extent", [], None),
             ("whole stream, 1/100 of it", [], narrow),
             ("run_1, 1/100", ["run_1"], narrow),
             ("run_1 / probe.01, 1/100", ["run_1", "probe.01"], narrow)]
    conn = Conn(server.host, server.port)
    out = []
    for label, path, window in cases:
        q = [("stream", STREAM)] + [("track", l) for l in path]
        if window:
            q += [("from", str(window[0])), ("to", str(window[1]))]
        q += [("budget", str(BUDGET))]
        target = "/api/survey?" + urllib.parse.urlencode(q)
        times, buckets, level = [], 0, None
        for _ in range(5):
            t0 = time.perf_counter()
            status, body = await conn.get(target)
            times.append((time.perf_counter() - t0) * 1e3)
            buckets, level, problem = judge(status, body)
            if problem:
                raise RuntimeError(f"repeat {label}: {problem}")
        out.append({"label": label, "ms": times, "buckets": buckets, "level": level})
    conn.close()
    return out


def server_level_cache(cli: Cli, extra: list[str]) -> tuple[int, str]:
    """The level cache `serve` keeps: `--level-cache` as given, else its default when it has
    the option, else the archive's `LEVEL_CACHE_CELLS`."""
    for i, a in enumerate(extra):
        if a == "--level-cache" and i + 1 < len(extra) and extra[i + 1].isdigit():
            return int(extra[i + 1]), "`serve --level-cache`, as given"
        if a.startswith("--level-cache=") and a.split("=", 1)[1].isdigit():
            return int(a.split("=", 1)[1]), "`serve --level-cache`, as given"
    m = re.search(r"--level-cache[^\[]*\[default: (\d+)\]", cli.run("serve", "--help"))
    if m:
        return int(m.group(1)), "`serve --level-cache`, its default"
    return LEVEL_CACHE_CELLS, "`LEVEL_CACHE_CELLS`, `src/archive/levels.rs`"


def level_tables(cli: Cli, archive: Path) -> list[dict]:
    """Each level file: its level, row groups and cells (rows), from the Parquet footers."""
    import pyarrow.parquet as pq

    out = []
    for f in cli.run("files", str(archive), "--stream", STREAM, "--levels", "--manifest").split():
        m = re.search(r"level=(\d+)", f)
        meta = pq.ParquetFile(f).metadata
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        out.append({"level": int(m.group(1)) if m else None, "groups": len(sizes),
                    "cells": sum(sizes), "largest": max(sizes, default=0)})
    return out


def abandoned_scan(server: Server, path: list[str]) -> dict:
    """A p95 fold (a raw scan) answered in full, then the same sent and abandoned after 30 ms:
    the server's CPU time, until it stops rising."""
    q = [("stream", STREAM)] + [("track", l) for l in path] + [("aggregate", "p95")]
    target = "/api/fold?" + urllib.parse.urlencode(q)
    urllib.request.urlopen(server.url + target[1:], timeout=TIMEOUT).read()  # warm
    c0, t0 = server.cpu(), time.perf_counter()
    urllib.request.urlopen(server.url + target[1:], timeout=TIMEOUT).read()
    full_wall, full_cpu = time.perf_counter() - t0, server.cpu() - c0
    time.sleep(0.3)
    c0 = server.cpu()
    s = socket.create_connection((server.host, server.port))
    t0 = time.perf_counter()
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode())
    time.sleep(0.03)
    s.close()
    closed = time.perf_counter()
    last, last_change = server.cpu(), time.perf_counter()
    while time.perf_counter() - last_change < 0.5 and time.perf_counter() - t0 < TIMEOUT:
        time.sleep(0.02)
        now = server.cpu()
        if now > last:
            last, last_change = now, time.perf_counter()
    return {"target": target, "full_wall": full_wall, "full_cpu": full_cpu,
            "abandoned_cpu": last - c0, "busy_after_close": max(0.0, last_change - closed)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--archive", type=Path, help="default: <target>/bench-data/scale-<rows>")
    p.add_argument("--rows", type=int, default=50_000_000,
                   help="rows of the archive examples/scale.rs builds when it is missing")
    p.add_argument("--cli", type=Path, help="default: <target>/release/series-archive")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--requests", type=int, default=40, help="per client")
    p.add_argument("--seconds", type=float, default=60.0, help="wall-clock cap of the concurrent run")
    p.add_argument("--single", type=int, default=200, help="requests of the sequential run")
    p.add_argument("--warm", type=int, default=100, help="untimed warm-up requests")
    p.add_argument("--duck", type=int, default=30, help="requests DuckDB answers too (0: none)")
    p.add_argument("--zooms", type=int, default=10, help="zoom-ins and as many zoom-outs (0: no page)")
    p.add_argument("--run", default="run_0", help="the run the page zooms into")
    p.add_argument("--screenshot", type=Path, help="save the page's zoomed view of the run here (PNG)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                   help="an extra argument for `serve` (repeat it; e.g. --serve-arg=--level-cache "
                        "--serve-arg=262144)")
    p.add_argument("--out", type=Path, help="write the markdown report here too")
    args = p.parse_args()

    cli_path = args.cli or target_dir() / "release" / "series-archive"
    cli = Cli(cli_path)
    archive = args.archive or target_dir() / "bench-data" / f"scale-{args.rows}"
    ensure_archive(archive, args.rows)
    inspected = cli.json("inspect", str(archive))
    ctx_levels = level_tables(cli, archive)
    ctx_cache = server_level_cache(cli, args.serve_arg)
    stream = next(s for s in inspected["streams"] if s["id"] == STREAM)
    rows = stream["rows"]
    began = time.perf_counter()

    log = Path(tempfile.mkstemp(prefix="bench-serve-", suffix=".log")[1])
    server = Server(cli_path, archive, log, args.serve_arg, prog="bench_serve")
    note(f"serving {archive} at {server.url} (pid {server.proc.pid})")
    failures: list[str] = []
    ctx: dict = {}
    try:
        with urllib.request.urlopen(server.url + "api/streams", timeout=TIMEOUT) as res:
            nodes = nodes_of(json.loads(res.read()))
        rng = random.Random(args.seed)
        warm = request_mix(nodes, random.Random(args.seed + 10_000), args.warm)
        single = request_mix(nodes, rng, args.single)
        multi = [request_mix(nodes, random.Random(args.seed * 1_000_003 + c), args.requests)
                 for c in range(args.clients)]

        note(f"warm-up: {len(warm)} requests")
        w = asyncio.run(run_phase(server, [warm], 600))
        failures += [f"warm-up {r['target']}: {r['problem']}" for r in w["results"] if r["problem"]]
        ctx["repeats"] = asyncio.run(repeats(server, nodes))

        note(f"1 client: {len(single)} requests")
        bodies: dict = {}
        s1 = asyncio.run(run_phase(server, [single], 600, None, bodies))
        # The sequential run's answers parsed whole: the bucket count the load runs rely on.
        for i, r in enumerate(s1["results"]):
            if r["problem"]:
                continue
            got = json.loads(bodies[i])
            n = len(got["buckets"]) if got.get("plan") else 0
            if n != r["buckets"] or n * 4 > BUDGET:
                r["problem"] = f"parsed {n} buckets, counted {r['buckets']} (budget {BUDGET})"

        note(f"{args.clients} clients: {args.requests} requests each, at most {args.seconds:.0f} s")
        s50 = asyncio.run(run_phase(server, multi, args.seconds))

        for name, ph in (("1 client", s1), (f"{args.clients} clients", s50)):
            failures += [f"{name}: {r['kind']} {r['path']} [{r['from']}, {r['to']}): {r['problem']}"
                         for r in ph["results"] if r["problem"]]

        duck = None
        if args.duck:
            n = min(args.duck, len(single))
            note(f"DuckDB peer: {n} requests")
            duck = duck_peer(cli, archive, single[:n], bodies, s1["results"])
            failures += [f"DuckDB: {m}" for m in duck["problems"]]

        page = None
        run_node = next(r for r in nodes["run"] if r["path"] == [args.run])
        if args.zooms:
            note(f"page: {args.zooms} zoom-ins and zoom-outs on {args.run}, twice")
            lo, hi = run_node["first_axis"], run_node["last_axis"] + 1
            # A view of 1/32 of the run, a little right of its middle: level 0 cells, the
            # noise field's waves resolved.
            width = (hi - lo) / 32
            view = (lo + (hi - lo) * 0.55, lo + (hi - lo) * 0.55 + width)
            page = page_bench(server, [args.run], args.zooms, args.screenshot, view)
            for s in (s for m in page["modes"].values() for s in m["steps"]):
                if s["buckets"] * 4 > s["budget"]:
                    failures.append(f"page: {s['buckets']} buckets for a budget of {s['budget']}")
            failures += [f"page console: {m}" for m in page["severe"]]
        note("abandoned scan")
        ctx["abandoned"] = abandoned_scan(server, [args.run])
    finally:
        code = server.stop()
    text = log.read_text(errors="replace")
    warnings = sum(1 for line in text.splitlines() if " WARN " in line or " ERROR " in line
                   or "panicked" in line)
    log.unlink()
    if warnings:
        failures.append(f"the server logged {warnings} warning/error line(s): {text[-400:]!r}")
    if code not in (0, -signal.SIGTERM):
        failures.append(f"the server exited {code}")

    import selenium
    cpu, mem = machine()
    argv = " ".join(sys.argv[1:])
    ctx.update({
        "date": datetime.date.today().isoformat(), "commit": git("rev-parse", "--short", "HEAD"),
        "cpu": cpu, "mem": mem, "version": cli.run("--version").strip(),
        "selenium": selenium.__version__,
        "commands": ["cargo build --release --bin series-archive --example scale",
                     f".venv/bin/python scripts/bench_serve.py {argv}".rstrip()],
        "archive": os.path.relpath(archive, ROOT) if archive.is_absolute() else str(archive),
        "rows": rows, "files": stream["files"], "level_files": stream["level_files"],
        "barriers": inspected["barriers"], "seed": args.seed, "level_tables": ctx_levels,
        "level_cache": ctx_cache, "serve_args": "".join(" " + a for a in args.serve_arg),
        "single": summary(s1), "multi": {**summary(s50), "clients": args.clients,
                                          "capped": s50["capped"], "server_threads": s50["server_threads"]},
        "single_results": s1["results"], "multi_results": s50["results"],
        "per_client": args.requests, "seconds": args.seconds,
        "duck": duck, "page": page, "zooms": args.zooms, "run": [args.run],
        "run_rows": run_node["rows"], "failures": failures, "server_warnings": warnings,
    })
    out = report(ctx)
    print(out)
    if args.out:
        args.out.write_text(out)
        note(f"wrote {args.out}")
    note(f"done in {time.perf_counter() - began:.0f} s")
    if failures:
        print(f"bench_serve: {len(failures)} FAILURE(S):", file=sys.stderr)
        for f in failures[:20]:
            print(f"  {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
