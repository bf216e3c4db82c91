#!/usr/bin/env python3
"""kill -9 torture: the real binary, killed at random inside ingest and compaction.

    scripts/torture.py [--cycles 200] [--binary target/release/series-archive]
                       [--dir DIR] [--seed 1] [--rows 40000] [--seal-rows 2000]

Each cycle writes a CSV whose rows continue the archive's positions (an explicit position
column, so the content at every position is known), starts `series-archive ingest` (or, one
cycle in four, `compact` after a short ingest) and SIGKILLs it after a random delay. The
barriers it acknowledged are the `barrier N: ... durable through position P` lines it printed
before dying. Then, on the damaged directory:

- `verify` must exit 0 (every committed digest verifies; the manifest replays whole);
- `rows` must answer positions 1..W exactly once each, every row's content as written, with
  W at least the highest acknowledged position (an acknowledged barrier is never lost);
- the next cycle's writable open must succeed (recovery quarantines leftovers and repairs a
  torn tail before claiming anything).

It prints cycles, kills that landed inside a barrier (the next open quarantined a leftover or
repaired a torn tail, or the archive held more than was acknowledged), acknowledged barriers
lost, failed opens and wrong rows, and exits 1 unless the last three are all 0. Standard
library only.
"""

import argparse
import csv
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BARRIER = re.compile(r"^barrier (\d+): stream capture durable through position (\d+)")


def value_of(position):
    """The row content at a position: deterministic, so any damage shows."""
    return (position * 7919) % 100003 - 50000


def track_of(position):
    return f"run_{position % 3}", f"p{position % 2}"


def write_csv(path, first, count):
    with open(path, "w", newline="") as f:
        f.write("run,probe,ordinal,value,pos\n")
        for p in range(first, first + count):
            run, probe = track_of(p)
            f.write(f"{run},{probe},{p},{value_of(p)},{p}\n")


def run(binary, args, **kw):
    return subprocess.run([binary, *args], capture_output=True, text=True, **kw)


def durable_rows(binary, archive, known=0):
    """How far the archive is durable, W; raises on any disagreement. Rows 1..known were
    checked before (their count is checked again); rows known+1..W are read and each one's
    position and content checked, so a cycle costs the rows it added."""
    inspect = run(binary, ["inspect", archive, "--json"])
    if inspect.returncode != 0:
        raise RuntimeError(f"inspect exited {inspect.returncode}: {inspect.stderr.strip()}")
    total = sum(s["rows"] for s in json.loads(inspect.stdout)["streams"])
    out = run(binary, ["rows", archive, "--stream", "capture", "--from", str(known + 1)])
    if out.returncode != 0:
        raise RuntimeError(f"rows exited {out.returncode}: {out.stderr.strip()}")
    positions = []
    for row in csv.DictReader(io.StringIO(out.stdout)):
        p = int(row["_position"])
        run_, probe = track_of(p)
        want = (run_, probe, str(p), str(value_of(p)))
        got = (row["run"], row["probe"], row["ordinal"], row["value"])
        if got != want:
            raise RuntimeError(f"position {p}: served {got}, written {want}")
        positions.append(p)
    positions.sort()
    expected = list(range(known + 1, known + 1 + len(positions)))
    if positions != expected:
        missing = sorted(set(expected) - set(positions))
        raise RuntimeError(f"positions past {known} are not contiguous, each once (missing {missing[:5]}…)")
    w = known + len(positions)
    if total != w:
        raise RuntimeError(f"the archive holds {total} rows, positions 1..{w} were served")
    return w


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--binary", default="target/release/series-archive")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rows", type=int, default=40_000, help="rows per ingest")
    ap.add_argument("--seal-rows", type=int, default=2_000)
    ap.add_argument("--max-delay", type=float, default=None,
                    help="longest kill delay in seconds (default: measured from a first clean ingest)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    if not os.path.exists(args.binary):
        sys.exit(f"{args.binary} not found: build it (cargo build --release) or pass --binary")
    work = args.dir or tempfile.mkdtemp(prefix="series-archive-torture-")
    os.makedirs(work, exist_ok=True)
    archive = os.path.join(work, "archive")
    shutil.rmtree(archive, ignore_errors=True)
    csv_path = os.path.join(work, "input.csv")
    ingest = ["ingest", archive, "--stream", "capture", "--track", "run,probe", "--axis", "ordinal",
              "--position", "pos", "--seal-rows", str(args.seal_rows), csv_path]

    # A first clean ingest measures how long one takes, so kills land inside the work.
    write_csv(csv_path, 1, args.rows)
    began = time.monotonic()
    out = run(args.binary, ingest)
    if out.returncode != 0:
        sys.exit(f"the first ingest failed: {out.stderr}")
    max_delay = args.max_delay or max(0.05, (time.monotonic() - began) * 1.2)
    durable = durable_rows(args.binary, archive)

    stats = dict(cycles=0, killed=0, mid_barrier=0, acked_lost=0, failed_opens=0, wrong_rows=0,
                 compactions=0)
    for cycle in range(args.cycles):
        stats["cycles"] += 1
        compact = cycle % 4 == 3
        write_csv(csv_path, durable + 1, args.rows // (8 if compact else 1))
        acked = durable
        if compact:
            # A short ingest to finish, then a compaction to kill.
            out = run(args.binary, ingest)
            if out.returncode != 0:
                stats["failed_opens"] += 1
                print(f"cycle {cycle}: ingest before compact failed: {out.stderr.strip()}")
                continue
            for line in out.stdout.splitlines():
                m = BARRIER.match(line)
                if m:
                    acked = max(acked, int(m.group(2)))
            command = ["compact", archive]
            stats["compactions"] += 1
        else:
            command = ingest
        proc = subprocess.Popen([args.binary, *command], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0, max_delay))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            stats["killed"] += 1
        stdout, stderr = proc.communicate()
        for line in stdout.splitlines():
            m = BARRIER.match(line)
            if m:
                acked = max(acked, int(m.group(2)))
        verify = run(args.binary, ["verify", archive])
        if verify.returncode != 0:
            stats["failed_opens"] += 1
            print(f"cycle {cycle}: verify exited {verify.returncode}: {verify.stdout.strip()} {verify.stderr.strip()}")
        try:
            served = durable_rows(args.binary, archive, durable)
        except RuntimeError as e:
            stats["wrong_rows"] += 1
            print(f"cycle {cycle}: {e}")
            break
        if served < acked:
            stats["acked_lost"] += 1
            print(f"cycle {cycle}: acknowledged through {acked}, served through {served}")
        # The next writable open recovers; what it reports shows where the kill landed.
        probe = run(args.binary, ["checkpoint", archive])
        if probe.returncode != 0:
            stats["failed_opens"] += 1
            print(f"cycle {cycle}: writable open failed: {probe.stderr.strip()}")
        inspect = run(args.binary, ["inspect", archive, "--json"])
        moved = 0
        if inspect.returncode == 0:
            moved = len(json.loads(inspect.stdout)["quarantine"])
        if served > acked or moved > stats.get("_moved", 0):
            stats["mid_barrier"] += 1
        stats["_moved"] = moved
        durable = served
    stats.pop("_moved", None)
    print(" ".join(f"{k}={v}" for k, v in stats.items()) + f" rows={durable} dir={work}")
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    bad = stats["acked_lost"] + stats["failed_opens"] + stats["wrong_rows"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
