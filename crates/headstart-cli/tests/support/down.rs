//! A provider that is down: an HTTP server answering every request with one error status, as a provider in an
//! outage does, on a thread of its own that stops with the test process.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A server answering `status` to every request, counting them.
pub struct DownProvider {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
}

impl DownProvider {
    /// Starts the server on a free port of 127.0.0.1.
    pub fn start(status: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let counted = Arc::clone(&counted);
                std::thread::spawn(move || answer(stream, status, &counted));
            }
        });
        DownProvider { addr, requests }
    }

    /// The base URL of path `path` (`/v1` for an OpenAI-compatible client).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// How many requests it refused.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Reads each request (headers and body, so that closing the connection does not reset it) and answers `status`.
fn answer(stream: TcpStream, status: u16, requests: &AtomicUsize) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        let mut first = true;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" && !first {
                break;
            }
            first = false;
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length.min(1 << 20)];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        requests.fetch_add(1, Ordering::SeqCst);
        let text = format!(r#"{{"error":{{"message":"the provider is down ({status})","type":"server_error"}}}}"#);
        let response = format!(
            "HTTP/1.1 {status} Down\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
