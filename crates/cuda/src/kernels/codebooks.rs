//! The i-quants' code tables as CUDA C device arrays, generated from `rinfer-kernels`'
//! [`codebooks`] when the program is assembled, so the tables are written down once (in
//! `rinfer-kernels`, checked there against ggml's) and the GPU reads the very words the CPU does.
//!
//! The host emulation compiles the kernel files as they are: its test drivers include
//! [`CODEBOOKS_HEADER`], which [`write_host_headers`] writes into their build folder.

use std::fmt::{LowerHex, Write};
use std::path::Path;

use rinfer_kernels::codebooks;

/// The name the host test drivers include the generated tables by.
pub const CODEBOOKS_HEADER: &str = "codebooks.cuh";

/// `static __device__ const <ty> <name>[N] = {...};`, eight words a line.
fn table<T: LowerHex + Copy>(out: &mut String, ty: &str, suffix: &str, name: &str, words: &[T]) {
    let _ = writeln!(
        out,
        "static __device__ const {ty} {name}[{}] = {{",
        words.len()
    );
    for line in words.chunks(8) {
        let items: Vec<String> = line.iter().map(|w| format!("0x{w:x}{suffix}")).collect();
        let _ = writeln!(out, "    {},", items.join(", "));
    }
    out.push_str("};\n");
}

/// The CUDA C text of every table the i-quant readers of `dequant_iq.cuh` use (ggml's names).
pub fn codebooks_source() -> String {
    let mut out = String::from(
        "// The i-quants' code tables, generated from rinfer_kernels::codebooks \
         (src/kernels/codebooks.rs).\n",
    );
    table(
        &mut out,
        "u64",
        "ull",
        "iq2xxs_grid",
        &codebooks::IQ2XXS_GRID,
    );
    table(&mut out, "u64", "ull", "iq2xs_grid", &codebooks::IQ2XS_GRID);
    table(&mut out, "u64", "ull", "iq2s_grid", &codebooks::IQ2S_GRID);
    table(&mut out, "u64", "ull", "iq1s_grid", &codebooks::IQ1S_GRID);
    table(&mut out, "u32", "u", "iq3xxs_grid", &codebooks::IQ3XXS_GRID);
    table(&mut out, "u32", "u", "iq3s_grid", &codebooks::IQ3S_GRID);
    table(&mut out, "u8", "", "ksigns_iq2xs", &codebooks::KSIGNS);
    let values: Vec<u8> = codebooks::IQ4_VALUES.iter().map(|&v| v as u8).collect();
    table(&mut out, "u8", "", "kvalues_iq4nl", &values);
    out
}

/// Writes the generated headers the host test drivers include ([`CODEBOOKS_HEADER`]) into
/// `dir`, which their compiler then searches (`-I dir`).
pub fn write_host_headers(dir: &Path) -> std::io::Result<()> {
    std::fs::write(dir.join(CODEBOOKS_HEADER), codebooks_source())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_ggml_words_and_lengths() {
        let source = codebooks_source();
        assert!(source.contains("static __device__ const u64 iq1s_grid[2048] = {"));
        assert!(source.contains("    0xffffffffffffffffull, 0xffffffffffffff01ull,"));
        assert!(source.contains("static __device__ const u32 iq3s_grid[512] = {"));
        assert!(source.contains("static __device__ const u8 kvalues_iq4nl[16] = {\n    0x81, "));
        assert_eq!(source.matches("};\n").count(), 8);
    }
}
