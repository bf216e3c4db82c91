//! `series-archive serve` end to end: the real binary on loopback, asked over HTTP, every
//! answer compared with the CLI's for the same arguments; refusals and their statuses; a
//! writer in another process committing while it serves; the bearer token.

#[path = "common/http.rs"]
mod http;
#[path = "common/process.rs"]
mod process;

use http::{get, Server};
use process::{cli, scratch, BIN};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

fn demo(dir: &Path, ticks: &str) {
    cli(&[
        "demo",
        dir.to_str().expect("utf-8"),
        "--ticks",
        ticks,
        "--cadence",
        "500",
    ]);
}

fn cli_json(args: &[&str]) -> Value {
    let out = cli(args);
    serde_json::from_slice(&out.stdout).expect("the CLI prints JSON")
}

#[test]
fn answers_exactly_what_the_cli_answers() {
    let dir = scratch("serve-same");
    let archive = dir.path().join("a");
    demo(&archive, "3000");
    let a = archive.to_str().expect("utf-8");
    let server = Server::start(BIN, &archive, &[]);

    // Surveys: the same JSON as `survey --json`, for several selections, ranges, budgets.
    for (query, args) in [
        (
            "track=run_1&budget=800",
            vec!["--track", "run_1", "--budget", "800"],
        ),
        (
            "track=run_2&track=probe.03&from=100&to=5000&budget=64",
            vec![
                "--track", "run_2", "probe.03", "--from", "100", "--to", "5000", "--budget", "64",
            ],
        ),
        ("budget=8", vec!["--budget", "8"]),
        (
            "from=11000&to=11001&budget=4000",
            vec!["--from", "11000", "--to", "11001", "--budget", "4000"],
        ),
    ] {
        let reply = server.get(&format!("/api/survey?stream=capture&{query}"));
        assert_eq!(reply.status, 200, "{query}: {}", reply.text());
        let mut want = vec!["survey", a, "--stream", "capture", "--json"];
        want.extend(args.iter().copied());
        assert_eq!(reply.json(), cli_json(&want), "survey {query}");
        let budget: usize = query
            .rsplit("budget=")
            .next()
            .and_then(|b| b.parse().ok())
            .expect("budget");
        let buckets = reply.json()["buckets"].as_array().expect("buckets").len();
        assert!(
            buckets * 4 <= budget,
            "{buckets} buckets over a budget of {budget}"
        );
        assert!(buckets > 0, "{query} answered no bucket");
    }

    // Folds, level and raw.
    for aggregate in ["mean", "max", "count", "p95", "p50"] {
        let reply = server.get(&format!(
            "/api/fold?stream=capture&track=run_3&from=7&to=9000&aggregate={aggregate}"
        ));
        assert_eq!(reply.status, 200, "{}", reply.text());
        let want = cli_json(&[
            "fold",
            a,
            "--stream",
            "capture",
            "--track",
            "run_3",
            "--from",
            "7",
            "--to",
            "9000",
            "--aggregate",
            aggregate,
            "--json",
        ]);
        assert_eq!(reply.json(), want, "fold {aggregate}");
    }

    // Rows: streamed CSV equals `rows`, byte for byte; JSON pages cover exactly the same rows.
    let whole = cli(&["rows", a, "--stream", "capture", "--track", "run_0"]).stdout;
    let streamed = server.get("/api/rows?stream=capture&track=run_0&format=csv");
    assert_eq!(streamed.status, 200);
    assert!(
        streamed.complete,
        "the streamed body ended with its last chunk"
    );
    assert_eq!(streamed.text(), String::from_utf8_lossy(&whole));
    let lines: Vec<&str> = std::str::from_utf8(&whole)
        .expect("csv")
        .lines()
        .skip(1)
        .collect();
    let mut paged: Vec<String> = Vec::new();
    let mut next = String::new();
    let mut pages = 0;
    loop {
        let reply = server.get(&format!(
            "/api/rows?stream=capture&track=run_0&limit=1000{next}"
        ));
        assert_eq!(reply.status, 200, "{}", reply.text());
        let page = reply.json();
        pages += 1;
        for row in page["rows"].as_array().expect("rows") {
            paged.push(format!(
                "{},{},{},{},{},{}",
                row["run"].as_str().expect("run"),
                row["probe"].as_str().expect("probe"),
                row["ordinal"],
                row["value"],
                row["noise"],
                row["_position"]
            ));
        }
        match &page["next"] {
            Value::Null => {
                assert_eq!(reply.header("x-next-from"), None);
                break;
            }
            n => {
                assert_eq!(
                    reply.header("x-next-from"),
                    Some(n["from"].to_string().as_str())
                );
                next = format!("&from={}&seq={}", n["from"], n["seq"]);
            }
        }
        assert!(pages < 100, "paging does not end");
    }
    assert_eq!(paged.len(), lines.len(), "pages hold every row once");
    // Floats print differently in JSON and CSV; compare the rest exactly and the floats as numbers.
    for (p, l) in paged.iter().zip(&lines) {
        let (p, l): (Vec<&str>, Vec<&str>) = (p.split(',').collect(), l.split(',').collect());
        assert_eq!((&p[..4], p[5]), (&l[..4], l[5]), "{p:?} vs {l:?}");
        let (x, y): (f64, f64) = (p[4].parse().expect("f64"), l[4].parse().expect("f64"));
        assert_eq!(x, y);
    }
    assert!(pages > 5, "{pages} pages of 1000 for {} rows", lines.len());

    // Arrow IPC: a stream of the same rows (the schema, then record batches, then the end).
    let arrow = server.get("/api/rows?stream=capture&track=run_0&format=arrow");
    assert_eq!(
        arrow.header("content-type"),
        Some("application/vnd.apache.arrow.stream")
    );
    let reader = arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(arrow.body), None)
        .expect("an Arrow IPC stream");
    let rows: usize = reader.map(|b| b.expect("a batch").num_rows()).sum();
    assert_eq!(rows, lines.len());

    // The tree: every track once, rows adding up.
    let streams = server.get("/api/streams").json();
    let capture = &streams["streams"][0];
    assert_eq!(capture["id"], "capture");
    assert_eq!(capture["measured"], serde_json::json!(["value", "noise"]));
    let tree = capture["tree"].as_array().expect("tree");
    assert_eq!(tree.len(), 4, "four runs");
    assert_eq!(tree[1]["path"], serde_json::json!(["run_1"]));
    assert_eq!(tree[1]["children"].as_array().expect("children").len(), 8);
    let rows: u64 = tree.iter().map(|n| n["rows"].as_u64().expect("rows")).sum();
    assert_eq!(rows, capture["rows"].as_u64().expect("rows"));
    assert_eq!(rows, 4 * 8 * 3000);
}

fn refusal(server: &Server, path: &str, status: u16, kind: &str, says: &str) -> Value {
    let reply = server.get(path);
    let body = reply.json();
    assert_eq!(reply.status, status, "{path}: {}", reply.text());
    assert_eq!(body["error"], kind, "{path}");
    let message = body["message"].as_str().expect("a message");
    assert!(
        message.contains(says),
        "{path}: {message:?} does not say {says:?}"
    );
    body
}

#[test]
fn refuses_with_the_refusals_own_status_and_message() {
    let dir = scratch("serve-refuse");
    let archive = dir.path().join("a");
    demo(&archive, "2000");
    let a = archive.to_str().expect("utf-8");
    cli(&["retire", a, "--stream", "capture", "--track", "run_0"]);
    let before = std::fs::read_dir(archive.join("manifest"))
        .expect("manifest")
        .count();
    let server = Server::start(BIN, &archive, &["--max-budget", "100000"]);

    let s = "/api/survey?stream=capture";
    refusal(
        &server,
        "/api/survey?budget=8",
        400,
        "bad_request",
        "\"stream\" is required",
    );
    refusal(&server, s, 400, "bad_request", "\"budget\" is required");
    refusal(
        &server,
        &format!("{s}&budget=7"),
        400,
        "bad_request",
        "must be at least 8",
    );
    refusal(
        &server,
        &format!("{s}&budget=-4"),
        400,
        "bad_request",
        "not a non-negative integer",
    );
    refusal(
        &server,
        &format!("{s}&budget=80&from=9&to=9"),
        400,
        "bad_request",
        "not above from 9",
    );
    refusal(
        &server,
        &format!("{s}&budget=80&budget=90"),
        400,
        "bad_request",
        "given twice",
    );
    refusal(
        &server,
        &format!("{s}&budget=80&colour=red"),
        400,
        "bad_request",
        "unknown parameter \"colour\"",
    );
    refusal(
        &server,
        &format!("{s}&budget=80&track=a&track=b&track=c"),
        400,
        "bad_request",
        "tracked by 2 component(s)",
    );
    refusal(
        &server,
        "/api/fold?stream=capture&aggregate=p101",
        400,
        "bad_request",
        "unknown aggregate \"p101\"",
    );
    refusal(
        &server,
        "/api/rows?stream=capture&format=xml",
        400,
        "bad_request",
        "json, csv or arrow",
    );
    refusal(
        &server,
        "/api/survey?stream=nope&budget=80",
        404,
        "unserved",
        "no stream \"nope\"",
    );
    refusal(&server, "/api/nothing", 404, "not_found", "/api/survey");
    refusal(
        &server,
        &format!("{s}&budget=100001"),
        413,
        "too_large",
        "--max-budget 100000",
    );
    refusal(
        &server,
        "/api/rows?stream=capture&limit=1000001",
        413,
        "too_large",
        "1000000",
    );
    let long = format!("{s}&budget=80{}", "&track=x".repeat(1100));
    refusal(&server, &long, 414, "too_large", "at most 8192");

    // A retired track: the floor, with where to narrow to, exactly as the CLI words it.
    let floor = refusal(
        &server,
        &format!("{s}&track=run_0&budget=80"),
        416,
        "floor",
        "narrow the range",
    );
    assert_eq!(floor["tier"], "levels");
    let axis = floor["axis"].as_u64().expect("the floor's axis");
    let cli_says = process::show(
        "survey",
        &std::process::Command::new(BIN)
            .args([
                "survey", a, "--stream", "capture", "--track", "run_0", "--budget", "80",
            ])
            .output()
            .expect("runs"),
    );
    assert!(
        cli_says.contains(floor["message"].as_str().expect("message")),
        "{cli_says}"
    );
    assert!(cli_says.contains(&format!("axis {axis}")));
    // The tree says where the refusals stand, as the archive computes them.
    let run0 = &server.get("/api/streams").json()["streams"][0]["tree"][0];
    assert_eq!(run0["path"], serde_json::json!(["run_0"]));
    assert_eq!(run0["retired"], true);
    assert_eq!(run0["survey_floor_axis"].as_u64(), Some(axis), "{run0}");
    let p95 = refusal(
        &server,
        "/api/fold?stream=capture&track=run_0&aggregate=p95",
        416,
        "floor",
        "floor",
    );
    assert!(p95["floor"].as_u64().is_some());
    assert_eq!(run0["raw_floor_axis"], p95["axis"], "{run0}");
    refusal(
        &server,
        "/api/rows?stream=capture&track=run_0",
        416,
        "floor",
        "floor",
    );

    // A damaged level file: unreadable, 503, naming the file; the other tracks still answer.
    let levels = cli(&["files", a, "--stream", "capture", "--levels"]).stdout;
    let level = String::from_utf8_lossy(&levels)
        .lines()
        .next()
        .expect("a level file")
        .to_owned();
    let path = if Path::new(&level).is_absolute() {
        level.clone().into()
    } else {
        archive.join(&level)
    };
    let mut bytes = std::fs::read(&path).expect("level file");
    // Every row group of it: a byte in every 97 flipped (digests are checked on read).
    let len = bytes.len();
    for b in bytes[8..len - 8].iter_mut().step_by(97) {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &bytes).expect("damage");
    let damaged = refusal(
        &server,
        &format!("{s}&track=run_1&budget=4000"),
        503,
        "unreadable",
        "unreadable",
    );
    println!("damaged: {damaged}");

    // Nothing a refusal asked for changed the archive.
    drop(server);
    assert_eq!(
        std::fs::read_dir(archive.join("manifest"))
            .expect("manifest")
            .count(),
        before
    );
}

/// Reads server-sent events until one whose data has `barriers` above `above`.
fn wait_for_barrier(addr: &str, above: u64, within: Duration) -> Value {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(within)).expect("timeout");
    write!(stream, "GET /api/watch HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("send");
    let began = Instant::now();
    let mut lines = BufReader::new(stream);
    let mut line = String::new();
    while began.elapsed() < within {
        line.clear();
        if lines.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(data) = line.trim().strip_prefix("data:") {
            let event: Value = serde_json::from_str(data.trim()).expect("event JSON");
            if event["barriers"].as_u64().expect("barriers") > above {
                return event;
            }
        }
    }
    panic!("no barrier event above {above} within {within:?}");
}

#[test]
fn sees_each_barrier_a_writer_commits_and_never_blocks_it() {
    let dir = scratch("serve-live");
    let archive = dir.path().join("a");
    demo(&archive, "1000");
    let server = Server::start(BIN, &archive, &[]);
    let first = server.get("/api/streams").json();
    let barriers = first["barriers"].as_u64().expect("barriers");
    let addr = server.addr.clone();
    let watcher =
        std::thread::spawn(move || wait_for_barrier(&addr, barriers, Duration::from_secs(60)));

    // Another process writes while the server serves: it takes the writer's lock, which the
    // server never holds, and commits more barriers.
    demo(&archive, "1000");
    let event = watcher.join().expect("watcher");
    assert!(
        event["watermarks"]["capture"].as_u64().expect("watermark") > 1000,
        "{event}"
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = server.get("/api/streams").json();
        if now["streams"][0]["rows"].as_u64() == Some(2 * 4 * 8 * 1000) {
            break;
        }
        assert!(Instant::now() < deadline, "the server still answers {now}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // And answers from the new snapshot: the same as the CLI now.
    let a = archive.to_str().expect("utf-8");
    let reply = server.get("/api/survey?stream=capture&budget=4000");
    assert_eq!(
        reply.json(),
        cli_json(&["survey", a, "--stream", "capture", "--budget", "4000", "--json"])
    );
}

#[test]
fn a_token_guards_the_api_and_other_addresses_need_one() {
    let dir = scratch("serve-token");
    let archive = dir.path().join("a");
    demo(&archive, "200");

    let open = std::process::Command::new(BIN)
        .args([
            "serve",
            archive.to_str().expect("utf-8"),
            "--listen",
            "0.0.0.0:0",
        ])
        .output()
        .expect("runs");
    assert!(!open.status.success());
    assert!(
        String::from_utf8_lossy(&open.stderr).contains("pass --token"),
        "{}",
        process::show("serve 0.0.0.0", &open)
    );

    let token = "correct-horse-battery-staple";
    let server = Server::start(BIN, &archive, &["--token", token]);
    let denied = server.get("/api/streams");
    assert_eq!(denied.status, 401, "{}", denied.text());
    assert_eq!(denied.header("www-authenticate"), Some("Bearer"));
    let wrong = get(
        &server.addr,
        "/api/streams",
        &[("Authorization", "Bearer correct-horse-battery-stapler")],
    );
    assert_eq!(wrong.status, 401);
    let bearer = format!("Bearer {token}");
    let allowed = get(&server.addr, "/api/streams", &[("Authorization", &bearer)]);
    assert_eq!(allowed.status, 200, "{}", allowed.text());
    // ?access_token= is for /api/watch only (EventSource cannot set headers).
    let watch = server.get("/api/watch?access_token=wrong-token-wrong-token");
    assert_eq!(watch.status, 401);
    let query = server.get(&format!("/api/streams?access_token={token}"));
    assert_eq!(query.status, 401, "{}", query.text());
    // The page holds no data and loads without it.
    let page = server.get("/");
    assert_eq!(page.status, 200);
    assert!(
        page.text().contains("window.seriesView"),
        "/ is not the page: {}",
        page.text()
    );
}

#[test]
fn the_curl_examples_of_the_docs_answer() {
    let readme = ["README.md", "docs/serve.md"]
        .map(|f| {
            std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(f))
                .expect("the docs")
        })
        .join("\n");
    let urls: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("curl "))
        .filter_map(|l| l.split('\'').nth(1))
        .collect();
    assert!(
        urls.len() >= 8,
        "the curl examples of README.md and docs/serve.md: {urls:?}"
    );
    let dir = scratch("serve-readme");
    let archive = dir.path().join("a");
    demo(&archive, "1000");
    let server = Server::start(BIN, &archive, &[]);
    for url in urls {
        let path = url
            .strip_prefix("http://127.0.0.1:8080")
            .unwrap_or_else(|| panic!("{url} is not on the default address"));
        if path == "/api/watch" {
            let event = wait_for_barrier(&server.addr, 0, Duration::from_secs(30));
            assert!(event["generation"].as_u64().is_some(), "{event}");
            continue;
        }
        let reply = server.get(path);
        assert_eq!(reply.status, 200, "{url}: {}", reply.text());
        assert!(!reply.body.is_empty(), "{url} answered nothing");
    }
}

#[test]
fn a_stream_that_fails_midway_breaks_the_transfer_never_ends_short() {
    let dir = scratch("serve-midway");
    let archive = dir.path().join("a");
    let a = archive.to_str().expect("utf-8");
    // Barrier files as sealed: 20 files of 1000 ticks × 32 tracks, read in several windows.
    cli(&[
        "demo",
        a,
        "--ticks",
        "20000",
        "--cadence",
        "1000",
        "--no-compact",
    ]);
    let files = cli(&["files", a, "--stream", "capture", "--manifest"]).stdout;
    let files = String::from_utf8_lossy(&files).into_owned();
    let last = files.lines().last().expect("data files");
    let path = if Path::new(last).is_absolute() {
        last.into()
    } else {
        archive.join(last)
    };
    let whole = cli(&["rows", a, "--stream", "capture"]).stdout;
    let mut bytes = std::fs::read(&path).expect("the newest data file");
    let len = bytes.len();
    for b in bytes[8..len - 8].iter_mut().step_by(97) {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &bytes).expect("damage");
    let server = Server::start(BIN, &archive, &[]);

    // The first windows read fine, so the status is 200 and rows flow; then the damaged
    // file: the transfer is cut, without its last chunk.
    let streamed = server.get("/api/rows?stream=capture&format=csv");
    assert_eq!(streamed.status, 200, "{}", streamed.text());
    assert!(!streamed.body.is_empty(), "rows flowed before the damage");
    assert!(
        !streamed.complete,
        "a stream that could not read its last file ended as if whole ({} of {} bytes)",
        streamed.body.len(),
        whole.len()
    );
    assert!(streamed.body.len() < whole.len());
    // A page is read whole before its status: the same damage is a 503.
    let page = server.get("/api/rows?stream=capture&format=csv&limit=1000000");
    assert_eq!(page.status, 503, "{}", page.text());
    assert_eq!(page.json()["error"], "unreadable");
}

#[test]
fn serve_and_demo_each_say_what_they_do() {
    for (command, says) in [
        ("serve", "Serve the archive's reads over HTTP"),
        ("demo", "Run a synthetic capture workload"),
    ] {
        let out = cli(&[command, "--help"]);
        let help = String::from_utf8_lossy(&out.stdout);
        let first = help.lines().next().unwrap_or_default();
        assert!(first.starts_with(says), "{command} --help begins {first:?}");
    }
}
