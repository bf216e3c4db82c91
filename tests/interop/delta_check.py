"""Reads a stream's Delta tables with every engine's default reader and compares each with
what the archive serves.

    delta_check.py ARCHIVE STREAM SERVED.parquet [--levels LEVEL_FILES.txt] [--glob-differs]
                   [--axis COLUMN] [--spark ROW_FILES.txt [--spark-levels LEVEL_FILES.txt]]

SERVED.parquet is `series-archive rows ARCHIVE --stream STREAM --format parquet`: every row
the archive serves. The rows table (ARCHIVE/streams/STREAM/rows) is read through its Delta
log, each engine with its default reader and no options, by

  - deltalake (`DeltaTable(...).to_pyarrow_dataset()`),
  - DuckDB's delta extension (`delta_scan`, from duckdb-ext-delta),
  - Polars (`pl.scan_delta(path)`, its native reader, and `pl.scan_parquet` over the log's
    `file_uris()`),
  - DataFusion (`SessionContext().register_table(name, DeltaTable(path))`: deltalake's table
    provider),
  - Daft (`daft.read_deltalake(path)` on the native runner, never Ray),

and with --spark, by Spark (`pyspark`, `local[2]`, one session for the whole run) over the
Parquet files `series-archive files ARCHIVE --stream STREAM` lists (ROW_FILES.txt; Spark has
no Delta reader without jars from Maven) and, with --spark-levels, the level files
`files --levels` lists.

Each must equal the served rows in count and in a checksum of every column: the sum, modulo
2^64, of a 64-bit BLAKE2b hash of each value's canonical text, so row order does not matter
but every value, and its Python type (an int is not a Decimal nor a float), does. And each
must report every column with the type the Delta log declares: the log's `long` as a signed
64-bit integer (Int64, bigint, LongType), `byte` as Int8, never a decimal or an unsigned
type. With --axis, the rows whose COLUMN is at least 2^62 must come back with exactly that
value (not null, not rounded) from every reader, and there must be such rows.

LEVEL_FILES.txt (optional) is what `files --levels --manifest` prints, the manifest's level
files: the levels table read through the log must hold exactly their cells. With
--glob-differs the plain glob `rows/*.parquet` must *not* match (the archive holds a file no
record names, or one the log has removed): evidence that the log, not luck, made the readers
exact.

A reader that fails is reported and the others still run. Prints one line per reader and
ends with `DELTA: ok: ...`; exits 1 on any difference.
"""

import os

# Daft: no telemetry request at import (this machine reaches no such service), no progress
# bar, and the native (local, multi-threaded) runner, never Ray. Set before `import daft`.
os.environ["DAFT_ANALYTICS_ENABLED"] = "0"
os.environ["DO_NOT_TRACK"] = "1"
os.environ["DAFT_PROGRESS_BAR"] = "0"
os.environ["DAFT_RUNNER"] = "native"

import argparse
import hashlib
import json
import sys
import tempfile
import time

import daft
import datafusion
import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

MOD = 1 << 64
LARGE = 1 << 62

# Every engine's name for a type, lower-cased, to the Delta primitive it stands for. A name
# not here (uint64, UInt64, ubigint, decimal(20,0), smallint for an unsigned byte, ...) has
# no Delta type and never equals what a log declares.
DELTA_TYPE = {
    **dict.fromkeys(["int64", "bigint", "long", "longtype"], "long"),
    **dict.fromkeys(["int32", "int", "integer", "integertype"], "integer"),
    **dict.fromkeys(["int16", "smallint", "short", "shorttype"], "short"),
    **dict.fromkeys(["int8", "tinyint", "byte", "bytetype"], "byte"),
    **dict.fromkeys(["float64", "double", "doubletype"], "double"),
    **dict.fromkeys(["float32", "float", "real", "floattype"], "float"),
    **dict.fromkeys(["bool", "boolean", "booleantype"], "boolean"),
    **dict.fromkeys(
        ["string", "large_string", "string_view", "utf8", "large_utf8", "varchar", "str", "stringtype"],
        "string",
    ),
}
SIGNED = {"long": "a signed 64-bit integer", "integer": "a signed 32-bit integer",
          "short": "a signed 16-bit integer", "byte": "a signed 8-bit integer"}


def canonical(v) -> bytes:
    if isinstance(v, float):
        return ("f" + v.hex()).encode()
    if isinstance(v, bool):
        return b"b1" if v else b"b0"
    if isinstance(v, int):
        return ("i%d" % v).encode()
    return ("s" + str(v)).encode()


class Read:
    """One reader's answer: columns as Python values, and the type it reports for each
    column, in its own words."""

    def __init__(self, columns: dict, types: dict):
        self.columns = columns
        self.types = types
        self.rows = len(next(iter(columns.values()))) if columns else 0


def of_arrow(table: pa.Table, types: dict | None = None) -> Read:
    if hasattr(table, "read_all"):
        table = table.read_all()
    columns = {name: table.column(name).to_pylist() for name in table.column_names}
    if types is None:
        types = {f.name: str(f.type) for f in table.schema}
    return Read(columns, types)


def of_polars(frame: pl.DataFrame) -> Read:
    return Read({c: frame[c].to_list() for c in frame.columns}, {c: str(t) for c, t in frame.schema.items()})


def summary(read: Read, columns: list[str]) -> dict:
    """Row count, and per column: (non-null count, checksum)."""
    out = {"rows": read.rows}
    for name in columns:
        total, present = 0, 0
        for v in read.columns[name]:
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


def read_duckdb(path: str) -> Read:
    con = duck()
    rel = con.sql(f"SELECT * FROM delta_scan('{path}')")
    types = {c: str(t) for c, t in zip(rel.columns, rel.types)}
    read = of_arrow(rel.arrow(), types)
    con.close()
    return read


def read_datafusion(path: str) -> Read:
    ctx = datafusion.SessionContext()
    ctx.register_table("delta", DeltaTable(path))
    df = ctx.sql("SELECT * FROM delta")
    types = {f.name: str(f.type) for f in df.schema()}
    return of_arrow(df.to_arrow_table(), types)


def read_daft(path: str) -> Read:
    df = daft.read_deltalake(path)
    types = {f.name: str(f.dtype) for f in df.schema()}
    return Read(df.to_pydict(), types)


def readers(path: str) -> dict:
    """Every engine's default reader of the Delta table at `path`: name -> thunk -> Read."""
    uris = DeltaTable(path).file_uris()
    got = {
        "deltalake to_pyarrow_dataset": lambda: of_arrow(DeltaTable(path).to_pyarrow_dataset().to_table()),
        "duckdb delta_scan": lambda: read_duckdb(path),
        "polars scan_delta": lambda: of_polars(pl.scan_delta(path).collect()),
        "datafusion deltalake provider": lambda: read_datafusion(path),
        "daft read_deltalake (native runner)": lambda: read_daft(path),
    }
    if uris:
        got["polars scan_parquet(file_uris)"] = lambda: of_polars(pl.scan_parquet(uris).collect())
    return got


_spark = None


def spark():
    """One Spark session for the whole run (its start is most of Spark's cost): local[2], on
    loopback only, no UI."""
    global _spark
    if _spark is None:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession

        began = time.monotonic()
        _spark = (
            SparkSession.builder.master("local[2]")
            .appName("series-archive delta_check")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="delta-check-spark-"))
            # A short-lived driver: the client compiler and the serial collector start faster.
            .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
            .config("spark.log.level", "ERROR")
            .getOrCreate()
        )
        print(f"spark {_spark.version} session started in {time.monotonic() - began:.1f} s")
    return _spark


def read_spark(paths: list[str]) -> Read:
    df = spark().read.parquet(*paths)
    names = df.columns
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    rows = df.collect()
    return Read({n: [r[i] for r in rows] for i, n in enumerate(names)}, types)


def declared(path: str) -> dict:
    """The Delta log's type of each column (its primitive name, e.g. `long`)."""
    schema = json.loads(DeltaTable(path).schema().to_json())
    return {f["name"]: f["type"] if isinstance(f["type"], str) else json.dumps(f["type"]) for f in schema["fields"]}


def type_problems(read: Read, columns: list[str], log: dict) -> list[str]:
    """Where the reader's types differ from the log's, for every column the log declares
    (`_seq` too, which `rows` does not serve) and every column the archive serves."""
    out = []
    for name in [*log, *(c for c in columns if c not in log)]:
        want = log.get(name)
        got = read.types.get(name)
        if want is None:
            out.append(f"{name} is not in the Delta log's schema")
        elif got is None:
            out.append(f"no column {name}, which the Delta log declares {want}")
        elif DELTA_TYPE.get(str(got).lower()) != want:
            what = f" ({SIGNED[want]})" if want in SIGNED else ""
            out.append(f"{name} is {got}, the Delta log declares {want}{what}")
    return out


def large_values(values: list):
    return sorted((v for v in values if v is not None and v >= LARGE), key=lambda v: (int(v), str(v)))


def axis_problem(read: Read, served: Read, axis: str) -> str | None:
    want = large_values(served.columns[axis])
    values = read.columns[axis]
    got = large_values(values)
    nulls = sum(v is None for v in values)
    exact = [v for v in got if isinstance(v, int) and not isinstance(v, bool)]
    if got == want and len(exact) == len(got) and nulls == 0:
        return None
    missing = [v for v in want if v not in exact]
    return (
        f"the {len(want)} {axis} values >= 2^62 do not come back exactly: {nulls} null(s) in {axis}, "
        f"{len(missing)} missing or changed (e.g. {missing[:3]}), got {[repr(v) for v in got[:3]]}"
    )


def compare(what: str, path: str, expected: Read, axis: str | None, spark_paths: list[str] | None) -> list[str]:
    columns = list(expected.columns)
    want = summary(expected, columns)
    log = declared(path)
    problems = []
    todo = readers(path)
    if spark_paths is not None:
        todo["spark read.parquet(files)"] = lambda: read_spark(spark_paths)
    for reader, thunk in todo.items():
        began = time.monotonic()
        try:
            read = thunk()
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            problems.append(f"{what}, {reader}: FAILED: {type(e).__name__}: {first}")
            print(f"{what}, {reader}: FAILED: {type(e).__name__}: {str(e).strip()[:2000]}")
            continue
        took = time.monotonic() - began
        missing = [c for c in columns if c not in read.columns]
        if missing:
            problems.append(f"{what}, {reader}: no column(s) {missing}")
            print(f"{what}, {reader}: no column(s) {missing}")
            continue
        got = summary(read, columns)
        diff = [k for k in want if want[k] != got[k]]
        line = f"{what}, {reader}: {got['rows']} rows"
        said = [", every column checksum equal" if not diff else " DIFFERS"]
        if diff:
            problems.append(
                f"{line}, differs from the archive in {diff}: want {[want[k] for k in diff]}, got {[got[k] for k in diff]}"
            )
        types = type_problems(read, columns, log)
        if types:
            problems.append(f"{what}, {reader}: types differ from the Delta log: " + "; ".join(types))
            said.append(", TYPES DIFFER from the log")
        else:
            said.append(", every type as the log declares")
        if axis is not None:
            wrong = axis_problem(read, expected, axis)
            if wrong:
                problems.append(f"{what}, {reader}: {wrong}")
                said.append(f", {axis} >= 2^62 NOT exact")
            else:
                said.append(f", the {len(large_values(expected.columns[axis]))} {axis} values >= 2^62 exact")
        print(line + "".join(said) + f" ({took:.2f} s)")
    return problems


def listed(path: str | None) -> list[str]:
    return [line for line in open(path).read().splitlines() if line] if path else []


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("archive")
    p.add_argument("stream")
    p.add_argument("served")
    p.add_argument("--levels")
    p.add_argument("--glob-differs", action="store_true")
    p.add_argument("--axis", help="the stream's axis column: its values >= 2^62 must come back exactly")
    p.add_argument("--spark", help="the rows' files, as `files` lists them: read by Spark too")
    p.add_argument("--spark-levels", help="the level files, as `files --levels` lists them: read by Spark too")
    a = p.parse_args()
    base = os.path.join(a.archive, "streams", a.stream)
    served = of_arrow(pq.read_table(a.served))
    print(f"served by the archive: {served.rows} rows")
    problems = []
    if a.axis is not None:
        if a.axis not in served.columns:
            problems.append(f"--axis {a.axis}: no such column in what the archive serves")
            a.axis = None
        elif not large_values(served.columns[a.axis]):
            problems.append(f"--axis {a.axis}: the archive serves no row with {a.axis} >= 2^62, so nothing is checked")
    spark_rows = listed(a.spark) if a.spark else None
    if a.spark is not None and not spark_rows:
        problems.append(f"--spark {a.spark}: lists no file")
    problems += compare("rows", os.path.join(base, "rows"), served, a.axis, spark_rows)
    glob = of_arrow(duck().execute(f"SELECT * FROM read_parquet('{base}/rows/*.parquet')").arrow())
    glob_equal = summary(glob, list(served.columns)) == summary(served, list(served.columns))
    print(f"plain glob: {glob.rows} rows, {'equal to' if glob_equal else 'NOT equal to'} what the archive serves")
    if a.glob_differs and glob_equal:
        problems.append("--glob-differs: the plain glob matched, so this case does not show the log's worth")
    cells = None
    if a.levels:
        paths = listed(a.levels)
        if paths:
            cells = of_arrow(pa.concat_tables([pq.read_table(f) for f in paths]))
    if a.spark_levels is not None and cells is None:
        problems.append("--spark-levels needs --levels naming at least one level file")
    if cells is not None:
        print(f"level cells in the manifest's files: {cells.rows}")
        spark_levels = listed(a.spark_levels) if a.spark_levels else None
        problems += compare("levels", os.path.join(base, "levels"), cells, None, spark_levels)
    if _spark is not None:
        _spark.stop()
    for problem in problems:
        print("PROBLEM:", problem)
    if problems:
        return 1
    print(f"DELTA: ok: every reader read exactly the {served.rows} rows the archive serves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
