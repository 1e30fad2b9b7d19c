//! Split GGUF models, as llama.cpp's `llama-gguf-split` writes them.
//!
//! A model split into N shards is the files `PREFIX-00001-of-0000N.gguf` …
//! `PREFIX-0000N-of-0000N.gguf` in one directory. Each shard is a complete GGUF file holding
//! some of the model's tensors (the first may hold none); only the first holds the model's
//! metadata. Every shard carries three keys:
//!
//! - `split.no` (u16): the shard's index, from 0;
//! - `split.count` (u16): N;
//! - `split.tensors.count` (i32): how many tensors the whole model has.
//!
//! [`open_shards`] opens any shard, finds its siblings by name, and accepts them only when
//! every shard is there, each one's `split.no` is its place in the naming and its
//! `split.count` is N, the shards together hold exactly `split.tensors.count` tensors (the
//! first shard's) and no tensor name is in two shards. A file without `split.count`, or with a
//! count of 0 or 1, is a whole model on its own, whatever its name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{GgufError, Result};

use super::file::GgufFile;
use super::metadata::Metadata;

/// The shard's index, from 0 (llama.cpp's `LLM_KV_SPLIT_NO`).
pub const SPLIT_NO_KEY: &str = "split.no";
/// How many shards the model has (`LLM_KV_SPLIT_COUNT`).
pub const SPLIT_COUNT_KEY: &str = "split.count";
/// How many tensors the whole model has (`LLM_KV_SPLIT_TENSORS_COUNT`).
pub const SPLIT_TENSORS_COUNT_KEY: &str = "split.tensors.count";

/// Digits of the shard numbers in a shard's name.
const SHARD_DIGITS: usize = 5;

/// Where a file sits in a split model, from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardName {
    /// The path up to `-NNNNN-of-NNNNN.gguf`.
    pub prefix: String,
    /// The shard's number, from 1.
    pub index: u32,
    /// How many shards the name says there are.
    pub count: u32,
}

impl ShardName {
    /// Reads `PREFIX-00002-of-00003.gguf`; `None` for any other name, or an impossible
    /// numbering (index 0 or past the count).
    pub fn parse(path: &Path) -> Option<Self> {
        let text = path.to_str()?;
        let stem = text.strip_suffix(".gguf")?;
        let (rest, count) = stem.rsplit_once("-of-")?;
        let (prefix, index) = rest.rsplit_once('-')?;
        let number = |digits: &str| {
            (digits.len() == SHARD_DIGITS && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| digits.parse::<u32>().ok())
                .flatten()
        };
        let (index, count) = (number(index)?, number(count)?);
        ((1..=count).contains(&index) && !prefix.is_empty()).then(|| Self {
            prefix: prefix.to_owned(),
            index,
            count,
        })
    }

    /// The path of shard `index` (from 1) of this model.
    pub fn sibling(&self, index: u32) -> PathBuf {
        shard_path(&self.prefix, index, self.count)
    }
}

/// `PREFIX-0000I-of-0000N.gguf`: the name `llama-gguf-split` gives shard `index` (from 1) of
/// `count`.
pub fn shard_path(prefix: &str, index: u32, count: u32) -> PathBuf {
    PathBuf::from(format!("{prefix}-{index:05}-of-{count:05}.gguf"))
}

/// `split.count` of a file, if it has one above 1.
fn split_count(meta: &Metadata) -> Result<Option<u32>> {
    if meta.get(SPLIT_COUNT_KEY).is_none() {
        return Ok(None);
    }
    let count = meta.get_u32(SPLIT_COUNT_KEY)?;
    Ok((count > 1).then_some(count))
}

/// The value of an integer key as text, or "missing".
fn shown(meta: &Metadata, key: &str) -> String {
    match meta.get(key) {
        None => "missing".to_owned(),
        Some(v) => v
            .as_i128()
            .map_or_else(|| format!("a {}", v.value_type().name()), |i| i.to_string()),
    }
}

/// Every shard of the model `path` belongs to, first shard first (so the first holds the
/// model's metadata); just the file itself when it is not split. See the module docs for what
/// is checked.
pub fn open_shards(path: impl AsRef<Path>) -> Result<Vec<GgufFile>> {
    let path = path.as_ref();
    let file = GgufFile::open(path)?;
    let Some(count) = split_count(file.metadata())? else {
        return Ok(vec![file]);
    };
    let Some(name) = ShardName::parse(path) else {
        let no = file.metadata().get_u32(SPLIT_NO_KEY).unwrap_or(0);
        return Err(GgufError::UnnamedShard {
            path: path.to_path_buf(),
            no: no.saturating_add(1),
            count,
        });
    };
    if name.count != count {
        return Err(GgufError::ShardMismatch {
            path: path.to_path_buf(),
            index: name.index,
            count: name.count,
            key: SPLIT_COUNT_KEY,
            found: count.to_string(),
            expected: name.count.to_string(),
        });
    }
    let mut given = Some(file);
    let mut shards = Vec::new();
    let mut paths = Vec::new();
    for index in 1..=count {
        let shard_path = name.sibling(index);
        let shard = if index == name.index {
            given.take().ok_or(GgufError::MissingShard {
                index,
                count,
                path: shard_path.clone(),
            })?
        } else {
            open_sibling(&shard_path, index, count)?
        };
        check_shard(&shard, &shard_path, index, count)?;
        shards.push(shard);
        paths.push(shard_path);
    }
    check_tensors(&shards, &paths, count)?;
    Ok(shards)
}

fn open_sibling(path: &Path, index: u32, count: u32) -> Result<GgufFile> {
    if !path.exists() {
        return Err(GgufError::MissingShard {
            index,
            count,
            path: path.to_path_buf(),
        });
    }
    GgufFile::open(path)
}

/// Checks that `shard`'s `split.no` and `split.count` place it at `index` of `count`.
fn check_shard(shard: &GgufFile, path: &Path, index: u32, count: u32) -> Result<()> {
    let meta = shard.metadata();
    let mismatch = |key: &'static str, expected: u32| GgufError::ShardMismatch {
        path: path.to_path_buf(),
        index,
        count,
        key,
        found: shown(meta, key),
        expected: expected.to_string(),
    };
    if meta.get_u32(SPLIT_COUNT_KEY).ok() != Some(count) {
        return Err(mismatch(SPLIT_COUNT_KEY, count));
    }
    if meta.get_u32(SPLIT_NO_KEY).ok() != Some(index - 1) {
        return Err(mismatch(SPLIT_NO_KEY, index - 1));
    }
    Ok(())
}

/// Checks that the shards hold `split.tensors.count` tensors, no name twice.
fn check_tensors(shards: &[GgufFile], paths: &[PathBuf], count: u32) -> Result<()> {
    let first = shards[0].metadata();
    let expected =
        first
            .get_u64(SPLIT_TENSORS_COUNT_KEY)
            .map_err(|_| GgufError::ShardMismatch {
                path: paths[0].clone(),
                index: 1,
                count,
                key: SPLIT_TENSORS_COUNT_KEY,
                found: shown(first, SPLIT_TENSORS_COUNT_KEY),
                expected: "the model's tensor count".to_owned(),
            })?;
    let mut holder: HashMap<&str, usize> = HashMap::new();
    for (i, shard) in shards.iter().enumerate() {
        for tensor in shard.tensors() {
            if let Some(&first) = holder.get(tensor.name()) {
                return Err(GgufError::DuplicateShardTensor {
                    tensor: tensor.name().to_owned(),
                    first: paths[first].clone(),
                    second: paths[i].clone(),
                });
            }
            holder.insert(tensor.name(), i);
        }
    }
    let found = holder.len() as u64;
    if found != expected {
        return Err(GgufError::ShardTensorCount {
            path: paths[0].clone(),
            count,
            found,
            expected,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{ShardName, shard_path};

    #[test]
    fn shard_names_round_trip_and_reject_impossible_numbers() {
        let name = ShardName::parse(Path::new("dir/m-Q8_0-00002-of-00003.gguf")).unwrap();
        assert_eq!(
            (name.prefix.as_str(), name.index, name.count),
            ("dir/m-Q8_0", 2, 3)
        );
        assert_eq!(name.sibling(3), Path::new("dir/m-Q8_0-00003-of-00003.gguf"));
        assert_eq!(shard_path("m", 1, 12), Path::new("m-00001-of-00012.gguf"));
        for bad in [
            "m-00000-of-00002.gguf",
            "m-00003-of-00002.gguf",
            "m-1-of-2.gguf",
            "m.gguf",
            "-00001-of-00002.gguf",
            "m-00001-of-00002.bin",
        ] {
            assert_eq!(ShardName::parse(Path::new(bad)), None, "{bad}");
        }
    }
}
