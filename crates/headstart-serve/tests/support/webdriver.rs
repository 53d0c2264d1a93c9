//! Just enough of the W3C WebDriver protocol to drive headless Chromium through chromedriver: a session, going
//! to a URL, finding and clicking an element, running a script, a screenshot. Plain HTTP/1.1 on a socket, one
//! request a connection: the few endpoints the browser test uses did not justify a WebDriver client crate
//! (fantoccini's `webdriver` dependency brings a second ICU and some twenty crates).

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The key W3C gives an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver, killed with its browser (its process group) when dropped.
pub struct Driver {
    child: Child,
    addr: SocketAddr,
}

impl Driver {
    /// Starts `chromedriver` on a free port and waits until it answers.
    pub async fn start(chromedriver: &Path) -> Driver {
        use std::os::unix::process::CommandExt as _;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start chromedriver");
        let driver = Driver {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(status) = driver.call("GET", "/status", None).await {
                if status["ready"] == true {
                    return driver;
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not answer within 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A browser session of `chromium` with `args`.
    pub async fn session(&self, chromium: &Path, args: &[String]) -> Browser<'_> {
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let answer = self
            .call("POST", "/session", Some(capabilities))
            .await
            .expect("a browser session");
        let id = answer["sessionId"].as_str().expect("a session id").to_owned();
        Browser { driver: self, id }
    }

    /// One command; its `value`, or the WebDriver error as text.
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let body = body.map(|body| body.to_string()).unwrap_or_default();
        let mut stream = TcpStream::connect(self.addr).await.map_err(|error| error.to_string())?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            self.addr,
            body.len()
        );
        stream
            .write_all(head.as_bytes())
            .await
            .map_err(|error| error.to_string())?;
        stream
            .write_all(body.as_bytes())
            .await
            .map_err(|error| error.to_string())?;
        // chromedriver keeps the connection open whatever the request says: read the head, then its length.
        let (head, payload) = tokio::time::timeout(Duration::from_secs(120), read_answer(&mut stream))
            .await
            .map_err(|_| format!("{method} {path}: no answer within 120 s"))??;
        let json: Value = serde_json::from_str(&payload).map_err(|error| format!("{error}: {payload}"))?;
        if head.starts_with("HTTP/1.1 200") {
            Ok(json["value"].clone())
        } else {
            Err(json["value"].to_string())
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: chromedriver and the browser processes it started.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

/// A browser session.
pub struct Browser<'d> {
    driver: &'d Driver,
    id: String,
}

impl Browser<'_> {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        self.driver
            .call(method, &format!("/session/{}{path}", self.id), body)
            .await
    }

    /// Opens `url`.
    pub async fn go(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url})))
            .await
            .expect("navigate");
    }

    /// Clicks the first element `selector` matches.
    pub async fn click(&self, selector: &str) {
        let found = self
            .call(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": selector})),
            )
            .await
            .unwrap_or_else(|error| panic!("no {selector}: {error}"));
        let element = found[ELEMENT].as_str().expect("an element reference");
        self.call("POST", &format!("/element/{element}/click"), Some(json!({})))
            .await
            .expect("click");
    }

    /// Runs `script` (a function body; `arguments[0]` is `argument`) and returns its value.
    pub async fn script(&self, script: &str, argument: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": [argument]})),
        )
        .await
        .expect("script")
    }

    /// The text of the first element `selector` matches, `None` while there is none.
    pub async fn text(&self, selector: &str) -> Option<String> {
        let script = "var found = document.querySelector(arguments[0]); return found ? found.textContent : null;";
        self.script(script, selector).await.as_str().map(str::to_owned)
    }

    /// Waits (polling, up to `patience`) for an element `selector` matches, and returns its text.
    pub async fn wait_for(&self, selector: &str, patience: Duration) -> String {
        let deadline = Instant::now() + patience;
        loop {
            if let Some(text) = self.text(selector).await {
                return text;
            }
            assert!(Instant::now() < deadline, "no {selector} within {patience:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A screenshot of the window, saved as PNG at `path`.
    pub async fn screenshot(&self, path: &Path) -> PathBuf {
        let encoded = self.call("GET", "/screenshot", None).await.expect("screenshot");
        let png = decode_base64(encoded.as_str().expect("base64 text"));
        std::fs::write(path, png).expect("write the screenshot");
        path.to_owned()
    }

    /// Ends the session (the browser exits).
    pub async fn quit(self) {
        let _ = self.call("DELETE", "", None).await;
    }
}

/// One HTTP answer: its head and its body (of the head's `Content-Length`).
async fn read_answer(stream: &mut TcpStream) -> Result<(String, String), String> {
    let mut buffer = Vec::new();
    let mut chunk = vec![0u8; 65_536];
    loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .ok_or_else(|| format!("no Content-Length in {head}"))?;
            while buffer.len() < end + 4 + length {
                let read = stream.read(&mut chunk).await.map_err(|error| error.to_string())?;
                if read == 0 {
                    return Err("the answer was cut short".to_owned());
                }
                buffer.extend_from_slice(&chunk[..read]);
            }
            let body = String::from_utf8_lossy(&buffer[end + 4..end + 4 + length]).into_owned();
            return Ok((head, body));
        }
        let read = stream.read(&mut chunk).await.map_err(|error| error.to_string())?;
        if read == 0 {
            return Err("no HTTP answer".to_owned());
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}

/// Standard base64 (the screenshot's encoding).
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| *c != b'=' && !c.is_ascii_whitespace())
        .map(value)
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let bits = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, d)| acc | u32::from(*d) << (18 - 6 * i));
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}
