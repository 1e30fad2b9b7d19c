//! The kernel program split into NVRTC modules, so that loading a model compiles only the
//! kernels its weights need.
//!
//! Compiling every kernel for every weight format costs minutes of CPU, almost all of it in
//! the instantiations of the weight kernels (`DEFINE_WEIGHT_KERNELS`, `DEFINE_Q8_1_KERNELS`,
//! `DEFINE_MMA_KERNELS`, one of each per format). The program is therefore compiled as
//! separate modules ([`KernelModule`]):
//!
//! - [`KernelModule::Common`]: every kernel that reads no weight format (norms, RoPE,
//!   attention and the KV cache, elementwise, mixture-of-experts routing, the q8_1
//!   quantization of activations): the kernel files with their instantiation lines removed, so
//!   the weight templates are parsed but never instantiated;
//! - [`KernelModule::Weights`]: one per [`GpuType`], the headers and the weight kernel files
//!   (`matmul.cu`, `matvec_q8_1.cu`, `wmma.cuh`, `mma.cu`) without their instantiation lines,
//!   followed by that format's own lines taken from those files. `quantize_q8_1`, which lives
//!   in `matvec_q8_1.cu`, is compiled into these modules too but only looked up in the common
//!   one.
//!
//! The instantiation lists at the end of the `.cu` files stay the one source of truth (the
//! host emulation compiles the files as they are; the tests in [`super`] keep the lists equal
//! to [`GpuType::ALL`]): a format's module takes its lines from them.

use super::{GpuType, KERNEL_FILES, MATMUL, MATVEC_Q8_1, MMA, WMMA, headers};

/// The macros whose invocations instantiate a format's kernels, with the file holding them.
const INSTANTIATIONS: [(&str, &str); 3] = [
    ("DEFINE_WEIGHT_KERNELS", MATMUL),
    ("DEFINE_Q8_1_KERNELS", MATVEC_Q8_1),
    ("DEFINE_MMA_KERNELS", MMA),
];

/// One separately compiled part of the kernel program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelModule {
    /// The kernels that read no weight format.
    Common,
    /// The kernels of one weight format.
    Weights(GpuType),
}

impl KernelModule {
    /// The common module and those of `types` (each once, in [`GpuType::ALL`]'s order).
    pub fn for_types(types: impl IntoIterator<Item = GpuType>) -> Vec<KernelModule> {
        let wanted: Vec<GpuType> = types.into_iter().collect();
        std::iter::once(KernelModule::Common)
            .chain(
                GpuType::ALL
                    .into_iter()
                    .filter(|ty| wanted.contains(ty))
                    .map(KernelModule::Weights),
            )
            .collect()
    }

    /// Every module: the whole program.
    pub fn all() -> Vec<KernelModule> {
        Self::for_types(GpuType::ALL)
    }

    /// Its name: `common`, or the format's suffix (`q4_k`).
    pub fn name(self) -> &'static str {
        match self {
            KernelModule::Common => "common",
            KernelModule::Weights(ty) => ty.suffix(),
        }
    }

    /// The CUDA C source NVRTC compiles for it.
    pub fn source(self) -> String {
        let mut parts = headers();
        match self {
            KernelModule::Common => {
                parts.extend(KERNEL_FILES.map(without_instantiations));
            }
            KernelModule::Weights(ty) => {
                let files = [MATMUL, MATVEC_Q8_1, WMMA, MMA];
                parts.extend(files.map(without_instantiations));
                parts.extend(instantiations_of(ty));
            }
        }
        parts.join("\n")
    }
}

/// Whether `line` instantiates kernels (`DEFINE_MMA_KERNELS(q4_k, fmt_q4_k)`), as opposed to
/// defining the macro (`#define DEFINE_MMA_KERNELS(name, F)`).
fn is_instantiation(line: &str) -> bool {
    INSTANTIATIONS
        .iter()
        .any(|(mac, _)| line.starts_with(mac) && line[mac.len()..].starts_with('('))
}

/// `file` without its instantiation lines.
fn without_instantiations(file: &str) -> String {
    file.lines()
        .filter(|line| !is_instantiation(line))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The lines of the kernel files that instantiate `ty`'s kernels.
pub fn instantiations_of(ty: GpuType) -> Vec<String> {
    INSTANTIATIONS
        .iter()
        .flat_map(|(mac, file)| {
            let prefix = format!("{mac}({},", ty.suffix());
            file.lines()
                .filter(move |line| line.starts_with(&prefix))
                .map(|line| format!("{line}\n"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_module_instantiates_no_weight_kernel() {
        let source = KernelModule::Common.source();
        assert!(!source.lines().any(is_instantiation));
        assert!(source.contains("quantize_q8_1("));
        assert!(source.contains("#define DEFINE_WEIGHT_KERNELS("));
    }

    /// Each format's module holds its own instantiations and no other format's: one line
    /// per kernel family it has.
    #[test]
    fn a_weight_module_instantiates_exactly_its_format() {
        for ty in GpuType::ALL {
            let source = KernelModule::Weights(ty).source();
            let lines: Vec<&str> = source.lines().filter(|l| is_instantiation(l)).collect();
            let want = 1 + usize::from(ty.has_q8_1_matvec()) + usize::from(ty.has_mma());
            assert_eq!(lines.len(), want, "{ty:?}: {lines:?}");
            let own = format!("({},", ty.suffix());
            assert!(lines.iter().all(|l| l.contains(&own)), "{ty:?}: {lines:?}");
        }
    }

    #[test]
    fn modules_for_types_start_with_the_common_one_and_list_each_type_once() {
        let q4_k = GpuType::of(rinfer_formats::GgmlType::Q4K).unwrap();
        let f32 = GpuType::of(rinfer_formats::GgmlType::F32).unwrap();
        assert_eq!(
            KernelModule::for_types([q4_k, f32, q4_k]),
            vec![
                KernelModule::Common,
                KernelModule::Weights(f32),
                KernelModule::Weights(q4_k)
            ]
        );
        assert_eq!(KernelModule::all().len(), GpuType::ALL.len() + 1);
    }
}
