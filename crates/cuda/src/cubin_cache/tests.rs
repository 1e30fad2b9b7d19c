//! The cache with a fake compiler that counts its calls.

use std::cell::Cell;
use std::path::PathBuf;

use super::*;

/// A fresh, empty folder for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("rinfer-cubin-cache-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn key(arch: (u32, u32), nvrtc: (i32, i32)) -> CubinKey {
    CubinKey::new("q4_k", "extern \"C\" __global__ void k() {}", arch, nvrtc)
}

/// Compiles to `cubin`, counting the calls in `calls`.
fn fake<'a>(calls: &'a Cell<usize>, cubin: &'a [u8]) -> impl FnOnce() -> Result<Vec<u8>, ()> + 'a {
    move || {
        calls.set(calls.get() + 1);
        Ok(cubin.to_vec())
    }
}

#[test]
fn a_miss_compiles_and_stores_then_a_hit_does_not_compile() {
    let cache = CubinCache::new(temp_dir("hit"));
    let calls = Cell::new(0);
    let k = key((9, 0), (12, 8));
    let first = cache
        .get_or_compile(&k, fake(&calls, b"cubin one"))
        .unwrap();
    assert_eq!(first, (b"cubin one".to_vec(), CubinOrigin::Compiled));
    let second = cache.get_or_compile(&k, fake(&calls, b"other")).unwrap();
    assert_eq!(second, (b"cubin one".to_vec(), CubinOrigin::Cached));
    assert_eq!(calls.get(), 1);
    let leftovers: Vec<_> = fs::read_dir(cache.dir()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    fs::remove_dir_all(cache.dir()).unwrap();
}

#[test]
fn a_corrupt_entry_is_recompiled_and_overwritten() {
    let cache = CubinCache::new(temp_dir("corrupt"));
    let k = key((8, 6), (12, 8));
    cache.store(&k, b"the real cubin").unwrap();
    let entry = cache.path(&k);
    let intact = fs::read(&entry).unwrap();
    let mut flipped = intact.clone();
    *flipped.last_mut().unwrap() ^= 1;
    let corruptions = [
        Vec::new(),
        intact[..HEADER - 1].to_vec(),
        intact[..intact.len() - 1].to_vec(),
        flipped,
        b"garbage that is long enough to hold a header, but not ours".to_vec(),
    ];
    for corrupt in corruptions {
        fs::write(&entry, &corrupt).unwrap();
        let calls = Cell::new(0);
        let got = cache
            .get_or_compile(&k, fake(&calls, b"the real cubin"))
            .unwrap();
        assert_eq!(got.1, CubinOrigin::Compiled, "{corrupt:?}");
        assert_eq!(calls.get(), 1);
        assert_eq!(fs::read(&entry).unwrap(), intact, "the entry is rewritten");
    }
    fs::remove_dir_all(cache.dir()).unwrap();
}

#[test]
fn another_architecture_nvrtc_or_source_is_another_entry() {
    let base = key((9, 0), (12, 8));
    let others = [
        key((8, 9), (12, 8)),
        key((9, 0), (13, 0)),
        CubinKey::new(
            "q4_k",
            "extern \"C\" __global__ void k2() {}",
            (9, 0),
            (12, 8),
        ),
        CubinKey::new(
            "q6_k",
            "extern \"C\" __global__ void k() {}",
            (9, 0),
            (12, 8),
        ),
    ];
    for other in &others {
        assert_ne!(base.file_name(), other.file_name());
    }
    let cache = CubinCache::new(temp_dir("keys"));
    let calls = Cell::new(0);
    cache.get_or_compile(&base, fake(&calls, b"base")).unwrap();
    for other in &others {
        let (cubin, origin) = cache.get_or_compile(other, fake(&calls, b"other")).unwrap();
        assert_eq!(
            (cubin.as_slice(), origin),
            (&b"other"[..], CubinOrigin::Compiled)
        );
    }
    assert_eq!(calls.get(), 1 + others.len());
    fs::remove_dir_all(cache.dir()).unwrap();
}

#[test]
fn a_failed_compile_stores_nothing_and_an_unwritable_folder_still_compiles() {
    let cache = CubinCache::new(temp_dir("failed"));
    let k = key((9, 0), (12, 8));
    assert_eq!(
        cache.get_or_compile(&k, || Err::<Vec<u8>, _>("bad")),
        Err("bad")
    );
    assert!(cache.load(&k).is_none());
    // A file where the folder should be: the cache cannot be written.
    fs::write(cache.dir(), b"not a folder").unwrap();
    let calls = Cell::new(0);
    let got = cache.get_or_compile(&k, fake(&calls, b"cubin")).unwrap();
    assert_eq!(got, (b"cubin".to_vec(), CubinOrigin::Compiled));
    fs::remove_file(cache.dir()).unwrap();
}

#[test]
fn the_source_hash_is_fnv1a_128() {
    assert_eq!(fnv1a_128(b""), 0x6c62272e07bb014262b821756295c58d);
    assert_eq!(fnv1a_128(b"a"), 0xd228cb696f1a8caf78912b704e4a8964);
}
