//! A TCP proxy between chromium and the test server (127.0.0.1:0) that can cut every
//! connection it carries, as a flaky network or a restarted load balancer does, while the server
//! keeps running. It keeps what the browser sent, so a test can read the requests' headers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

#[derive(Debug, Default)]
struct Shared {
    /// Per connection, the bytes the browser sent.
    sent: Vec<Vec<u8>>,
    open: Vec<AbortHandle>,
    /// While set, connections are closed as soon as their request head is read.
    refusing: bool,
    /// When each refused request came, and its head (lowercased).
    refused: Vec<(Instant, String)>,
}

#[derive(Debug)]
pub struct Proxy {
    pub addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: AbortHandle,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

impl Proxy {
    /// Accepts on `listener` and forwards each connection to `target`.
    pub fn start(listener: TcpListener, target: SocketAddr) -> Self {
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let accepting = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if accepting.lock().unwrap().refusing {
                    tokio::spawn(refuse(client, Arc::clone(&accepting)));
                    continue;
                }
                let mut s = accepting.lock().unwrap();
                let slot = s.sent.len();
                s.sent.push(Vec::new());
                let pipe = tokio::spawn(pipe(client, target, Arc::clone(&accepting), slot));
                s.open.push(pipe.abort_handle());
            }
        })
        .abort_handle();
        Self { addr, shared, task }
    }

    /// Closes every connection open now (both sides); how many were still open.
    pub fn cut(&self) -> usize {
        let open = std::mem::take(&mut self.shared.lock().unwrap().open);
        let live = open.iter().filter(|h| !h.is_finished()).count();
        for h in open {
            h.abort();
        }
        live
    }

    /// Refuses new connections (closes them once their request is read) or serves them again.
    pub fn refuse(&self, on: bool) {
        self.shared.lock().unwrap().refusing = on;
    }

    /// When the refused requests for the event stream of `conversation` came.
    pub fn refused_event_requests(&self, conversation: &str) -> Vec<Instant> {
        let start = format!("get /api/v1/conversations/{conversation}/events");
        let s = self.shared.lock().unwrap();
        s.refused
            .iter()
            .filter(|(_, head)| head.starts_with(&start))
            .map(|(at, _)| *at)
            .collect()
    }

    /// The `Last-Event-ID` of each request for the event stream of `conversation`, in the order
    /// the connections were made (`None` for a request without one).
    pub fn event_requests(&self, conversation: &str) -> Vec<Option<String>> {
        let start = format!("get /api/v1/conversations/{conversation}/events");
        let s = self.shared.lock().unwrap();
        let mut found = Vec::new();
        for bytes in &s.sent {
            let text = String::from_utf8_lossy(bytes).to_ascii_lowercase();
            for (at, _) in text.match_indices(&start) {
                let head = text[at..].split("\r\n\r\n").next().unwrap_or_default();
                found.push(
                    head.lines()
                        .find_map(|l| l.strip_prefix("last-event-id:"))
                        .map(|v| v.trim().to_owned()),
                );
            }
        }
        found
    }
}

async fn pipe(client: TcpStream, target: SocketAddr, shared: Arc<Mutex<Shared>>, slot: usize) {
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let up = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from_client.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            shared.lock().unwrap().sent[slot].extend_from_slice(&buf[..n]);
            if to_server.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = to_server.shutdown().await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
        let _ = to_client.shutdown().await;
    };
    tokio::join!(up, down);
}

async fn refuse(mut client: TcpStream, shared: Arc<Mutex<Shared>>) {
    let at = Instant::now();
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    shared.lock().unwrap().refused.push((at, head));
}
