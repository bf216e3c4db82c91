"""A real S3-compatible server on loopback for the test suite: moto's server mode.

    python tests/s3/moto_server.py BUCKET [BUCKET...]

Binds 127.0.0.1 on a free port, creates the buckets, prints the endpoint URL on one line,
and serves until its standard input closes (the test that started it exits or drops it).
"""

import sys

import boto3
from moto.server import ThreadedMotoServer

server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
endpoint = f"http://{host}:{port}"
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    aws_access_key_id="test",
    aws_secret_access_key="test",
    region_name="us-east-1",
)
for bucket in sys.argv[1:]:
    s3.create_bucket(Bucket=bucket)
print(endpoint, flush=True)
sys.stdin.read()
server.stop()
