//! `rinfer pull` and `--model org/repo:QUANT` against a mock hub on 127.0.0.1: the file chosen,
//! the cache's layout, resuming a cut download with a range request, refusing a wrong
//! checksum without leaving anything behind, split models, and models resolved from the cache
//! without the network.

mod cli_support;
mod pull_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::Duration;

use cli_support::{failure, fixtures, succeeded};
use pull_support::{COMMIT, MockHub, hex};
use sha2::{Digest, Sha256};

/// `rinfer ARGS` with its cache in `home` and the hub at `endpoint`, run to its end.
fn rinfer(home: &Path, endpoint: &str, args: &[&str]) -> Output {
    command(home, endpoint, args)
        .output()
        .expect("the rinfer binary runs")
}

/// A hub whose `org/model` holds `data` as its `model-Q4_K_M.gguf`, and `data`.
fn hub_with_model(data: Vec<u8>) -> (MockHub, Vec<u8>) {
    let hub = MockHub::start();
    hub.add("org/model", "model-Q4_K_M.gguf", data.clone());
    (hub, data)
}

/// `rinfer pull MODEL` against `hub`.
fn pull(home: &Path, hub: &MockHub, model: &str) -> Output {
    rinfer(home, &hub.endpoint(), &["pull", model])
}

fn command(home: &Path, endpoint: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rinfer"));
    command
        .args(args)
        .env("RINFER_HOME", home)
        .env("HF_ENDPOINT", endpoint)
        .env("HF_TOKEN", "hf_test_token")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy");
    command
}

fn stdout(out: &Output) -> String {
    succeeded(out);
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `len` bytes that differ from file to file (by `seed`).
fn contents(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn repo_dir(home: &Path, repo: &str) -> PathBuf {
    home.join("hub")
        .join(format!("models--{}", repo.replace('/', "--")))
}

/// Every file name under `dir`, recursively (empty when it does not exist).
fn all_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && !path.is_symlink() {
                out.extend(all_files(&path));
            } else {
                out.push(path.display().to_string());
            }
        }
    }
    out
}

#[test]
fn pull_picks_q4_k_m_by_default_and_caches_it_in_the_hub_layout() {
    let hub = MockHub::start();
    let q4 = contents(1, 5000);
    let q8 = contents(2, 7000);
    hub.add("org/model", "README.md", b"# a model".to_vec());
    hub.add("org/model", "model-Q8_0.gguf", q8.clone());
    hub.add("org/model", "mmproj-model-F16.gguf", contents(3, 100));
    hub.add("org/model", "model-Q4_K_M.gguf", q4.clone());
    hub.add("org/model", "model-IQ4_XS.gguf", contents(4, 100));
    let home = tempfile::tempdir().unwrap();

    let out = pull(home.path(), &hub, "org/model");
    let path = PathBuf::from(stdout(&out).trim());
    let repo = repo_dir(home.path(), "org/model");
    assert_eq!(
        path,
        repo.join("snapshots")
            .join(COMMIT)
            .join("model-Q4_K_M.gguf")
    );
    assert_eq!(fs::read(&path).unwrap(), q4);
    assert!(path.symlink_metadata().unwrap().is_symlink());
    let sha = hex(&Sha256::digest(&q4));
    assert_eq!(fs::read(repo.join("blobs").join(&sha)).unwrap(), q4);
    assert_eq!(fs::read_to_string(repo.join("refs/main")).unwrap(), COMMIT);
    // Only the chosen file was downloaded; the token went with every request to the hub.
    let seen = hub.take_seen();
    let downloads: Vec<_> = seen.iter().filter(|s| s.is_download()).collect();
    assert_eq!(downloads.len(), 1, "{seen:?}");
    assert!(downloads[0].target.ends_with("/model-Q4_K_M.gguf"));
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some("Bearer hf_test_token")),
        "{seen:?}"
    );
    // The listing came in pages (five files, three a page).
    assert!(
        seen.iter().any(|s| s.target.contains("cursor=3")),
        "{seen:?}"
    );

    // An explicit tag picks its file, case-insensitively; the first stays.
    let out = pull(home.path(), &hub, "org/model:q8_0");
    assert_eq!(fs::read(stdout(&out).trim()).unwrap(), q8);
    assert_eq!(fs::read(&path).unwrap(), q4);
    assert!(
        !all_files(&repo).iter().any(|f| f.ends_with(".incomplete")),
        "{:?}",
        all_files(&repo)
    );
}

#[test]
fn a_cut_connection_is_resumed_with_a_range_request() {
    let (hub, data) = hub_with_model(contents(5, 20_000));
    hub.cut_downloads(6000, 1);
    let home = tempfile::tempdir().unwrap();

    let out = pull(home.path(), &hub, "org/model");
    assert_eq!(fs::read(stdout(&out).trim()).unwrap(), data);
    let ranges: Vec<_> = hub
        .take_seen()
        .into_iter()
        .filter(|s| s.target.contains("/resolve/") || s.is_download())
        .map(|s| s.range)
        .collect();
    // The first try asked for the whole file; the second for the rest, through the redirect.
    assert_eq!(ranges.first(), Some(&None), "{ranges:?}");
    assert!(
        ranges.iter().any(|r| r.as_deref() == Some("bytes=6000-")),
        "{ranges:?}"
    );
}

#[test]
fn a_server_that_ignores_the_range_restarts_the_file_from_its_first_byte() {
    let (hub, data) = hub_with_model(contents(8, 20_000));
    hub.cut_downloads(7000, 1);
    hub.ignore_ranges();
    let home = tempfile::tempdir().unwrap();

    let out = pull(home.path(), &hub, "org/model");
    assert_eq!(fs::read(stdout(&out).trim()).unwrap(), data);
    let ranges: Vec<_> = hub.take_downloads().into_iter().map(|s| s.range).collect();
    assert_eq!(ranges, [None, Some("bytes=7000-".to_owned())]);
}

#[test]
fn a_pull_that_keeps_breaking_keeps_its_bytes_and_the_next_pull_resumes_them() {
    let (hub, data) = hub_with_model(contents(6, 30_000));
    hub.cut_downloads(12_000, usize::MAX);
    let home = tempfile::tempdir().unwrap();

    let error = failure(&pull(home.path(), &hub, "org/model"));
    assert!(
        error.contains("run `rinfer pull` again to resume"),
        "{error}"
    );
    let sha = hex(&Sha256::digest(&data));
    let partial = repo_dir(home.path(), "org/model")
        .join("blobs")
        .join(format!("{sha}.incomplete"));
    assert_eq!(fs::read(&partial).unwrap(), data[..12_000]);
    assert!(
        !repo_dir(home.path(), "org/model")
            .join("refs/main")
            .exists()
    );

    hub.cut_downloads(0, 0);
    hub.take_seen();
    let out = pull(home.path(), &hub, "org/model");
    assert_eq!(fs::read(stdout(&out).trim()).unwrap(), data);
    let downloads = hub.take_downloads();
    assert_eq!(downloads.len(), 1, "{downloads:?}");
    assert_eq!(downloads[0].range.as_deref(), Some("bytes=12000-"));
    assert!(!partial.exists());
}

#[test]
fn a_wrong_checksum_is_refused_and_nothing_of_the_file_is_cached() {
    let hub = MockHub::start();
    let data = contents(7, 9000);
    let wrong = hex(&Sha256::digest(b"something else"));
    hub.add_publishing("org/model", "model-Q4_K_M.gguf", data, wrong.clone());
    let home = tempfile::tempdir().unwrap();

    let error = failure(&pull(home.path(), &hub, "org/model"));
    assert!(
        error.contains("model-Q4_K_M.gguf failed its checksum"),
        "{error}"
    );
    assert!(error.contains(&wrong), "{error}");
    assert!(error.contains("nothing of it is cached"), "{error}");
    assert_eq!(
        error.lines().filter(|l| l.contains("error")).count(),
        1,
        "{error}"
    );
    let files = all_files(&repo_dir(home.path(), "org/model"));
    assert!(files.is_empty(), "{files:?}");

    // A model argument naming it fails the same way, and runs nothing.
    let out = rinfer(
        home.path(),
        &hub.endpoint(),
        &["inspect", "org/model:Q4_K_M"],
    );
    assert!(failure(&out).contains("failed its checksum"));
    assert!(all_files(&repo_dir(home.path(), "org/model")).is_empty());
}

#[test]
fn every_shard_of_a_split_model_is_pulled_and_the_first_is_the_model() {
    let hub = MockHub::start();
    let shards: Vec<Vec<u8>> = (0..3)
        .map(|i| contents(10 + i, 4000 + 100 * i as usize))
        .collect();
    for (i, shard) in shards.iter().enumerate() {
        let path = format!("F16/model-F16-{:05}-of-00003.gguf", i + 1);
        hub.add("org/big", &path, shard.clone());
    }
    hub.add("org/big", "model-Q4_K_M.gguf", contents(20, 100));
    let home = tempfile::tempdir().unwrap();

    let out = pull(home.path(), &hub, "org/big:F16");
    let first = PathBuf::from(stdout(&out).trim());
    assert!(
        first.ends_with("F16/model-F16-00001-of-00003.gguf"),
        "{first:?}"
    );
    for (i, shard) in shards.iter().enumerate() {
        let path = first
            .parent()
            .unwrap()
            .join(format!("model-F16-{:05}-of-00003.gguf", i + 1));
        assert_eq!(&fs::read(path).unwrap(), shard);
    }
    assert_eq!(hub.take_downloads().len(), 3);
}

#[test]
fn a_hub_model_argument_is_pulled_on_first_use_then_read_from_the_cache_offline() {
    let hub = MockHub::start();
    let vocab = fs::read(fixtures().join("tokenizer/ggml-vocab-gpt-2.gguf")).unwrap();
    hub.add("org/vocab", "vocab-Q8_0.gguf", vocab);
    let home = tempfile::tempdir().unwrap();
    let args = [
        "tokenize",
        "--model",
        "org/vocab:Q8_0",
        "Hello world",
        "--json",
    ];

    let out = rinfer(home.path(), &hub.endpoint(), &args);
    let first = stdout(&out);
    assert!(stderr(&out).contains("org/vocab:Q8_0 is not cached: pulling it"));

    // No hub at all now: the cache answers.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let out = rinfer(home.path(), &dead, &args);
    assert_eq!(stdout(&out), first);
    assert!(!stderr(&out).contains("pulling"));
    let tokens: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert!(!tokens["tokens"].as_array().unwrap().is_empty());

    // The same for a positional model path.
    let out = rinfer(home.path(), &dead, &["inspect", "org/vocab:Q8_0", "--json"]);
    let info: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(info.is_object());
    // A quantisation never pulled is not in the cache, and the dead hub says so.
    let out = rinfer(home.path(), &dead, &["inspect", "org/vocab:Q4_0"]);
    let error = failure(&out);
    assert!(error.contains("cannot reach"), "{error}");
}

#[test]
fn a_missing_quantisation_or_repository_is_a_clear_error() {
    let hub = MockHub::start();
    hub.add("org/model", "model-Q4_K_M.gguf", contents(30, 100));
    hub.add("org/model", "model-Q8_0.gguf", contents(31, 100));
    let home = tempfile::tempdir().unwrap();

    let out = pull(home.path(), &hub, "org/model:Q5_K_M");
    let error = failure(&out);
    assert!(
        error.contains("no GGUF file of quantisation Q5_K_M"),
        "{error}"
    );
    assert!(error.contains("model-Q8_0.gguf"), "{error}");

    let out = pull(home.path(), &hub, "org/nothing");
    let error = failure(&out);
    assert!(error.contains("404: Repository not found"), "{error}");
    assert!(error.contains("HF_TOKEN"), "{error}");

    let out = pull(home.path(), &hub, "not a repo");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_second_process_pulling_the_same_file_waits_for_the_first() {
    let (hub, data) = hub_with_model(contents(40, 10_000));
    let home = tempfile::tempdir().unwrap();
    let sha = hex(&Sha256::digest(&data));
    let lock_path = home
        .path()
        .join("hub/.locks/models--org--model")
        .join(format!("{sha}.lock"));
    fs::create_dir_all(lock_path.parent().unwrap()).unwrap();
    // This test plays the first process: it holds the download's lock.
    let lock = fs::File::create(&lock_path).unwrap();
    lock.lock().unwrap();

    let mut second = command(home.path(), &hub.endpoint(), &["pull", "org/model"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(1500));
    assert!(
        second.try_wait().unwrap().is_none(),
        "the second pull did not wait"
    );
    assert!(
        hub.take_downloads().is_empty(),
        "the second pull downloaded while the first held the lock"
    );

    lock.unlock().unwrap();
    let out = second.wait_with_output().unwrap();
    assert_eq!(fs::read(stdout(&out).trim()).unwrap(), data);
    assert!(stderr(&out).contains("waiting for another process downloading it"));
}
