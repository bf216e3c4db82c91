"""What tests/replicate.rs asks of a bucket on moto's server, outside the crate.

    python tests/s3/replica_check.py copy ENDPOINT BUCKET FROM TO
        copies every object under FROM/ to TO/ (a snapshot of a replica, to restore from
        without taking the original prefix over)
    python tests/s3/replica_check.py engines ENDPOINT TABLE_URL EXPECTED_CSV
        reads the Delta table at TABLE_URL (s3://bucket/prefix/streams/ID/rows) with each
        engine's default reader (DuckDB delta_scan over httpfs, deltalake, Polars scan_delta,
        Daft read_deltalake on its native runner)
        and checks the row count, and the sum and the order-free checksum of every column
        `rows` printed in EXPECTED_CSV, exactly
"""

import csv
import os
import sys

# Daft: no telemetry request at import (this machine reaches no such service), no progress
# bar, and the native (local) runner, never Ray. Set before `import daft`.
os.environ["DAFT_ANALYTICS_ENABLED"] = "0"
os.environ["DO_NOT_TRACK"] = "1"
os.environ["DAFT_PROGRESS_BAR"] = "0"
os.environ["DAFT_RUNNER"] = "native"

import boto3


def client(endpoint):
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test",
                        aws_secret_access_key="test", region_name="us-east-1")


def copy(endpoint, bucket, src, dst):
    s3 = client(endpoint)
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=src + "/"):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            s3.copy_object(Bucket=bucket, Key=dst + key[len(src):],
                           CopySource={"Bucket": bucket, "Key": key})
            n += 1
    print("copied", n)


def checksums(columns, rows):
    """Per column: the sum of a stable hash of each value's text (order-free)."""
    import zlib
    return {c: sum(zlib.crc32(str(r[c]).encode()) for r in rows) for c in columns}


def engines(endpoint, table, expected_csv):
    import duckdb
    import polars as pl
    from deltalake import DeltaTable

    with open(expected_csv) as f:
        expected = list(csv.DictReader(f))
    columns = list(expected[0].keys())
    want = checksums(columns, expected)

    def text(v):
        return "" if v is None else str(v)

    def check(engine, records):
        got = checksums(columns, [{c: text(r[c]) for c in columns} for r in records])
        assert len(records) == len(expected), (engine, len(records), len(expected))
        assert got == want, (engine, got, want)
        print(engine, "ok", len(records))

    ext = os.path.join(os.path.dirname(duckdb.__file__), "..", "duckdb_ext", "extensions")
    con = duckdb.connect(config={"extension_directory": os.path.abspath(ext),
                                 "autoinstall_known_extensions": False})
    con.execute("LOAD httpfs")
    con.execute("LOAD delta")
    host = endpoint.split("://", 1)[1]
    con.execute(f"CREATE SECRET replica (TYPE s3, KEY_ID 'test', SECRET 'test', "
                f"REGION 'us-east-1', ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)")
    cur = con.execute(f"SELECT {', '.join(columns)} FROM delta_scan(?)", [table])
    names = [d[0] for d in cur.description]
    check("duckdb", [dict(zip(names, r)) for r in cur.fetchall()])

    opts = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true"}
    check("deltalake", DeltaTable(table, storage_options=opts).to_pyarrow_table(
        columns=columns).to_pylist())
    check("polars", pl.scan_delta(table, storage_options=opts).select(columns)
          .collect().to_dicts())

    # DataFusion reads the files the bucket's Delta log lists (deltalake resolves the log)
    # with its own Parquet reader and its own S3 store. deltalake's table provider cannot
    # scan an S3 table here: it crosses DataFusion's FFI, whose other side has no object
    # store registered ("No suitable object store found", delta-rs issue #4623).
    import functools
    import datafusion
    from datafusion.object_store import AmazonS3
    bucket = table.split("://", 1)[1].split("/", 1)[0]
    ctx = datafusion.SessionContext()
    ctx.register_object_store("s3://", AmazonS3(
        bucket_name=bucket, region="us-east-1", access_key_id="test",
        secret_access_key="test", endpoint=endpoint, allow_http=True), bucket)
    frames = [ctx.read_parquet(uri) for uri in DeltaTable(table, storage_options=opts).file_uris()]
    check("datafusion", functools.reduce(lambda a, b: a.union(b), frames)
          .select(*columns).to_arrow_table().to_pylist())

    import daft
    from daft.io import IOConfig, S3Config
    io = IOConfig(s3=S3Config(endpoint_url=endpoint, key_id="test", access_key="test",
                              region_name="us-east-1", use_ssl=False,
                              force_virtual_addressing=False))
    got = daft.read_deltalake(table, io_config=io).select(*columns).to_pydict()
    check("daft", [dict(zip(columns, values)) for values in zip(*(got[c] for c in columns))])


if __name__ == "__main__":
    if sys.argv[1] == "copy":
        copy(*sys.argv[2:6])
    elif sys.argv[1] == "engines":
        engines(*sys.argv[2:5])
    else:
        sys.exit(f"unknown command {sys.argv[1]!r}")
