//! Q5_0: 32 values per block, 5-bit codes (4 low bits packed as Q4_0, fifth bits in a u32)
//! and one f16 scale: `x = d * (q - 16)`.

use half::f16;

use super::Quantize;
use super::util::centred_code;

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

#[cfg(test)]
mod tests;

block_struct! {
    /// One Q5_0 block.
    BlockQ5_0, 22 bytes {
        /// Scale.
        d: f16,
        /// Fifth bit of element `j` in bit `j` (little-endian u32).
        qh: [u8; 4],
        /// Low 4 bits, packed as Q4_0.
        qs: [u8; 16],
    }
}

impl BlockQ5_0 {
    /// The 32 codes in `0..32`.
    #[inline]
    pub(crate) fn codes(&self) -> [i32; 32] {
        five_bit_codes(&self.qs, self.qh)
    }
}

/// The 32 five-bit codes of a Q5_0 or Q5_1 block: the low bits packed as Q4_0 in `qs`, the
/// fifth bit of element `j` in bit `j` of `qh` (little-endian).
#[inline]
pub(crate) fn five_bit_codes(qs: &[u8; 16], qh: [u8; 4]) -> [i32; 32] {
    let qh = u32::from_le_bytes(qh);
    let mut q = [0i32; 32];
    for (j, &b) in qs.iter().enumerate() {
        q[j] = ((b & 0xF) as u32 | (((qh >> j) << 4) & 0x10)) as i32;
        q[j + 16] = ((b >> 4) as u32 | ((qh >> (j + 12)) & 0x10)) as i32;
    }
    q
}

/// Packs the codes `code(x[j])` (`0..32`) of 32 values as [`five_bit_codes`] reads them:
/// `(qs, qh)`.
pub(crate) fn pack_five_bits(x: &[f32], code: impl Fn(f32) -> u32) -> ([u8; 16], [u8; 4]) {
    let mut qs = [0u8; 16];
    let mut qh = 0u32;
    for (j, q) in qs.iter_mut().enumerate() {
        let (q0, q1) = (code(x[j]), code(x[j + 16]));
        *q = ((q0 & 0xF) | ((q1 & 0xF) << 4)) as u8;
        qh |= ((q0 & 0x10) >> 4) << j;
        qh |= ((q1 & 0x10) >> 4) << (j + 16);
    }
    (qs, qh.to_le_bytes())
}

codes32_format!(BlockQ5_0: Q5_0, |b| b.codes().map(|q| q - 16));

impl Quantize for BlockQ5_0 {
    fn quantize(x: &[f32]) -> Self {
        let (d, code) = centred_code(x, 16);
        let (qs, qh) = pack_five_bits(x, |v| code(v) as u32);
        BlockQ5_0 {
            d: f16::from_f32(d),
            qh,
            qs,
        }
    }
}
