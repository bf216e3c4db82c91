# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exploring a series archive with DuckDB and Polars
#
# A `series-archive` directory is plain Parquet: this notebook opens one **without the
# crate**, with DuckDB and Polars only.
#
# ```
# ARCHIVE/
#   manifest/              the append-only commit log (binary; the crate's business)
#   streams/<id>/rows/     Parquet data files: the row's own columns + _position + _seq
#   .tmp/                  writes in flight -- never read these
#   .quarantine/           evidence kept after a crash or a failed check -- never read these
# ```
#
# **Which files?** The manifest is the commit point, and it is not meant to be parsed by
# hand. Each stream's rows are also a **Delta Lake table** (`streams/<id>/rows/_delta_log`),
# kept level with the manifest: DuckDB's `delta_scan`, Polars and `deltalake` read through it
# exactly the committed files, never a file a crash left behind. This notebook reads through
# the log. The plain glob `ARCHIVE/streams/<id>/rows/*.parquet` is the quick, non-exact
# path (pass `--glob`): after a crash it can include a file no record names until the next
# writable open moves it into `.quarantine/`. The CLI prints the same exact list:
#
# ```
# series-archive files ARCHIVE --stream capture     # one path per line, read through the log
# ```
#
# Columns: every row column as declared, plus `_position` (u64, the stream position the row
# was delivered at; several rows may share one) and `_seq` (u64, unique within a stream,
# ascending in publish order -- `ORDER BY _seq` is the order `series-archive rows` serves).
#
# Run it as a script: `python notebooks/explore.py ARCHIVE [--stream ID --track COL,COL
# --axis COL --field COL --cell-width N]`. The defaults fit the demo archive
# (`series-archive demo DIR`). In Jupyter (via jupytext) set `SERIES_ARCHIVE_DIR` or edit the
# parameters cell.

# %%
import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import duckdb
import polars as pl

# %% tags=["parameters"]
parser = argparse.ArgumentParser(description="Explore a series archive with DuckDB and Polars.")
parser.add_argument("archive", nargs="?", default=os.environ.get("SERIES_ARCHIVE_DIR", "target/demo-archive"))
parser.add_argument("--stream", default="capture", help="stream id")
parser.add_argument("--track", default="run,probe", help="track columns, outermost first")
parser.add_argument("--axis", default="ordinal", help="the axis column (unsigned integer)")
parser.add_argument("--field", default="value", help="the measured column to downsample")
parser.add_argument("--cell-width", type=int, default=256, help="M4 grid cell width on the axis")
parser.add_argument("--glob", action="store_true", help="read the plain glob instead of the Delta log (quick, not exact)")
# Under a Jupyter kernel argv holds the kernel's own flags: take parameters from here and
# SERIES_ARCHIVE_DIR instead.
IN_KERNEL = "ipykernel" in sys.modules
args = parser.parse_args([] if IN_KERNEL else sys.argv[1:])

ARCHIVE = Path(args.archive)
STREAM = args.stream
TRACK = [c for c in args.track.split(",") if c]
AXIS = args.axis
FIELD = args.field
CELL_WIDTH = args.cell_width
assert CELL_WIDTH >= 1, "--cell-width must be at least 1"

TABLE = ARCHIVE / "streams" / STREAM / "rows"
GLOB = str(TABLE / "*.parquet")
print(f"archive {ARCHIVE}, stream {STREAM}, track {TRACK}, axis {AXIS}, field {FIELD}, cell width {CELL_WIDTH}")
if args.glob:
    FILES = sorted(str(p) for p in TABLE.glob("*.parquet"))
    print(f"glob    {GLOB} (not exact after a crash)")
else:
    from deltalake import DeltaTable

    FILES = DeltaTable(str(TABLE)).file_uris()
    print(f"table   {TABLE} (through its Delta log: exactly the committed files)")
if not FILES:
    sys.exit(f"no data files in {TABLE}: is {ARCHIVE} an archive holding stream {STREAM!r}?")

# %% [markdown]
# ## Open the files
#
# DuckDB gets a view over exactly those files; Polars a lazy scan of the same files (both keep
# the files' own types, UInt64 included).

# %%
con = duckdb.connect()
# A view cannot take a bound parameter: the file list is written into it as SQL literals.
file_list = ", ".join("'" + f.replace("'", "''") + "'" for f in FILES)
con.execute(f"CREATE VIEW rows AS SELECT * FROM read_parquet([{file_list}])")
lf = pl.scan_parquet(FILES)
print(con.sql("DESCRIBE rows"))
print(lf.collect_schema())


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


track_sql = ", ".join(q(c) for c in TRACK)
group_sql = f"{track_sql}, " if TRACK else ""

# %% [markdown]
# ## Rows per track

# %%
duck_counts = con.sql(
    f"SELECT {group_sql}count(*) AS rows, min(_position) AS first_position, max(_position) AS last_position "
    f"FROM rows GROUP BY ALL ORDER BY ALL"
).pl()
polars_counts = (
    lf.group_by(TRACK or pl.lit(0).alias("_all"))
    .agg(
        pl.len().alias("rows"),
        pl.col("_position").min().alias("first_position"),
        pl.col("_position").max().alias("last_position"),
    )
    .drop("_all", strict=False)
    .sort(TRACK or "rows")
    .collect()
)
print(duck_counts)
counts_agree = duck_counts.with_columns(pl.col("rows").cast(pl.Int64)).equals(
    polars_counts.with_columns(pl.col("rows").cast(pl.Int64))
)
assert counts_agree, f"per-track counts differ:\nduckdb\n{duck_counts}\npolars\n{polars_counts}"
total_rows = int(duck_counts["rows"].sum())
print(f"tracks: {duck_counts.height}, rows: {total_rows} (DuckDB and Polars agree)")

# %% [markdown]
# ## M4 downsampling per track
#
# M4 keeps, per track and per grid cell of the axis, the first, last, minimum and maximum
# point: enough to draw a line chart at one pixel column per cell without losing a spike.
# The grid is global, anchored at axis 0: `cell = axis // CELL_WIDTH` (the archive's own
# levels use the same anchoring). Ties are broken deterministically: first/last by
# `(axis, _seq)`, the point of the minimum/maximum is the earliest by `(axis, _seq)`.

# %%
a, f = q(AXIS), q(FIELD)
m4_sql = f"""
SELECT {group_sql}
       {a} // {CELL_WIDTH}                                             AS cell,
       count(*)                                                        AS rows,
       min({a})                                                        AS first_axis,
       arg_min({f}, ({a}, _seq))                                       AS first_value,
       max({a})                                                        AS last_axis,
       arg_max({f}, ({a}, _seq))                                       AS last_value,
       min({f})                                                        AS min_value,
       arg_min({a}, ({f}, {a}, _seq))                                  AS min_axis,
       max({f})                                                        AS max_value,
       arg_max({a}, ({f}, -CAST({a} AS HUGEINT), -CAST(_seq AS HUGEINT))) AS max_axis
FROM rows
GROUP BY ALL
ORDER BY ALL
"""
started = time.perf_counter()
m4_duck = con.sql(m4_sql).pl()
duck_ms = (time.perf_counter() - started) * 1e3
print(f"DuckDB M4: {m4_duck.height} cells in {duck_ms:.1f} ms")
print(m4_duck.head(8))

# %%
started = time.perf_counter()
m4_polars = (
    lf.with_columns((pl.col(AXIS) // CELL_WIDTH).alias("cell"))
    .group_by([*TRACK, "cell"])
    .agg(
        pl.len().alias("rows"),
        pl.col(AXIS).min().alias("first_axis"),
        pl.col(FIELD).sort_by([AXIS, "_seq"]).first().alias("first_value"),
        pl.col(AXIS).max().alias("last_axis"),
        pl.col(FIELD).sort_by([AXIS, "_seq"]).last().alias("last_value"),
        pl.col(FIELD).min().alias("min_value"),
        pl.col(AXIS).sort_by([FIELD, AXIS, "_seq"]).first().alias("min_axis"),
        pl.col(FIELD).max().alias("max_value"),
        pl.col(AXIS).sort_by([FIELD, AXIS, "_seq"], descending=[True, False, False]).first().alias("max_axis"),
    )
    .sort([*TRACK, "cell"])
    .collect()
)
polars_ms = (time.perf_counter() - started) * 1e3
print(f"Polars M4: {m4_polars.height} cells in {polars_ms:.1f} ms")
print(m4_polars.head(8))

# %% [markdown]
# ## DuckDB and Polars agree
#
# Both results are brought to one schema and compared exactly; each is summarised by a
# SHA-256 of its CSV text so a run's output can be compared across machines.

# %%
schema = lf.collect_schema()
common = {
    **{c: pl.String for c in TRACK},
    "cell": pl.UInt64,
    "rows": pl.Int64,
    "first_axis": schema[AXIS],
    "first_value": schema[FIELD],
    "last_axis": schema[AXIS],
    "last_value": schema[FIELD],
    "min_value": schema[FIELD],
    "min_axis": schema[AXIS],
    "max_value": schema[FIELD],
    "max_axis": schema[AXIS],
}


def normalise(df: pl.DataFrame) -> pl.DataFrame:
    return df.select([pl.col(c).cast(t) for c, t in common.items()]).sort([*TRACK, "cell"])


def digest(df: pl.DataFrame) -> str:
    return hashlib.sha256(df.write_csv().encode()).hexdigest()


duck_n, polars_n = normalise(m4_duck), normalise(m4_polars)
print(f"M4 duckdb: {duck_n.height} cells, {int(duck_n['rows'].sum())} rows, sha256 {digest(duck_n)}")
print(f"M4 polars: {polars_n.height} cells, {int(polars_n['rows'].sum())} rows, sha256 {digest(polars_n)}")
assert int(duck_n["rows"].sum()) == total_rows, "M4 cells must cover every row"
if not duck_n.equals(polars_n):
    diff = duck_n.join(polars_n, on=[*TRACK, "cell"], how="full", suffix="_polars").filter(
        pl.any_horizontal([pl.col(c).ne_missing(pl.col(f"{c}_polars")) for c in common if c not in (*TRACK, "cell")])
    )
    raise AssertionError(f"DuckDB and Polars M4 results differ in {diff.height} cell(s):\n{diff}")
print("M4 agree: DuckDB == Polars")

# %% [markdown]
# ## One track, as a chart would draw it
#
# Four points per cell, in axis order: this is what a plot needs (at most
# `4 × cells` points, however many rows the track holds).

# %%
if TRACK:
    first_track = duck_n.select(TRACK).row(0)
    one = duck_n.filter(pl.all_horizontal([pl.col(c) == v for c, v in zip(TRACK, first_track)]))
else:
    first_track, one = (), duck_n
points = (
    pl.concat(
        [
            one.select(pl.col(f"{k}_axis").alias("axis"), pl.col(f"{k}_value").alias("value"))
            for k in ("first", "last", "min", "max")
        ]
    )
    .unique()
    .sort("axis")
)
rows_in_track = int(one["rows"].sum())
print(f"track {'/'.join(first_track) or '(untracked)'}: {rows_in_track} rows -> {points.height} M4 points over {one.height} cells")
print(points.head(12))
