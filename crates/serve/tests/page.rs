//! The chat page at `/`: served without a key, self-contained, and — in headless Chromium
//! driven over WebDriver — it asks for the key of a server that requires one, shows the
//! model's name, streams an answer to a typed message, and stops it on the stop button.
//!
//! The browser test needs Debian's `chromium` and `chromium-driver`; it installs them with
//! apt-get when missing, and skips with a message where they cannot be installed.

mod support;

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rinfer_serve::{ApiKeys, ServeConfig};
use serde_json::{Value, json};
use support::{Server, config, tiny_model};

const KEY: &str = "sk-page-test";

/// `config` with [`KEY`] as its one API key.
fn keyed(mut config: ServeConfig) -> ServeConfig {
    config.api_keys = ApiKeys::new([KEY]).unwrap();
    config
}

#[test]
fn the_page_is_served_without_a_key_and_loads_nothing_from_elsewhere() {
    let mut config = config(&tiny_model(), 512);
    config.engine.threads = Some(2);
    let s = Server::start(keyed(config));
    let r = s.get("/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let csp = r.header("content-security-policy").unwrap();
    assert!(csp.contains("connect-src 'self'") && csp.contains("default-src 'none'"));
    let page = r.text();
    assert!(page.contains("/v1/chat/completions") && page.contains("id=\"stop\""));
    for remote in ["http://", "https://", "//cdn"] {
        assert!(!page.contains(remote), "the page refers to {remote}");
    }
}

/// `chromium` and `chromedriver`, installed with apt-get when missing; `None` (and a message)
/// where they cannot be.
fn chromium() -> Option<(String, String)> {
    let find = |names: &[&str]| {
        names.iter().find_map(|n| {
            let out = Command::new("which").arg(n).output().ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
    };
    let browsers = ["chromium", "chromium-browser"];
    if find(&browsers).is_none() || find(&["chromedriver"]).is_none() {
        let apt = |args: &[&str]| {
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let install = ["install", "-y", "-q", "chromium", "chromium-driver"];
        // A fresh machine may have no package lists yet.
        let installed = apt(&install) || (apt(&["update", "-q"]) && apt(&install));
        if !installed {
            eprintln!(
                "SKIPPED: chromium and chromium-driver are missing and apt-get could not install them"
            );
            return None;
        }
    }
    Some((find(&browsers)?, find(&["chromedriver"])?))
}

/// A chromedriver process, killed when dropped.
struct Driver {
    child: Child,
    addr: SocketAddr,
    session: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            self.call("DELETE", &path, &json!({}));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    fn start(browser: &str, driver: &str) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut driver = Self {
            child,
            addr,
            session: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !Self::is_up(addr) {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": browser,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
            }
        }}});
        let session = driver.call("POST", "/session", &capabilities);
        driver.session = session["sessionId"].as_str().unwrap().to_string();
        driver
    }

    /// A WebDriver command; returns its `value`. (chromedriver keeps connections open even
    /// when asked to close them: the answer is read by its length.)
    fn call(&self, method: &str, path: &str, body: &Value) -> Value {
        let body = body.to_string();
        let mut stream = TcpStream::connect(self.addr).expect("chromedriver answers");
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        support::send_head(&mut stream, method, path, body.len()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let r = support::read_one_response(&mut BufReader::new(stream))
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        assert_eq!(r.status, 200, "{method} {path}: {}", r.text());
        r.json()["value"].clone()
    }

    fn is_up(addr: SocketAddr) -> bool {
        TcpStream::connect(addr).is_ok()
    }

    fn session_call(&self, method: &str, path: &str, body: &Value) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    fn script(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            &json!({"script": script, "args": []}),
        )
    }

    fn element(&self, css: &str) -> String {
        let found = self.session_call(
            "POST",
            "/element",
            &json!({"using": "css selector", "value": css}),
        );
        found
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap()
            .to_string()
    }

    fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.session_call(
            "POST",
            &format!("/element/{id}/value"),
            &json!({"text": text}),
        );
    }

    fn click(&self, css: &str) {
        let id = self.element(css);
        self.session_call("POST", &format!("/element/{id}/click"), &json!({}));
    }

    /// Waits (up to `seconds`) for `script` to return a truthy value, and returns it.
    fn wait_for(&self, script: &str, seconds: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            let value = self.script(script);
            if !matches!(value, Value::Null | Value::Bool(false)) && value != json!("") {
                return value;
            }
            assert!(Instant::now() < deadline, "timed out waiting for: {script}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn in_chromium_the_page_asks_for_the_key_streams_an_answer_and_stops_it() {
    let Some((browser, driver)) = chromium() else {
        return;
    };
    let model = support::default_model().display().to_string();
    let s = Server::start(keyed(config(&model, 2048)));
    let d = Driver::start(&browser, &driver);
    d.session_call(
        "POST",
        "/url",
        &json!({"url": format!("http://{}/", s.addr)}),
    );
    // The server answered 401: the page asks for the key.
    d.wait_for(
        "return getComputedStyle(document.getElementById('keybox')).display !== 'none'",
        20,
    );
    d.type_into("#key", KEY);
    d.click("#savekey");
    let name = d.wait_for(
        "const t = document.getElementById('model').textContent; return t === '…' ? '' : t",
        20,
    );
    assert_eq!(name, "gemma-3-270m-q4_k_m");
    // A long answer, so that it is still streaming when stop is pressed.
    d.script("document.getElementById('max_tokens').value = '1500'; return true");
    d.type_into("#input", "Write a long story about a lighthouse keeper.");
    d.click("#send");
    let first = d.wait_for(
        "const a = document.querySelector('.assistant span'); return a ? a.textContent : ''",
        60,
    );
    assert!(!first.as_str().unwrap().is_empty());
    d.click("#stop");
    d.wait_for("return document.querySelector('.stopped') !== null", 20);
    let idle = d.script(
        "return !document.getElementById('send').disabled && document.getElementById('stop').disabled",
    );
    assert_eq!(idle, json!(true));
    let answer = d.script("return document.querySelector('.assistant span').textContent");
    assert!(
        answer.as_str().unwrap().len() >= first.as_str().unwrap().len(),
        "the streamed answer shrank"
    );
}
