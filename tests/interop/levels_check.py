#!/usr/bin/env python3
"""Differential check of `survey` and `fold` against DuckDB over the raw rows.

    levels_check.py ANSWERS.json

ANSWERS.json (written by tests/interop_levels.rs) holds the archive directory, the
`inspect --json` description of each stream, and a list of requests -- a stream, track
labels (a whole track, a prefix, or none for the whole stream) and an axis range
[from, to) with either end possibly unbounded -- each with the archive's answers:
`survey --json` under several budgets and `fold --json` for several aggregates.

Everything is recomputed with DuckDB from the raw rows only,
`read_parquet('<archive>/streams/<id>/rows/*.parquet')`; the level files are never read:

  * survey: the plan (finest level whose cells over the span fit budget / (4 x fields);
    past the coarsest level the smallest merge that fits) and its span; then on the grid the
    answer states (plan.cell_width, plan.cells) the true M4 bucket of every track, field and
    cell -- first = value at the least axis (ties: least _seq), last = value at the greatest
    axis (ties: greatest _seq), min/max = the extreme value placed at the earliest _seq
    holding it, count, sum, sum of squares -- and, for a prefix or the whole stream, the
    tracks merged cell by cell in track-key order (labels compared as UTF-8 bytes) by the
    archive's documented merge rule (first: strictly smaller axis wins, a tie keeps the
    earlier track; last: a greater-or-equal axis wins, a tie takes the later track; min/max:
    strictly smaller/greater value wins by IEEE total order, a tie keeps the earlier track).
    The buckets must be equal, in order (by field, then by cell). Also: four points per
    bucket never exceed the budget, and `fields` are the numeric columns of the rows files
    other than the axis and the track, in declared order.
  * fold, level folds (min, max, mean, sum, count): over the level-0 cells the range
    touches, whole: rows with axis in [lo // base * base, (hi // base + 1) * base), lo and
    hi the inclusive requested bounds; the answer's span must say exactly that.
  * fold, percentiles pR: quantile_disc(value, R / 100) over exactly [from, to).
  * a statistic of no values is null, except `count` and `sum`, which are 0 as
    src/contract/aggregate.rs documents (DuckDB's sum of nothing is NULL); answers compare
    bit for bit, so -0.0 is not 0.

Sums compare exactly for a field whose values make every sum exact (multiples of 1/4,
small enough that sum and sum of squares never round: the generated CSV's fields and the
demo's integer `value`); for any other field (the demo's `noise`) first/last/min/max/count
and percentiles still compare exactly, and sum, sum of squares and mean must lie within
the bound recursive summation in any order guarantees (4 n u sum|x|, u = 2^-53).

Exit status: 0 when everything agrees (the last line starts `levels_check: ok`), 1 on any
mismatch (each printed with the request, the archive's answer and DuckDB's), 2 when the
check itself cannot run.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

try:
    import duckdb
except ImportError as e:  # pragma: no cover - environment problem, not a mismatch
    sys.exit(
        f"levels_check.py: cannot import {e.name!r}: run scripts/test (it installs "
        "requirements-test.txt into .venv) or point SERIES_ARCHIVE_PYTHON at a python "
        "that has duckdb"
    )

NUMERIC_DUCKDB_TYPES = {
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
    "FLOAT",
    "DOUBLE",
}
LEVEL_FOLDS = ("min", "max", "mean", "sum", "count")
U = 2.0**-53
MAX_SHOWN = 25


class CheckError(Exception):
    """The check could not run (as opposed to a mismatch)."""


def sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def total_key(x: float) -> int:
    """Rust's f64::total_cmp as an integer key."""
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits ^ 0x7FFF_FFFF_FFFF_FFFF if bits < 0 else bits


def same_float(a, b) -> bool:
    """Equal as f64, bit for bit (so -0.0 != 0.0 and NaN == NaN)."""
    if a is None or b is None:
        return a is None and b is None
    return struct.pack("<d", float(a)) == struct.pack("<d", float(b))


class Bucket:
    """An M4 bucket; `sum_abs` (the sum of |value|) only bounds rounding, never compared."""

    __slots__ = ("field", "first", "last", "min", "max", "count", "sum", "sum_sq", "sum_abs")

    def __init__(self, field, first, last, mn, mx, count, s, sum_sq, sum_abs):
        self.field = field
        self.first, self.last, self.min, self.max = first, last, mn, mx
        self.count, self.sum, self.sum_sq, self.sum_abs = count, s, sum_sq, sum_abs

    @staticmethod
    def from_json(b: dict) -> "Bucket":
        p = lambda k: (int(b[k]["axis"]), float(b[k]["value"]))  # noqa: E731
        return Bucket(
            int(b["field"]), p("first"), p("last"), p("min"), p("max"),
            int(b["count"]), float(b["sum"]), float(b["sum_sq"]), None,
        )

    def as_dict(self) -> dict:
        pair = lambda p: {"axis": p[0], "value": p[1]}  # noqa: E731
        return {
            "field": self.field,
            "first": pair(self.first),
            "last": pair(self.last),
            "min": pair(self.min),
            "max": pair(self.max),
            "count": self.count,
            "sum": self.sum,
            "sum_sq": self.sum_sq,
        }


class Ties:
    """How often a tie rule decided an answer (so the test proves ties are exercised)."""

    def __init__(self):
        self.within = {"first": 0, "last": 0, "min": 0, "max": 0}
        self.across = {"first": 0, "last": 0, "min": 0, "max": 0}

    def total(self) -> int:
        return sum(self.within.values()) + sum(self.across.values())


def merge(early: Bucket, later: Bucket, ties: Ties) -> Bucket:
    """The archive's documented merge rule, written from its description (bucket.rs)."""
    if later.first[0] == early.first[0] and not same_float(later.first[1], early.first[1]):
        ties.across["first"] += 1
    if later.last[0] == early.last[0] and not same_float(later.last[1], early.last[1]):
        ties.across["last"] += 1
    if same_float(later.min[1], early.min[1]) and later.min[0] != early.min[0]:
        ties.across["min"] += 1
    if same_float(later.max[1], early.max[1]) and later.max[0] != early.max[0]:
        ties.across["max"] += 1
    return Bucket(
        early.field,
        later.first if later.first[0] < early.first[0] else early.first,
        later.last if later.last[0] >= early.last[0] else early.last,
        later.min if total_key(later.min[1]) < total_key(early.min[1]) else early.min,
        later.max if total_key(later.max[1]) > total_key(early.max[1]) else early.max,
        early.count + later.count,
        early.sum + later.sum,
        early.sum_sq + later.sum_sq,
        early.sum_abs + later.sum_abs,
    )


def plan(ladder: dict, lo: int, hi: int, cells_per_field: int) -> dict:
    """The plan as documented: finest level that fits, else the smallest merge past the
    coarsest level that fits."""
    base, factor, levels = ladder["base"], ladder["factor"], ladder["levels"]
    touched = lambda w: hi // w - lo // w + 1  # noqa: E731
    for k in range(levels):
        w = base * factor**k
        if touched(w) <= cells_per_field:
            return {"level": k, "merge": 1, "cell_width": w, "cells": [lo // w, hi // w]}
    w = base * factor ** (levels - 1)
    merge_n = 1
    while touched(w * merge_n) > cells_per_field:
        merge_n += 1
    width = w * merge_n
    return {"level": levels - 1, "merge": merge_n, "cell_width": width, "cells": [lo // width, hi // width]}


class Checker:
    def __init__(self, answers: dict):
        self.archive = Path(answers["archive"])
        self.streams: dict = {s["id"]: s for s in answers["inspect"]["streams"]}
        self.requests: list = answers["requests"]
        self.db = duckdb.connect()
        self.mismatches: list[str] = []
        self.surveys = 0
        self.buckets = 0
        self.folds = 0
        self.merged_past_coarsest = 0
        self.ties = Ties()
        self.exact: dict[str, dict[str, bool]] = {}
        self.views: dict[str, str] = {}
        for i, sid in enumerate(sorted(self.streams)):
            self.prepare_stream(i, sid)

    # -- setup ---------------------------------------------------------------------------

    def prepare_stream(self, i: int, sid: str) -> None:
        info = self.streams[sid]
        rows_dir = self.archive / "streams" / sid / "rows"
        if not any(rows_dir.glob("*.parquet")):
            raise CheckError(f"stream {sid}: no Parquet files under {rows_dir}")
        view = f"raw_{i}"
        # The raw rows only: the documented glob under rows/, never the level files (read
        # once into a table: the requests query it many times).
        self.db.sql(f"CREATE TABLE {view} AS SELECT * FROM read_parquet({sql_str(str(rows_dir / '*.parquet'))})")
        self.views[sid] = view
        described = self.db.sql(f"DESCRIBE {view}").fetchall()
        axis, track = info["axis"], info["track"]
        numeric = [
            name for name, typ, *_ in described
            if typ in NUMERIC_DUCKDB_TYPES and name not in track and name != axis and name not in ("_position", "_seq")
        ]
        if numeric != info["measured"]:
            self.fail(
                f"stream {sid}: measured fields",
                f"inspect says {info['measured']}, the Parquet's numeric columns other than axis/track are {numeric}",
            )
        # Which fields sum exactly in any order: multiples of 1/4 whose sum of squares (in
        # units of 1/16) stays below 2^53.
        self.exact[sid] = {}
        for name in info["measured"]:
            v = f"CAST({ident(name)} AS DOUBLE)"
            quarters, max_abs, n = self.db.sql(
                f"SELECT coalesce(bool_and({v} * 4 = floor({v} * 4)), true), coalesce(max(abs({v})), 0), count({v}) FROM {view}"
            ).fetchone()
            self.exact[sid][name] = bool(quarters) and n * (max_abs * 4) ** 2 < 2.0**53
        print(f"stream {sid}: fields {info['measured']}, exact sums: {self.exact[sid]}, ladder {info['ladder']}")

    # -- bookkeeping ---------------------------------------------------------------------

    def fail(self, what: str, detail: str) -> None:
        self.mismatches.append(what)
        if len(self.mismatches) <= MAX_SHOWN:
            print(f"MISMATCH {what}\n{detail}\n", flush=True)

    @staticmethod
    def describe(req: dict, extra: str) -> str:
        track = " ".join(repr(t) for t in req["track"]) or "(whole stream)"
        rng = f"[{'' if req['from'] is None else req['from']}, {'' if req['to'] is None else req['to']})"
        return f"{req['stream']} --track {track} axis {rng} {extra}"

    # -- DuckDB --------------------------------------------------------------------------

    def selection(self, req: dict) -> str:
        info = self.streams[req["stream"]]
        conds = ["true"]
        for col, label in zip(info["track"], req["track"]):
            conds.append(f"CAST({ident(col)} AS VARCHAR) = {sql_str(label)}")
        return " AND ".join(conds)

    def bounds(self, req: dict):
        """The inclusive [lo, hi] the request covers, or None when it covers nothing."""
        info = self.streams[req["stream"]]
        a = ident(info["axis"])
        first, last = self.db.sql(
            f"SELECT min({a}), max({a}) FROM {self.views[req['stream']]} WHERE {self.selection(req)}"
        ).fetchone()
        lo = req["from"] if req["from"] is not None else first
        hi = req["to"] - 1 if req["to"] is not None else last
        if lo is None or hi is None or lo > hi:
            return None
        return int(lo), int(hi)

    def track_buckets(self, req: dict, field: str, f: int, width: int, start: int, end: int):
        """Per track (labels tuple) per cell: the M4 bucket of `field` over axis [start, end)."""
        info = self.streams[req["stream"]]
        a, v = ident(info["axis"]), f"CAST({ident(field)} AS DOUBLE)"
        labels = ", ".join(f"CAST({ident(c)} AS VARCHAR)" for c in info["track"])
        sql = f"""
            SELECT [{labels}] AS labels, {a} // {width} AS cell,
                min({a}), first({v} ORDER BY {a} ASC, _seq ASC),
                max({a}), first({v} ORDER BY {a} DESC, _seq DESC),
                first({a} ORDER BY {v} ASC, _seq ASC), min({v}),
                first({a} ORDER BY {v} DESC, _seq ASC), max({v}),
                count({v}), sum({v}), sum({v} * {v}), sum(abs({v})),
                -- the answers the opposite tie rule would give, to count decisive ties
                first({v} ORDER BY {a} ASC, _seq DESC), first({v} ORDER BY {a} DESC, _seq ASC),
                first({a} ORDER BY {v} ASC, _seq DESC), first({a} ORDER BY {v} DESC, _seq DESC)
            FROM {self.views[req['stream']]}
            WHERE {self.selection(req)} AND {a} >= {start} AND {a} < {end} AND {v} IS NOT NULL
            GROUP BY ALL
        """
        out = {}
        for row in self.db.sql(sql).fetchall():
            labels, cell = tuple(row[0]), int(row[1])
            fa, fv, la, lv, mina, minv, maxa, maxv, n, s, sq, sa, fv2, lv2, mina2, maxa2 = row[2:]
            b = Bucket(
                f, (int(fa), float(fv)), (int(la), float(lv)), (int(mina), float(minv)),
                (int(maxa), float(maxv)), int(n), float(s), float(sq), float(sa),
            )
            self.ties.within["first"] += not same_float(fv, fv2)
            self.ties.within["last"] += not same_float(lv, lv2)
            self.ties.within["min"] += int(mina) != int(mina2)
            self.ties.within["max"] += int(maxa) != int(maxa2)
            out[(labels, cell)] = b
        return out

    # -- comparisons ---------------------------------------------------------------------

    def bucket_differences(self, got: Bucket, want: Bucket, exact: bool) -> list[str]:
        diffs = []
        if got.field != want.field:
            diffs.append("field")
        for k in ("first", "last", "min", "max"):
            g, w = getattr(got, k), getattr(want, k)
            if g[0] != w[0] or not same_float(g[1], w[1]):
                diffs.append(k)
        if got.count != want.count:
            diffs.append("count")
        for k, bound in (("sum", want.sum_abs), ("sum_sq", want.sum_sq)):
            g, w = getattr(got, k), getattr(want, k)
            if exact:
                if not same_float(g, w):
                    diffs.append(k)
            elif abs(g - w) > 4 * max(want.count, 1) * U * abs(bound) + 1e-300:
                diffs.append(f"{k} (beyond the rounding bound)")
        return diffs

    def check_survey(self, req: dict, span, s: dict, cache: dict) -> None:
        self.surveys += 1
        sid = req["stream"]
        info = self.streams[sid]
        fields = info["measured"]
        budget = s.get("budget")
        what = self.describe(req, f"survey --budget {budget}")
        shown = lambda: json.dumps({k: v for k, v in s.items() if k != "buckets"})  # noqa: E731
        header = [
            (s.get("stream"), sid, "stream"),
            (s.get("fields"), fields, "fields"),
            (s.get("axis"), info["axis"], "axis"),
            (s.get("cells_per_field"), budget // (4 * len(fields)), "cells_per_field"),
        ]
        for got, want, name in header:
            if got != want:
                self.fail(what, f"  {name}: archive {got!r}, expected {want!r}")
                return
        buckets = [Bucket.from_json(b) for b in s["buckets"]]
        if 4 * len(buckets) > budget:
            self.fail(what, f"  {len(buckets)} buckets x 4 points exceed the budget {budget}")
        order = [(b.field, b.first[0]) for b in buckets]
        if any(x >= y for x, y in zip(order, order[1:])):
            self.fail(what, f"  buckets are not ordered by field then first.axis: {order}")
        for f in range(len(fields)):
            per_field = sum(1 for b in buckets if b.field == f)
            if per_field > s["cells_per_field"]:
                self.fail(what, f"  field {fields[f]}: {per_field} buckets > cells_per_field {s['cells_per_field']}")

        if span is None:
            if s["plan"] is not None or s["span"] is not None or buckets:
                self.fail(what, f"  the range holds nothing; archive answered {shown()} with {len(buckets)} buckets")
            return
        lo, hi = span
        want_plan = plan(info["ladder"], lo, hi, s["cells_per_field"])
        if s["plan"] != want_plan:
            self.fail(what, f"  plan for inclusive span [{lo}, {hi}]:\n  archive {s['plan']}\n  expected {want_plan}")
            return
        if want_plan["merge"] > 1:
            self.merged_past_coarsest += 1
        w = want_plan["cell_width"]
        c0, c1 = want_plan["cells"]
        if s["span"] != [c0 * w, (c1 + 1) * w]:
            self.fail(what, f"  span: archive {s['span']}, expected {[c0 * w, (c1 + 1) * w]} (cells {c0}..={c1} of width {w})")

        # DuckDB per track, then the cross-track merge in track-key order, in Python; several
        # budgets of one request often share a grid.
        if (w, c0, c1) not in cache:
            cache[(w, c0, c1)] = self.expected_buckets(req, w, c0, c1)
        expected = cache[(w, c0, c1)]
        self.buckets += len(expected)
        self.compare_buckets(what, s, buckets, expected, w)

    def expected_buckets(self, req: dict, w: int, c0: int, c1: int) -> list[Bucket]:
        fields = self.streams[req["stream"]]["measured"]
        expected: list[Bucket] = []
        for f, name in enumerate(fields):
            per_track = self.track_buckets(req, name, f, w, c0 * w, (c1 + 1) * w)
            tracks = sorted({labels for labels, _ in per_track}, key=lambda t: tuple(x.encode() for x in t))
            cells = sorted({cell for _, cell in per_track})
            for cell in cells:
                acc = None
                for t in tracks:
                    b = per_track.get((t, cell))
                    if b is not None:
                        acc = b if acc is None else merge(acc, b, self.ties)
                expected.append(acc)
        return expected

    def compare_buckets(self, what: str, s: dict, buckets: list[Bucket], expected: list[Bucket], w: int) -> None:
        sid = s["stream"]
        fields = self.streams[sid]["measured"]
        shown = lambda: json.dumps({k: v for k, v in s.items() if k != "buckets"})  # noqa: E731
        problems = []
        if len(buckets) != len(expected):
            problems.append(f"  {len(buckets)} buckets, DuckDB has {len(expected)}")
        for i, (got, want) in enumerate(zip(buckets, expected)):
            diffs = self.bucket_differences(got, want, self.exact[sid][fields[want.field]])
            if diffs:
                problems.append(
                    f"  bucket {i} (field {fields[want.field]}, cell {want.first[0] // w}) differs in {', '.join(diffs)}:\n"
                    f"    archive {json.dumps(got.as_dict())}\n    duckdb  {json.dumps(want.as_dict())}"
                )
        if problems:
            self.fail(what, f"  answer {shown()}\n" + "\n".join(problems[:6]) + ("\n  ..." if len(problems) > 6 else ""))

    def check_fold(self, req: dict, span, answer: dict, cache: dict) -> None:
        self.folds += 1
        sid = req["stream"]
        info = self.streams[sid]
        fields = info["measured"]
        kind = answer.get("kind")
        what = self.describe(req, f"fold --aggregate {kind}")
        level = kind in LEVEL_FOLDS
        if not level and not (isinstance(kind, str) and kind.startswith("p")):
            raise CheckError(f"{what}: unexpected aggregate {kind!r}")
        problems = []
        if answer.get("stream") != sid or answer.get("fields") != fields:
            problems.append(f"  stream/fields: archive {answer.get('stream')!r} {answer.get('fields')!r}")
        want_source = "level 0" if level else "raw"
        if answer.get("source") != want_source:
            problems.append(f"  source: archive {answer.get('source')!r}, expected {want_source!r}")
        if span is None:
            want_span = None
        elif level:
            base = info["ladder"]["base"]
            want_span = [span[0] // base * base, (span[1] // base + 1) * base]
        else:
            want_span = [span[0], span[1] + 1]
        if answer.get("span") != want_span:
            problems.append(f"  span: archive {answer.get('span')}, expected {want_span} (inclusive request bounds {span})")
        stats = None if span is None else self.range_stats(req, want_span, cache)
        want_answers = []
        for f, name in enumerate(fields):
            if stats is None:
                n, value, slack = 0, None, 0.0
            elif level:
                n, mn, mx, s, sa = stats[f]["level"]
                s = 0.0 if s is None else float(s)
                value = {"min": mn, "max": mx, "sum": s, "count": float(n), "mean": s / n if n else None}[kind]
                # Sums round (in any order) only for a field whose sums are not exact.
                slack = 0.0
                if not self.exact[sid][name] and kind in ("sum", "mean") and n:
                    slack = 4 * n * U * float(sa)
                    if kind == "mean":
                        slack = slack / n + abs(value) * 2 * U
            else:
                n, value, slack = stats[f]["count"], stats[f][kind], 0.0
            if n == 0:
                value = 0.0 if kind in ("sum", "count") else None
            want_answers.append({"field": f, "kind": kind, "value": None if value is None else float(value), "count": int(n)})
            got = answer["answers"][f] if f < len(answer.get("answers", [])) else None
            ok = (
                got is not None
                and got.get("field") == f
                and got.get("kind") == kind
                and got.get("count") == n
                and (
                    same_float(got.get("value"), want_answers[-1]["value"])
                    or (slack > 0 and got.get("value") is not None and abs(got["value"] - value) <= slack)
                )
            )
            if not ok:
                problems.append(
                    f"  field {name}: archive {json.dumps(got)}\n"
                    f"           duckdb  {json.dumps(want_answers[-1])}" + (f" (within {slack:g})" if slack else "")
                )
        if len(answer.get("answers", [])) != len(fields):
            problems.append(f"  {len(answer.get('answers', []))} answers for {len(fields)} fields")
        if problems:
            self.fail(what, f"  archive span {answer.get('span')}\n" + "\n".join(problems))

    def range_stats(self, req: dict, span: list[int], cache: dict) -> list[dict]:
        """Per field over rows with axis in [span[0], span[1]): the level-fold inputs (count,
        min, max, sum, sum |v|) and quantile_disc for every percentile the request asks."""
        key = tuple(span)
        if key in cache:
            return cache[key]
        info = self.streams[req["stream"]]
        a = ident(info["axis"])
        ranks = sorted({int(f["kind"][1:]) for f in req["folds"] if f["kind"] not in LEVEL_FOLDS})
        cols = []
        for name in info["measured"]:
            v = f"CAST({ident(name)} AS DOUBLE)"
            cols += [f"count({v})", f"min({v})", f"max({v})", f"sum({v})", f"sum(abs({v}))"]
            cols += [f"quantile_disc({v}, {r / 100!r}::DOUBLE)" for r in ranks]
        row = self.db.sql(
            f"SELECT {', '.join(cols)} FROM {self.views[req['stream']]} "
            f"WHERE {self.selection(req)} AND {a} >= {span[0]} AND {a} < {span[1]}"
        ).fetchone()
        out, width = [], 5 + len(ranks)
        for f in range(len(info["measured"])):
            part = row[f * width : (f + 1) * width]
            d = {"level": part[:5], "count": part[0]}
            d.update({f"p{r}": part[5 + i] for i, r in enumerate(ranks)})
            out.append(d)
        cache[key] = out
        return out

    def run(self) -> None:
        for req in self.requests:
            if req["stream"] not in self.streams:
                raise CheckError(f"request names unknown stream {req['stream']!r}")
            span = self.bounds(req)
            grids: dict = {}
            for s in req["surveys"]:
                self.check_survey(req, span, s, grids)
            ranges: dict = {}
            for f in req["folds"]:
                self.check_fold(req, span, f, ranges)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        answers = json.loads(Path(sys.argv[1]).read_text())
        print(f"duckdb {duckdb.__version__}, archive {answers['archive']}, {len(answers['requests'])} requests")
        checker = Checker(answers)
        checker.run()
    except (CheckError, OSError, KeyError, json.JSONDecodeError, duckdb.Error) as e:
        print(f"levels_check.py: cannot run the check: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if checker.mismatches:
        print(f"levels_check: FAILED, {len(checker.mismatches)} answer(s) differ from DuckDB:", file=sys.stderr)
        for m in checker.mismatches[:MAX_SHOWN]:
            print(f"  - {m}", file=sys.stderr)
        if len(checker.mismatches) > MAX_SHOWN:
            print(f"  ... and {len(checker.mismatches) - MAX_SHOWN} more", file=sys.stderr)
        return 1
    exact = sorted(f"{sid}.{f}" for sid, fs in checker.exact.items() for f, e in fs.items() if e)
    inexact = sorted(f"{sid}.{f}" for sid, fs in checker.exact.items() for f, e in fs.items() if not e)
    t = checker.ties
    pairs = lambda d: " ".join(f"{k}={v}" for k, v in d.items())  # noqa: E731
    print(f"ties decided within a track: {pairs(t.within)}")
    print(f"ties decided across tracks: {pairs(t.across)}")
    print(
        f"levels_check: ok: {checker.surveys} surveys ({checker.buckets} buckets, "
        f"{checker.merged_past_coarsest} merged past the coarsest level) and {checker.folds} folds "
        f"equal DuckDB; ties decided {t.total()}; exact sums: {' '.join(exact) or '-'}; "
        f"bounded sums: {' '.join(inexact) or '-'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
