//! CPU feature detection, done once per process.

use std::sync::OnceLock;

/// The instruction-set level a kernel table is built for, in increasing capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable scalar Rust; the reference every other level is tested against.
    Scalar,
    /// x86-64 with AVX2, FMA and F16C.
    Avx2,
}

impl Isa {
    /// The name shown in logs (`"scalar"`, `"avx2"`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
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
    if std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("f16c")
    {
        Isa::Avx2
    } else {
        Isa::Scalar
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Isa {
    Isa::Scalar
}
