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

#[test]
fn zero_experts_are_refused() {
    let message = refused("moe_expert_count_zero");
    assert!(message.contains("expert_count"), "{message}");
}

#[test]
fn more_experts_used_than_there_are_is_refused() {
    let message = refused("moe_expert_used_gt_count");
    assert!(message.contains("expert_used_count"), "{message}");
}

#[test]
fn expert_tensors_with_too_few_experts_are_refused() {
    let message = refused("moe_expert_dim_mismatch");
    assert!(message.contains("blk.0.ffn_gate_exps.weight"), "{message}");
}

#[test]
fn a_router_of_the_wrong_shape_is_refused() {
    let message = refused("moe_gate_inp_wrong_shape");
    assert!(message.contains("blk.0.ffn_gate_inp.weight"), "{message}");
}
