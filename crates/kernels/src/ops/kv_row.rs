//! The element types a KV cache stores its key and value rows in, and the conversions between
//! them and f32: f16 rounds to nearest even; q8_0 and the 4- and 5-bit types (q4_0, q4_1,
//! q5_0, q5_1, iq4_nl, as llama.cpp's `--cache-type-k/-v`) are ggml's reference quantizers,
//! one block of 32 values at a time. The 4- and 5-bit rows are kept as bytes and decoded block
//! by block through their format's scalar dequantizer.

use std::fmt;
use std::str::FromStr;

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::quant::iq4_nl::BlockIq4Nl;
use crate::quant::q4_0::BlockQ4_0;
use crate::quant::q4_1::BlockQ4_1;
use crate::quant::q5_0::BlockQ5_0;
use crate::quant::q5_1::BlockQ5_1;
use crate::quant::q8_0::BlockQ8_0;
use crate::quant::{
    BlockFormat, DequantizeBytesFn, Quantize, QuantizeBytesFn, dequantize_bytes, quantize_bytes,
};

/// Values per q8_0 block.
const Q8_0_BLOCK: usize = 32;

/// The type of the key and value rows of a KV cache (llama.cpp's `--cache-type-k/-v`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvType {
    /// 4 bytes a value: exactly what the projections computed.
    F32,
    /// 2 bytes a value, rounded to nearest even (the default, as in llama.cpp: attention
    /// decodes each key block once per task, so it runs as fast as f32 in half the memory).
    #[default]
    F16,
    /// 34 bytes per 32 values (an f16 scale and 32 signed codes); rows must be whole blocks.
    Q8_0,
    /// 18 bytes per 32 values (ggml's Q4_0).
    Q4_0,
    /// 20 bytes per 32 values (ggml's Q4_1: scale and minimum).
    Q4_1,
    /// 22 bytes per 32 values (ggml's Q5_0).
    Q5_0,
    /// 24 bytes per 32 values (ggml's Q5_1).
    Q5_1,
    /// 18 bytes per 32 values (ggml's IQ4_NL: a non-linear 4-bit table).
    Iq4Nl,
}

/// The codec of a type kept as raw blocks of 32 values.
#[derive(Clone, Copy)]
struct Codec {
    /// Bytes per block.
    bytes: usize,
    dequantize: DequantizeBytesFn,
    quantize: QuantizeBytesFn,
}

impl Codec {
    const fn of<B: Quantize>() -> Self {
        Codec {
            bytes: B::BYTES,
            dequantize: dequantize_bytes::<B>,
            quantize: quantize_bytes::<B>,
        }
    }
}

impl KvType {
    /// Every type, in the order the flag lists them.
    pub const ALL: [KvType; 8] = [
        KvType::F32,
        KvType::F16,
        KvType::Q8_0,
        KvType::Q4_0,
        KvType::Q4_1,
        KvType::Q5_0,
        KvType::Q5_1,
        KvType::Iq4Nl,
    ];

    /// The name the flag takes (`f32`, `f16`, `q8_0`, `q4_0`, `q4_1`, `q5_0`, `q5_1`,
    /// `iq4_nl`).
    pub fn name(self) -> &'static str {
        match self {
            KvType::F32 => "f32",
            KvType::F16 => "f16",
            KvType::Q8_0 => "q8_0",
            KvType::Q4_0 => "q4_0",
            KvType::Q4_1 => "q4_1",
            KvType::Q5_0 => "q5_0",
            KvType::Q5_1 => "q5_1",
            KvType::Iq4Nl => "iq4_nl",
        }
    }

    /// Values that must divide a head's width (a block never spans two heads).
    pub fn block_values(self) -> usize {
        match self {
            KvType::F32 | KvType::F16 => 1,
            _ => Q8_0_BLOCK,
        }
    }

    /// The codec of a type kept as raw blocks (the 4- and 5-bit ones).
    fn codec(self) -> Option<Codec> {
        Some(match self {
            KvType::Q4_0 => Codec::of::<BlockQ4_0>(),
            KvType::Q4_1 => Codec::of::<BlockQ4_1>(),
            KvType::Q5_0 => Codec::of::<BlockQ5_0>(),
            KvType::Q5_1 => Codec::of::<BlockQ5_1>(),
            KvType::Iq4Nl => Codec::of::<BlockIq4Nl>(),
            KvType::F32 | KvType::F16 | KvType::Q8_0 => return None,
        })
    }

    /// Bytes of a row of `width` values, or `None` when that overflows or `width` is not a
    /// whole number of blocks.
    pub fn row_bytes(self, width: usize) -> Option<usize> {
        if !width.is_multiple_of(self.block_values()) {
            return None;
        }
        match self {
            KvType::F32 => width.checked_mul(4),
            KvType::F16 => width.checked_mul(2),
            KvType::Q8_0 => (width / Q8_0_BLOCK).checked_mul(BlockQ8_0::BYTES),
            _ => (width / Q8_0_BLOCK).checked_mul(self.codec()?.bytes),
        }
    }
}

impl fmt::Display for KvType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A KV type name that is not one of [`KvType::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown KV cache type `{0}`: expected f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl")]
pub struct UnknownKvType(pub String);

impl FromStr for KvType {
    type Err = UnknownKvType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KvType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownKvType(s.to_string()))
    }
}

/// Rows of one type, as a KV cache stores them.
#[derive(Clone, Copy, Debug)]
pub enum KvRow<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// f16 values.
    F16(&'a [f16]),
    /// q8_0 blocks of 32 values.
    Q8_0(&'a [BlockQ8_0]),
    /// Blocks of 32 values of a 4- or 5-bit type, as bytes.
    Blocks(KvType, &'a [u8]),
}

/// The codec of a row of raw blocks.
///
/// # Panics
/// When `ty` is not kept as raw blocks (a caller bug).
fn codec(ty: KvType) -> Codec {
    ty.codec().expect("a type kept as raw blocks")
}

impl<'a> KvRow<'a> {
    /// Values in the row.
    pub fn len(&self) -> usize {
        match self {
            KvRow::F32(r) => r.len(),
            KvRow::F16(r) => r.len(),
            KvRow::Q8_0(r) => r.len() * Q8_0_BLOCK,
            KvRow::Blocks(ty, r) => r.len() / codec(*ty).bytes * Q8_0_BLOCK,
        }
    }

    /// Whether the row holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values `start..start + len` (for the block types both must be multiples of 32).
    ///
    /// # Panics
    /// When the range is out of the row or cuts a block (a caller bug).
    pub fn slice(&self, start: usize, len: usize) -> KvRow<'a> {
        match *self {
            KvRow::F32(r) => KvRow::F32(&r[start..start + len]),
            KvRow::F16(r) => KvRow::F16(&r[start..start + len]),
            KvRow::Q8_0(r) => {
                assert!(start.is_multiple_of(Q8_0_BLOCK) && len.is_multiple_of(Q8_0_BLOCK));
                KvRow::Q8_0(&r[start / Q8_0_BLOCK..(start + len) / Q8_0_BLOCK])
            }
            KvRow::Blocks(ty, r) => {
                assert!(start.is_multiple_of(Q8_0_BLOCK) && len.is_multiple_of(Q8_0_BLOCK));
                let bytes = codec(ty).bytes;
                KvRow::Blocks(
                    ty,
                    &r[start / Q8_0_BLOCK * bytes..(start + len) / Q8_0_BLOCK * bytes],
                )
            }
        }
    }

    /// The f32 values, without conversion, when the row holds f32.
    pub fn as_f32(&self) -> Option<&'a [f32]> {
        match *self {
            KvRow::F32(r) => Some(r),
            _ => None,
        }
    }

    /// The row's values as f32 into `out` (exact for f32 and f16; the block types'
    /// dequantization otherwise).
    ///
    /// # Panics
    /// When `out` is not as long as the row (a caller bug).
    pub fn decode(&self, out: &mut [f32]) {
        assert_eq!(out.len(), self.len());
        match *self {
            KvRow::F32(r) => out.copy_from_slice(r),
            KvRow::F16(r) => super::VectorKernels::detected().f16_to_f32(r, out),
            KvRow::Q8_0(r) => r
                .iter()
                .zip(out.chunks_exact_mut(Q8_0_BLOCK))
                .for_each(|(b, o)| b.dequantize(o)),
            KvRow::Blocks(ty, r) => (codec(ty).dequantize)(r, out),
        }
    }
}

/// Rows of one type that a KV cache writes into.
#[derive(Debug)]
pub enum KvRowMut<'a> {
    /// f32 values.
    F32(&'a mut [f32]),
    /// f16 values.
    F16(&'a mut [f16]),
    /// q8_0 blocks of 32 values.
    Q8_0(&'a mut [BlockQ8_0]),
    /// Blocks of 32 values of a 4- or 5-bit type, as bytes.
    Blocks(KvType, &'a mut [u8]),
}

impl KvRowMut<'_> {
    /// Stores `values` converted to the row's type: f16 rounded to nearest even, q8_0 as ggml's
    /// `quantize_row_q8_0` (per 32 values, scale `amax / 127`, codes rounded half away from 0),
    /// the other block types as ggml's reference quantizers.
    ///
    /// # Panics
    /// When `values` is not as long as the row (a caller bug).
    pub fn encode(self, values: &[f32]) {
        match self {
            KvRowMut::F32(r) => r.copy_from_slice(values),
            KvRowMut::F16(r) => r.convert_from_f32_slice(values),
            KvRowMut::Q8_0(r) => {
                assert_eq!(r.len() * Q8_0_BLOCK, values.len());
                r.iter_mut()
                    .zip(values.chunks_exact(Q8_0_BLOCK))
                    .for_each(|(b, x)| *b = BlockQ8_0::quantize(x));
            }
            KvRowMut::Blocks(ty, r) => {
                let codec = codec(ty);
                assert_eq!(r.len() / codec.bytes * Q8_0_BLOCK, values.len());
                (codec.quantize)(values, r);
            }
        }
    }
}

/// Rows of `width` values of one [`KvType`], allocated once: one layer's keys or values.
#[derive(Clone, Debug)]
pub struct KvRows {
    data: RowData,
    /// Elements of `data` per row (values, q8_0 blocks, or bytes of raw blocks).
    units: usize,
}

#[derive(Clone, Debug)]
enum RowData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Q8_0(Vec<BlockQ8_0>),
    Blocks(KvType, Vec<u8>),
}

impl KvRows {
    /// `rows` zeroed rows of `width` values, or `None` when `width` is not a whole number of
    /// the type's blocks or the size overflows (check [`KvType::row_bytes`] first to allocate
    /// nothing unbounded).
    pub fn new(kv_type: KvType, rows: usize, width: usize) -> Option<Self> {
        let row_bytes = kv_type.row_bytes(width)?;
        row_bytes.checked_mul(rows)?;
        let units = match kv_type.codec() {
            Some(_) => row_bytes,
            None => width / kv_type.block_values(),
        };
        let len = units * rows;
        let data = match kv_type {
            KvType::F32 => RowData::F32(vec![0.0; len]),
            KvType::F16 => RowData::F16(vec![f16::ZERO; len]),
            KvType::Q8_0 => RowData::Q8_0(vec![bytemuck::Zeroable::zeroed(); len]),
            _ => RowData::Blocks(kv_type, vec![0; len]),
        };
        Some(Self { data, units })
    }

    /// The type of the rows.
    pub fn kv_type(&self) -> KvType {
        match self.data {
            RowData::F32(_) => KvType::F32,
            RowData::F16(_) => KvType::F16,
            RowData::Q8_0(_) => KvType::Q8_0,
            RowData::Blocks(ty, _) => ty,
        }
    }

    /// Bytes of all rows.
    pub fn bytes(&self) -> usize {
        self.all_bytes().len()
    }

    fn all_bytes(&self) -> &[u8] {
        match &self.data {
            RowData::F32(d) => bytemuck::cast_slice(d),
            RowData::F16(d) => bytemuck::cast_slice(d),
            RowData::Q8_0(d) => bytemuck::cast_slice(d),
            RowData::Blocks(_, d) => d,
        }
    }

    fn all_bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.data {
            RowData::F32(d) => bytemuck::cast_slice_mut(d),
            RowData::F16(d) => bytemuck::cast_slice_mut(d),
            RowData::Q8_0(d) => bytemuck::cast_slice_mut(d),
            RowData::Blocks(_, d) => d,
        }
    }

    /// Row `i`.
    ///
    /// # Panics
    /// When there is no row `i` (a caller bug).
    #[inline]
    pub fn row(&self, i: usize) -> KvRow<'_> {
        let r = i * self.units..(i + 1) * self.units;
        match &self.data {
            RowData::F32(d) => KvRow::F32(&d[r]),
            RowData::F16(d) => KvRow::F16(&d[r]),
            RowData::Q8_0(d) => KvRow::Q8_0(&d[r]),
            RowData::Blocks(ty, d) => KvRow::Blocks(*ty, &d[r]),
        }
    }

    /// Stores `values` as row `i`, converted to the type (see [`KvRowMut::encode`]).
    ///
    /// # Panics
    /// When there is no row `i` or `values` is not one row wide (a caller bug).
    pub fn store(&mut self, i: usize, values: &[f32]) {
        let r = i * self.units..(i + 1) * self.units;
        match &mut self.data {
            RowData::F32(d) => KvRowMut::F32(&mut d[r]),
            RowData::F16(d) => KvRowMut::F16(&mut d[r]),
            RowData::Q8_0(d) => KvRowMut::Q8_0(&mut d[r]),
            RowData::Blocks(ty, d) => KvRowMut::Blocks(*ty, &mut d[r]),
        }
        .encode(values);
    }

    /// The stored bytes of row `i`, to copy it unchanged into rows of the same type.
    ///
    /// # Panics
    /// When there is no row `i` (a caller bug).
    pub fn row_bytes(&self, i: usize) -> &[u8] {
        let n = self.bytes() / self.rows().max(1);
        &self.all_bytes()[i * n..(i + 1) * n]
    }

    /// Sets row `i` to `bytes`, taken from [`Self::row_bytes`] of rows of the same type and
    /// width.
    ///
    /// # Panics
    /// When there is no row `i` or `bytes` is not one row long (a caller bug).
    pub fn set_row_bytes(&mut self, i: usize, bytes: &[u8]) {
        let n = self.bytes() / self.rows().max(1);
        self.all_bytes_mut()[i * n..(i + 1) * n].copy_from_slice(bytes);
    }

    /// Rows held.
    pub fn rows(&self) -> usize {
        let len = match &self.data {
            RowData::F32(d) => d.len(),
            RowData::F16(d) => d.len(),
            RowData::Q8_0(d) => d.len(),
            RowData::Blocks(_, d) => d.len(),
        };
        len.checked_div(self.units).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testing::spread_values;

    #[test]
    fn kv_type_names_parse_and_unknown_ones_are_refused() {
        for t in KvType::ALL {
            assert_eq!(t.name().parse::<KvType>(), Ok(t));
        }
        assert_eq!("Q8_0".parse::<KvType>(), Ok(KvType::Q8_0));
        assert_eq!("IQ4_NL".parse::<KvType>(), Ok(KvType::Iq4Nl));
        let err = "q2_k".parse::<KvType>().unwrap_err();
        assert!(err.to_string().contains("expected f32, f16, q8_0"), "{err}");
        assert_eq!(KvType::default(), KvType::F16);
    }

    #[test]
    fn row_bytes_halve_for_f16_and_take_34_per_32_for_q8_0() {
        assert_eq!(KvType::F32.row_bytes(256), Some(1024));
        assert_eq!(KvType::F16.row_bytes(256), Some(512));
        assert_eq!(KvType::Q8_0.row_bytes(256), Some(8 * 34));
        assert_eq!(KvType::Q8_0.row_bytes(40), None);
        assert_eq!(KvType::Q4_0.row_bytes(256), Some(8 * 18));
        assert_eq!(KvType::Q5_1.row_bytes(256), Some(8 * 24));
        assert_eq!(KvType::Iq4Nl.row_bytes(48), None);
        assert_eq!(KvType::F32.row_bytes(usize::MAX), None);
    }

    #[test]
    fn f16_rows_round_to_nearest_even_and_decode_exactly() {
        // 1 + 2^-11 lies halfway between two f16 values: it rounds to the even one (1.0).
        let values = [
            1.0 + 2f32.powi(-11),
            1.0 + 3.0 * 2f32.powi(-11),
            65504.0,
            -0.0,
        ];
        let mut row = [f16::ZERO; 4];
        KvRowMut::F16(&mut row).encode(&values);
        let mut back = [0.0f32; 4];
        KvRow::F16(&row).decode(&mut back);
        assert_eq!(back, [1.0, 1.0 + 4.0 * 2f32.powi(-11), 65504.0, -0.0]);
        for (&v, &b) in values.iter().zip(&row) {
            assert_eq!(b, f16::from_f32(v));
        }
    }

    #[test]
    fn q8_0_rows_match_the_reference_quantizer_block_by_block() {
        let values = spread_values(64, 37, 29, 14.0, 3.0);
        let mut row = [BlockQ8_0 {
            d: f16::ZERO,
            qs: [0; 32],
        }; 2];
        KvRowMut::Q8_0(&mut row).encode(&values);
        for (block, x) in row.iter().zip(values.chunks(32)) {
            assert_eq!(*block, BlockQ8_0::quantize(x));
        }
        let mut back = vec![0.0f32; 64];
        KvRow::Q8_0(&row).decode(&mut back);
        for (b, v) in back.iter().zip(&values) {
            assert!((b - v).abs() <= 14.0 / 3.0 / 127.0, "{b} vs {v}");
        }
        let head = KvRow::Q8_0(&row).slice(32, 32);
        let mut second = vec![0.0f32; 32];
        head.decode(&mut second);
        assert_eq!(second, back[32..]);
    }

    #[test]
    fn an_all_zero_q8_0_block_decodes_to_zeros() {
        let mut row = [BlockQ8_0 {
            d: f16::ONE,
            qs: [1; 32],
        }];
        KvRowMut::Q8_0(&mut row).encode(&[0.0; 32]);
        let mut back = [1.0f32; 32];
        KvRow::Q8_0(&row).decode(&mut back);
        assert_eq!(back, [0.0; 32]);
    }

    #[test]
    fn four_and_five_bit_rows_hold_the_reference_quantizers_blocks() {
        let values = spread_values(64, 37, 29, 14.0, 3.0);
        for kv_type in KvType::ALL.into_iter().filter(|t| t.codec().is_some()) {
            let codec = codec(kv_type);
            let mut rows = KvRows::new(kv_type, 2, 64).unwrap();
            rows.store(1, &values);
            let mut want = vec![0u8; 2 * codec.bytes];
            (codec.quantize)(&values, &mut want);
            assert_eq!(rows.row_bytes(1), &want[..], "{kv_type}");
            let mut back = vec![0.0f32; 64];
            rows.row(1).decode(&mut back);
            let mut exact = vec![0.0f32; 64];
            (codec.dequantize)(&want, &mut exact);
            assert_eq!(back, exact, "{kv_type}");
            for (b, v) in back.iter().zip(&values) {
                assert!((b - v).abs() <= 14.0 / 3.0 / 7.0, "{kv_type}: {b} vs {v}");
            }
            let mut second = vec![0.0f32; 32];
            rows.row(1).slice(32, 32).decode(&mut second);
            assert_eq!(second, back[32..], "{kv_type}");
        }
    }

    #[test]
    fn stored_rows_copy_byte_for_byte_between_stores_of_one_type() {
        let values: Vec<f32> = (0..64).map(|i| i as f32 / 7.0 - 4.0).collect();
        for kv_type in KvType::ALL {
            let mut a = KvRows::new(kv_type, 3, 64).unwrap();
            assert_eq!(a.kv_type(), kv_type);
            assert_eq!(a.rows(), 3);
            assert_eq!(a.bytes(), 3 * kv_type.row_bytes(64).unwrap());
            a.store(1, &values);
            let mut b = KvRows::new(kv_type, 2, 64).unwrap();
            b.set_row_bytes(0, a.row_bytes(1));
            let (mut x, mut y) = (vec![0.0; 64], vec![1.0; 64]);
            a.row(1).decode(&mut x);
            b.row(0).decode(&mut y);
            assert_eq!(x, y, "{kv_type}");
        }
        assert!(KvRows::new(KvType::Q8_0, 1, 48).is_none());
        assert!(KvRows::new(KvType::Q4_1, 1, 48).is_none());
        assert!(KvRows::new(KvType::F32, usize::MAX, 64).is_none());
    }
}
