//! What the S3 benchmarks share: their flags, and a real S3-compatible server on loopback
//! (moto's server mode, from the test venv) or one already running (`--endpoint`), with an
//! `object_store` client for it.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

/// The value after the flag `name` on the command line.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The server a benchmark talks to; a server this process started stops when dropped.
pub struct Server {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl Server {
    /// `endpoint` when given, else moto started with `python` and `bucket` created, served
    /// with keep-alive connections as S3 serves them (`moto_server.py --keep-alive`).
    pub fn start(endpoint: Option<String>, python: &str, bucket: &str) -> Server {
        if let Some(endpoint) = endpoint {
            return Server {
                child: None,
                endpoint,
            };
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/s3/moto_server.py");
        let mut child = Command::new(python)
            .args([script, "--keep-alive", bucket])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("start moto with {python}: {e} (pass --python or --endpoint)")
            });
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("endpoint");
        // Its errors go nowhere: an empty line is a server that did not start.
        assert!(
            line.starts_with("http://"),
            "moto did not start with {python} (its venv needs requirements-test.txt, cheroot \
             among them: scripts/test installs it); it said {line:?}"
        );
        Server {
            child: Some(child),
            endpoint: line.trim().to_owned(),
        }
    }

    /// Sets what `ColdTier::from_url` reads of the environment to reach this server (call it
    /// before any request thread starts).
    #[allow(dead_code)] // not every benchmark that includes this module uses it
    pub fn export_env(&self) {
        for (key, value) in [
            ("AWS_ENDPOINT", self.endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
        ] {
            std::env::set_var(key, value);
        }
    }

    /// A client for `bucket` on the server.
    #[allow(dead_code)] // not every benchmark that includes this module uses it
    pub fn store(&self, bucket: &str) -> Arc<dyn object_store::ObjectStore> {
        Arc::new(
            object_store::aws::AmazonS3Builder::new()
                .with_bucket_name(bucket)
                .with_endpoint(&self.endpoint)
                .with_allow_http(true)
                .with_access_key_id("test")
                .with_secret_access_key("test")
                .with_region("us-east-1")
                .build()
                .expect("s3 client"),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            drop(child.stdin.take());
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
