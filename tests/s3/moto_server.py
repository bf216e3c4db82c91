"""A real S3-compatible server on loopback for the test suite: moto's server mode.

    python tests/s3/moto_server.py [--keep-alive] BUCKET [BUCKET...]

Binds 127.0.0.1 on a free port, creates the buckets, prints the endpoint URL on one line,
and serves until its standard input closes (the test that started it exits or drops it).

moto's own server (Werkzeug's) answers every request `Connection: close`, so each request
pays a TCP connection, which S3 itself does not charge a client that keeps its connections.
With `--keep-alive` the same moto application is served by cheroot, an HTTP/1.1 server that
keeps connections open, as the benchmarks do (`examples/common/bench.rs`) so that what they
measure is the client's cost of a request, not of a connection per request.
"""

import sys
import threading

import boto3

args = sys.argv[1:]
keep_alive = bool(args) and args[0] == "--keep-alive"
buckets = args[1:] if keep_alive else args

if keep_alive:
    from cheroot import wsgi
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    server = wsgi.Server(
        ("127.0.0.1", 0), DomainDispatcherApplication(create_backend_app), numthreads=8
    )
    server.prepare()
    host, port = server.bind_addr[:2]
    threading.Thread(target=server.serve, daemon=True).start()
else:
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
for bucket in buckets:
    s3.create_bucket(Bucket=bucket)
print(endpoint, flush=True)
sys.stdin.read()
server.stop()
