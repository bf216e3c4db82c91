//! A real S3-compatible server on loopback (moto's server mode, from the test venv), started
//! by the test that needs it and stopped when it is dropped. A test that cannot start it
//! fails; it never skips.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// The running server.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

impl Moto {
    /// Starts the server with `buckets` created.
    pub fn start(buckets: &[&str]) -> Moto {
        let python = match std::env::var_os("SERIES_ARCHIVE_PYTHON") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => panic!(
                "SERIES_ARCHIVE_PYTHON is not set: the S3 tests start moto's server from the \
                 test venv; run the suite with scripts/test (it installs requirements-test.txt)"
            ),
        };
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/s3/moto_server.py");
        let mut child = Command::new(&python)
            .arg(script)
            .args(buckets)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} {script}: {e}", python.display()));
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the endpoint");
        let endpoint = line.trim().to_owned();
        assert!(
            endpoint.starts_with("http://127.0.0.1:"),
            "moto did not start (is moto[server] in requirements-test.txt installed?): {endpoint:?}"
        );
        Moto { child, endpoint }
    }

    /// The environment a process needs to reach the server as S3 (what
    /// `AmazonS3Builder::from_env` reads).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
        ]
    }

    /// An object store client for `bucket` on the server.
    pub fn store(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .expect("an S3 client for moto")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
