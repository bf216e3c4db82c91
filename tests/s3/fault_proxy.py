"""A fault-injecting HTTP proxy in front of an S3 server, for tests/replicate_faults.rs.

    python tests/s3/fault_proxy.py http://127.0.0.1:UPSTREAM_PORT

Binds 127.0.0.1 on a free port, prints its own endpoint (`http://127.0.0.1:PORT`) as the
first line of stdout, forwards to UPSTREAM, and exits when its standard input closes (as
moto_server.py does). Python 3.11 standard library only.

Control: one command per line on stdin; each is answered by one line on stdout once it is
in effect (so a test that has read the answer knows every request from then on sees the new
mode):

    MODE [ARG] [only=KIND] [times=K]
                             ->  ok mode=MODE requests=N forwarded=N slowdown=N reset=N
                                    stalled=N lost=N hungup=N upstream_errors=N
    stats                    ->  the same line, the mode unchanged

MODE is one of

    pass        forward every request faithfully
    503         answer every request `503 Service Unavailable` with S3's `SlowDown` XML
                error (Content-Length set, the connection kept alive), forwarding nothing
    reset       read the request head, then reset the connection (SO_LINGER 0: an RST, not
                a FIN), forwarding nothing
    stall       read the request head and never answer, until the mode changes (then the
                connection is reset) or the client gives up and closes it; nothing forwarded
    slow MS     forward, and hold the answer MS milliseconds before relaying it
    lost        forward the request and read the server's whole answer (the server has
                acted on it), then reset the client's connection instead of answering: an
                acknowledgement lost on the way back
    hangup      as `lost`, but the client's connection is closed cleanly (a FIN) instead of
                reset: to the client, a server that hung up before answering
    flaky N     forward, but every Nth request (counted over the requests `only` selects)
                gets a fault instead, in turn a 503, a reset, a lost answer

`only=KIND` limits the fault to some requests, the others are forwarded: `all` (the default),
`read` (GET, HEAD), `write` (PUT, POST, DELETE), `create` (a conditional PUT,
`If-None-Match: *`: object_store's `PutMode::Create`). `times=K` (K > 0) injects the fault
into the first K of those requests only, then forwards (0, the default: no limit).

The counters are totals since the start: every request seen, those forwarded, and each kind
of fault injected (`upstream_errors`: the server could not be reached or closed mid-answer,
which the proxy passes on as a reset); `puts` counts PUT requests and `checksummed` those
carrying `x-amz-checksum-sha256`.

Why faults per request, with HTTP parsing, rather than per connection over raw bytes:
object_store (reqwest/hyper) keeps connections alive and sends many requests on one, so a
fault decided when a connection opens would hit every request of a pooled connection or none,
and a mode switch would not reach connections already open. The proxy therefore parses
HTTP/1.1 just enough to find each message's end: the request head, then a body framed by
`Content-Length` or `Transfer-Encoding: chunked`; the response head (1xx interim answers
relayed and read past), then its body by `Content-Length`, chunked, none (HEAD, 204, 304) or
until the server closes. Each client connection gets its own server connection, so requests
and answers stay paired. Bytes are relayed as they arrive (bodies are never buffered whole).
A request with `Expect: 100-continue` (boto3 sends it; object_store does not) is answered
`100 Continue` by the proxy itself, and forwarded without the header, so that a body is never
held up waiting for an interim answer the proxy would only relay after the body.
"""

import asyncio
import os
import socket
import struct
import sys
import threading
import urllib.parse

MODES = {"pass", "503", "reset", "stall", "slow", "lost", "hangup", "flaky"}
KINDS = {"all", "read", "write", "create"}
FLAKY_FAULTS = ["503", "reset", "lost"]

SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
    b"<RequestId>fault-proxy</RequestId></Error>"
)

COUNTERS = [
    "requests", "forwarded", "slowdown", "reset", "stalled", "lost", "hungup", "upstream_errors",
    "puts", "checksummed",
]


class State:
    def __init__(self):
        self.mode = "pass"
        self.arg = 0
        self.only = "all"
        self.matched = 0
        self.times = 0
        self.faulted = 0
        self.counts = {k: 0 for k in COUNTERS}
        # Set (and replaced) whenever the mode changes: what a stalled request waits on.
        self.changed = asyncio.Event()

    def line(self):
        counts = " ".join(f"{k}={v}" for k, v in self.counts.items())
        return f"ok mode={self.mode} {counts}"

    def apply(self, words):
        """Applies a control command; answers the reply line."""
        if not words or words == ["stats"]:
            return self.line()
        mode, rest = words[0], words[1:]
        options = {"only": "all", "times": "0"}
        while rest and rest[-1].split("=", 1)[0] in options and "=" in rest[-1]:
            key, _, value = rest.pop().partition("=")
            options[key] = value
        only, times = options["only"], options["times"]
        if mode not in MODES or only not in KINDS or not times.isdigit():
            return f"error: unknown mode, kind or count: {' '.join(words)}"
        arg = 0
        if mode in ("slow", "flaky"):
            if len(rest) != 1 or not rest[0].isdigit() or int(rest[0]) <= 0:
                return f"error: {mode} takes a positive number: {' '.join(words)}"
            arg = int(rest[0])
        elif rest:
            return f"error: {mode} takes no argument: {' '.join(words)}"
        self.mode, self.arg, self.only, self.matched = mode, arg, only, 0
        self.times, self.faulted = int(times), 0
        self.changed.set()
        self.changed = asyncio.Event()
        return self.line()

    def fault_for(self, request):
        """The fault this request gets: None (forward), or a mode name."""
        if self.mode == "pass" or not selected(self.only, request):
            return None
        if self.times and self.faulted >= self.times:
            return None
        fault = self.mode
        if self.mode == "flaky":
            self.matched += 1
            if self.matched % self.arg:
                return None
            fault = FLAKY_FAULTS[(self.matched // self.arg - 1) % len(FLAKY_FAULTS)]
        self.faulted += 1
        return fault


def selected(only, request):
    method = request["method"]
    if only == "all":
        return True
    if only == "read":
        return method in ("GET", "HEAD")
    if only == "write":
        return method in ("PUT", "POST", "DELETE")
    return method == "PUT" and request["headers"].get("if-none-match", "").strip() == "*"


def parse_head(head):
    """`(start line words, headers)` of a message head (bytes ending in CRLF CRLF)."""
    lines = head.decode("latin-1").split("\r\n")
    start = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return start, headers


def without_expect(head):
    """The request head less its `Expect` header."""
    lines = head.split(b"\r\n")
    return b"\r\n".join(l for l in lines if not l.lower().startswith(b"expect:"))


def chunked(headers):
    te = headers.get("transfer-encoding", "")
    return te.split(",")[-1].strip().lower() == "chunked" if te else False


def wants_close(headers):
    return "close" in [t.strip().lower() for t in headers.get("connection", "").split(",")]


async def relay_exact(reader, writer, n):
    """Relays exactly `n` bytes from `reader` to `writer` (or drops them when None)."""
    while n > 0:
        data = await reader.read(min(n, 1 << 16))
        if not data:
            raise asyncio.IncompleteReadError(b"", n)
        n -= len(data)
        if writer is not None:
            writer.write(data)
            await writer.drain()


async def relay_chunked(reader, writer):
    """Relays a chunked body, its last chunk and trailers included."""
    while True:
        line = await reader.readuntil(b"\r\n")
        if writer is not None:
            writer.write(line)
        size = int(line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while True:
                trailer = await reader.readuntil(b"\r\n")
                if writer is not None:
                    writer.write(trailer)
                if trailer == b"\r\n":
                    break
            if writer is not None:
                await writer.drain()
            return
        await relay_exact(reader, writer, size + 2)


async def relay_body(reader, writer, headers, until_eof=False):
    if chunked(headers):
        await relay_chunked(reader, writer)
    elif "content-length" in headers:
        await relay_exact(reader, writer, int(headers["content-length"]))
    elif until_eof:
        while data := await reader.read(1 << 16):
            if writer is not None:
                writer.write(data)
                await writer.drain()


def reset(writer):
    """Closes the connection with an RST."""
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


class Proxy:
    def __init__(self, upstream):
        url = urllib.parse.urlsplit(upstream)
        self.host, self.port = url.hostname, url.port or 80
        self.state = State()

    async def handle(self, creader, cwriter):
        up = None
        try:
            while True:
                try:
                    head = await creader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                start, headers = parse_head(head)
                if len(start) < 2:
                    return reset(cwriter)
                request = {"method": start[0].upper(), "headers": headers}
                state = self.state
                state.counts["requests"] += 1
                if request["method"] == "PUT":
                    # Uploads, and those that carry a body checksum the server checks.
                    state.counts["puts"] += 1
                    if "x-amz-checksum-sha256" in headers:
                        state.counts["checksummed"] += 1
                fault = state.fault_for(request)
                if fault == "reset":
                    state.counts["reset"] += 1
                    return reset(cwriter)
                if fault == "stall":
                    state.counts["stalled"] += 1
                    await self.stall(creader, state.changed)
                    return reset(cwriter)
                if "100-continue" in headers.get("expect", "").lower():
                    cwriter.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    await cwriter.drain()
                    head = without_expect(head)
                if fault == "503":
                    state.counts["slowdown"] += 1
                    await relay_body(creader, None, headers)
                    body = b"" if request["method"] == "HEAD" else SLOWDOWN
                    cwriter.write(
                        b"HTTP/1.1 503 Service Unavailable\r\n"
                        b"Content-Type: application/xml\r\n"
                        b"x-amz-request-id: fault-proxy\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode()
                        + body
                    )
                    await cwriter.drain()
                    if wants_close(headers):
                        return
                    continue
                # Forwarded (pass, slow, lost, flaky's good turns).
                if up is None:
                    try:
                        up = await asyncio.open_connection(self.host, self.port)
                    except OSError:
                        state.counts["upstream_errors"] += 1
                        return reset(cwriter)
                ureader, uwriter = up
                lose = fault in ("lost", "hangup")
                try:
                    uwriter.write(head)
                    await relay_body(creader, uwriter, headers)
                    await uwriter.drain()
                    while True:
                        rhead = await ureader.readuntil(b"\r\n\r\n")
                        rstart, rheaders = parse_head(rhead)
                        status = int(rstart[1])
                        if 100 <= status < 200 and status != 101:
                            if not lose:
                                cwriter.write(rhead)
                                await cwriter.drain()
                            continue
                        break
                    if fault == "slow":
                        await asyncio.sleep(state.arg / 1000)
                    sink = None if lose else cwriter
                    if sink is not None:
                        sink.write(rhead)
                    no_body = request["method"] == "HEAD" or status in (204, 304)
                    close = wants_close(headers) or wants_close(rheaders)
                    if not no_body:
                        framed = chunked(rheaders) or "content-length" in rheaders
                        await relay_body(ureader, sink, rheaders, until_eof=not framed)
                        close = close or not framed
                    if sink is not None:
                        await sink.drain()
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    if creader.at_eof() or cwriter.is_closing():
                        return
                    state.counts["upstream_errors"] += 1
                    return reset(cwriter)
                if fault == "lost":
                    state.counts["lost"] += 1
                    return reset(cwriter)
                if fault == "hangup":
                    state.counts["hungup"] += 1
                    return
                state.counts["forwarded"] += 1
                if close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except Exception as e:  # a proxy bug: said, not hidden
            print(f"fault_proxy: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            reset(cwriter)
        finally:
            if up is not None:
                up[1].transport.abort()
            if not cwriter.is_closing():
                cwriter.close()

    async def stall(self, creader, changed):
        """Waits until the mode changes or the client closes (what it sends is dropped)."""

        async def until_eof():
            try:
                while await creader.read(1 << 16):
                    pass
            except ConnectionError:
                pass

        eof = asyncio.ensure_future(until_eof())
        change = asyncio.ensure_future(changed.wait())
        await asyncio.wait([eof, change], return_when=asyncio.FIRST_COMPLETED)
        for task in (eof, change):
            task.cancel()


async def main(upstream):
    proxy = Proxy(upstream)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0, limit=1 << 20)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}", flush=True)
    loop = asyncio.get_running_loop()

    def control():
        for line in sys.stdin:
            words = line.split()

            async def apply(words=words):
                return proxy.state.apply(words)

            reply = asyncio.run_coroutine_threadsafe(apply(), loop).result()
            print(reply, flush=True)
        # Standard input closed: the test is done with the proxy.
        sys.stdout.flush()
        os._exit(0)

    threading.Thread(target=control, daemon=True).start()
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1]))
