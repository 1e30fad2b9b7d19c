//! `Transformer::map` visits every weight of a tree once, in order, with the GGUF name and the
//! shape the dimensions imply: what the loader checks tensors against and the GPU names them by.

use rinfer_transformer::{
    Block, Experts, Ffn, GateUpDown, Gating, Heads, Linear, Mapper, Norm, NormKind, NormWeights,
    Qkv, Role, RopeParams, RopeStyle, Router, Shape, Stage, Tensor, Transformer,
};

/// Records every weight `map` visits.
struct Visits(Vec<(String, Shape)>);

impl<'t> Mapper<'t, (), ()> for Visits {
    type Error = ();

    fn matrix(&mut self, t: &Tensor, _: &'t ()) -> Result<(), ()> {
        self.0.push((t.name.to_string(), t.shape));
        Ok(())
    }

    fn vector(&mut self, t: &Tensor, _: &'t ()) -> Result<(), ()> {
        self.0.push((t.name.to_string(), t.shape));
        Ok(())
    }

    fn experts(&mut self, t: &Tensor, _: &'t ()) -> Result<(), ()> {
        self.0.push((t.name.to_string(), t.shape));
        Ok(())
    }
}

#[test]
fn map_names_every_weight_with_the_shape_the_dimensions_imply() {
    let norm = |role| NormWeights {
        role,
        params: Norm {
            kind: NormKind::Rms,
            eps: 1e-6,
        },
        weight: (),
        bias: None,
    };
    let linear = |bias: bool| Linear {
        weight: (),
        bias: bias.then_some(()),
    };
    let stages = vec![
        Stage::AttentionNorm(norm(Role::AttnNorm)),
        Stage::Qkv(Qkv::Separate {
            q: linear(true),
            k: linear(false),
            v: linear(false),
        }),
        Stage::QkNorm {
            eps: 1e-6,
            q: (),
            k: (),
        },
        Stage::Rope(RopeParams {
            n_rot: 8,
            freq_base: 1e4,
            freq_scale: 1.0,
            style: RopeStyle::Neox,
            yarn: None,
            factors: true,
        }),
        Stage::AttentionOutput(linear(false)),
        Stage::AttentionResidual,
        Stage::FfnNorm(norm(Role::PostAttentionNorm)),
        Stage::Router {
            router: Router {
                experts: 4,
                used: 2,
                gating: Gating::SoftmaxTopK,
                scale: 1.0,
            },
            scores: linear(false),
            selection_bias: None,
        },
        Stage::Experts {
            experts: Experts {
                ffn: Ffn::SiluGated,
                ffn_dim: 6,
            },
            weights: GateUpDown {
                gate: (),
                up: (),
                down: (),
            },
        },
        Stage::FfnResidual,
    ];
    let tree: Transformer<()> = Transformer {
        vocab_size: 10,
        hidden: 16,
        heads: 2,
        kv_heads: 1,
        head_dim: 8,
        ffn_dim: 32,
        embedding_scale: None,
        token_embd: (),
        position_embd: None,
        token_types: None,
        embedding_norm: None,
        causal: true,
        rope_freqs: Some(()),
        per_layer_inputs: None,
        blocks: vec![Block {
            heads: Heads {
                heads: 2,
                kv_heads: 1,
                head_dim: 8,
            },
            stages,
        }],
        output_norm: Some(norm(Role::OutputNorm)),
        output: Some(()),
        output_bias: None,
        final_softcap: None,
        classifier: None,
    };
    let mut visits = Visits(Vec::new());
    tree.map(&mut visits).unwrap();
    let matrix = |rows, cols| Shape::Matrix { rows, cols };
    let experts = |rows, cols| Shape::Experts {
        count: 4,
        rows,
        cols,
    };
    let want = [
        ("token_embd.weight", matrix(10, 16)),
        ("rope_freqs.weight", Shape::Vector(4)),
        ("blk.0.attn_norm.weight", Shape::Vector(16)),
        ("blk.0.attn_q.weight", matrix(16, 16)),
        ("blk.0.attn_q.bias", Shape::Vector(16)),
        ("blk.0.attn_k.weight", matrix(8, 16)),
        ("blk.0.attn_v.weight", matrix(8, 16)),
        ("blk.0.attn_q_norm.weight", Shape::Vector(8)),
        ("blk.0.attn_k_norm.weight", Shape::Vector(8)),
        ("blk.0.attn_output.weight", matrix(16, 16)),
        ("blk.0.post_attention_norm.weight", Shape::Vector(16)),
        ("blk.0.ffn_gate_inp.weight", matrix(4, 16)),
        ("blk.0.ffn_gate_exps.weight", experts(6, 16)),
        ("blk.0.ffn_up_exps.weight", experts(6, 16)),
        ("blk.0.ffn_down_exps.weight", experts(16, 6)),
        ("output_norm.weight", Shape::Vector(16)),
        ("output.weight", matrix(10, 16)),
    ];
    let got: Vec<(&str, Shape)> = visits.0.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    assert_eq!(got, want);
}
