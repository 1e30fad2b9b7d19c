//! The batched decode's host-side state: the layout and host image of its KV-cache tables, the
//! rows' ids and positions, and its graphs (see `decode_rows.rs`).

use cudarc::driver::CudaGraph;

use crate::graph_policy::DecodeGraph;
use crate::plan::UploadPlan;
use crate::program::CacheTables;

/// The batched decode's host-side state, allocated once at load.
pub(crate) struct RowDecode {
    /// Where the device tables are and how they are laid out.
    pub tables: CacheTables,
    /// The host image of the tables `[layers, 2, rows]`.
    pub table: Vec<u64>,
    /// Token ids of the rows `[rows]`.
    pub ids: Vec<i32>,
    /// Positions of the rows `[rows]`.
    pub positions: Vec<i32>,
    /// One graph per row count.
    pub graphs: DecodeGraph<CudaGraph>,
}

impl RowDecode {
    /// The state for `plan`'s batched decode, its tables at device address `tables`.
    pub(crate) fn new(plan: &UploadPlan, tables: u64) -> Self {
        let rows = plan.decode_rows;
        let tables = CacheTables {
            base: tables,
            rows,
            slots: plan.kv_slots.clone(),
            block_strides: plan.kv_block_strides(),
        };
        Self {
            table: vec![0; tables.len()],
            tables,
            ids: vec![0; rows],
            positions: vec![0; rows],
            graphs: DecodeGraph::default(),
        }
    }
}
