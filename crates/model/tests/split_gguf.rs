//! A model split by llama.cpp's `llama-gguf-split` (shards written here from a fixture, with
//! its `split.*` keys) loads from any shard and computes the logits of the whole file bit for
//! bit; a split with a shard missing, a wrong count or a tensor twice is refused with an error
//! that names the problem.

mod common;

use std::path::{Path, PathBuf};

use common::{batched_logits, fixtures};
use rinfer_formats::gguf::{
    GgufFile, GgufWriter, MetadataValue, SPLIT_COUNT_KEY, SPLIT_NO_KEY, SPLIT_TENSORS_COUNT_KEY,
    shard_path,
};
use rinfer_model::{LoadedModel, Model, ModelError};

const FIXTURE: &str = "llama-tiny-q8_0";
const PROMPT: [u32; 5] = [1, 17, 42, 7, 99];

fn whole() -> GgufFile {
    GgufFile::open(fixtures().join(format!("models/{FIXTURE}.gguf"))).unwrap()
}

/// Writes one shard per group of tensor indices into `dir` as `model-0000I-of-0000N.gguf`,
/// the model's metadata in the first, and `keys(i)` as shard `i`'s (`split.no`,
/// `split.count`, `split.tensors.count`); returns the shards' paths.
fn write_split(
    dir: &Path,
    groups: &[Vec<usize>],
    keys: impl Fn(usize) -> (u16, u16, i32),
) -> Vec<PathBuf> {
    let file = whole();
    let tensors: Vec<_> = file.tensors().collect();
    let prefix = dir.join("model").to_str().unwrap().to_owned();
    let count = groups.len() as u32;
    groups
        .iter()
        .enumerate()
        .map(|(i, group)| {
            let mut w = if i == 0 {
                GgufWriter::with_metadata_of(&file).unwrap()
            } else {
                GgufWriter::new()
            };
            let (no, n, total) = keys(i);
            w.add_metadata(SPLIT_NO_KEY, MetadataValue::U16(no))
                .unwrap();
            w.add_metadata(SPLIT_COUNT_KEY, MetadataValue::U16(n))
                .unwrap();
            w.add_metadata(SPLIT_TENSORS_COUNT_KEY, MetadataValue::I32(total))
                .unwrap();
            for &t in group {
                let t = &tensors[t];
                w.add_tensor(t.name(), t.ty(), t.dims(), t.data.to_vec())
                    .unwrap();
            }
            let path = shard_path(&prefix, i as u32 + 1, count);
            w.write_file(&path).unwrap();
            path
        })
        .collect()
}

/// The fixture's tensors in `n` consecutive groups.
fn thirds(n: usize) -> (Vec<Vec<usize>>, i32) {
    let total = whole().tensors().len();
    let per = total.div_ceil(n);
    let groups = (0..n)
        .map(|i| (i * per..((i + 1) * per).min(total)).collect())
        .collect();
    (groups, total as i32)
}

fn good_split(dir: &Path) -> Vec<PathBuf> {
    let (groups, total) = thirds(3);
    write_split(dir, &groups, |i| (i as u16, 3, total))
}

fn open_error(path: &Path) -> String {
    match Model::open_gguf(path) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e @ ModelError::Gguf(_)) => e.to_string(),
        Err(e) => panic!("not a file error: {e}"),
    }
}

#[test]
fn a_split_model_gives_the_logits_of_the_whole_file_from_any_shard() {
    let (single, _) = Model::open_gguf(fixtures().join(format!("models/{FIXTURE}.gguf"))).unwrap();
    let expected = batched_logits(&single, &PROMPT);
    let dir = tempfile::tempdir().unwrap();
    let shards = good_split(dir.path());
    for path in &shards {
        let (model, first) = Model::open_gguf(path).unwrap();
        assert!(first.metadata().get("general.architecture").is_some());
        let got = batched_logits(&model, &PROMPT);
        assert!(
            got.iter()
                .map(|v| v.to_bits())
                .eq(expected.iter().map(|v| v.to_bits())),
            "logits through {} differ from the whole file's",
            path.display()
        );
    }
    // The tokenizer and chat template come from the first shard's metadata.
    let loaded = LoadedModel::open(&shards[2]).unwrap();
    assert_eq!(batched_logits(&loaded.model, &PROMPT), expected);
}

#[test]
fn a_first_shard_holding_only_metadata_loads() {
    // llama-gguf-split --no-tensor-first-split: shard 1 has the metadata and no tensors.
    let (mut groups, total) = thirds(2);
    groups.insert(0, Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let shards = write_split(dir.path(), &groups, |i| (i as u16, 3, total));
    let (single, _) = Model::open_gguf(fixtures().join(format!("models/{FIXTURE}.gguf"))).unwrap();
    let (split, _) = Model::open_gguf(&shards[0]).unwrap();
    assert_eq!(
        batched_logits(&split, &PROMPT),
        batched_logits(&single, &PROMPT)
    );
}

#[test]
fn a_missing_shard_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let shards = good_split(dir.path());
    std::fs::remove_file(&shards[1]).unwrap();
    let err = open_error(&shards[0]);
    assert!(err.contains("shard 2 of 3"), "{err}");
    assert!(err.contains("model-00002-of-00003.gguf"), "{err}");
}

#[test]
fn a_shard_with_another_split_count_is_refused() {
    let (groups, total) = thirds(3);
    let dir = tempfile::tempdir().unwrap();
    let shards = write_split(dir.path(), &groups, |i| {
        (i as u16, if i == 2 { 4 } else { 3 }, total)
    });
    let err = open_error(&shards[0]);
    assert!(err.contains("split.count is 4, expected 3"), "{err}");
    assert!(err.contains("model-00003-of-00003.gguf"), "{err}");
    // Opened from that shard, its count disagrees with its own name.
    let err = open_error(&shards[2]);
    assert!(err.contains("split.count is 4, expected 3"), "{err}");
}

#[test]
fn a_shard_out_of_place_is_refused() {
    let (groups, total) = thirds(3);
    let dir = tempfile::tempdir().unwrap();
    let shards = write_split(dir.path(), &groups, |i| ([0, 2, 1][i], 3, total));
    let err = open_error(&shards[0]);
    assert!(err.contains("split.no is 2, expected 1"), "{err}");
}

#[test]
fn a_tensor_in_two_shards_is_refused() {
    let (mut groups, total) = thirds(3);
    let repeated = groups[0][0];
    groups[1].push(repeated);
    let dir = tempfile::tempdir().unwrap();
    let shards = write_split(dir.path(), &groups, |i| (i as u16, 3, total));
    let err = open_error(&shards[0]);
    let name = whole().tensors().nth(repeated).unwrap().name().to_owned();
    assert!(
        err.contains(&format!("tensor {name:?} is in both")),
        "{err}"
    );
    assert!(err.contains("model-00002-of-00003.gguf"), "{err}");
}

#[test]
fn shards_holding_fewer_tensors_than_announced_are_refused() {
    let (mut groups, total) = thirds(3);
    groups[2].pop();
    let dir = tempfile::tempdir().unwrap();
    let shards = write_split(dir.path(), &groups, |i| (i as u16, 3, total));
    let err = open_error(&shards[0]);
    assert!(
        err.contains(&format!(
            "hold {} tensors, but split.tensors.count says {total}",
            total - 1
        )),
        "{err}"
    );
}
