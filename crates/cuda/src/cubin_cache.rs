//! The on-disk cache of compiled kernel modules (CUBINs), so that a model load compiles a
//! module only the first time.
//!
//! An entry is keyed by the module's name, the target architecture, NVRTC's version and a
//! 128-bit FNV-1a hash of the compile options and the module's source text ([`CubinKey`]); any
//! change to the kernels, the options, the GPU or the compiler therefore misses. The cache
//! folder is `$RINFER_HOME/kernels`
//! (`~/.cache/rinfer/kernels` by default), resolved by the program from its environment like
//! the model cache ([`NvrtcSearch::from_variables`](crate::nvrtc_search::NvrtcSearch)); without
//! one nothing is cached.
//!
//! An entry is a magic line, the payload's length and hash, then the CUBIN. It is written to
//! a temporary file in the same folder and renamed over the entry, so a reader never sees a
//! partial file. An entry that is unreadable, too short, of another format or whose hash does
//! not match is treated as absent: the module is compiled again and the entry overwritten.
//! [`CubinCache::get_or_compile`] says where the CUBIN came from, so that a caller whose
//! driver rejects a cached CUBIN can [`CubinCache::recompile`] it. Failing to write an entry
//! is not an error: the compiled CUBIN is still used.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The first bytes of every entry (format version 1).
const MAGIC: &[u8; 16] = b"rinfer cubin v1\n";
/// Magic, payload length (u64) and payload hash (u128), little-endian.
const HEADER: usize = MAGIC.len() + 8 + 16;

/// 128-bit FNV-1a: stable across Rust versions and platforms, unlike `std`'s hasher.
pub fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;
    bytes.iter().fold(OFFSET, |hash, &b| {
        (hash ^ u128::from(b)).wrapping_mul(PRIME)
    })
}

/// What identifies a compiled module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CubinKey {
    /// The module's name (`common`, `q4_k`).
    pub module: String,
    /// The compute capability compiled for.
    pub arch: (u32, u32),
    /// NVRTC's (major, minor) version.
    pub nvrtc: (i32, i32),
    /// The hash of the compile options and the module's source.
    pub source_hash: u128,
}

impl CubinKey {
    /// The key of `module`'s `source` compiled for `arch` by NVRTC `nvrtc` with
    /// [`crate::kernels::NVRTC_OPTIONS`].
    pub fn new(module: &str, source: &str, arch: (u32, u32), nvrtc: (i32, i32)) -> Self {
        Self {
            module: module.to_string(),
            arch,
            nvrtc,
            source_hash: fnv1a_128(
                crate::kernels::NVRTC_OPTIONS
                    .iter()
                    .flat_map(|o| [o.as_bytes(), b"\n"])
                    .chain([source.as_bytes()])
                    .flatten()
                    .copied()
                    .collect::<Vec<u8>>()
                    .as_slice(),
            ),
        }
    }

    /// The entry's file name: `q4_k-sm_90-nvrtc12.8-<hash>.cubin`.
    pub fn file_name(&self) -> String {
        format!(
            "{}-sm_{}{}-nvrtc{}.{}-{:032x}.cubin",
            self.module, self.arch.0, self.arch.1, self.nvrtc.0, self.nvrtc.1, self.source_hash
        )
    }
}

/// Where a CUBIN came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CubinOrigin {
    /// A valid cache entry.
    Cached,
    /// NVRTC, just now.
    Compiled,
}

/// The cache folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CubinCache {
    dir: PathBuf,
}

impl CubinCache {
    /// The cache in `dir` (created when the first entry is written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry's path.
    pub fn path(&self, key: &CubinKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// The CUBIN stored for `key`, if its entry is present and intact.
    pub fn load(&self, key: &CubinKey) -> Option<Vec<u8>> {
        decode(&fs::read(self.path(key)).ok()?)
    }

    /// Stores `cubin` for `key`: written to a temporary file, then renamed over the entry.
    pub fn store(&self, key: &CubinKey, cubin: &[u8]) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let path = self.path(key);
        let temp = self
            .dir
            .join(format!(".{}.{}.tmp", key.file_name(), std::process::id()));
        let written = (|| {
            let mut file = fs::File::create(&temp)?;
            file.write_all(&encode(cubin))?;
            file.sync_all()?;
            fs::rename(&temp, &path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }

    /// The cached CUBIN for `key`, or else `compile()`'s, stored for next time.
    pub fn get_or_compile<E>(
        &self,
        key: &CubinKey,
        compile: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<(Vec<u8>, CubinOrigin), E> {
        if let Some(cubin) = self.load(key) {
            return Ok((cubin, CubinOrigin::Cached));
        }
        self.recompile(key, compile)
            .map(|cubin| (cubin, CubinOrigin::Compiled))
    }

    /// `compile()`'s CUBIN, overwriting the entry for `key` (one the driver refused).
    pub fn recompile<E>(
        &self,
        key: &CubinKey,
        compile: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Vec<u8>, E> {
        let cubin = compile()?;
        // The cache only saves time: a folder that cannot be written costs a compile next time.
        let _ = self.store(key, &cubin);
        Ok(cubin)
    }
}

/// An entry's bytes for `cubin`.
fn encode(cubin: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER + cubin.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&fnv1a_128(cubin).to_le_bytes());
    bytes.extend_from_slice(cubin);
    bytes
}

/// The CUBIN of an entry's bytes, if the magic, length and hash all check.
fn decode(bytes: &[u8]) -> Option<Vec<u8>> {
    let (header, payload) = bytes.split_at_checked(HEADER)?;
    let (magic, rest) = header.split_at(MAGIC.len());
    let (len, hash) = rest.split_at(8);
    let len = u64::from_le_bytes(len.try_into().ok()?);
    let hash = u128::from_le_bytes(hash.try_into().ok()?);
    (magic == MAGIC
        && len == payload.len() as u64
        && !payload.is_empty()
        && hash == fnv1a_128(payload))
    .then(|| payload.to_vec())
}

#[cfg(test)]
mod tests;
