//! Weights repacked once at load time into the layout a faster kernel reads: an explicit
//! transform with its own type, [`PackedMatrix`], multiplied by [`matmul_packed`].
//!
//! Most quantized weight types are packed sixteen rows at a time for AVX-512 (see
//! `nibbles` for Q4_0 and IQ4_NL, `min_formats` for Q4_1 and Q5_1, `q5_0x16`, `q8_0x16`,
//! `mxfp4x16`, `q2_kx16`, `q3_kx16`, `q4_kx16`, `q5_kx16`, `q6_kx16`, `iq4_xsx16`, `tq1_0x16`
//! and `tq2_0x16`; `grid_quads` for IQ3_XXS and IQ3_S): one instruction dots four codes of
//! sixteen rows (VNNI's `vpdpbusd`, or AVX-512 BW multiply-adds where the CPU has no VNNI:
//! `byte_dot`), each weight block is decoded once for several tokens, and no horizontal sum is
//! needed. Decode and prefill both use the packed kernel, so a token's outputs are the same
//! whether it is multiplied alone or in a batch, and on any number of threads.
//!
//! Where the CPU has AMX (and Linux lets the process use it), products of four or more tokens
//! run on the tile unit: Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1, Q8_0 and MXFP4 (`byte_codes_amx`), and
//! Q4_K, Q5_K, Q6_K and IQ4_XS (`super_blocks_amx`), with the same integer sums and the same
//! float steps, so the results do not change. The AMX kernels are written over
//! `amx::TileUnit`, which tests also run on a software model of the unit where the CPU has no
//! AMX.
//!
//! Which type packs into which layout, and for which instruction set, is written once in
//! [`crate::registry`]; this module knows the layouts and their kernels, not the CPU.

// Only x86 kernels multiply packed matrices; elsewhere the layouts serve their tests alone.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use std::ops::Range;

use bytemuck::Pod;
use rinfer_formats::GgmlType;

use crate::error::KernelError;
use crate::operands::{ActivationBuffer, BlockSummary, ScratchParts, TOKEN_TILE, WeightMatrix};
use crate::quant::BlockFormat;
use summary::Summarized;

/// Declares the `repr(C)` plain-data struct `$name` with the fields given (all `pub(crate)`):
/// a packed block, or a part several packed layouts share.
macro_rules! packed_struct {
    (
        $(#[$meta:meta])*
        $name:ident {
            $($(#[$field_meta:meta])* $field:ident: $field_ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
        pub(crate) struct $name {
            $($(#[$field_meta])* pub(crate) $field: $field_ty,)*
        }
    };
}

/// Declares a packed block format: the [`packed_struct!`] `$packed` with the fields given, and
/// its [`PackedFormat`] implementation for sixteen rows of
/// `$source` blocks against `$act` activations, whose `pack_row` is the one given. With
/// `scale d`, the struct starts with the field `d`, each row's f16 scale (bits), which
/// `pack_row` fills from the source block's `d` before its own steps; with `extra row bytes`,
/// the format's [`PackedFormat::EXTRA_ROW_BYTES`].
macro_rules! packed_format {
    (
        $(#[$meta:meta])*
        $packed:ident: $source:ty => $act:ty
            $(, scale $d:ident)? $(, extra row bytes $extra:literal)? {
            $($(#[$field_meta:meta])* $field:ident: $field_ty:ty,)*
        }
        $(#[$pack_meta:meta])*
        fn pack_row(&mut $self:ident, $i:ident, $block:ident) { $($pack_row:tt)* }
    ) => {
        packed_struct! {
            $(#[$meta])*
            $packed {
                $(
                    /// Each row's f16 scale (bits), the source block's.
                    $d: [u16; $crate::packed::ROWS],
                )?
                $($(#[$field_meta])* $field: $field_ty,)*
            }
        }

        impl $crate::packed::PackedFormat for $packed {
            type Source = $source;
            type Act = $act;
            $(const EXTRA_ROW_BYTES: usize = $extra;)?
            $(#[$pack_meta])*
            fn pack_row(&mut $self, $i: usize, $block: &$source) {
                $($self.$d[$i] = $block.$d.to_bits();)?
                $($pack_row)*
            }
        }
    };
}

/// Calls `$kernel::<N>` (after the type arguments in brackets, if any) with `N` the number of
/// tokens `$n`, from 1 to the most given (4 or 8; more tokens take the most). The kernels are
/// written for a fixed number of tokens, so that their accumulators stay in registers.
#[cfg(target_arch = "x86_64")]
macro_rules! for_tokens {
    ($n:expr, 4, $kernel:ident $([$($g:ty),+])? ($($arg:expr),*)) => {
        match $n {
            1 => $kernel::<$($($g,)+)? 1>($($arg),*),
            2 => $kernel::<$($($g,)+)? 2>($($arg),*),
            3 => $kernel::<$($($g,)+)? 3>($($arg),*),
            _ => $kernel::<$($($g,)+)? 4>($($arg),*),
        }
    };
    ($n:expr, 8, $kernel:ident $([$($g:ty),+])? ($($arg:expr),*)) => {
        match $n {
            1 => $kernel::<$($($g,)+)? 1>($($arg),*),
            2 => $kernel::<$($($g,)+)? 2>($($arg),*),
            3 => $kernel::<$($($g,)+)? 3>($($arg),*),
            4 => $kernel::<$($($g,)+)? 4>($($arg),*),
            5 => $kernel::<$($($g,)+)? 5>($($arg),*),
            6 => $kernel::<$($($g,)+)? 6>($($arg),*),
            7 => $kernel::<$($($g,)+)? 7>($($arg),*),
            _ => $kernel::<$($($g,)+)? 8>($($arg),*),
        }
    };
}

/// The AVX-512 kernels of a packed layout against activation blocks `$act`, as the associated
/// constants [`Avx512Kernels::DOT`] (AVX-512 VNNI) and [`Avx512Kernels::DOT_BW`] (AVX-512 BW
/// without VNNI): `$run` is the kernel's body, written once over the dot products of
/// `byte_dot`, whose proof value `$d` is a `Vnni` in the one and a `MultiplyAdd` in the other.
/// Both are bit-identical to the layout's scalar reference.
#[cfg(target_arch = "x86_64")]
macro_rules! avx512_entries {
    ($packed:ty, $act:ty, |$d:ident, $w:ident, $a:ident, $s:ident, $out:ident| $run:expr) => {
        const DOT: $crate::packed::GroupDotFn<Self> = {
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
            fn dot(
                $w: &[$packed],
                $a: &[$act],
                $s: &[$crate::operands::BlockSummary],
                $out: &mut [[f32; $crate::packed::ROWS]],
            ) {
                // SAFETY: this function's target features include AVX-512 F, BW, VL and VNNI.
                let $d = unsafe { $crate::packed::byte_dot::Vnni::new() };
                $run
            }
            dot
        };
        const DOT_BW: $crate::packed::GroupDotFn<Self> = {
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
            fn dot(
                $w: &[$packed],
                $a: &[$act],
                $s: &[$crate::operands::BlockSummary],
                $out: &mut [[f32; $crate::packed::ROWS]],
            ) {
                // SAFETY: this function's target features include AVX-512 F, BW and VL.
                let $d = unsafe { $crate::packed::byte_dot::MultiplyAdd::new() };
                $run
            }
            dot
        };
    };
}

/// Makes the kernels of a packed byte-code format (`byte_codes_avx512`, `byte_codes_amx`)
/// whose blocks the closure `$codes` decodes the layout's [`Avx512Kernels`], with an AMX
/// kernel.
#[cfg(target_arch = "x86_64")]
macro_rules! byte_code_kernels {
    ($packed:ty, $codes:expr) => {
        impl $crate::packed::Avx512Kernels for $packed {
            avx512_entries!(
                $packed,
                $crate::quant::q8_0::BlockQ8_0,
                |d, w, a, s, out| {
                    $crate::packed::byte_codes_avx512::dot_group(d, w, a, s, out, $codes)
                }
            );

            amx_entries!(
                $packed,
                $crate::quant::q8_0::BlockQ8_0,
                |w, a, s, out, T| {
                    $crate::packed::byte_codes_amx::dot_group::<_, T>(w, a, s, out, $codes)
                }
            );
        }
    };
}

/// The AMX kernel of a packed layout, [`Avx512Kernels::DOT_AMX`], and for tests the same
/// kernel on the tile unit's software model, [`Avx512Kernels::DOT_AMX_MODEL`]: `$run` is the
/// kernel's body over the tile unit type `$tiles`, which it may call `unsafe` functions with
/// (the entry's caller checked what the unit needs).
#[cfg(target_arch = "x86_64")]
macro_rules! amx_entries {
    ($packed:ty, $act:ty, |$w:ident, $a:ident, $s:ident, $out:ident, $tiles:ident| $run:expr) => {
        /// The VNNI kernel on the AMX tile unit where a call has tokens enough; bit-identical
        /// to it. It needs [`crate::Isa::Amx`].
        const DOT_AMX: Option<$crate::packed::GroupDotFn<Self>> = amx_entries!(
            @kernel $crate::packed::amx::Tiles, $packed, $act, |$w, $a, $s, $out, $tiles| $run
        );

        /// [`Self::DOT_AMX`] on the software model of the tile unit. It needs AVX-512 VNNI.
        #[cfg(test)]
        const DOT_AMX_MODEL: Option<$crate::packed::GroupDotFn<Self>> = amx_entries!(
            @kernel $crate::packed::amx::ModelTiles, $packed, $act,
            |$w, $a, $s, $out, $tiles| $run
        );
    };
    (
        @kernel $unit:ty, $packed:ty, $act:ty,
        |$w:ident, $a:ident, $s:ident, $out:ident, $tiles:ident| $run:expr
    ) => {{
        /// # Safety
        /// The CPU must support AVX-512 VNNI and what `TileUnit::configure` asks of the unit.
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        unsafe fn dot(
            $w: &[$packed],
            $a: &[$act],
            $s: &[$crate::operands::BlockSummary],
            $out: &mut [[f32; $crate::packed::ROWS]],
        ) {
            type $tiles = $unit;
            // SAFETY: the entry's caller checked what the unit needs.
            unsafe { $run }
        }
        Some(dot)
    }};
}

/// Makes the AVX-512 kernels of a packed super-block format against Q8_K activations the
/// layout's [`Avx512Kernels`] (see [`avx512_entries!`]): the call's tokens four at a time, each
/// time the loop of `fold_avx512` over the row group's blocks, in which `$add(d, x, tokens,
/// acc)` (generic over the dot products `D` and the number of tokens `N`, as
/// [`super_block_adder!`] writes it) adds block `x`'s products with the tokens' activations to
/// their accumulators; with `times $factor`, the sums are multiplied by it at the end; with
/// `amx { … }`, the layout also has the AMX kernel of `super_blocks_amx`, and the three bodies
/// given (each with its parameters named, the first a `Vnni` where it has one) implement its
/// `TileSubBlocks`.
#[cfg(target_arch = "x86_64")]
macro_rules! super_block_dot_group {
    (@entries $packed:ty, $add:expr $(, times $factor:expr)?) => {
        avx512_entries!($packed, $crate::quant::q8_k::BlockQ8K, |d, w, a, s, out| {
            use ::std::arch::x86_64::*;
            use $crate::operands::BlockSummary;
            use $crate::packed::byte_dot::ByteDot;
            use $crate::packed::fold_avx512::{fold_blocks, store};
            use $crate::quant::q8_k::BlockQ8K;

            /// The products for exactly `N` tokens.
            #[inline]
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
            fn dot_tokens<D: ByteDot, const N: usize>(
                d: D,
                w: &[$packed],
                a: &[BlockQ8K],
                s: &[BlockSummary],
                out: &mut [[f32; $crate::packed::ROWS]],
            ) {
                let acc = fold_blocks(w, a, s, |x, tokens, acc: &mut [__m512; N]| {
                    ($add)(d, x, tokens, acc)
                });
                $(let factor = _mm512_set1_ps($factor);
                let acc = acc.map(|acc| _mm512_mul_ps(acc, factor));)?
                store(out, acc);
            }

            /// Tokens one pass over the weights takes (their accumulators stay in
            /// registers).
            const TOKENS: usize = 4;
            let chunks = $crate::packed::fold_avx512::token_chunks(out, a, s, w.len(), TOKENS);
            for (out, a, s) in chunks {
                for_tokens!(out.len(), 4, dot_tokens[_](d, w, a, s, out));
            }
        });
    };
    (
        $packed:ty, $add:expr, amx $(parts $parts:literal)? {
            codes: |$cx:ident, $cj:ident| $codes:expr,
            add_sub_block: |$ad:ident, $ax:ident, $aj:ident, $dots:ident, $y:ident,
                $summaries:ident, $sumi:ident| $add_sub_block:expr,
            finish: |$fd:ident, $fx:ident, $fsumi:ident, $fy:ident, $acc:ident| $finish:expr $(,)?
        }
    ) => {
        impl $crate::packed::Avx512Kernels for $packed {
            super_block_dot_group!(@entries $packed, $add);
            amx_entries!($packed, $crate::quant::q8_k::BlockQ8K, |w, a, s, out, T| {
                $crate::packed::super_blocks_amx::dot_group::<$packed, T>(w, a, s, out)
            });
        }

        impl $crate::packed::super_blocks_amx::TileSubBlocks for $packed {
            $(const PARTS: usize = $parts;)?

            #[inline]
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
            unsafe fn codes(&self, $cj: usize) -> [::std::arch::x86_64::__m512i; 8] {
                let $cx = self;
                $codes
            }

            #[inline]
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
            unsafe fn add_sub_block(
                &self,
                $aj: usize,
                $dots: &[::std::arch::x86_64::__m512i],
                $y: &$crate::quant::q8_k::BlockQ8K,
                $summaries: &[$crate::operands::BlockSummary],
                $sumi: ::std::arch::x86_64::__m512i,
            ) -> ::std::arch::x86_64::__m512i {
                // SAFETY: this function's target features include AVX-512 VNNI.
                let $ad = unsafe { $crate::packed::byte_dot::Vnni::new() };
                let $ax = self;
                $add_sub_block
            }

            #[inline]
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
            unsafe fn finish(
                &self,
                $fsumi: ::std::arch::x86_64::__m512i,
                $fy: &$crate::quant::q8_k::BlockQ8K,
                $acc: ::std::arch::x86_64::__m512,
            ) -> ::std::arch::x86_64::__m512 {
                // SAFETY: this function's target features include AVX-512 VNNI.
                let $fd = unsafe { $crate::packed::byte_dot::Vnni::new() };
                let $fx = self;
                $finish
            }
        }
    };
    ($packed:ty, $add:expr $(, times $factor:expr)?) => {
        impl $crate::packed::Avx512Kernels for $packed {
            super_block_dot_group!(@entries $packed, $add $(, times $factor)?);
        }
    };
}

/// Writes the function that adds one super-block's products to the accumulators of `N` tokens,
/// the `$add` of [`super_block_dot_group!`] (or the shared one a family of layouts passes it):
/// `fn add_block(d, x: &Packed, tokens, acc) { … }`, with any type parameters before those in
/// angle brackets, becomes an inlined AVX-512 function generic over the dot products `d: D`
/// (`D: ByteDot`) and the number of tokens `N`, taking the super-block `x`, the tokens'
/// activations there (`fold_avx512::Tokens`) and their accumulators `acc: &mut [__m512; N]`.
#[cfg(target_arch = "x86_64")]
macro_rules! super_block_adder {
    (
        $vis:vis fn $name:ident $(<$($g:ident: $bound:path),+>)?
            ($d:ident, $x:ident: &$packed:ty, $tokens:ident, $acc:ident) $body:block
    ) => {
        /// Adds super-block `x`'s products with the tokens' activations to their accumulators.
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
        $vis fn $name<$($($g: $bound,)+)? D: $crate::packed::byte_dot::ByteDot, const N: usize>(
            $d: D,
            $x: &$packed,
            $tokens: $crate::packed::fold_avx512::Tokens<'_>,
            $acc: &mut [::std::arch::x86_64::__m512; N],
        ) $body
    };
}

mod allocation;
#[cfg(target_arch = "x86_64")]
pub(crate) mod amx;
mod batch;
#[cfg(target_arch = "x86_64")]
mod byte_codes_amx;
#[cfg(target_arch = "x86_64")]
mod byte_codes_avx512;
#[cfg(test)]
mod byte_codes_reference;
#[cfg(target_arch = "x86_64")]
pub(crate) mod byte_dot;
#[cfg(target_arch = "x86_64")]
mod code_bits_avx512;
#[cfg(target_arch = "x86_64")]
mod fold_avx512;
mod grid_quads;
#[cfg(target_arch = "x86_64")]
mod grid_quads_avx512;
pub(crate) mod iq1_grid;
#[cfg(target_arch = "x86_64")]
mod iq1_grid_avx512;
pub(crate) mod iq1_mx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod iq1_mx16_avx512;
pub(crate) mod iq1_sx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod iq1_sx16_avx512;
pub(crate) mod iq2_grid;
#[cfg(target_arch = "x86_64")]
mod iq2_grid_avx512;
pub(crate) mod iq2_sx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod iq2_sx16_avx512;
pub(crate) mod iq2_xsx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod iq2_xsx16_avx512;
pub(crate) mod iq2_xxsx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod iq2_xxsx16_avx512;
pub(crate) mod iq3_sx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod iq3_sx16_avx512;
pub(crate) mod iq3_xxsx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod iq3_xxsx16_avx512;
pub(crate) mod iq4_xsx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod iq4_xsx16_avx512;
pub(crate) mod min_formats;
#[cfg(target_arch = "x86_64")]
pub(crate) mod min_formats_avx512;
pub(crate) mod mxfp4x16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod mxfp4x16_avx512;
pub(crate) mod nibbles;
#[cfg(target_arch = "x86_64")]
pub(crate) mod nibbles_avx512;
pub(crate) mod q2_kx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod q2_kx16_avx512;
pub(crate) mod q3_kx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod q3_kx16_avx512;
pub(crate) mod q4_kx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod q4_kx16_avx512;
pub(crate) mod q5_0x16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod q5_0x16_avx512;
pub(crate) mod q5_kx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod q5_kx16_avx512;
pub(crate) mod q6_kx16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod q6_kx16_avx512;
pub(crate) mod q8_0x16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod q8_0x16_avx512;
#[cfg(test)]
mod reference;
#[cfg(target_arch = "x86_64")]
mod register_grid_avx512;
mod rows;
mod shared;
mod summary;
#[cfg(target_arch = "x86_64")]
mod super_blocks_amx;
#[cfg(target_arch = "x86_64")]
mod table_lookup_avx512;
#[cfg(test)]
mod tests;
pub(crate) mod tq1_0x16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod tq1_0x16_avx512;
pub(crate) mod tq2_0x16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod tq2_0x16_avx512;
mod two_bits;
#[cfg(target_arch = "x86_64")]
mod two_bits_avx512;

pub use batch::{RowsProduct, matvec_packed_batch};
pub use shared::matmul_packed_shared;

/// Rows per packed block.
pub(crate) const ROWS: usize = 16;

/// A packed block format: sixteen rows of one block column, packed from the stored blocks,
/// multiplied against activations quantized to `Act` and summarized per 32 values.
pub(crate) trait PackedFormat: Pod + Send + Sync {
    /// The stored block it is packed from, whose activation format it multiplies.
    type Source: BlockFormat;
    /// The activation block format.
    type Act: Summarized;
    /// Bytes a packed row takes beyond its source block: 0 where it keeps the source's size;
    /// more where the layout completes seven-bit sign bytes, widens packed scales or mins, or
    /// keeps a scale as f32.
    const EXTRA_ROW_BYTES: usize = 0;
    /// Packs `block` as row `i` (`0..16`) of `self`, which was zeroed before its first row.
    fn pack_row(&mut self, i: usize, block: &Self::Source);

    /// Packs one block of each of up to sixteen rows into `self` (zeroed): missing rows stay
    /// zero.
    fn pack_into(&mut self, rows: &[&Self::Source]) {
        const {
            assert!(
                size_of::<Self>() == ROWS * (size_of::<Self::Source>() + Self::EXTRA_ROW_BYTES),
                "a packed block is sixteen source blocks and the declared extra bytes"
            )
        };
        for (i, block) in rows.iter().enumerate().take(ROWS) {
            self.pack_row(i, block);
        }
    }

    /// [`PackedFormat::pack_into`] a zeroed block.
    #[cfg(test)]
    fn pack(rows: &[Self::Source]) -> Self {
        let mut out = Self::zeroed();
        out.pack_into(&rows.iter().collect::<Vec<_>>());
        out
    }
}

/// A packed kernel: the sixteen rows of one row group against several tokens.
///
/// `unsafe` because SIMD kernels need the instruction set they were written for; only the
/// packers the registry lists for that instruction set build a matrix with one.
pub(crate) type GroupDotFn<P> =
    unsafe fn(&[P], &[<P as PackedFormat>::Act], &[BlockSummary], &mut [[f32; ROWS]]);

/// The kernels of a packed layout for AVX-512 (F, BW and VL, with AVX2, FMA and F16C; with
/// VNNI or without) and, where it has one, for AMX: what [`pack_avx512`] packs the layout for.
/// The macros `super_block_dot_group!` and `byte_code_kernels!` implement it.
#[cfg(target_arch = "x86_64")]
pub(crate) trait Avx512Kernels: PackedFormat {
    /// The AVX-512 VNNI kernel; bit-identical to the layout's scalar reference.
    const DOT: GroupDotFn<Self>;
    /// The same kernel on AVX-512 BW's multiply-adds, for CPUs without VNNI; bit-identical to
    /// [`Self::DOT`].
    const DOT_BW: GroupDotFn<Self>;
    /// The same products on the AMX tile unit (bit-identical to [`Self::DOT`]; it needs
    /// [`crate::Isa::Amx`]), where the layout has them.
    const DOT_AMX: Option<GroupDotFn<Self>> = None;
    /// [`Self::DOT_AMX`] on the software model of the tile unit, so that tests check the AMX
    /// kernels on any CPU with AVX-512 VNNI.
    #[cfg(test)]
    const DOT_AMX_MODEL: Option<GroupDotFn<Self>> = None;
}

/// Packs `w` into layout `P` for the best of its kernels that `isa` runs: the AMX one where
/// `isa` includes AMX and the layout has one, else the VNNI one where `isa` includes VNNI,
/// else the AVX-512 BW one. The registry's entry for a layout.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VL, AVX2, FMA and F16C, and everything `isa`
/// includes: products of the returned matrix run the kernel.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn pack_avx512<P: Avx512Kernels>(
    w: &WeightMatrix<'_>,
    release: Release<'_>,
    isa: crate::Isa,
) -> PackedMatrix {
    let dot = match P::DOT_AMX {
        Some(amx) if isa >= crate::Isa::Amx => amx,
        _ if isa >= crate::Isa::Avx512Vnni => P::DOT,
        _ => P::DOT_BW,
    };
    PackedMatrix::pack_with::<P>(w, dot, release)
}

/// Told each byte range of the source matrix once it is packed and will not be read again.
pub(crate) type Release<'r> = &'r (dyn Fn(Range<usize>) + Sync);

/// Packs a matrix for the best kernel of its layout that an instruction set runs (the AMX one
/// where the set includes [`crate::Isa::Amx`]): a registry entry.
///
/// `unsafe` because the matrix it returns runs its kernel in [`matmul_packed`]: the CPU must
/// support the instruction set the registry lists beside it, and the one passed.
pub(crate) type PackFn = unsafe fn(&WeightMatrix<'_>, Release<'_>, crate::Isa) -> PackedMatrix;

/// The packed rows of one format and their kernel, behind one interface.
trait PackedProduct: Send + Sync {
    /// `y = W[rows]·x` for `n_tokens` rows of `x` already quantized by
    /// [`PackedProduct::quantize`] (`bytes`, `summaries`; lengths already checked; `rows`
    /// starts on a row group and ends on one or at the last row), with `tile` as the output
    /// tile (at least `rows.len() · min(n_tokens, TOKEN_TILE)` values when `n_tokens > 1`).
    #[allow(clippy::too_many_arguments)]
    fn matmul_quantized(
        &self,
        rows: Range<usize>,
        cols: usize,
        bytes: &[u8],
        summaries: &[BlockSummary],
        n_tokens: usize,
        tile: &mut [f32],
        y: &mut [f32],
    );

    /// Bytes of one quantized activation row of `cols` values.
    fn activation_row_bytes(&self, cols: usize) -> usize;

    /// Quantizes the rows of `x` (`cols` values each) into `bytes` for this format, with the
    /// summaries of their 32-value groups (`bytes` and `summaries` sized for those rows).
    fn quantize(&self, cols: usize, x: &[f32], bytes: &mut [u8], summaries: &mut [BlockSummary]);

    /// The outputs of row group `group` (its first `out.len()` rows) against one quantized
    /// activation row `a` with summaries `s`.
    fn dot_one(&self, group: usize, cols: usize, a: &[u8], s: &[BlockSummary], out: &mut [f32]);

    /// Packed weight bytes per row of a matrix of `cols` columns.
    fn bytes_per_row(&self, cols: usize) -> usize;

    /// The format its activations are quantized to.
    fn activation_type(&self) -> GgmlType;
}

/// A weight matrix repacked for this CPU's fastest kernel (by [`crate::Kernels::pack`]);
/// multiply it with [`matmul_packed`].
///
/// ```
/// use rinfer_formats::GgmlType;
/// use rinfer_kernels::{Kernels, WeightMatrix};
///
/// let data = vec![0u8; 64 * 22]; // 64 rows of one Q5_0 block
/// let w = WeightMatrix::new(GgmlType::Q5_0, 64, 32, &data)?;
/// // `None` where the CPU has no packed kernel (no AVX-512 VNNI): multiply `w` as it is.
/// if let Some(packed) = Kernels::detected().pack(&w) {
///     assert_eq!((packed.rows(), packed.cols()), (64, 32));
/// }
/// # Ok::<(), rinfer_kernels::KernelError>(())
/// ```
pub struct PackedMatrix {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    data: Box<dyn PackedProduct>,
}

impl std::fmt::Debug for PackedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedMatrix")
            .field("ty", &self.ty)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl PackedMatrix {
    /// Packs `w` (whose type is `P::Source`'s) for the kernel `dot`.
    fn pack_with<P: PackedFormat>(
        w: &WeightMatrix<'_>,
        dot: GroupDotFn<P>,
        release: Release<'_>,
    ) -> Self {
        debug_assert_eq!(w.ty(), P::Source::TYPE);
        PackedMatrix {
            ty: w.ty(),
            rows: w.rows(),
            cols: w.cols(),
            data: Box::new(rows::pack_rows(w, dot, release)),
        }
    }

    /// Number of rows (outputs).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (inputs).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Whether this matrix reads its input as `other` does (the same width, quantized to the
    /// same format), so that the two can share one quantized input in [`matmul_packed_shared`]
    /// and [`matvec_packed_batch`].
    pub fn reads_input_like(&self, other: &PackedMatrix) -> bool {
        (self.cols, self.data.activation_type()) == (other.cols, other.data.activation_type())
    }

    /// Whether the rows from `row` on can be multiplied apart from those before it (with
    /// [`matmul_packed_rows`]): rows are packed in groups, so a range must start where a group
    /// does. A matrix that stacks several experts' rows splits at each expert if this holds at
    /// each expert's first row.
    pub fn splits_at(&self, row: usize) -> bool {
        row.is_multiple_of(ROWS) && row <= self.rows
    }
}

/// `Y = W·X` for packed `w`: `x` holds `n_tokens` rows of `w.cols()` values, `y` receives
/// `n_tokens` rows of `w.rows()` values (one token is a matvec). Activations are quantized once
/// into `act`.
///
/// # Errors
/// [`KernelError::LengthMismatch`] when `x` or `y` do not fit the matrix and
/// [`KernelError::ScratchTooSmall`] when `act` was sized for fewer tokens, columns or rows.
pub fn matmul_packed(
    w: &PackedMatrix,
    x: &[f32],
    n_tokens: usize,
    act: &mut ActivationBuffer,
    y: &mut [f32],
) -> Result<(), KernelError> {
    matmul_packed_rows(w, 0..w.rows, x, n_tokens, act, y)
}

/// [`matmul_packed`] of the rows `rows` of `w` alone (one expert of a matrix that stacks every
/// expert's rows): `y` receives `n_tokens` rows of `rows.len()` values, each the bits
/// [`matmul_packed`] gives that row.
///
/// # Errors
/// [`KernelError::RowRange`] when `rows` does not start where [`PackedMatrix::splits_at`]
/// allows, ends past the matrix, or ends inside a row group short of the last row; otherwise as
/// [`matmul_packed`].
pub fn matmul_packed_rows(
    w: &PackedMatrix,
    rows: Range<usize>,
    x: &[f32],
    n_tokens: usize,
    act: &mut ActivationBuffer,
    y: &mut [f32],
) -> Result<(), KernelError> {
    let ends_on_group = rows.end == w.rows || w.splits_at(rows.end);
    if !w.splits_at(rows.start) || rows.end > w.rows || rows.start > rows.end || !ends_on_group {
        return Err(KernelError::RowRange {
            start: rows.start,
            end: rows.end,
            rows: w.rows,
        });
    }
    for (what, expected, actual) in [
        ("activations", n_tokens * w.cols, x.len()),
        ("output", n_tokens * rows.len(), y.len()),
    ] {
        if expected != actual {
            return Err(KernelError::LengthMismatch {
                what,
                expected,
                actual,
            });
        }
    }
    if n_tokens == 0 || rows.is_empty() {
        return Ok(());
    }
    let parts = quantize_input(w, x, n_tokens, rows.len(), act)?;
    w.data.matmul_quantized(
        rows,
        w.cols,
        parts.bytes,
        parts.summaries,
        n_tokens,
        parts.tile,
        y,
    );
    Ok(())
}

/// Quantizes the `n_tokens` rows of `x` as `w` reads them into `act`, which also lends the
/// output tile for products of up to `most_rows` rows: the first step of every packed product.
///
/// # Errors
/// [`KernelError::ScratchTooSmall`] when `act` was sized for fewer tokens, columns or rows.
fn quantize_input<'a>(
    w: &PackedMatrix,
    x: &[f32],
    n_tokens: usize,
    most_rows: usize,
    act: &'a mut ActivationBuffer,
) -> Result<ScratchParts<'a>, KernelError> {
    let tile = match n_tokens {
        0 | 1 => 0,
        n => most_rows * TOKEN_TILE.min(n),
    };
    let row_bytes = w.data.activation_row_bytes(w.cols);
    let parts = act.parts(n_tokens * row_bytes, n_tokens * w.cols / 32, tile)?;
    w.data.quantize(w.cols, x, parts.bytes, parts.summaries);
    Ok(parts)
}
