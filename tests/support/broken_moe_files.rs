//! The broken mixture-of-experts fixtures (`tests/fixtures/models/broken`), each with the name
//! its refusal must give for its fault, shared by the tests of the library and of the binary
//! (included by path).

/// Each broken file's name (without `.gguf`) and what its refusal names.
pub const BROKEN_MOE_FILES: [(&str, &str); 4] = [
    ("moe_expert_count_zero", "expert_count"),
    ("moe_expert_used_gt_count", "expert_used_count"),
    ("moe_expert_dim_mismatch", "blk.0.ffn_gate_exps.weight"),
    ("moe_gate_inp_wrong_shape", "blk.0.ffn_gate_inp.weight"),
];
