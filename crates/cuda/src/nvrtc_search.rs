//! Where NVRTC is looked for, and in which order the files found are tried; also where what
//! it compiles is cached ([`NvrtcSearch::cubin_cache`]).
//!
//! NVRTC comes in several shapes: a CUDA toolkit (`/usr/local/cuda/lib64/libnvrtc.so.13`, or
//! wherever `CUDA_PATH` / `CUDA_HOME` point), a distribution package on the loader's default
//! path, or the `nvidia-cuda-nvrtc` Python wheels (`site-packages/nvidia/cuda_nvrtc/lib` for
//! CUDA 12, `site-packages/nvidia/cu13/lib` for CUDA 13). Each major version has its own file
//! name (`libnvrtc.so.12`, `libnvrtc.so.13`), and the unversioned `libnvrtc.so` only exists
//! where a toolkit's development files are installed.
//!
//! The search lists every `libnvrtc.so` and `libnvrtc.so.<major>` in these folders, in this
//! order: `LD_LIBRARY_PATH`, the toolkits (`CUDA_PATH`, `CUDA_HOME`, `/usr/local/cuda`, then
//! `/usr/local/cuda-*` newest first), the wheels of the active virtual or conda environment,
//! the user's and the system's Python; then the bare names, which the system loader resolves
//! through its own paths. The candidates are then ranked by major version: the driver's own
//! first (its NVRTC emits code that driver accepts), then older majors newest first, then
//! newer ones; without a driver, newest first. Files of the same rank keep the search order.
//! This crate reads no environment: the program does, once ([`NvrtcSearch::from_variables`]
//! with its variables; the `rinfer` binary at start), and hands the search down in
//! [`LoadOptions`](crate::LoadOptions). [`NvrtcSearch::default`] is the search without
//! variables: the usual install folders, then the system loader (which honours
//! `LD_LIBRARY_PATH` itself). The ranking is a pure function of a [`NvrtcSearch`], so tests
//! can give it any folders.

use std::ffi::OsString;

use std::path::{Path, PathBuf};

/// The NVRTC major versions whose file names are tried through the system loader.
const KNOWN_MAJORS: [u32; 2] = [13, 12];

/// Where to look for NVRTC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcSearch {
    /// Library folders searched first (`LD_LIBRARY_PATH`).
    pub library_path: Vec<PathBuf>,
    /// CUDA toolkit roots, each searched in `lib64` and `lib`.
    pub toolkits: Vec<PathBuf>,
    /// Python installation prefixes (a venv, conda, `~/.local`, `/usr/local`, `/usr`), each
    /// searched for the NVRTC wheels in its `lib/python3*/{site,dist}-packages`.
    pub python_prefixes: Vec<PathBuf>,
    /// Where compiled kernel modules are cached ([`crate::cubin_cache`]): `$RINFER_HOME/kernels`,
    /// else `$HOME/.cache/rinfer/kernels`; `None` caches nothing.
    pub cubin_cache: Option<PathBuf>,
}

/// One file to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcCandidate {
    /// A path, or a bare file name for the system loader to resolve.
    pub path: PathBuf,
    /// The major version its name says (`None` for the unversioned `libnvrtc.so`).
    pub major: Option<u32>,
}

impl Default for NvrtcSearch {
    /// The search without environment variables: the usual toolkit and Python folders.
    fn default() -> Self {
        Self::from_variables(|_| None)
    }
}

impl NvrtcSearch {
    /// The search for a process whose environment variable `name` is `variable(name)`:
    /// `LD_LIBRARY_PATH`, the toolkit named by `CUDA_PATH` and `CUDA_HOME` and the usual
    /// install folders, and the Python prefixes of `VIRTUAL_ENV`, `CONDA_PREFIX`, `~/.local`
    /// (under `HOME`) and the system; the kernel cache under `RINFER_HOME`, else under `HOME`
    /// (`~/.cache/rinfer/kernels`, beside the model cache).
    pub fn from_variables(variable: impl Fn(&str) -> Option<OsString>) -> Self {
        let var = |name: &str| variable(name).filter(|v| !v.is_empty());
        let library_path = var("LD_LIBRARY_PATH")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        let mut toolkits: Vec<PathBuf> = ["CUDA_PATH", "CUDA_HOME"]
            .into_iter()
            .filter_map(|name| var(name).map(PathBuf::from))
            .collect();
        toolkits.push(PathBuf::from("/usr/local/cuda"));
        toolkits.extend(versioned_toolkits(Path::new("/usr/local")));
        let mut python_prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
            .into_iter()
            .filter_map(|name| var(name).map(PathBuf::from))
            .collect();
        if let Some(home) = var("HOME") {
            python_prefixes.push(PathBuf::from(home).join(".local"));
        }
        python_prefixes.extend(["/usr/local", "/usr"].map(PathBuf::from));
        let rinfer_home = var("RINFER_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cache/rinfer")));
        Self {
            library_path,
            toolkits,
            python_prefixes,
            cubin_cache: rinfer_home.map(|home| home.join("kernels")),
        }
    }

    /// The folders searched, in order.
    pub fn folders(&self) -> Vec<PathBuf> {
        let mut folders = self.library_path.clone();
        for root in &self.toolkits {
            folders.extend(["lib64", "lib"].map(|lib| root.join(lib)));
        }
        for prefix in &self.python_prefixes {
            for packages in python_package_dirs(prefix) {
                folders.push(packages.join("nvidia/cu13/lib"));
                folders.push(packages.join("nvidia/cuda_nvrtc/lib"));
            }
        }
        let mut unique = Vec::new();
        for folder in folders {
            if !unique.contains(&folder) {
                unique.push(folder);
            }
        }
        unique
    }

    /// Every NVRTC file found, then the bare names, ranked for a driver of CUDA major version
    /// `driver_major` (`None`: no driver, newest first).
    pub fn candidates(&self, driver_major: Option<u32>) -> Vec<NvrtcCandidate> {
        let mut found: Vec<NvrtcCandidate> = Vec::new();
        let mut seen: Vec<PathBuf> = Vec::new();
        for folder in self.folders() {
            for (path, major) in nvrtc_files(&folder) {
                let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                if !seen.contains(&real) {
                    seen.push(real);
                    found.push(NvrtcCandidate { path, major });
                }
            }
        }
        for major in KNOWN_MAJORS {
            found.push(NvrtcCandidate {
                path: PathBuf::from(format!("libnvrtc.so.{major}")),
                major: Some(major),
            });
        }
        found.push(NvrtcCandidate {
            path: PathBuf::from("libnvrtc.so"),
            major: None,
        });
        rank(&mut found, driver_major);
        found
    }
}

/// Sorts `candidates` (stably) by how well their major version suits the driver.
pub fn rank(candidates: &mut [NvrtcCandidate], driver_major: Option<u32>) {
    candidates.sort_by_key(|c| match (c.major, driver_major) {
        (Some(major), Some(driver)) if major == driver => (0, 0),
        (Some(major), Some(driver)) if major < driver => (1, u32::MAX - major),
        (Some(major), Some(_)) => (2, major),
        (Some(major), None) => (1, u32::MAX - major),
        // An unversioned file's version is only known once loaded: after every named one.
        (None, _) => (3, 0),
    });
}

/// The `libnvrtc.so` and `libnvrtc.so.<major>` files of `folder`, with the major version their
/// names say, in name order (other NVRTC files, such as `libnvrtc-builtins` or the fully
/// versioned `libnvrtc.so.12.9.86` behind the major's link, are not entry points).
fn nvrtc_files(folder: &Path) -> Vec<(PathBuf, Option<u32>)> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<(PathBuf, Option<u32>)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let major = major_of(&name)?;
            Some((entry.path(), major))
        })
        .collect();
    files.sort();
    files
}

/// `Some(None)` for `libnvrtc.so`, `Some(Some(m))` for `libnvrtc.so.<m>`, `None` otherwise.
fn major_of(name: &str) -> Option<Option<u32>> {
    let rest = name.strip_prefix("libnvrtc.so")?;
    if rest.is_empty() {
        return Some(None);
    }
    let digits = rest.strip_prefix('.')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Some)
}

/// `prefix/lib/python3*/site-packages` and `dist-packages`, and Debian's
/// `prefix/lib/python3/dist-packages`, newest Python first.
fn python_package_dirs(prefix: &Path) -> Vec<PathBuf> {
    let lib = prefix.join("lib");
    let Ok(entries) = std::fs::read_dir(&lib) else {
        return Vec::new();
    };
    let mut pythons: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.starts_with("python3"))
        .collect();
    pythons.sort_by_key(|name| std::cmp::Reverse(python_minor(name)));
    pythons
        .iter()
        .flat_map(|p| ["site-packages", "dist-packages"].map(|d| lib.join(p).join(d)))
        .collect()
}

/// 11 for `python3.11`, 0 for `python3`.
fn python_minor(name: &str) -> u32 {
    name.strip_prefix("python3.")
        .and_then(|minor| minor.parse().ok())
        .unwrap_or(0)
}

/// `/usr/local/cuda-13.0`, `/usr/local/cuda-12.9`, …: the versioned toolkits, newest first.
fn versioned_toolkits(parent: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut toolkits: Vec<((u32, u32), PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (major, minor) = name.strip_prefix("cuda-")?.split_once('.')?;
            Some(((major.parse().ok()?, minor.parse().ok()?), e.path()))
        })
        .collect();
    toolkits.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    toolkits.into_iter().map(|(_, path)| path).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(path: &str, major: Option<u32>) -> NvrtcCandidate {
        NvrtcCandidate {
            path: PathBuf::from(path),
            major,
        }
    }

    #[test]
    fn only_the_entry_points_are_candidates() {
        assert_eq!(major_of("libnvrtc.so"), Some(None));
        assert_eq!(major_of("libnvrtc.so.13"), Some(Some(13)));
        assert_eq!(major_of("libnvrtc.so.12"), Some(Some(12)));
        for other in [
            "libnvrtc.so.12.9.86",
            "libnvrtc.alt.so.12",
            "libnvrtc-builtins.so.12.9",
            "libnvrtc.so.",
            "libnvrtc.sox",
            "libcudart.so.12",
        ] {
            assert_eq!(major_of(other), None, "{other}");
        }
    }

    #[test]
    fn the_drivers_major_comes_first_then_older_then_newer() {
        let mut c = vec![
            candidate("a/libnvrtc.so", None),
            candidate("a/libnvrtc.so.12", Some(12)),
            candidate("b/libnvrtc.so.14", Some(14)),
            candidate("b/libnvrtc.so.11", Some(11)),
            candidate("b/libnvrtc.so.13", Some(13)),
            candidate("c/libnvrtc.so.13", Some(13)),
        ];
        rank(&mut c, Some(13));
        let order: Vec<_> = c.iter().map(|c| c.path.to_str().unwrap()).collect();
        assert_eq!(
            order,
            [
                "b/libnvrtc.so.13",
                "c/libnvrtc.so.13",
                "a/libnvrtc.so.12",
                "b/libnvrtc.so.11",
                "b/libnvrtc.so.14",
                "a/libnvrtc.so",
            ]
        );
        rank(&mut c, None);
        assert_eq!(c[0].major, Some(14));
        assert_eq!(c[5].major, None);
    }

    #[test]
    fn wheels_toolkits_and_the_library_path_are_searched_in_order() {
        let root = std::env::temp_dir().join(format!("rinfer-nvrtc-search-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let touch = |rel: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, b"").unwrap();
        };
        touch("ld/libnvrtc.so.12");
        touch("cuda/lib64/libnvrtc.so.13");
        touch("cuda/lib64/libnvrtc.so.13.0.48");
        touch("cuda/lib64/libnvrtc-builtins.so.13.0");
        touch("venv/lib/python3.11/site-packages/nvidia/cu13/lib/libnvrtc.so.13");
        touch("venv/lib/python3.11/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12");
        touch("venv/lib/python3.11/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.alt.so.12");
        let search = NvrtcSearch {
            library_path: vec![root.join("ld")],
            toolkits: vec![root.join("cuda"), root.join("missing")],
            python_prefixes: vec![root.join("venv")],
            cubin_cache: None,
        };
        let found = search.candidates(Some(12));
        let shown: Vec<String> = found
            .iter()
            .map(|c| {
                let p = c.path.strip_prefix(&root).unwrap_or(&c.path);
                p.display().to_string()
            })
            .collect();
        assert_eq!(
            shown,
            [
                "ld/libnvrtc.so.12",
                "venv/lib/python3.11/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
                "libnvrtc.so.12",
                "cuda/lib64/libnvrtc.so.13",
                "venv/lib/python3.11/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
                "libnvrtc.so.13",
                "libnvrtc.so",
            ]
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_kernel_cache_is_under_rinfer_home_else_home() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            NvrtcSearch::from_variables(move |name| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| OsString::from(v))
            })
            .cubin_cache
        };
        assert_eq!(
            vars(&[("RINFER_HOME", "/r"), ("HOME", "/h")]),
            Some(PathBuf::from("/r/kernels"))
        );
        assert_eq!(
            vars(&[("RINFER_HOME", ""), ("HOME", "/h")]),
            Some(PathBuf::from("/h/.cache/rinfer/kernels"))
        );
        assert_eq!(vars(&[]), None);
    }
}
