#!/usr/bin/env python3
"""Generate a realistic eventd metric-store SQLite database, for testing the eventd importer.

    scripts/gen_eventd.py OUT.db [--series 48] [--samples 200000] [--seed 1]
                          [--retired-before-fraction 0] [--json] [--force]

The database has exactly the schema the importer assumes (tables metadata, series, samples,
rollups and their indexes, schema_version 1) and follows eventd's rules, so that it exercises
what a real store holds rather than a tidy ideal:

- series of all three types (about 40% counters, 40% gauges, 20% histograms) with canonical
  label strings (pairs sorted by key in UTF-8 byte order, `key=value` joined by `,`): one with
  no labels, unicode values (`sérveur-1`, `東京`, `Zürich`, emoji), and one whose keys sort
  differently in UTF-8 and UTF-16 order;
- label_hash and boundaries_hash are FNV-1a 64 masked to 63 bits, and two gauges of the same
  name have different labels with the same label_hash (a real collision, found with Pollard
  rho), so nothing may identify a series by its hash alone;
- two histogram series share name and labels and differ only in their bucket boundaries;
- samples are in nanoseconds from 2026-01-01, one per scrape interval (10 s or 15 s, with
  jitter) and skewed: a few series hold many more samples than the rest. Some timestamps are
  duplicated within a series (a second row, a new id: identical value for counters and
  histograms, a slightly different one for gauges), and a few percent of samples are inserted
  at the end of the run, so their ids are larger than those of later samples of their series;
- every host reboots a few times: its boot_id (16 random bytes) changes, it sends nothing while
  down, and its counters and histogram counts restart from about zero; otherwise counters
  never decrease, and gauges wander around a level;
- histogram samples have value 0.0 and histogram_data, a canonical MessagePack map (keys sorted
  bytewise: boundaries, counts, sum, total_count; floats as float64; ints in their smallest
  encoding) with the series' boundaries, per-bucket counts, their total and the sum;
- rollups (min, max, sum, count, avg over aligned 60 s and 3600 s windows, of all the samples
  of the window whatever their boot) for the counters and gauges;
- with --retired-before-fraction F, the oldest fraction F of each series' samples is deleted
  after the rollups were computed, as eventd's lifecycle does.

The output is a function of the options alone (not of the machine or the Python hash seed).
It prints a one-line summary, or with --json a JSON one: counts by type, the colliding pair,
duplicate-timestamp, out-of-order and boot-change counts, and the time span. Needs `msgpack`.
"""

import argparse
import heapq
import json
import math
import operator
import os
import random
import sqlite3
import struct
import sys
from array import array
from bisect import bisect_right
from datetime import datetime, timezone
from itertools import repeat

import msgpack

COUNTER, GAUGE, HISTOGRAM = 0, 1, 2
TYPE_NAMES = ("counter", "gauge", "histogram")
TYPE_SHARES = (0.4, 0.4, 0.2)

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
U64 = (1 << 64) - 1
MASK63 = (1 << 63) - 1

# host=A and host=B have the same masked FNV-1a 64 (in fact the same full 64 bits): found
# with a parallel Pollard-rho search over f(x) = hash("host=%016x" % x).
COLLIDING_HOSTS = ("3d143a4c77ef104e", "3e359a4628f71dca")

# The importer's documented schema, verbatim (sqlite_master keeps this text).
SCHEMA = (
    "CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE series (id INTEGER PRIMARY KEY, name TEXT NOT NULL, labels TEXT NOT NULL,"
    " type INTEGER NOT NULL,\n"
    "  label_hash INTEGER NOT NULL, boundaries_hash INTEGER, boundaries BLOB,"
    " UNIQUE(name, labels, boundaries_hash))",
    "CREATE TABLE samples (id INTEGER PRIMARY KEY,"
    " series_id INTEGER NOT NULL REFERENCES series(id), boot_id BLOB NOT NULL,\n"
    "  timestamp INTEGER NOT NULL, value REAL NOT NULL, histogram_data BLOB)",
    "CREATE TABLE rollups (id INTEGER PRIMARY KEY,"
    " series_id INTEGER NOT NULL REFERENCES series(id), function TEXT NOT NULL,\n"
    "  window_seconds INTEGER NOT NULL, window_start INTEGER NOT NULL, value REAL NOT NULL)",
)
INDEXES = (
    "CREATE INDEX idx_samples_series_timestamp ON samples(series_id, timestamp, id)",
    "CREATE INDEX idx_series_name ON series(name)",
    "CREATE INDEX idx_series_label_hash ON series(label_hash)",
    "CREATE INDEX idx_rollups_series_function_window"
    " ON rollups(series_id, function, window_seconds, window_start)",
)

NS = 1_000_000_000
START_NS = 1_767_225_600 * NS  # 2026-01-01T00:00:00Z
INTERVALS_S = (10, 15)
JITTER_NS = 50_000_000  # a scrape lands up to 50 ms either side of its slot
DUPLICATE_P = 0.005  # chance that a sample is a second row at its predecessor's timestamp
LATE_P = 0.03  # chance that a sample is inserted at the end of the run
HEAVY_SERIES = 3  # series with about ten times the samples of the others
REBOOTS_PER_HOST = (2, 4)
DOWNTIME_S = (30, 300)
ROLLUP_WINDOWS_S = (60, 3600)
ROLLUP_FUNCTIONS = ("min", "max", "sum", "count", "avg")

# host -> zone; every series is scraped from one host, whose boots it shares.
HOSTS = {
    "sérveur-1": "Zürich",
    "sérveur-2": "Zürich",
    "edge-東京-01": "東京",
    "db-são-paulo": "São Paulo",
    "🦀-builder": "us-east-1",
}
EXTRA_LABELS = {
    "job": ("api", "ingest", "réplication"),
    "path": ("/api/v1/users", "/café/menu", "/検索"),
    "team": ("🦀-core", "ops 🔥", "Ünïcode"),
    "status": ("200", "404", "503"),
}
NAMES = {
    COUNTER: ("http_requests_total", "bytes_sent_total", "cpu_seconds_total", "errors_total"),
    GAUGE: ("memory_used_bytes", "temperature_celsius", "queue_depth", "open_connections"),
    HISTOGRAM: ("request_duration_seconds", "response_size_bytes", "db_query_seconds"),
}
BOUNDARY_SETS = (
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0],
    [0.001, 0.01, 0.1, 1.0, 10.0],
    [100.0, 1000.0, 10000.0, 100000.0, 1000000.0],
    [-10.0, -1.0, 0.0, 1.0, 10.0],
)


def fnv1a64_masked(data: bytes) -> int:
    """FNV-1a 64 of `data`, masked to 63 bits (as eventd stores label_hash and boundaries_hash)."""
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & U64
    return h & MASK63


def canonical_labels(labels: dict) -> str:
    """eventd's canonical label string: pairs sorted by key in UTF-8 byte order."""
    for k, v in labels.items():
        for part in (k, v):
            assert part and not any(c in "=," or ord(c) < 0x20 or ord(c) == 0x7F for c in part)
    keys = sorted(labels, key=lambda k: k.encode("utf-8"))
    return ",".join(f"{k}={labels[k]}" for k in keys)


def boundaries_blob(boundaries: list) -> bytes:
    """u32 LE count, then the boundaries as f64 LE in producer order."""
    return struct.pack(f"<I{len(boundaries)}d", len(boundaries), *boundaries)


class Series:
    """A series row: its canonical labels, hashes and boundaries blob, and its host."""

    def __init__(self, name, labels, type_, host, boundaries=None):
        self.name, self.labels, self.type, self.host = name, labels, type_, host
        self.boundaries = boundaries
        self.blob = boundaries_blob(boundaries) if boundaries is not None else None
        self.label_hash = fnv1a64_masked(labels.encode("utf-8"))
        self.boundaries_hash = fnv1a64_masked(self.blob) if self.blob is not None else None


def special_series() -> list:
    """The series every database has, whatever --series says."""
    hosts = list(HOSTS)
    twins = canonical_labels({"host": hosts[2], "zone": HOSTS[hosts[2]]})
    # U+FF5A sorts before U+1F980 in UTF-8 (and code point) order, after it in UTF-16.
    unicode_keys = canonical_labels({"🦀": "crab", "ｚone": "全角", "Host": hosts[4]})
    return [
        Series("eventd_samples_ingested_total", "", COUNTER, hosts[0]),
        *(Series("node_temperature_celsius", canonical_labels({"host": h}), GAUGE, h)
          for h in COLLIDING_HOSTS),
        Series("rpc_latency_seconds", twins, HISTOGRAM, hosts[2], BOUNDARY_SETS[0]),
        Series("rpc_latency_seconds", twins, HISTOGRAM, hosts[2], BOUNDARY_SETS[1]),
        Series("unicode_keys_total", unicode_keys, COUNTER, hosts[4]),
    ]


def make_series(rng: random.Random, count: int) -> list:
    """The special series plus regular ones, types chosen to approach TYPE_SHARES."""
    series = special_series()
    if count < len(series):
        raise SystemExit(f"--series must be at least {len(series)}")
    taken = {(s.name, s.labels) for s in series}
    per_type = [sum(s.type == t for s in series) for t in range(3)]
    while len(series) < count:
        type_ = max(range(3), key=lambda t: TYPE_SHARES[t] * (len(series) + 1) - per_type[t])
        host = rng.choice(list(HOSTS))
        labels = {"host": host, "zone": HOSTS[host]}
        for key in rng.sample(sorted(EXTRA_LABELS), rng.randint(0, 2)):
            labels[key] = rng.choice(EXTRA_LABELS[key])
        name, labels = rng.choice(NAMES[type_]), canonical_labels(labels)
        if (name, labels) in taken:
            continue
        taken.add((name, labels))
        boundaries = list(rng.choice(BOUNDARY_SETS)) if type_ == HISTOGRAM else None
        series.append(Series(name, labels, type_, host, boundaries))
        per_type[type_] += 1
    rng.shuffle(series)
    return series


def apportion(rng: random.Random, total: int, parts: int, heavy: int) -> list:
    """Split `total` samples over `parts` series, each at least one: series `heavy` and a few
    others get about 10x the rest (and so span the whole run, seeing every reboot)."""
    if total < parts:
        raise SystemExit("--samples must be at least --series")
    weights = [rng.uniform(0.5, 1.5) for _ in range(parts)]
    for i in [heavy] + rng.sample(range(parts), HEAVY_SERIES - 1):
        weights[i] = 10.0
    exact = [w * (total - parts) / sum(weights) for w in weights]
    shares = [1 + int(e) for e in exact]
    by_remainder = sorted(range(parts), key=lambda i: int(exact[i]) - exact[i])
    for i in by_remainder[: total - sum(shares)]:
        shares[i] += 1
    return shares


class Host:
    """A host's boots over the span: boot k starts when reboot k-1's downtime ends."""

    def __init__(self, rng: random.Random, span_ns: int):
        reboots = sorted(START_NS + int(span_ns * rng.uniform(0.05, 0.95))
                         for _ in range(rng.randint(*REBOOTS_PER_HOST)))
        self.down = [(t, t + rng.randint(*DOWNTIME_S) * NS) for t in reboots]
        self.boot_ids = [rng.randbytes(16) for _ in range(len(reboots) + 1)]


def timeline(rng: random.Random, host: Host, start: int, n: int, interval_ns: int):
    """Timestamps (nondecreasing: duplicates repeat) and boot indexes of a series' n samples."""
    ts, boots = array("q"), array("B")
    rnd, down = rng.random, host.down
    t, boot = start, 0
    for j in range(n):
        if j and rnd() < DUPLICATE_P:
            ts.append(t)
            boots.append(boot)
            continue
        t += interval_ns + int((2 * rnd() - 1) * JITTER_NS)
        while boot < len(down) and t >= down[boot][0]:
            t = max(t, down[boot][1] + int(rnd() * interval_ns))
            boot += 1
        ts.append(t)
        boots.append(boot)
    return ts, boots


def counter_values(rng: random.Random, ts, boots) -> array:
    """Monotonic within a boot, restarting from about zero at each boot change."""
    rate = 10 ** rng.uniform(-1, 4)  # per second
    integral = rng.random() < 0.5
    vals, rnd = array("d"), rng.random
    v, prev_t, prev_boot = rate * rng.uniform(0, 86400), ts[0], boots[0]
    for t, boot in zip(ts, boots):
        if boot != prev_boot:
            v = rate * rnd()
        elif t != prev_t:
            v += rate * (t - prev_t) / NS * (0.5 + rnd())
        if integral:
            v = float(math.floor(v))
        vals.append(v)
        prev_t, prev_boot = t, boot
    return vals


def gauge_values(rng: random.Random, ts) -> array:
    """A mean-reverting random walk; a duplicate timestamp gets a slightly different value."""
    level = 10 ** rng.uniform(0, 6)
    sigma = level * rng.uniform(0.005, 0.05)
    vals, gauss = array("d"), rng.gauss
    v, prev_t = level, None
    for t in ts:
        if t == prev_t:
            vals.append(v + gauss(0, sigma * 0.1))
            continue
        v += 0.05 * (level - v) + gauss(0, sigma)
        vals.append(v)
        prev_t = t
    return vals


def histogram_data(rng: random.Random, boundaries: list, ts, boots) -> list:
    """Canonical MessagePack per sample: counts and sum cumulative within a boot."""
    nb = len(boundaries) + 1
    low = boundaries[0] - (boundaries[1] - boundaries[0])
    high = boundaries[-1] + (boundaries[-1] - boundaries[-2])
    edges = [low, *boundaries, high]  # bucket b holds observations in [edges[b], edges[b + 1])
    peak = rng.randrange(nb)
    weights = [1.0 / (1 + abs(i - peak)) ** 2 for i in range(nb)]
    increments = []  # a pool of (per-bucket counts, sum) for one scrape interval
    for _ in range(64):
        counts = [0] * nb
        total = 0.0
        for b in rng.choices(range(nb), weights, k=rng.randint(0, 40)):
            counts[b] += 1
            total += edges[b] + (edges[b + 1] - edges[b]) * rng.random()
        increments.append((counts, total))
    out, rnd = [], rng.random
    counts, total, prev_t, prev_boot = [0] * nb, 0.0, None, boots[0]
    for t, boot in zip(ts, boots):
        if t == prev_t:
            out.append(out[-1])
            continue
        if boot != prev_boot:
            counts, total = [0] * nb, 0.0
        inc, inc_sum = increments[int(rnd() * 64)]
        counts = [a + b for a, b in zip(counts, inc)]
        total += inc_sum
        out.append(msgpack.packb({"boundaries": boundaries, "counts": counts, "sum": total,
                                  "total_count": sum(counts)}, use_single_float=False))
        prev_t, prev_boot = t, boot
    return out


def rollups(series_id: int, type_: int, ts, vals, counts: dict):
    """Rollup rows of one series: every window with a sample, all its samples, any boot.
    Counts the rows in counts[(type_, window_seconds)]."""
    n = len(ts)
    for w in ROLLUP_WINDOWS_S:
        w_ns = w * NS
        i = 0
        while i < n:
            start = ts[i] // w_ns * w_ns
            j = bisect_right(ts, start + w_ns - 1, i)
            window = vals[i:j]
            s, c = math.fsum(window), float(j - i)
            yield series_id, "min", w, start, min(window)
            yield series_id, "max", w, start, max(window)
            yield series_id, "sum", w, start, s
            yield series_id, "count", w, start, c
            yield series_id, "avg", w, start, s / c
            counts[type_, w] += len(ROLLUP_FUNCTIONS)
            i = j


def iso(ns):
    """ISO 8601 UTC, to the second, of a timestamp in ns (None for none)."""
    if ns is None:
        return None
    return datetime.fromtimestamp(ns // NS, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write(path: str, series: list, sample_rows, rollup_rows) -> None:
    """Write the database to path + ".tmp" in one transaction, indexes last, then rename it."""
    tmp = path + ".tmp"
    if os.path.exists(tmp):
        os.remove(tmp)
    db = sqlite3.connect(tmp, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("BEGIN")
    for statement in SCHEMA:
        db.execute(statement)
    db.execute("INSERT INTO metadata VALUES ('schema_version', '1')")
    db.executemany("INSERT INTO series VALUES (?, ?, ?, ?, ?, ?, ?)",
                   [(k + 1, s.name, s.labels, s.type, s.label_hash, s.boundaries_hash, s.blob)
                    for k, s in enumerate(series)])
    db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?)", sample_rows)
    db.executemany("INSERT INTO rollups (series_id, function, window_seconds, window_start, value)"
                   " VALUES (?, ?, ?, ?, ?)", rollup_rows)
    for statement in INDEXES:
        db.execute(statement)
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()
    os.replace(tmp, path)


def generate(path: str, n_series: int, n_samples: int, seed: int, retired_fraction: float) -> dict:
    """Write the database and return its summary."""
    rng = random.Random(seed)
    series = make_series(rng, n_series)
    shares = apportion(rng, n_samples, n_series, [s.labels for s in series].index(""))
    intervals = [rng.choice(INTERVALS_S) * NS for _ in series]
    span = max(n * i for n, i in zip(shares, intervals))
    hosts = {h: Host(rng, span) for h in sorted({s.host for s in series})}

    pair = [k for k, s in enumerate(series) if s.host in COLLIDING_HOSTS]
    a, b = (series[k] for k in pair)
    assert a.labels != b.labels and a.label_hash == b.label_hash, "label-hash pair must collide"

    # Per series k (id k + 1), in timestamp order: timestamps, boot indexes, values,
    # histogram blobs (or None), which samples arrive late, and how many are retired.
    ts, boots, vals, hist, late = [], [], [], [], []
    for s, n, interval in zip(series, shares, intervals):
        start = START_NS + int(rng.random() * (span - n * interval))
        t, bt = timeline(rng, hosts[s.host], start, n, interval)
        ts.append(t)
        boots.append(bt)
        if s.type == HISTOGRAM:
            vals.append(array("d", bytes(8 * n)))  # all 0.0
            hist.append(histogram_data(rng, s.boundaries, t, bt))
        else:
            vals.append(counter_values(rng, t, bt) if s.type == COUNTER else gauge_values(rng, t))
            hist.append([None] * n)
        late.append(bytearray(rng.random() < LATE_P for _ in range(n)))
    retired = [int(retired_fraction * n) for n in shares]
    boot_ids = [hosts[s.host].boot_ids for s in series]
    out_of_order = 0

    def arrivals():
        """(k, j) in insertion order: all series merged by timestamp, then the late ones."""
        late_rows = []
        merged = heapq.merge(*(zip(t, repeat(k), range(len(t))) for k, t in enumerate(ts)))
        for _, k, j in merged:
            if late[k][j]:
                late_rows.append((k, j))
            else:
                yield k, j
        rng.shuffle(late_rows)
        yield from late_rows

    def sample_rows():
        """Every sample takes the next id; the retired ones are then not written (deleted)."""
        nonlocal out_of_order
        max_ts = [-1] * len(series)
        for id_, (k, j) in enumerate(arrivals(), 1):
            if j < retired[k]:
                continue
            t = ts[k][j]
            if max_ts[k] > t:
                out_of_order += 1
            else:
                max_ts[k] = t
            yield id_, k + 1, boot_ids[k][boots[k][j]], t, vals[k][j], hist[k][j]

    rollup_counts = {(t, w): 0 for t in (COUNTER, GAUGE) for w in ROLLUP_WINDOWS_S}
    rollup_rows = (row for k, s in enumerate(series) if s.type != HISTOGRAM
                   for row in rollups(k + 1, s.type, ts[k], vals[k], rollup_counts))
    write(path, series, sample_rows(), rollup_rows)

    kept = [range(r, n) for r, n in zip(retired, shares)]
    kept_by_type = [sum(len(r) for r, s in zip(kept, series) if s.type == t) for t in range(3)]
    first = min((ts[k][r.start] for k, r in enumerate(kept) if r), default=None)
    last = max((ts[k][-1] for k, r in enumerate(kept) if r), default=None)
    duplicates = sum(sum(map(operator.eq, ts[k][r.start:], ts[k][r.start + 1:]))
                     for k, r in enumerate(kept))
    transitions = sum(len(set(boots[k][r.start:])) - 1 for k, r in enumerate(kept) if r)
    types = [s.type for s in series]
    return {
        "path": path,
        "seed": seed,
        "series": {"total": len(series), **{TYPE_NAMES[t]: types.count(t) for t in range(3)}},
        "samples": {"total": sum(kept_by_type), "generated": n_samples, "retired": sum(retired),
                    **dict(zip(TYPE_NAMES, kept_by_type))},
        "rollups": {"total": sum(rollup_counts.values()),
                    **{TYPE_NAMES[t]: sum(rollup_counts[t, w] for w in ROLLUP_WINDOWS_S)
                       for t in (COUNTER, GAUGE)},
                    **{f"window_{w}s": sum(rollup_counts[t, w] for t in (COUNTER, GAUGE))
                       for w in ROLLUP_WINDOWS_S}},
        "label_hash_collision": {
            "label_hash": a.label_hash,
            "series": [{"id": k + 1, "name": series[k].name, "labels": series[k].labels}
                       for k in pair],
        },
        "boundary_twins": [{"id": k + 1, "name": s.name, "labels": s.labels,
                            "boundaries_hash": s.boundaries_hash}
                           for k, s in enumerate(series) if s.name == "rpc_latency_seconds"],
        "duplicate_timestamp_samples": duplicates,
        "out_of_order_samples": out_of_order,
        "boot_changes": sum(len(h.down) for h in hosts.values()),
        "series_boot_transitions": transitions,
        "time_span": {"first_ns": first, "last_ns": last, "first": iso(first), "last": iso(last),
                      "seconds": (last - first) / NS if first is not None else 0.0},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="the SQLite database to write")
    p.add_argument("--series", type=int, default=48)
    p.add_argument("--samples", type=int, default=200_000, help="total samples generated")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--retired-before-fraction", type=float, default=0.0, metavar="F",
                   help="delete the oldest fraction F of each series' samples after rollups")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    args = p.parse_args()
    if not 0.0 <= args.retired_before_fraction <= 1.0:
        p.error("--retired-before-fraction must be within [0, 1]")
    if os.path.exists(args.out) and not args.force:
        p.error(f"{args.out} exists (use --force to overwrite)")
    summary = generate(args.out, args.series, args.samples, args.seed, args.retired_before_fraction)
    if args.json:
        json.dump(summary, sys.stdout, ensure_ascii=False, indent=2)
        print()
        return
    s, c = summary, summary["label_hash_collision"]
    print(f"{s['path']}: {s['series']['total']} series ({s['series']['counter']} counters, "
          f"{s['series']['gauge']} gauges, {s['series']['histogram']} histograms), "
          f"{s['samples']['total']} samples ({s['samples']['retired']} retired), "
          f"{s['rollups']['total']} rollups; {s['duplicate_timestamp_samples']} duplicate "
          f"timestamps, {s['out_of_order_samples']} out of order, {s['boot_changes']} reboots; "
          f"series {c['series'][0]['id']} and {c['series'][1]['id']} share label_hash "
          f"{c['label_hash']:#x}; {s['time_span']['first']} .. {s['time_span']['last']}")


if __name__ == "__main__":
    main()
