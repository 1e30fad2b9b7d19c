//! CPU feature detection, done once per process: the one place that chooses what this CPU
//! runs. Every kernel table ([`crate::Kernels`], its vector kernels, activation quantizers and
//! packed layouts) is built for an [`Isa`] level, and [`detected`] is the level they are built
//! for unless a caller asks for less.

use std::sync::OnceLock;

/// The instruction-set level a kernel table is built for, in increasing capability. The levels
/// are those of the architecture compiled for: a build never names another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable scalar Rust; the reference every other level is tested against.
    Scalar,
    /// x86-64 with AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 with AVX-512 F, BW and VL on top of [`Isa::Avx2`] (Skylake-SP class Xeons).
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// [`Isa::Avx512`] with VNNI, the byte and word dot-product instructions.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
    /// [`Isa::Avx512Vnni`] with Intel AMX (tile and int8 units), which Linux granted this process.
    #[cfg(target_arch = "x86_64")]
    Amx,
    /// AArch64 Advanced SIMD (NEON), which every AArch64 CPU has.
    #[cfg(target_arch = "aarch64")]
    Neon,
    /// [`Isa::Neon`] with the dot-product extension (`sdot`).
    #[cfg(target_arch = "aarch64")]
    Dotprod,
    /// [`Isa::Dotprod`] with the int8 matrix-multiply extension (`smmla`).
    #[cfg(target_arch = "aarch64")]
    I8mm,
}

impl Isa {
    /// Every level of this architecture, lowest first.
    #[cfg(target_arch = "x86_64")]
    pub const ALL: &'static [Isa] = &[
        Isa::Scalar,
        Isa::Avx2,
        Isa::Avx512,
        Isa::Avx512Vnni,
        Isa::Amx,
    ];
    /// Every level of this architecture, lowest first.
    #[cfg(target_arch = "aarch64")]
    pub const ALL: &'static [Isa] = &[Isa::Scalar, Isa::Neon, Isa::Dotprod, Isa::I8mm];
    /// Every level of this architecture, lowest first.
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    pub const ALL: &'static [Isa] = &[Isa::Scalar];

    /// The name shown in logs (`"scalar"`, `"avx2"`, `"avx512"`, `"avx512+vnni"`,
    /// `"avx512+vnni+amx"`, `"NEON"`, `"NEON + dotprod"`, `"NEON + dotprod + i8mm"`).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => "avx512",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => "avx512+vnni",
            #[cfg(target_arch = "x86_64")]
            Isa::Amx => "avx512+vnni+amx",
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => "NEON",
            #[cfg(target_arch = "aarch64")]
            Isa::Dotprod => "NEON + dotprod",
            #[cfg(target_arch = "aarch64")]
            Isa::I8mm => "NEON + dotprod + i8mm",
        }
    }

    /// Whether this level includes `other` (usable in constant tables).
    pub(crate) const fn includes(self, other: Isa) -> bool {
        self as u8 >= other as u8
    }
}

/// The best instruction-set level this CPU supports, detected on first call and cached.
pub fn detected() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(detect)
}

/// Whether this CPU runs the AVX-512 kernels (never one of another architecture).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    return detected() >= Isa::Avx512;
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Isa {
    use std::is_x86_feature_detected as has;
    let avx2 = has!("avx2") && has!("fma") && has!("f16c");
    let avx512 = has!("avx512f") && has!("avx512bw") && has!("avx512vl");
    let vnni = avx512 && has!("avx512vnni");
    match (avx2, avx512, vnni) {
        (true, _, true) if cpu_has_amx_int8() && tile_data_permitted() => Isa::Amx,
        (true, _, true) => Isa::Avx512Vnni,
        (true, true, false) => Isa::Avx512,
        (true, false, _) => Isa::Avx2,
        _ => Isa::Scalar,
    }
}

/// Whether the CPU has the AMX tile and int8 units.
#[cfg(target_arch = "x86_64")]
fn cpu_has_amx_int8() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    if __cpuid(0).eax < 7 {
        return false;
    }
    let edx = __cpuid_count(7, 0).edx;
    let (tile, int8) = (edx & (1 << 24) != 0, edx & (1 << 25) != 0);
    tile && int8
}

/// Asks Linux for the tile data state: without it the first tile instruction faults.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn tile_data_permitted() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: this `arch_prctl` request only grants this process the use of the tile data
    // state; it reads and writes none of our memory.
    let status = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        )
    };
    status == 0
}

#[cfg(all(target_arch = "x86_64", not(target_os = "linux")))]
fn tile_data_permitted() -> bool {
    false
}

#[cfg(target_arch = "aarch64")]
fn detect() -> Isa {
    use std::arch::is_aarch64_feature_detected as has;
    match (has!("neon"), has!("dotprod"), has!("i8mm")) {
        (true, true, true) => Isa::I8mm,
        (true, true, false) => Isa::Dotprod,
        (true, false, _) => Isa::Neon,
        _ => Isa::Scalar,
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn detect() -> Isa {
    Isa::Scalar
}
