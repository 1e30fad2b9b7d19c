//! AVX-512 kernel of [`BlockQ5Kx16`]: Q4_K's kernel (`q4_kx16_avx512`) with each
//! sub-block's fifth bits added to its codes as they are decoded.

use std::arch::x86_64::*;

use super::code_bits_avx512::with_fifth_bits;
use super::q4_kx16_avx512::{add_k_block, add_scaled_sub_block, finish_k_block, sub_block_codes};
use super::q5_kx16::BlockQ5Kx16;

super_block_dot_group!(
    BlockQ5Kx16,
    |d, x: &BlockQ5Kx16, tokens, acc| {
        add_k_block(d, x, tokens, acc, 31, |x| &x.low, |x, j| codes(x, j))
    },
    amx {
        codes: |x, j| codes(x, j),
        add_sub_block: |_d, x, j, dots, _y, _summaries, sumi| {
            add_scaled_sub_block(&x.low, j, dots[0], sumi)
        },
        finish: |d, x, sumi, y, acc| finish_k_block(d, &x.low, sumi, y, acc),
    }
);

/// The eight code vectors (`0..32`) of sub-block `j`: vector `g` gives each row its codes
/// `4g..4g + 4`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
fn codes(x: &BlockQ5Kx16, j: usize) -> [__m512i; 8] {
    // SAFETY: reads exactly the 64 fifth-bit bytes of sub-block `j`; unaligned is allowed.
    let h = unsafe { _mm512_loadu_si512(x.qh[j].as_ptr().cast()) };
    with_fifth_bits(sub_block_codes(&x.low, j), h)
}
