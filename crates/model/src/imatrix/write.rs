//! An importance matrix written as llama-imatrix's `save_imatrix` writes it: GGUF metadata
//! `general.type = "imatrix"`, `imatrix.datasets`, `imatrix.chunk_count`,
//! `imatrix.chunk_size`, then per entry, in name order, `NAME.in_sum2` (F32 `[values / counts, counts]`)
//! and `NAME.counts` (F32 `[1, counts]`), trailing dimensions of 1 dropped as ggml does.

use rinfer_formats::GgmlType;
use rinfer_formats::gguf::{GgufWriter, MetadataValue, ValueType};

use super::ImatrixSums;

impl ImatrixSums {
    /// The GGUF file of this matrix, laid out as llama-imatrix lays it out.
    pub fn to_gguf(&self) -> Result<GgufWriter, rinfer_formats::GgufError> {
        let mut w = GgufWriter::new();
        w.add_metadata("general.type", MetadataValue::String("imatrix".into()))?;
        let datasets = self
            .datasets
            .iter()
            .map(|d| MetadataValue::String(d.clone()))
            .collect();
        w.add_metadata(
            "imatrix.datasets",
            MetadataValue::Array {
                element: ValueType::String,
                items: datasets,
            },
        )?;
        w.add_metadata(
            "imatrix.chunk_count",
            MetadataValue::U32(self.chunk_count()),
        )?;
        w.add_metadata("imatrix.chunk_size", MetadataValue::U32(self.chunk_size))?;
        let mut names: Vec<&String> = self.entries.keys().collect();
        names.sort();
        for name in names {
            let e = &self.entries[name];
            // ggml's shapes: `[values / counts, counts]` and `[1, counts]`, a trailing 1 dropped
            // (so a latent attention's heads, with one count, lie in one row).
            let n = e.counts.len();
            let dims = |first: usize| match n {
                1 => vec![first as u64],
                _ => vec![first as u64, n as u64],
            };
            let sums = e.sums.iter().flat_map(|v| v.to_le_bytes()).collect();
            let sums_dims = dims(e.sums.len() / n);
            w.add_tensor(&format!("{name}.in_sum2"), GgmlType::F32, &sums_dims, sums)?;
            let counts = e.counts.iter().flat_map(|&c| (c as f32).to_le_bytes());
            let counts = counts.collect();
            w.add_tensor(&format!("{name}.counts"), GgmlType::F32, &dims(1), counts)?;
        }
        Ok(w)
    }
}
