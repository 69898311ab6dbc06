//! Shared by the tests that run the `scheduler-service` binary: a replica on a free loopback port
//! and a client that sends raw protobuf bytes (requests no well-behaved client could build).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use placement_scheduler::procstat::{Memory, Proc};
use placement_scheduler::proto::placement_service_client::PlacementServiceClient;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::Status;

/// A `scheduler-service` process on 127.0.0.1:0, killed when dropped.
pub struct Replica {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// The metrics endpoint's address, when started with [`Replica::start_with_metrics`].
    pub metrics: Option<String>,
}

impl Replica {
    /// Starts the binary with `args` after the listen flags (metrics off); the port is read from
    /// its JSON log.
    pub fn start(args: &[&str]) -> Self {
        Self::spawn(args, false, |_| {})
    }

    /// [`Replica::start`] with the metrics endpoint on a free port.
    pub fn start_with_metrics(args: &[&str]) -> Self {
        Self::spawn(args, true, |_| {})
    }

    /// [`Replica::start`], with `setup` applied to the command first (limits, environment).
    pub fn start_with(args: &[&str], setup: impl FnOnce(&mut Command)) -> Self {
        Self::spawn(args, false, setup)
    }

    fn spawn(args: &[&str], metrics: bool, setup: impl FnOnce(&mut Command)) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_scheduler-service"));
        command
            .args(["--listen", "127.0.0.1:0", "--log-format", "json"])
            .args(["--metrics-listen", if metrics { "127.0.0.1:0" } else { "off" }])
            .args(args)
            .env_remove("PLACEMENT_POLICY_FILE")
            .env("RUST_LOG", "warn,scheduler_service=info,placement_scheduler=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        setup(&mut command);
        let mut child = command.spawn().expect("start scheduler-service");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let found = serde_json::from_str::<serde_json::Value>(&line).ok().and_then(|v| {
                    let message = v.get("message")?.as_str()?.to_string();
                    let addr = v.get("addr")?.as_str()?.to_string();
                    Some((message, addr))
                });
                if let Some(found) = found {
                    let _ = tx.send(found);
                }
            }
        });
        let (mut grpc, mut metrics_addr) = (None, None);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while grpc.is_none() || (metrics && metrics_addr.is_none()) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok((message, addr)) if message == "placement decision service listening" => grpc = Some(addr),
                Ok((message, addr)) if message == "metrics listening" => metrics_addr = Some(addr),
                Ok(_) => {}
                Err(e) => {
                    let _ = child.kill();
                    panic!(
                        "scheduler-service did not report its addresses: {e} ({:?})",
                        child.wait()
                    );
                }
            }
        }
        Self {
            child,
            endpoint: format!("http://{}", grpc.expect("the gRPC address")),
            metrics: metrics_addr,
        }
    }

    /// The value of a metric without labels, from the metrics endpoint.
    pub async fn metric(&self, name: &str) -> f64 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.metrics.as_deref().expect("started with metrics");
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect to /metrics");
        s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
            .await
            .expect("request /metrics");
        let mut body = String::new();
        s.read_to_string(&mut body).await.expect("read /metrics");
        body.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("metric {name} not found in:\n{body}"))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// VmRSS and VmHWM now.
    pub fn memory(&self) -> Memory {
        Proc::Pid(self.pid())
            .memory()
            .expect("the replica's /proc/<pid>/status")
    }

    /// CPU time the process has used so far.
    pub fn cpu(&self) -> Duration {
        Proc::Pid(self.pid()).cpu().expect("the replica's /proc/<pid>/stat")
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// A client with no message size limit of its own.
    pub async fn client(&self) -> PlacementServiceClient<Channel> {
        PlacementServiceClient::new(self.channel().await)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX)
    }

    /// A new connection.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.endpoint.clone())
            .expect("valid endpoint")
            .connect()
            .await
            .expect("connect to the replica")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A codec sending `Bytes` as they are and reading answers as bytes.
#[derive(Debug, Clone, Default)]
pub struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// Calls `method` of PlacementService with `body` as the request message's bytes.
pub async fn raw_unary(channel: Channel, method: &str, body: Bytes) -> Result<Bytes, Status> {
    let mut grpc = tonic::client::Grpc::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(format!("not ready: {e}")))?;
    let path = format!("/placement.v1.PlacementService/{method}")
        .parse()
        .expect("a valid path");
    grpc.unary(tonic::Request::new(body), path, RawCodec)
        .await
        .map(tonic::Response::into_inner)
}

/// Appends a varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field `number` holding `payload`.
pub fn field(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    put_varint(&mut out, (u64::from(number) << 3) | 2);
    put_varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

/// `count` empty messages in the repeated field `number`: two bytes each on the wire.
pub fn empty_elements(number: u32, count: usize) -> Vec<u8> {
    let tag = ((number << 3) | 2) as u8;
    assert!(number < 16, "one-byte tags only");
    let mut out = Vec::with_capacity(2 * count);
    for _ in 0..count {
        out.push(tag);
        out.push(0);
    }
    out
}
