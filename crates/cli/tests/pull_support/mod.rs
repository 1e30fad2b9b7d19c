//! A mock Hugging Face hub on 127.0.0.1 that answers the requests `rinfer pull` makes as the
//! hub does: the revision and tree APIs (the tree paged three entries at a time through
//! `Link` headers), and `resolve/` downloads redirected to a "CDN" path that honours `Range`.
//! It can cut a download at a byte, publish a wrong SHA-256, and records every request.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::json;
use sha2::{Digest, Sha256};

/// The commit every mock repository is at.
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
/// Tree entries per listing page.
const PAGE: usize = 3;

/// One request the hub received.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Path and query.
    pub target: String,
    /// The `Range` header.
    pub range: Option<String>,
    /// The `Authorization` header.
    pub authorization: Option<String>,
}

struct File {
    contents: Vec<u8>,
    published_sha256: String,
}

#[derive(Default)]
struct State {
    /// repo → path → file.
    repos: BTreeMap<String, BTreeMap<String, File>>,
    /// Downloads stop after this byte of the file (its absolute offset) and the connection is
    /// closed, this many more times.
    cut: Option<(u64, usize)>,
    /// Downloads answer 200 with the whole file, whatever range was asked for.
    ignore_ranges: bool,
    seen: Vec<Seen>,
}

/// The mock hub; it serves until the test process ends.
pub struct MockHub {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl MockHub {
    /// A hub with no repositories.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&shared);
                thread::spawn(move || serve(stream, &state));
            }
        });
        Self { addr, state }
    }

    /// `http://127.0.0.1:PORT`, for `HF_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds `path` to `repo` with its true SHA-256 published.
    pub fn add(&self, repo: &str, path: &str, contents: Vec<u8>) {
        let sha = hex(&Sha256::digest(&contents));
        self.add_publishing(repo, path, contents, sha);
    }

    /// Adds `path` to `repo`, publishing `sha256` as its digest.
    pub fn add_publishing(&self, repo: &str, path: &str, contents: Vec<u8>, sha256: String) {
        let file = File {
            contents,
            published_sha256: sha256,
        };
        let mut state = self.state.lock().unwrap();
        state
            .repos
            .entry(repo.into())
            .or_default()
            .insert(path.into(), file);
    }

    /// Cuts the next `times` downloads after byte `at` of the file.
    pub fn cut_downloads(&self, at: u64, times: usize) {
        self.state.lock().unwrap().cut = Some((at, times));
    }

    /// Answers every download with the whole file, as a server without range support does.
    pub fn ignore_ranges(&self) {
        self.state.lock().unwrap().ignore_ranges = true;
    }

    /// Every request so far, and forgets them.
    pub fn take_seen(&self) -> Vec<Seen> {
        std::mem::take(&mut self.state.lock().unwrap().seen)
    }

    /// The downloads of file contents (the requests to the CDN) so far, and forgets every
    /// request.
    pub fn take_downloads(&self) -> Vec<Seen> {
        let mut seen = self.take_seen();
        seen.retain(Seen::is_download);
        seen
    }
}

impl Seen {
    /// Whether this request downloads a file's contents (from the CDN the hub redirects to).
    pub fn is_download(&self) -> bool {
        self.target.starts_with("/cdn/")
    }
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let (mut range, mut authorization) = (None, None);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "range" => range = Some(value.trim().to_owned()),
                "authorization" => authorization = Some(value.trim().to_owned()),
                _ => {}
            }
        }
    }
    let seen = Seen {
        target: target.clone(),
        range: range.clone(),
        authorization,
    };
    let mut state = state.lock().unwrap();
    state.seen.push(seen);
    let mut out = stream;
    respond(&mut out, &mut state, &target, range.as_deref());
    let _ = out.flush();
    let _ = out.shutdown(Shutdown::Both);
}

fn respond(out: &mut TcpStream, state: &mut State, target: &str, range: Option<&str>) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let parts: Vec<&str> = path.trim_start_matches('/').splitn(6, '/').collect();
    match parts.as_slice() {
        ["api", "models", org, name, "revision", "main"] => {
            let repo = format!("{org}/{name}");
            if state.repos.contains_key(&repo) {
                send_json(out, 200, &json!({ "id": repo, "sha": COMMIT }), None);
            } else {
                send_json(out, 404, &json!({ "error": "Repository not found" }), None);
            }
        }
        ["api", "models", org, name, "tree", rest] => {
            let repo = format!("{org}/{name}");
            let Some(files) = state.repos.get(&repo).filter(|_| *rest == COMMIT) else {
                return send_json(out, 404, &json!({ "error": "Revision not found" }), None);
            };
            let cursor: usize = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("cursor="))
                .map_or(0, |c| c.parse().unwrap());
            let entries: Vec<_> = files
                .iter()
                .skip(cursor)
                .take(PAGE)
                .map(|(path, file)| {
                    json!({
                        "type": "file",
                        "oid": "ffffffffffffffffffffffffffffffffffffffff",
                        "size": file.contents.len(),
                        "path": path,
                        "lfs": {
                            "oid": file.published_sha256,
                            "size": file.contents.len(),
                            "pointerSize": 134,
                        },
                    })
                })
                .collect();
            let link = (cursor + PAGE < files.len()).then(|| {
                format!(
                    "<http://{}/api/models/{repo}/tree/{COMMIT}?recursive=true&cursor={}>; rel=\"next\"",
                    out.local_addr().unwrap(),
                    cursor + PAGE
                )
            });
            send_json(out, 200, &json!(entries), link);
        }
        [org, name, "resolve", commit, rest @ ..] if *commit == COMMIT => {
            let file = rest.join("/");
            let location = format!("/cdn/{org}/{name}/{file}");
            let _ = write!(
                out,
                "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\
                 Connection: close\r\n\r\n"
            );
        }
        ["cdn", org, name, rest @ ..] => {
            let repo = format!("{org}/{name}");
            let file = rest.join("/");
            let Some(file) = state.repos.get(&repo).and_then(|r| r.get(&file)) else {
                return send_json(out, 404, &json!({ "error": "Entry not found" }), None);
            };
            let size = file.contents.len() as u64;
            let range = range.filter(|_| !state.ignore_ranges);
            let start: u64 = range
                .and_then(|r| r.strip_prefix("bytes="))
                .and_then(|r| r.strip_suffix('-'))
                .map_or(0, |s| s.parse().unwrap());
            let mut end = size;
            if let Some((at, times)) = state.cut
                && times > 0
            {
                end = at.clamp(start, size);
                state.cut = Some((at, times - 1));
            }
            let head = if range.is_some() {
                format!(
                    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{}/{size}\r\n",
                    size - 1
                )
            } else {
                "HTTP/1.1 200 OK\r\n".to_owned()
            };
            let _ = write!(
                out,
                "{head}Content-Length: {}\r\nAccept-Ranges: bytes\r\nConnection: close\r\n\r\n",
                size - start
            );
            let _ = out.write_all(&file.contents[start as usize..end as usize]);
        }
        _ => send_json(out, 404, &json!({ "error": "Not found" }), None),
    }
}

fn send_json(out: &mut TcpStream, status: u16, body: &serde_json::Value, link: Option<String>) {
    let body = body.to_string();
    let link = link.map(|l| format!("Link: {l}\r\n")).unwrap_or_default();
    let _ = write!(
        out,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{link}\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}
