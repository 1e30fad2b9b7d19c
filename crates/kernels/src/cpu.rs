//! CPU feature detection, done once per process.

use std::sync::OnceLock;

/// The instruction-set level a kernel table is built for, in increasing capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable scalar Rust; the reference every other level is tested against.
    Scalar,
    /// x86-64 with AVX2, FMA and F16C.
    Avx2,
    /// x86-64 with AVX-512 F, BW, VL and VNNI on top of [`Isa::Avx2`].
    Avx512,
}

impl Isa {
    /// The name shown in logs (`"scalar"`, `"avx2"`, `"avx512"`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}

/// The best instruction-set level this CPU supports, detected on first call and cached.
pub fn detected() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Isa {
    use std::is_x86_feature_detected as has;
    let avx2 = has!("avx2") && has!("fma") && has!("f16c");
    let avx512 = has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512vnni");
    match (avx2, avx512) {
        (true, true) => Isa::Avx512,
        (true, false) => Isa::Avx2,
        _ => Isa::Scalar,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Isa {
    Isa::Scalar
}
