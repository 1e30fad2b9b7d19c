//! Scaling out as docs/DEPLOYMENT.md shows: two `rinfer serve` replicas behind nginx with the
//! config file of docs/deployment/nginx.conf, exercised on loopback. Skipped, with a message,
//! where nginx is not installed.

mod serve_support;

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use serve_support::{Server, request, tiny_model, try_request};

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

#[test]
fn replicas_behind_nginx_share_the_load() {
    let Some(nginx) = nginx() else {
        eprintln!("SKIPPED: nginx is not installed; the load-balancer test needs it");
        return;
    };
    let model = tiny_model();
    let args = ["--model", model.as_str(), "--ctx", "256", "--threads", "1"];
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
    let _proxy = Nginx(
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
    let served: Vec<f64> = replicas
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
        .collect();
    assert_eq!(served.iter().sum::<f64>(), 24.0, "{served:?}");
    assert!(
        served.iter().all(|&n| n > 0.0),
        "one replica got nothing: {served:?}"
    );
}
