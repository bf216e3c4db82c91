//! `serve` against clients that connect and never finish a request (issue 23, item 5): the
//! real binary, under a lowered open-file limit, with hundreds of idle connections, still
//! answers a client with the token at once; idle connections are closed after
//! `--header-timeout`; past `--max-connections` the oldest connection waiting for a request
//! head is closed, and when every open one is answering, a new one is refused with 503.

#[path = "common/http.rs"]
mod http;
#[path = "common/process.rs"]
mod process;

use http::{get, Server};
use process::{cli, scratch, BIN};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "correct-horse-battery-staple";

fn demo(dir: &Path) {
    cli(&[
        "demo",
        dir.to_str().expect("utf-8"),
        "--ticks",
        "600",
        "--cadence",
        "300",
    ]);
}

/// `serve ARCHIVE --listen 127.0.0.1:0 EXTRA…` with at most `files` open files (`ulimit -n`,
/// soft and hard, set by bash before it execs the server).
fn serve_limited(archive: &Path, files: u32, extra: &[&str]) -> Server {
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(format!("ulimit -n {files} && exec \"$@\""))
        .arg("bash")
        .arg(BIN)
        .arg("serve")
        .arg(archive)
        .args(["--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("bash runs serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("serve prints where it listens");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("serve printed {line:?}, not its address"))
        .to_owned();
    Server { child, addr }
}

/// Whether the server closed `stream` (EOF or a reset) within `within`; false when it is still
/// open then. Bytes the server sent first (a refusal) are read past.
fn closed_within(mut stream: &TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// A GET on a fresh connection that must be answered within `within`: (status, elapsed).
fn timed_get(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    within: Duration,
) -> (u16, Duration) {
    let began = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let (addr, asked) = (addr.to_owned(), path.to_owned());
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    std::thread::spawn(move || {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let _ = tx.send(get(&addr, &asked, &headers).status);
    });
    let status = rx
        .recv_timeout(within)
        .unwrap_or_else(|_| panic!("GET {path} was not answered within {within:?}"));
    (status, began.elapsed())
}

/// A connection with an answer in flight: `/api/watch` keeps its event stream open.
fn watcher(addr: &str) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(stream, "GET /api/watch HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("a status line");
    assert!(line.starts_with("HTTP/1.1 200"), "watch answered {line:?}");
    loop {
        line.clear();
        reader.read_line(&mut line).expect("a header line");
        if line == "\r\n" {
            return reader;
        }
    }
}

#[test]
fn idle_connections_never_lock_out_a_client_with_the_token() {
    let dir = scratch("serve-idle");
    let archive = dir.path().join("a");
    demo(&archive);
    // The defaults, as a server started without thinking of this runs: --header-timeout 10s
    // (docs/serve.md) and --max-connections 512 (lowered to fit the 256 files).
    let timeout = Duration::from_secs(10);
    let server = serve_limited(&archive, 256, &["--token", TOKEN]);
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("Authorization", bearer.as_str())];
    let (status, _) = timed_get(&server.addr, "/api/streams", &auth, Duration::from_secs(10));
    assert_eq!(status, 200);

    // 300 connections (more than the server may open files) that never finish a request:
    // half send nothing, half a request line and one header of a head that never ends.
    let opened = Instant::now();
    let idle: Vec<TcpStream> = (0..300)
        .map(|i| {
            let mut s = TcpStream::connect(&server.addr).expect("connect");
            if i % 2 == 1 {
                s.write_all(b"GET /api/streams HTTP/1.1\r\nHost: x\r\n")
                    .expect("half a head");
            }
            s
        })
        .collect();
    // Give the server time to accept as many of them as it will.
    std::thread::sleep(Duration::from_millis(300));

    // A client with the token is answered at once, well before any idle one times out, and
    // again (not only once).
    for _ in 0..3 {
        let (status, took) =
            timed_get(&server.addr, "/api/streams", &auth, Duration::from_secs(10));
        assert_eq!(status, 200);
        assert!(
            took < Duration::from_millis(1500),
            "a client with the token waited {took:?} behind 300 idle connections"
        );
    }
    assert!(
        opened.elapsed() < timeout,
        "the checks above took past the header timeout; they prove nothing"
    );

    // The newest idle connections are still open (closed by the deadline, not at once)...
    let newest = idle.last().expect("300");
    assert!(
        !closed_within(newest, Duration::from_millis(100)),
        "the newest idle connection was closed {:?} after it opened, before --header-timeout {timeout:?}",
        opened.elapsed()
    );
    // ...and every idle one is closed by the server once the header timeout has passed.
    let deadline = opened + timeout + Duration::from_secs(4);
    let still_open = idle
        .iter()
        .filter(|s| !closed_within(s, deadline.saturating_duration_since(Instant::now())))
        .count();
    assert_eq!(
        still_open,
        0,
        "{still_open} of 300 idle connections still open {:?} after they opened (--header-timeout {timeout:?})",
        opened.elapsed()
    );

    // A request without the token is refused and its connection closed: it cannot be held
    // open for another try.
    let mut anon = TcpStream::connect(&server.addr).expect("connect");
    write!(
        anon,
        "GET /api/streams HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.addr
    )
    .expect("send");
    anon.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut answer = Vec::new();
    let _ = anon.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
}

#[test]
fn past_max_connections_the_oldest_waiting_is_closed_or_the_new_one_refused() {
    let dir = scratch("serve-cap");
    let archive = dir.path().join("a");
    demo(&archive);
    let server = Server::start(
        BIN,
        &archive,
        &["--max-connections", "4", "--header-timeout", "60s"],
    );
    // Two connections with an answer in flight, two waiting for a request head: the cap.
    let _w1 = watcher(&server.addr);
    let _w2 = watcher(&server.addr);
    let i1 = TcpStream::connect(&server.addr).expect("connect");
    std::thread::sleep(Duration::from_millis(50));
    let i2 = TcpStream::connect(&server.addr).expect("connect");
    std::thread::sleep(Duration::from_millis(200));

    // A fifth is served: the oldest waiting connection is closed to make room, the other
    // waiting one is not.
    let (status, took) = timed_get(&server.addr, "/api/streams", &[], Duration::from_secs(10));
    assert_eq!(status, 200);
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(
        closed_within(&i1, Duration::from_secs(2)),
        "the oldest waiting connection was left open past the cap"
    );
    assert!(
        !closed_within(&i2, Duration::from_millis(300)),
        "a waiting connection was closed though the cap had room"
    );

    // Every place taken by an answer in flight: two more watchers (the second closes i2),
    // then a new connection is refused at once with 503, not left waiting.
    let _w3 = watcher(&server.addr);
    let _w4 = watcher(&server.addr);
    assert!(closed_within(&i2, Duration::from_secs(2)));
    let refused = get(&server.addr, "/api/streams", &[]);
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(
        refused.text().contains("--max-connections"),
        "{}",
        refused.text()
    );
}
