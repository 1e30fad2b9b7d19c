//! The sums an importance matrix is made of, collected by observing the forward pass's products
//! as llama-imatrix's `collect_imatrix` does.

use std::collections::HashMap;

use rinfer_transformer::{Mapper, Role, Tensor};

use crate::observe::MatmulObserver;
use crate::weights::{Cpu, Linear, Matrix};

/// llama.cpp leaves out the products of a batch of fewer rows (`src1->ne[1] < 16`), except
/// routed experts'.
const FEWEST_ROWS: usize = 16;

/// How the products of one tensor are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A 2-D matrix (`MUL_MAT`): one count, every row of every batch.
    Dense,
    /// One matrix per head stacked in a 3-D tensor (latent attention's `attn_k_b`,
    /// `attn_v_b`; a `MUL_MAT` over the heads): sums per head, one count of the batch's rows.
    PerHead,
    /// As [`Kind::PerHead`], of a product that reads each KV stream (chunk) of the batch apart
    /// (latent attention's `attn_v_b`, after attention): fewer than 16 rows per chunk are
    /// skipped.
    PerHeadPerChunk,
    /// Routed experts (`MUL_MAT_ID`): sums and a count per expert, of the rows routed to it.
    Routed,
}

/// The squared inputs of one weight tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Input columns of one matrix.
    pub(crate) cols: usize,
    pub(crate) kind: Kind,
    /// Per matrix (expert or head), per input column, the sum over its rows of the input
    /// squared, in f32 as llama.cpp adds them (`[matrices, cols]`).
    pub(crate) sums: Vec<f32>,
    /// Rows counted per expert (one count for the other kinds).
    pub(crate) counts: Vec<u64>,
}

impl Entry {
    /// The sums, `cols` per matrix, matrices one after the other.
    pub fn sums(&self) -> &[f32] {
        &self.sums
    }

    /// The rows counted: one per expert for routed experts, else one.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Input columns of one matrix.
    pub fn cols(&self) -> usize {
        self.cols
    }
}

/// Observes a model's products and adds each `blk.*` weight's squared inputs to its entry.
pub(crate) struct Collector {
    /// Entry names, in the order `targets` refers to them.
    names: Vec<String>,
    entries: Vec<Entry>,
    /// Per matrix (by the address of its bytes): its entry and which of its matrices it is.
    targets: HashMap<usize, (usize, usize)>,
    /// Rows each chunk (KV stream) has in the current pass.
    rows_per_chunk: usize,
}

impl Collector {
    /// A collector for the layer weights of `model`'s transformer (llama-imatrix leaves out the
    /// embedding and the LM head).
    pub(crate) fn new(transformer: &rinfer_transformer::Transformer<Cpu>) -> Self {
        let mut collector = Self {
            names: Vec::new(),
            entries: Vec::new(),
            targets: HashMap::new(),
            rows_per_chunk: 0,
        };
        let Ok(_) = transformer.map(&mut Targets(&mut collector));
        collector
    }

    fn add(&mut self, t: &Tensor, kind: Kind, matrices: &[&Matrix]) {
        let name = t.name.to_string();
        let Some(first) = matrices.first() else {
            return;
        };
        if !name.starts_with("blk.") {
            return;
        }
        let entry = self.entries.len();
        for (index, m) in matrices.iter().enumerate() {
            self.targets.insert(address(m), (entry, index));
        }
        let counts = if kind == Kind::Routed {
            matrices.len()
        } else {
            1
        };
        self.names.push(name);
        self.entries.push(Entry {
            cols: first.cols,
            kind,
            sums: vec![0.0; first.cols * matrices.len()],
            counts: vec![0; counts],
        });
    }

    /// The next passes hold `rows` rows of each of their chunks.
    pub(crate) fn pass_rows_per_chunk(&mut self, rows: usize) {
        self.rows_per_chunk = rows;
    }

    /// The entries by tensor name.
    pub(crate) fn into_entries(self) -> HashMap<String, Entry> {
        self.names.into_iter().zip(self.entries).collect()
    }
}

/// The address of a matrix's bytes, which names it.
fn address(m: &Matrix) -> usize {
    m.data().as_ptr() as usize
}

impl MatmulObserver for Collector {
    fn observe(&mut self, weight: &Matrix, input: &[f32], rows: usize) {
        let Some(&(entry, index)) = self.targets.get(&address(weight)) else {
            return;
        };
        let e = &mut self.entries[entry];
        let skipped = match e.kind {
            Kind::Dense | Kind::PerHead => rows < FEWEST_ROWS,
            Kind::PerHeadPerChunk => rows.min(self.rows_per_chunk) < FEWEST_ROWS,
            Kind::Routed => false,
        };
        if skipped {
            return;
        }
        let acc = &mut e.sums[index * e.cols..(index + 1) * e.cols];
        for row in input.chunks_exact(e.cols).take(rows) {
            for (a, &x) in acc.iter_mut().zip(row) {
                *a += x * x;
            }
        }
        match e.kind {
            Kind::Routed => e.counts[index] += rows as u64,
            // Every head sees the same rows: count them once.
            Kind::PerHead | Kind::PerHeadPerChunk if index > 0 => {}
            Kind::Dense | Kind::PerHead | Kind::PerHeadPerChunk => e.counts[0] += rows as u64,
        }
    }
}

/// Registers every matrix of a tree with the collector.
struct Targets<'c>(&'c mut Collector);

impl<'t> Mapper<'t, Cpu, ()> for Targets<'_> {
    type Error = std::convert::Infallible;

    fn matrix(&mut self, t: &Tensor, m: &'t Matrix) -> Result<(), Self::Error> {
        self.0.add(t, Kind::Dense, &[m]);
        Ok(())
    }

    fn vector(&mut self, _: &Tensor, _: &'t Vec<f32>) -> Result<(), Self::Error> {
        Ok(())
    }

    fn experts(&mut self, t: &Tensor, e: &'t Vec<Linear>) -> Result<(), Self::Error> {
        let kind = match (t.name.role.single_expert(), t.name.role) {
            (Some(_), _) => Kind::Routed,
            (None, Role::AttnVB) => Kind::PerHeadPerChunk,
            (None, _) => Kind::PerHead,
        };
        let matrices: Vec<&Matrix> = e.iter().map(|l| &l.weight).collect();
        self.0.add(t, kind, &matrices);
        Ok(())
    }
}
