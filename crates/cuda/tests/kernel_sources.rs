//! The host and the CUDA sources agree: every kernel the runtime loads is defined, and the
//! launch constants equal the sources' `#define`s.

use rinfer_cuda::kernels::KvElement::{F16, F32};
use rinfer_cuda::kernels::{self, GpuType, program_source};
use rinfer_cuda::launch::{
    self, ATTN_WARPS, FLASH_WARPS, KV_BLOCK, MATMUL_TOKENS, MATMUL_WARPS, MAX_HEAD_DIM, MMA_ROWS,
    MMA_TOKENS, MMA_WARPS, MMVQ_ROWS, MMVQ_TOKENS, MMVQ_WARPS, PREFILL_TILE, PREFILL_WARPS,
    Q8_1_BLOCKS_PER_CTA,
};

fn define(name: &str) -> u64 {
    let source = program_source();
    let line = source
        .lines()
        .find(|l| l.starts_with(&format!("#define {name} ")))
        .unwrap_or_else(|| panic!("#define {name} not found"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn every_loaded_kernel_is_defined_in_the_sources() {
    let source = program_source();
    for element in kernels::KvElement::ALL {
        let define = format!("DEFINE_KV_KERNELS({}, ", element.name());
        assert!(source.contains(&define), "no KV kernels for {element:?}");
    }
    // Written out, or instantiated by a macro over the element type or the head width.
    for name in kernels::kv_kernel_names() {
        let element = kernels::KvElement::ALL
            .iter()
            .find_map(|e| name.strip_suffix(&format!("_{}", e.name())));
        let base = element.unwrap_or_else(|| name.rsplit_once('_').map_or(name, |(base, _)| base));
        let found = [
            format!(" {name}("),
            format!(" {base}_##suffix("),
            format!(" {base}_##width("),
        ]
        .iter()
        .any(|pattern| source.contains(pattern));
        assert!(found, "kernel {name} is not defined");
    }
    for name in kernels::FIXED_KERNELS {
        let found = source.contains(&format!(" {name}(")) && source.contains("extern \"C\"");
        assert!(found, "kernel {name} is not defined");
    }
    for ty in GpuType::ALL {
        let fmt = format!(
            "DEFINE_WEIGHT_KERNELS({}, fmt_{})",
            ty.suffix(),
            ty.suffix()
        );
        assert!(source.contains(&fmt), "no kernels for {ty:?}");
        assert_eq!(GpuType::of(ty.ggml()), Some(ty));
        let mma = format!("DEFINE_MMA_KERNELS({}, fmt_{})", ty.suffix(), ty.suffix());
        assert_eq!(
            source.contains(&mma),
            ty.has_mma(),
            "tensor-core kernels of {ty:?}"
        );
    }
    for ty in GpuType::Q8_1 {
        // The format's reader gives the codes (`fmt_q4_k::codes`).
        let define = format!("DEFINE_Q8_1_KERNELS({0}, fmt_{0})", ty.suffix());
        assert!(source.contains(&define), "no q8_1 matvec for {ty:?}");
        assert!(GpuType::ALL.contains(&ty));
    }
    let with_mma = GpuType::ALL.iter().filter(|ty| ty.has_mma()).count();
    assert_eq!(
        with_mma,
        GpuType::ALL.len() - 3,
        "all but F32, F16 and BF16"
    );
    assert_eq!(
        kernels::all_kernel_names().len(),
        kernels::FIXED_KERNELS.len()
            + kernels::KvKernel::ALL.len() * kernels::KvElement::ALL.len()
            + 2
            + kernels::FLASH_HEAD_WIDTHS.len()
            + 5 * GpuType::ALL.len()
            + 2 * GpuType::Q8_1.len()
            + 2 * with_mma
    );
}

#[test]
fn launch_constants_match_the_sources() {
    assert_eq!(define("MATMUL_WARPS"), u64::from(MATMUL_WARPS));
    assert_eq!(define("MATMUL_TOKENS"), u64::from(MATMUL_TOKENS));
    assert_eq!(define("ATTN_WARPS"), u64::from(ATTN_WARPS));
    assert_eq!(
        define("MAX_DECODE_SPLITS"),
        launch::MAX_DECODE_SPLITS as u64
    );
    assert_eq!(define("MAX_HEAD_DIM"), MAX_HEAD_DIM as u64);
    assert_eq!(define("KV_BLOCK"), KV_BLOCK as u64);
    assert_eq!(define("PREFILL_WARPS"), u64::from(PREFILL_WARPS));
    assert_eq!(define("PREFILL_TILE"), u64::from(PREFILL_TILE));
    assert_eq!(define("FLASH_WARPS"), u64::from(FLASH_WARPS));
    assert_eq!(define("MMVQ_WARPS"), u64::from(MMVQ_WARPS));
    assert_eq!(define("MMVQ_ROWS"), u64::from(MMVQ_ROWS));
    assert_eq!(define("MMVQ_TOKENS"), u64::from(MMVQ_TOKENS));
    assert_eq!(
        define("Q8_1_BLOCKS_PER_CTA"),
        u64::from(Q8_1_BLOCKS_PER_CTA)
    );
    assert_eq!(define("MMA_ROWS"), u64::from(MMA_ROWS));
    assert_eq!(define("MMA_TOKENS"), u64::from(MMA_TOKENS));
    assert_eq!(define("MMA_WARPS"), u64::from(MMA_WARPS));
}

#[test]
fn launch_shapes_cover_their_work() {
    let decode = launch::matmul(1000, 1);
    assert_eq!(decode.grid, (250, 1, 1));
    assert_eq!(decode.block, (128, 1, 1));
    assert_eq!(launch::matmul(1001, 17).grid, (251, 3, 1));
    assert_eq!(launch::per_row(3, 640).block, (640, 1, 1));
    assert_eq!(launch::per_row(3, 8192).block, (1024, 1, 1));
    assert_eq!(launch::rope(5, 8, 128).block, (64, 1, 1));
    assert_eq!(launch::rope(5, 8, 20).block, (32, 1, 1));
    assert_eq!(launch::elementwise(257).grid, (2, 1, 1));
    // Two rows per warp, four warps per block; a warp per q8_1 block of 32 activations.
    assert_eq!(launch::matvec_q8_1(1001).grid, (126, 1, 1));
    assert_eq!(launch::quantize_q8_1(3, 2048).grid, (16, 3, 1));
    assert_eq!(launch::attention_prefill(F32, 17, 4).grid, (3, 4, 1));
    // Sixteen queries a warp over an f16 cache.
    assert_eq!(launch::attention_prefill(F16, 33, 4).grid, (2, 4, 1));
    assert_eq!(launch::attention_prefill(F16, 33, 4).block, (64, 1, 1));
    // Every routed (token, expert) slot a grid.y of its own, each row of the expert a warp.
    assert_eq!(launch::matmul_by_id(1001, 9 * 8).grid, (251, 72, 1));
    assert_eq!(launch::matmul_by_id(1001, 9 * 8).block, (128, 1, 1));
    assert_eq!(launch::route(9).grid, (9, 1, 1));
    // Per expert, its received slots in groups of MATMUL_TOKENS.
    assert_eq!(
        launch::matmul_grouped_by_id(1001, 128, 3).grid,
        (251, 384, 1)
    );
    // Tensor cores: a block per 128 rows × 64 tokens (or 64 of one expert's slots), 8 warps.
    let mma = launch::mma(5632, 512);
    assert_eq!(mma.grid, (44, 8, 1));
    assert_eq!(mma.block, (256, 1, 1));
    assert_eq!(launch::mma(129, 65).grid, (2, 2, 1));
    assert_eq!(launch::mma_grouped_by_id(1001, 128, 3).grid, (8, 384, 1));
    for keys in [1, 63, 64, 65, 512, 4096, 32_768, 131_072] {
        let s = launch::decode_splits(keys);
        assert!(s.splits * s.split_len >= keys, "{keys}: {s:?}");
        assert!(s.splits <= launch::MAX_DECODE_SPLITS, "{keys}: {s:?}");
        assert!(s.split_len >= launch::MIN_SPLIT_KEYS);
    }
}
