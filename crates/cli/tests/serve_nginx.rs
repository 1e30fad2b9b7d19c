//! Scaling out as docs/DEPLOYMENT.md shows: two `rinfer serve` replicas behind nginx with the
//! config file of docs/deployment/nginx.conf, exercised on loopback: load sharing, and one
//! conversation (`X-Session-Id`) kept on one replica so that its prefix cache hits. Skipped,
//! with a message, where nginx is not installed.

mod serve_support;

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use serve_support::{Server, request, request_with_headers, tiny_model, try_request};

fn nginx() -> Option<String> {
    let out = Command::new("sh")
        .args(["-c", "command -v nginx || ls /usr/sbin/nginx"])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !path.is_empty()).then_some(path)
}

/// The nginx master process; stopped with SIGTERM (which also ends its workers) when dropped.
struct Nginx(std::process::Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Two replicas behind nginx running docs/deployment/nginx.conf, and nginx's address; `None`
/// (with a message) where nginx is not installed.
fn replicas_behind_nginx(extra: &[&str]) -> Option<([Server; 2], Nginx, SocketAddr)> {
    let Some(nginx) = nginx() else {
        eprintln!("SKIPPED: nginx is not installed; the load-balancer test needs it");
        return None;
    };
    let model = tiny_model();
    let mut args = vec!["--model", model.as_str(), "--ctx", "256", "--threads", "1"];
    args.extend_from_slice(extra);
    let replicas = [Server::start(&args), Server::start(&args)];
    let port = free_port();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/deployment/nginx.conf");
    let config = std::fs::read_to_string(docs)
        .expect("docs/deployment/nginx.conf")
        .replace("127.0.0.1:8081", &replicas[0].addr.to_string())
        .replace("127.0.0.1:8082", &replicas[1].addr.to_string())
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nginx-{port}"));
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config).unwrap();
    // Running as root, nginx would hand its workers to `nobody`, who cannot write here.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    let globals = format!(
        "daemon off; pid {}; error_log {};{}",
        dir.join("nginx.pid").display(),
        dir.join("logs/error.log").display(),
        if root { " user root;" } else { "" }
    );
    let dir_arg = dir.display().to_string();
    let conf_arg = conf.display().to_string();
    let proxy = Nginx(
        Command::new(nginx)
            .args(["-p", &dir_arg, "-c", &conf_arg, "-g", &globals])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts"),
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    while !try_request(addr, "GET", "/health", b"").is_ok_and(|r| r.status == 200) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "nginx never answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some((replicas, proxy, addr))
}

/// Successful completions each replica has answered.
fn served(replicas: &[Server]) -> Vec<f64> {
    replicas
        .iter()
        .map(|r| {
            r.get("/metrics")
                .text()
                .lines()
                .find(|l| {
                    l.starts_with(
                        "rinfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"}",
                    )
                })
                .and_then(|l| l.rsplit(' ').next()?.parse().ok())
                .unwrap_or(0.0)
        })
        .collect()
}

#[test]
fn replicas_behind_nginx_share_the_load() {
    let Some((replicas, _proxy, addr)) = replicas_behind_nginx(&[]) else {
        return;
    };
    let results: Vec<(u16, bool)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..24)
            .map(|i| {
                scope.spawn(move || {
                    let stream = i % 2 == 0;
                    let body = json!({"prompt": format!("Request {i}"), "max_tokens": 8, "stream": stream});
                    let r = request(addr, "POST", "/v1/completions", body.to_string().as_bytes());
                    let complete = !stream || r.events().last().map(String::as_str) == Some("[DONE]");
                    (r.status, complete)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        results
            .iter()
            .all(|&(status, complete)| status == 200 && complete),
        "{results:?}"
    );
    let served = served(&replicas);
    assert_eq!(served.iter().sum::<f64>(), 24.0, "{served:?}");
    assert!(
        served.iter().all(|&n| n > 0.0),
        "one replica got nothing: {served:?}"
    );
}

#[test]
fn one_conversation_stays_on_one_replica_and_keeps_its_cache_hits() {
    let Some((replicas, _proxy, addr)) = replicas_behind_nginx(&["--parallel", "1"]) else {
        return;
    };
    for session in 0..6 {
        let before = served(&replicas);
        let header = format!("X-Session-Id: conversation-{session}");
        // Each conversation its own text from the first token after BOS.
        let prompt = format!(
            "{session} is the number of the log the keeper of the lighthouse wrote every \
             evening: the wind, the sea, the ships that passed and the lamp's oil."
        );
        for turn in 0..3 {
            let body = json!({"prompt": prompt, "max_tokens": 2, "temperature": 0});
            let r = request_with_headers(
                addr,
                "POST",
                "/v1/completions",
                "localhost",
                &[&header, "Content-Type: application/json"],
                body.to_string().as_bytes(),
            );
            assert_eq!(r.status, 200, "{}", r.text());
            let usage = &r.json()["usage"];
            let prompt_tokens = usage["prompt_tokens"].as_u64().unwrap();
            let cached = usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap();
            // Resent, it finds the whole prompt but the last token in its replica's cache.
            let expected = if turn == 0 {
                0..2
            } else {
                prompt_tokens - 1..prompt_tokens
            };
            assert!(
                expected.contains(&cached),
                "session {session} turn {turn}: {cached} of {prompt_tokens} cached"
            );
        }
        let after = served(&replicas);
        let grew: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        assert!(
            grew.contains(&3.0) && grew.contains(&0.0),
            "session {session} was split: {grew:?}"
        );
    }
}
