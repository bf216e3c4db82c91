#!/usr/bin/env python3
"""Interop check: DuckDB and Polars read the archive's Parquet without this crate.

    check.py ARCHIVE --bin PATH/TO/series-archive [--expect-rows STREAM=N ...]

For every stream of ARCHIVE (as `series-archive inspect --json` lists them) this reads the
committed data files four ways -- DuckDB and Polars, each over the documented glob
`ARCHIVE/streams/<id>/rows/*.parquet` and over the exact list `series-archive files`
prints -- and compares them with what `series-archive rows` serves (`--format parquet
--out` and `--format csv --out`, read back by both engines), over several scopes:

  * the whole stream,
  * one whole track (every track column equal to its label),
  * a track prefix (the outermost track column only),
  * a position range `_position >= a AND _position < b` vs `rows --from a --to b`,
  * the track and the range together.

For each scope and source it computes a fingerprint: the row count, the exact sum of every
integer column (the axis and `_position` included), the number of distinct tracks, the
least and greatest `_position`, and an order-independent hash (the sum of a per-row hash of
every row column and `_position`). Every fingerprint must equal the reference (DuckDB over
the glob) exactly; the hash is compared within an engine (DuckDB and Polars hash
differently), everything else across engines too.

Also checked: the glob and `files` name the same set of files; `_seq` is unique; ordering
the archive's rows by `_seq` gives exactly the sequence `rows` serves (publish order);
per-track row counts equal what `inspect --json` reports; and junk planted under `.tmp/`
and `.quarantine/` (copies of a real data file, readable Parquet) is not picked up by the
documented glob.

Exit status: 0 when everything agrees, 1 on any mismatch (each one printed), 2 when the
check itself cannot run (a CLI failure, a missing module, a bad argument).
"""

from __future__ import annotations

import argparse
import glob as globlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import duckdb
    import polars as pl
except ImportError as e:  # pragma: no cover - environment problem, not a mismatch
    sys.exit(
        f"check.py: cannot import {e.name!r}: run scripts/test (it installs "
        "requirements-test.txt into .venv) or point SERIES_ARCHIVE_PYTHON at a python "
        "that has duckdb, polars and pyarrow"
    )

INTEGER_DUCKDB_TYPES = {
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
}
# The part of a fingerprint that does not depend on the engine's hash function.
PORTABLE_SKIP = {"hash_hi", "hash_lo"}
JUNK_NAME = "interop-junk"


class CheckError(Exception):
    """The check could not run (as opposed to a mismatch)."""


def sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def sql_list(paths: list[str]) -> str:
    return "[" + ", ".join(sql_str(p) for p in paths) + "]"


class Checker:
    def __init__(self, archive: Path, binary: Path, workdir: Path):
        self.archive = archive
        self.binary = binary
        self.workdir = workdir
        self.db = duckdb.connect()
        self.mismatches: list[str] = []
        self.comparisons = 0

    # -- the CLI -----------------------------------------------------------------------

    def cli(self, *args: str) -> str:
        cmd = [str(self.binary), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CheckError(
                f"`{' '.join(cmd)}` exited {proc.returncode}\n"
                f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
            )
        return proc.stdout

    # -- bookkeeping ---------------------------------------------------------------------

    def fail(self, what: str, detail: str) -> None:
        self.mismatches.append(f"{what}: {detail}")
        print(f"  MISMATCH {what}: {detail}", flush=True)

    def expect(self, what: str, got, want) -> bool:
        self.comparisons += 1
        if got != want:
            self.fail(what, f"got {got!r}, want {want!r}")
            return False
        return True

    def expect_fingerprint(self, what: str, got: dict, want: dict, portable: bool) -> None:
        """Equal fingerprints; `portable` leaves out the engine-specific hash."""
        self.comparisons += 1
        keys = [k for k in want if not (portable and k in PORTABLE_SKIP)]
        diff = [f"{k} {got.get(k)} (want {want[k]})" for k in keys if got.get(k) != want[k]]
        if diff:
            self.fail(what, "; ".join(diff))

    # -- fingerprints --------------------------------------------------------------------

    def duck_fingerprint(self, source: str, where: str, cols: list[str], ints: list[str], track: list[str]) -> dict:
        h = f"hash({', '.join(ident(c) for c in cols)})"
        parts = ["count(*) AS rows"]
        if track:
            tup = ", ".join(ident(c) for c in track)
            parts.append(f"count(DISTINCT row({tup})) AS tracks")
        for c in ints:
            parts.append(f"CAST(sum({ident(c)}) AS HUGEINT) AS {ident('sum_' + c)}")
        parts += [
            'min("_position") AS min_position',
            'max("_position") AS max_position',
            "CAST(sum(h >> 32) AS HUGEINT) AS hash_hi",
            "CAST(sum(h & 4294967295) AS HUGEINT) AS hash_lo",
        ]
        sql = f"SELECT {', '.join(parts)} FROM (SELECT *, {h} AS h FROM {source} WHERE {where})"
        rel = self.db.sql(sql)
        row = rel.fetchone()
        out = {}
        for name, v in zip(rel.columns, row):
            out[name] = int(v) if v is not None else None
        return out

    def polars_fingerprint(self, lf: "pl.LazyFrame", pred: "pl.Expr", cols: list[str], ints: list[str], track: list[str]) -> dict:
        # Integers hash as Int64 whatever their width and sign: the archive's files store
        # unsigned columns signed (format version 5), what `rows` serves keeps the declared
        # types, and Polars' hash depends on the dtype, not only the value.
        schema = lf.collect_schema()
        h = pl.struct(
            [pl.col(c).cast(pl.Int64) if schema[c].is_integer() else pl.col(c) for c in cols]
        ).hash(seed=0)
        exprs = [pl.len().alias("rows")]
        if track:
            exprs.append(pl.struct(track).n_unique().alias("tracks"))
        for c in ints:
            exprs.append(pl.col(c).cast(pl.Int128).sum().alias("sum_" + c))
        exprs += [
            pl.col("_position").min().alias("min_position"),
            pl.col("_position").max().alias("max_position"),
            (h // (1 << 32)).sum().alias("hash_hi"),
            (h % (1 << 32)).sum().alias("hash_lo"),
        ]
        row = lf.filter(pred).select(exprs).collect().row(0, named=True)
        return {k: (int(v) if v is not None else None) for k, v in row.items()}

    # -- one stream ----------------------------------------------------------------------

    def check_stream(self, info: dict, expect_rows: int | None) -> None:
        sid = info["id"]
        track: list[str] = info["track"]
        axis: str | None = info.get("axis")
        names = [c.split(" ", 1)[0] for c in info["columns"]]
        print(f"stream {sid}: columns {names}, track {track}, axis {axis}, watermark {info['watermark']}")

        rows_dir = self.archive / "streams" / sid / "rows"
        pattern = str(rows_dir / "*.parquet")
        listed = [os.path.abspath(p) for p in self.cli("files", str(self.archive), "--stream", sid).split("\n") if p]
        globbed = sorted(os.path.abspath(p) for p in globlib.glob(pattern))
        self.expect(f"{sid}: the glob and `files` name the same files", sorted(globbed), sorted(listed))
        if not listed:
            raise CheckError(f"stream {sid} has no committed files")

        glob_src = f"read_parquet({sql_str(pattern)})"
        list_src = f"read_parquet({sql_list(listed)})"

        # Baseline before junk is planted.
        baseline = self.db.sql(f"SELECT count(*) FROM {glob_src}").fetchone()[0]
        self.plant_junk(sid, Path(listed[0]))
        after = self.db.sql(f"SELECT count(*) FROM {glob_src}").fetchone()[0]
        self.expect(f"{sid}: glob row count unchanged by junk in .tmp/ and .quarantine/", after, baseline)
        after_pl = pl.scan_parquet(pattern).select(pl.len()).collect().item()
        self.expect(f"{sid}: Polars glob row count unchanged by junk", after_pl, baseline)
        if expect_rows is not None:
            self.expect(f"{sid}: stream rows", baseline, expect_rows)

        schema = self.db.sql(f"DESCRIBE SELECT * FROM {glob_src}").fetchall()
        types = {r[0]: r[1] for r in schema}
        for required in ("_position", "_seq"):
            if required not in types:
                raise CheckError(f"{sid}: the data files have no {required} column")
            # Format version 5 stores them signed, as the Delta log declares them.
            self.expect(f"{sid}: {required} is BIGINT", types[required], "BIGINT")
        self.expect(f"{sid}: file columns are the row's columns + _position + _seq", list(types), names + ["_position", "_seq"])
        cols = names + ["_position"]
        ints = [c for c in cols if types[c] in INTEGER_DUCKDB_TYPES]

        # _seq identifies a row within the stream.
        n, distinct = self.db.sql(f"SELECT count(*), count(DISTINCT _seq) FROM {glob_src}").fetchone()
        self.expect(f"{sid}: _seq is unique", distinct, n)

        # Per-track counts vs inspect.
        if track:
            tcols = ", ".join(f"CAST({ident(c)} AS VARCHAR)" for c in track)
            got = {tuple(r[:-1]): r[-1] for r in self.db.sql(f"SELECT {tcols}, count(*) FROM {glob_src} GROUP BY ALL").fetchall()}
            want = {tuple(t["labels"]): t["rows"] for t in info["tracks"]}
            self.expect(f"{sid}: per-track row counts vs inspect --json", got, want)

        # Scopes.
        wm = int(info["watermark"])
        lo, hi = wm * 3 // 10 + 1, wm * 7 // 10 + 1
        scopes: list[tuple[str, list[str], list[tuple[str, str]], tuple[int, int] | None]] = [("whole stream", [], [], None)]
        if track and info["tracks"]:
            chosen = info["tracks"][len(info["tracks"]) // 2]["labels"]
            scopes.append((f"track {'/'.join(chosen)}", ["--track", *chosen], list(zip(track, chosen)), None))
            if len(track) > 1:
                scopes.append((f"prefix {chosen[0]}", ["--track", chosen[0]], [(track[0], chosen[0])], None))
        scopes.append((f"positions [{lo}, {hi})", ["--from", str(lo), "--to", str(hi)], [], (lo, hi)))
        if track and info["tracks"]:
            scopes.append((f"track {'/'.join(chosen)} positions [{lo}, {hi})", ["--track", *chosen, "--from", str(lo), "--to", str(hi)], list(zip(track, chosen)), (lo, hi)))

        lf_glob = pl.scan_parquet(pattern)
        lf_list = pl.scan_parquet(listed)
        polars_schema = lf_glob.collect_schema()

        for si, (label, cli_args, eqs, rng) in enumerate(scopes):
            before = len(self.mismatches)
            where = ["TRUE"]
            pred = pl.lit(True)
            for c, v in eqs:
                where.append(f"CAST({ident(c)} AS VARCHAR) = {sql_str(v)}")
                pred = pred & (pl.col(c).cast(pl.String) == v)
            if rng:
                where.append(f'"_position" >= {rng[0]} AND "_position" < {rng[1]}')
                pred = pred & (pl.col("_position") >= rng[0]) & (pl.col("_position") < rng[1])
            where_sql = " AND ".join(where)

            pq_out = self.workdir / f"{sid}-{si}.parquet"
            csv_out = self.workdir / f"{sid}-{si}.csv"
            self.cli("rows", str(self.archive), "--stream", sid, *cli_args, "--format", "parquet", "--out", str(pq_out))
            self.cli("rows", str(self.archive), "--stream", sid, *cli_args, "--format", "csv", "--out", str(csv_out))

            served_pq = f"read_parquet({sql_str(str(pq_out))})"
            casts = ", ".join(f"CAST({ident(c)} AS {types[c]}) AS {ident(c)}" for c in cols)
            served_csv = f"(SELECT {casts} FROM read_csv({sql_str(str(csv_out))}, header = true, all_varchar = true))"
            pl_csv = pl.scan_csv(csv_out, infer_schema=False).select(
                [pl.col(c).cast(polars_schema[c]) for c in cols]
            )

            fps = {
                "duckdb glob": self.duck_fingerprint(glob_src, where_sql, cols, ints, track),
                "duckdb files": self.duck_fingerprint(list_src, where_sql, cols, ints, track),
                "duckdb rows parquet": self.duck_fingerprint(served_pq, "TRUE", cols, ints, track),
                "duckdb rows csv": self.duck_fingerprint(served_csv, "TRUE", cols, ints, track),
                "polars glob": self.polars_fingerprint(lf_glob, pred, cols, ints, track),
                "polars files": self.polars_fingerprint(lf_list, pred, cols, ints, track),
                "polars rows parquet": self.polars_fingerprint(pl.scan_parquet(pq_out), pl.lit(True), cols, ints, track),
                "polars rows csv": self.polars_fingerprint(pl_csv, pl.lit(True), cols, ints, track),
            }
            ref = fps["duckdb glob"]
            if ref["rows"] == 0:
                self.expect(f"{sid} / {label}: the scope selects rows", 0, "> 0")
            for name, fp in fps.items():
                if name == "duckdb glob":
                    continue
                same_engine = fps[name.split()[0] + " glob"]
                self.expect_fingerprint(f"{sid} / {label}: {name} vs duckdb glob", fp, ref, portable=True)
                self.expect_fingerprint(f"{sid} / {label}: {name} vs {name.split()[0]} glob (hash)", fp, same_engine, portable=False)

            # Publish order: the archive's rows by _seq == the order `rows` serves.
            key = ["_position", *track] + ([axis] if axis else [])
            key_sql = ", ".join(ident(c) for c in key)
            archive_order = self.db.sql(f"SELECT {key_sql} FROM {glob_src} WHERE {where_sql} ORDER BY _seq").fetchall()
            served_order = self.db.sql(
                f"SELECT {key_sql} FROM read_parquet({sql_str(str(pq_out))}, file_row_number = true) ORDER BY file_row_number"
            ).fetchall()
            if archive_order != served_order:
                first = next(
                    (i for i, (a, b) in enumerate(zip(archive_order, served_order)) if a != b),
                    min(len(archive_order), len(served_order)),
                )
                self.comparisons += 1
                self.fail(
                    f"{sid} / {label}: publish order (duckdb ORDER BY _seq vs rows output order)",
                    f"{len(served_order)} rows served, {len(archive_order)} in the archive; first difference at row {first}: "
                    f"served {served_order[first : first + 3]}, archive {archive_order[first : first + 3]}",
                )
            else:
                self.comparisons += 1
            pl_order = lf_glob.filter(pred).sort("_seq").select(key).collect()
            served_pl = pl.read_parquet(pq_out, columns=key)
            self.expect(f"{sid} / {label}: publish order (polars sort by _seq vs rows output order)", pl_order.equals(served_pl), True)

            verdict = "ok" if len(self.mismatches) == before else "FAILED"
            print(
                f"  {verdict} {label}: {ref['rows']} rows, positions {ref['min_position']}..{ref['max_position']}, "
                f"{ref.get('tracks', '-')} tracks, {len(fps)} readings compared, publish order compared"
            )

    def plant_junk(self, sid: str, real: Path) -> None:
        """Copies a real data file under .tmp/ and .quarantine/, including at paths that
        mirror streams/<id>/rows/, and checks the copies are readable Parquet."""
        targets = [
            self.archive / ".tmp" / f"{JUNK_NAME}-{sid}.parquet",
            self.archive / ".tmp" / "streams" / sid / "rows" / real.name,
            self.archive / ".quarantine" / f"{JUNK_NAME}-{sid}.parquet",
            self.archive / ".quarantine" / JUNK_NAME / "streams" / sid / "rows" / real.name,
        ]
        real_rows = self.db.sql(f"SELECT count(*) FROM read_parquet({sql_str(str(real))})").fetchone()[0]
        for t in targets:
            t.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(real, t)
            n = self.db.sql(f"SELECT count(*) FROM read_parquet({sql_str(str(t))})").fetchone()[0]
            self.expect(f"junk {t} is readable Parquet with the real file's rows", n, real_rows)
        print(f"  planted junk: {', '.join(str(t.relative_to(self.archive)) for t in targets)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("archive", type=Path)
    ap.add_argument("--bin", type=Path, default=os.environ.get("SERIES_ARCHIVE_BIN"), help="the series-archive binary")
    ap.add_argument("--stream", action="append", default=[], help="check only these streams (default: every stream)")
    ap.add_argument("--expect-rows", action="append", default=[], metavar="STREAM=N", help="the stream must hold exactly N rows")
    args = ap.parse_args()
    if args.bin is None:
        print("check.py: give --bin PATH (or SERIES_ARCHIVE_BIN)", file=sys.stderr)
        return 2
    expect = {}
    for e in args.expect_rows:
        k, _, v = e.partition("=")
        expect[k] = int(v)

    archive = args.archive.resolve()
    print(f"duckdb {duckdb.__version__}, polars {pl.__version__}, archive {archive}")
    with tempfile.TemporaryDirectory(prefix="interop-check-") as work:
        checker = Checker(archive, args.bin.resolve(), Path(work))
        try:
            described = json.loads(checker.cli("inspect", str(archive), "--json"))
            streams = {s["id"]: s for s in described["streams"]}
            wanted = args.stream or sorted(streams)
            for sid in wanted:
                if sid not in streams:
                    raise CheckError(f"stream {sid!r} is not in the archive (it has {sorted(streams)})")
            for sid in set(expect) - set(wanted):
                raise CheckError(f"--expect-rows names {sid!r}, which is not checked")
            for sid in wanted:
                checker.check_stream(streams[sid], expect.get(sid))
        except CheckError as e:
            print(f"check.py: cannot run the check: {e}", file=sys.stderr)
            return 2
    if checker.mismatches:
        print(f"\ninterop: FAILED, {len(checker.mismatches)} mismatch(es) of {checker.comparisons} comparisons:", file=sys.stderr)
        for m in checker.mismatches[:40]:
            print(f"  - {m}", file=sys.stderr)
        if len(checker.mismatches) > 40:
            print(f"  ... and {len(checker.mismatches) - 40} more (all printed above on stdout)", file=sys.stderr)
        return 1
    print(f"\ninterop: ok, {checker.comparisons} comparisons over {len(wanted)} stream(s) agree exactly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
