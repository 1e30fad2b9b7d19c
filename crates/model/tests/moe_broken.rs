//! Mixture-of-experts files whose metadata lies about the experts are refused with a one-line
//! error naming the problem (llama.cpp aborts on two of them); the valid control runs.

mod common;

use common::fixtures;
use rinfer_model::{KvCache, Logits, Model, Scratch};

fn open(name: &str) -> Result<Model, String> {
    let path = fixtures().join(format!("models/broken/{name}.gguf"));
    Model::open_gguf(path)
        .map(|(model, _file)| model)
        .map_err(|e| e.to_string())
}

fn refused(name: &str) -> String {
    let message = open(name).err().unwrap_or_else(|| panic!("{name} loaded"));
    assert!(!message.contains('\n'), "{name}: not one line: {message}");
    message
}

#[test]
fn the_control_loads_and_decodes_finite_logits() {
    let model = open("moe_control_valid").unwrap();
    let mut cache = KvCache::new(&model.config, 8, 1);
    let mut scratch = Scratch::new(&model.config, 1);
    for token in 0..8 {
        let logits = model
            .forward(&[token * 7 % 64], &mut cache, &mut scratch, Logits::Last)
            .unwrap();
        assert!(logits.iter().all(|l| l.is_finite()), "token {token}");
    }
}

/// Each broken file is refused, the error naming what is wrong with it.
#[test]
fn files_that_lie_about_their_experts_are_refused_naming_the_problem() {
    for (name, named) in [
        // Zero experts.
        ("moe_expert_count_zero", "expert_count"),
        // More experts used than there are.
        ("moe_expert_used_gt_count", "expert_used_count"),
        // Expert tensors with too few experts.
        ("moe_expert_dim_mismatch", "blk.0.ffn_gate_exps.weight"),
        // A router of the wrong shape.
        ("moe_gate_inp_wrong_shape", "blk.0.ffn_gate_inp.weight"),
    ] {
        let message = refused(name);
        assert!(message.contains(named), "{name}: {message}");
    }
}
