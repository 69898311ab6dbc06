//! The example scheduler extender (`tests/extender/extender.py`, Python standard library only)
//! as a child process on `127.0.0.1:<free port>`, stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The example extender's script.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("extender/extender.py")
}

/// A running example extender.
pub struct ExtenderProcess {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// Keeps the port file's directory (and the request log) while it runs.
    dir: tempfile::TempDir,
}

impl ExtenderProcess {
    /// Starts `python3 extender.py <args>` and waits until it listens.
    pub fn start(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port_file = dir.path().join("port");
        let log = dir.path().join("requests.jsonl");
        let child = Command::new("python3")
            .arg(script())
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .args(args)
            .stdout(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("python3 runs the example extender");
        let started = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                if let Ok(p) = text.trim().parse() {
                    break p;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the example extender did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Self { child, port, dir }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The requests received so far: (verb, ExtenderArgs or ExtenderBindingArgs as sent).
    pub fn requests(&self) -> Vec<(String, serde_json::Value)> {
        let text = std::fs::read_to_string(self.dir.path().join("requests.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| (v["verb"].as_str().unwrap_or_default().to_string(), v["args"].clone()))
            .collect()
    }
}

impl Drop for ExtenderProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
