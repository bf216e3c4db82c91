"""Checks survey answers against the level-table queries docs/format.md documents.

    tables_check.py general ANSWERS.json   the general query: DuckDB over the files
                                           `files --level K` prints, merged in that order
    tables_check.py whole ANSWERS.json     after a forced compaction: DuckDB over
                                           levels/level=*/*.parquet (Hive) and Polars

ANSWERS.json holds `surveys` (track, survey --json) and `files` (per level, in merge order);
`whole` also `archive`. Every survey answered at one level (merge 1) is recomputed cell for
cell; any difference fails with the cell. Prints `tables_check: ok: ...` at the end.
"""

import json
import sys

import duckdb
import polars as pl

COLUMNS = ["cell", "first_axis", "first", "last_axis", "last", "min_axis", "min",
           "max_axis", "max", "count", "sum", "sum_sq"]

# The general query of docs/format.md, for one level and one track; FILES as a list literal.
GENERAL = """
with partials as (
    select *, list_position({files}, filename) as name
    from read_parquet({files}, filename = true)
    where level = {level}
)
select cell,
       min(first_axis)                      as first_axis,
       arg_min("first", (first_axis, name)) as "first",
       max(last_axis)                       as last_axis,
       arg_max("last", (last_axis, name))   as "last",
       arg_min(min_axis, ("min", name))     as min_axis,
       arg_min("min", ("min", name))        as "min",
       arg_max(max_axis, ("max", -name))    as max_axis,
       arg_max("max", ("max", -name))       as "max",
       sum("count")                         as "count",
       sum("sum")                           as "sum",
       sum(sum_sq)                          as sum_sq
from partials
where host = ? and node = ? and field = 'reading' and cell between ? and ?
group by host, node, field, cell
order by cell
"""

# The whole-table query of docs/format.md.
WHOLE = """
select cell, first_axis, "first", last_axis, "last", min_axis, "min", max_axis, "max",
       "count", "sum", sum_sq
from read_parquet('{root}/streams/plant/levels/level=*/*.parquet', hive_partitioning = true)
where level = {level} and host = ? and node = ? and field = 'reading'
  and cell between ? and ?
order by cell
"""


def expected(survey):
    """The survey's buckets as rows (cell, first_axis, first, ...)."""
    width = survey["plan"]["cell_width"]
    rows = []
    for b in survey["buckets"]:
        rows.append((b["first"]["axis"] // width, b["first"]["axis"], b["first"]["value"],
                     b["last"]["axis"], b["last"]["value"], b["min"]["axis"],
                     b["min"]["value"], b["max"]["axis"], b["max"]["value"], b["count"],
                     b["sum"], b["sum_sq"]))
    return rows


def normal(rows):
    return [tuple(float(v) if isinstance(v, float) else int(v) for v in r) for r in rows]


def compare(what, got, want):
    got, want = normal(got), normal(want)
    if got != want:
        for i, (g, w) in enumerate(zip(got, want)):
            if g != w:
                diff = {c: (gv, wv) for c, gv, wv in zip(COLUMNS, g, w) if gv != wv}
                sys.exit(f"{what}: row {i} (cell {w[0]}) differs (query, survey): {diff}")
        sys.exit(f"{what}: {len(got)} cells from the query, {len(want)} in the survey")


def main():
    mode, path = sys.argv[1], sys.argv[2]
    answers = json.load(open(path))
    con = duckdb.connect()
    checked = cells = 0
    levels = set()
    for entry in answers["surveys"]:
        survey, (host, node) = entry["survey"], entry["track"]
        plan = survey["plan"]
        if plan is None or plan["merge"] != 1:
            continue
        level, (first, last) = plan["level"], plan["cells"]
        want = expected(survey)
        params = [host, node, first, last]
        what = f"{mode}: track {host}/{node} level {level} budget {survey['budget']}"
        if mode == "general":
            files = "[" + ", ".join("'" + f.replace("'", "''") + "'"
                                    for f in answers["files"][level]) + "]"
            got = con.execute(GENERAL.format(files=files, level=level), params).fetchall()
            compare(what + " (DuckDB, general query)", got, want)
        else:
            root = answers["archive"].replace("'", "''")
            got = con.execute(WHOLE.format(root=root, level=level), params).fetchall()
            compare(what + " (DuckDB, whole table)", got, want)
            frame = (pl.scan_parquet(f"{answers['archive']}/streams/plant/levels/level=*/*.parquet",
                                     hive_partitioning=True)
                     .filter((pl.col("level") == level) & (pl.col("host") == host)
                             & (pl.col("node") == node) & (pl.col("field") == "reading")
                             & pl.col("cell").is_between(first, last))
                     .sort("cell")
                     .select(COLUMNS)
                     .collect())
            compare(what + " (Polars)", frame.rows(), want)
        checked += 1
        cells += len(want)
        levels.add(level)
    if checked == 0 or len(levels) < 2:
        sys.exit(f"{mode}: too little was checked ({checked} surveys, levels {sorted(levels)})")
    print(f"tables_check: ok: {mode}: {checked} surveys checked, {cells} cells, "
          f"levels {sorted(levels)}")


if __name__ == "__main__":
    main()
