"""Reads a stream's Delta tables with every engine and compares each with what the archive
serves.

    delta_check.py ARCHIVE STREAM SERVED.parquet [--levels LEVEL_FILES.txt] [--glob-differs]

SERVED.parquet is `series-archive rows ARCHIVE --stream STREAM --format parquet`: every row
the archive serves. The rows table (ARCHIVE/streams/STREAM/rows) is read through its Delta
log by

  - deltalake (`DeltaTable(...).to_pyarrow_dataset()`),
  - DuckDB's delta extension (`delta_scan`, from duckdb-ext-delta),
  - Polars (`pl.scan_delta(..., use_pyarrow=True)`, and `pl.scan_parquet` over the log's
    `file_uris()`),

and each must equal the served rows in count and in a checksum of every column: the sum,
modulo 2^64, of a 64-bit BLAKE2b hash of each value's canonical text, so row order does not
matter but every value does. LEVEL_FILES.txt (optional) is what `files --levels --manifest`
prints, the manifest's level files: the levels table read through the log must hold exactly
their cells. With --glob-differs the plain glob
`rows/*.parquet` must *not* match (the archive holds a file no record names, or one the log
has removed): evidence that the log, not luck, made the readers exact.

Prints one line per reader and ends with `DELTA: ok: ...`; exits 1 on any difference.
"""

import argparse
import hashlib
import os
import sys

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

MOD = 1 << 64


def canonical(v) -> bytes:
    if isinstance(v, float):
        return ("f" + v.hex()).encode()
    if isinstance(v, bool):
        return b"b1" if v else b"b0"
    if isinstance(v, int):
        return ("i%d" % v).encode()
    return ("s" + str(v)).encode()


def summary(table: pa.Table, columns: list[str]) -> dict:
    """Row count, and per column: (non-null count, checksum)."""
    out = {"rows": table.num_rows}
    for name in columns:
        total, present = 0, 0
        for v in table.column(name).to_pylist():
            if v is None:
                continue
            present += 1
            h = hashlib.blake2b(canonical(v), digest_size=8).digest()
            total = (total + int.from_bytes(h, "little")) % MOD
        out[name] = (present, total)
    return out


def duck() -> duckdb.DuckDBPyConnection:
    ext = os.path.join(os.path.dirname(duckdb.__file__), "..", "duckdb_ext", "extensions")
    con = duckdb.connect(
        config={"extension_directory": os.path.abspath(ext), "autoinstall_known_extensions": False}
    )
    con.execute("LOAD delta")
    return con


def readers(path: str) -> dict:
    """Every engine's reading of the Delta table at `path`, as Arrow tables."""
    dt = DeltaTable(path)
    uris = dt.file_uris()
    got = {
        "deltalake": dt.to_pyarrow_dataset().to_table(),
        "duckdb delta_scan": duck().execute(f"SELECT * FROM delta_scan('{path}')").arrow(),
        "polars scan_delta": pl.scan_delta(path, use_pyarrow=True).collect().to_arrow(),
    }
    if uris:
        got["polars scan_parquet(file_uris)"] = pl.scan_parquet(uris).collect().to_arrow()
    return got


def compare(what: str, path: str, expected: pa.Table) -> list[str]:
    columns = expected.column_names
    want = summary(expected, columns)
    problems = []
    for reader, table in readers(path).items():
        if hasattr(table, "read_all"):
            table = table.read_all()
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            problems.append(f"{what}, {reader}: no column(s) {missing}")
            continue
        got = summary(table, columns)
        diff = [k for k in want if want[k] != got[k]]
        line = f"{what}, {reader}: {got['rows']} rows"
        if diff:
            problems.append(f"{line}, differs from the archive in {diff}: want {[want[k] for k in diff]}, got {[got[k] for k in diff]}")
        print(line + (" DIFFERS" if diff else ", every column checksum equal"))
    return problems


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("archive")
    p.add_argument("stream")
    p.add_argument("served")
    p.add_argument("--levels")
    p.add_argument("--glob-differs", action="store_true")
    a = p.parse_args()
    base = os.path.join(a.archive, "streams", a.stream)
    served = pq.read_table(a.served)
    print(f"served by the archive: {served.num_rows} rows")
    problems = compare("rows", os.path.join(base, "rows"), served)
    glob = duck().execute(f"SELECT * FROM read_parquet('{base}/rows/*.parquet')").arrow()
    if hasattr(glob, "read_all"):
        glob = glob.read_all()
    glob_equal = summary(glob, served.column_names) == summary(served, served.column_names)
    print(f"plain glob: {glob.num_rows} rows, {'equal to' if glob_equal else 'NOT equal to'} what the archive serves")
    if a.glob_differs and glob_equal:
        problems.append("--glob-differs: the plain glob matched, so this case does not show the log's worth")
    if a.levels:
        paths = [line for line in open(a.levels).read().splitlines() if line]
        if paths:
            cells = pa.concat_tables([pq.read_table(f) for f in paths])
        else:
            cells = None
    if a.levels and cells is not None:
        print(f"level cells in the manifest's files: {cells.num_rows}")
        problems += compare("levels", os.path.join(base, "levels"), cells)
    for problem in problems:
        print("PROBLEM:", problem)
    if problems:
        return 1
    print(f"DELTA: ok: every reader read exactly the {served.num_rows} rows the archive serves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
