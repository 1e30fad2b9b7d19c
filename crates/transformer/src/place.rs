//! The walk of [`Transformer::map`](crate::Transformer::map) over one layer: each stage's
//! weights with their roles and the shapes the dimensions imply, handed to the [`Mapper`].

use crate::block::{
    FfnUp, Handles, LatentQ, Linear, Mapper, NormWeights, Qkv, Shape, Stage, Tensor, Transformer,
};
use crate::tensor::{Role, TensorName};

/// Where [`Transformer::map`] is: the model and the layer (none for the head).
pub(crate) struct Place<'t, H: Handles> {
    pub(crate) c: &'t Transformer<H>,
    pub(crate) layer: Option<usize>,
}

impl<'t, H: Handles> Place<'t, H> {
    fn name(&self, role: Role) -> TensorName {
        match self.layer {
            Some(layer) => TensorName::layer(role, layer),
            None => TensorName::model(role),
        }
    }

    pub(crate) fn vector<B: Handles, M: Mapper<'t, H, B>>(
        &self,
        role: Role,
        len: usize,
        v: &'t H::Vector,
        m: &mut M,
    ) -> Result<B::Vector, M::Error> {
        let t = Tensor {
            name: self.name(role),
            shape: Shape::Vector(len),
        };
        m.vector(&t, v)
    }

    /// A convolution kernel of `channels` rows of `taps` values.
    fn filter<B: Handles, M: Mapper<'t, H, B>>(
        &self,
        role: Role,
        (channels, taps): (usize, usize),
        v: &'t H::Vector,
        m: &mut M,
    ) -> Result<B::Vector, M::Error> {
        let t = Tensor {
            name: self.name(role),
            shape: Shape::Filter { channels, taps },
        };
        m.vector(&t, v)
    }

    /// A bias of `len` values beside the weight `weight`.
    pub(crate) fn bias<B: Handles, M: Mapper<'t, H, B>>(
        weight: TensorName,
        len: usize,
        bias: &'t Option<H::Vector>,
        m: &mut M,
    ) -> Result<Option<B::Vector>, M::Error> {
        let Some(bias) = bias else {
            return Ok(None);
        };
        let t = Tensor {
            name: weight.bias(),
            shape: Shape::Vector(len),
        };
        m.optional_vector(&t, bias)
    }

    pub(crate) fn norm<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        n: &'t NormWeights<H>,
        len: usize,
        m: &mut M,
    ) -> Result<NormWeights<B>, M::Error> {
        Ok(NormWeights {
            role: n.role,
            params: n.params,
            weight: self.vector(n.role, len, &n.weight, m)?,
            bias: Self::bias(self.name(n.role), len, &n.bias, m)?,
        })
    }

    pub(crate) fn linear<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        role: Role,
        (rows, cols): (usize, usize),
        l: &'t Linear<H>,
        m: &mut M,
    ) -> Result<Linear<B>, M::Error> {
        let name = self.name(role);
        let t = Tensor {
            name,
            shape: Shape::Matrix { rows, cols },
        };
        Ok(Linear {
            weight: m.matrix(&t, &l.weight)?,
            bias: Self::bias(name, rows, &l.bias, m)?,
        })
    }

    fn experts<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        role: Role,
        (count, rows, cols): (usize, usize, usize),
        e: &'t H::Experts,
        m: &mut M,
    ) -> Result<B::Experts, M::Error> {
        let t = Tensor {
            name: self.name(role),
            shape: Shape::Experts { count, rows, cols },
        };
        m.experts(&t, e)
    }

    /// The stage with its weights mapped; `None` drops it: q/k norms whose weights the mapper
    /// finds absent (an optional pair, as GLM-4.5 files may leave out).
    pub(crate) fn stage<B: Handles, M: Mapper<'t, H, B>>(
        &mut self,
        stage: &'t Stage<H>,
        m: &mut M,
    ) -> Result<Option<Stage<B>>, M::Error> {
        let c = self.c;
        let (hidden, q_dim, kv_dim, ffn) = (c.hidden, c.q_dim(), c.kv_dim(), c.ffn_dim);
        let block = &c.blocks[self.layer.unwrap_or(0)];
        Ok(Some(match stage {
            Stage::AttentionNorm(n) => Stage::AttentionNorm(self.norm(n, hidden, m)?),
            Stage::Qkv(Qkv::Separate { q, k, v }) => Stage::Qkv(Qkv::Separate {
                q: self.linear(Role::AttnQ, (q_dim, hidden), q, m)?,
                k: self.linear(Role::AttnK, (kv_dim, hidden), k, m)?,
                v: self.linear(Role::AttnV, (kv_dim, hidden), v, m)?,
            }),
            Stage::Qkv(Qkv::Fused(qkv)) => Stage::Qkv(Qkv::Fused(self.linear(
                Role::AttnQkv,
                (q_dim + 2 * kv_dim, hidden),
                qkv,
                m,
            )?)),
            Stage::Qkv(Qkv::GatedQuery { q, k, v }) => Stage::Qkv(Qkv::GatedQuery {
                q: self.linear(Role::AttnQ, (2 * q_dim, hidden), q, m)?,
                k: self.linear(Role::AttnK, (kv_dim, hidden), k, m)?,
                v: self.linear(Role::AttnV, (kv_dim, hidden), v, m)?,
            }),
            Stage::AttentionGate => Stage::AttentionGate,
            Stage::ShortConv {
                conv,
                in_proj,
                kernel,
                out_proj,
            } => Stage::ShortConv {
                conv: *conv,
                in_proj: self.linear(Role::ShortConvInProj, (3 * hidden, hidden), in_proj, m)?,
                kernel: self.filter(Role::ShortConvConv, (conv.channels, conv.taps), kernel, m)?,
                out_proj: self.linear(Role::ShortConvOutProj, (hidden, hidden), out_proj, m)?,
            },
            Stage::DeltaNet {
                net,
                qkv,
                gate,
                kernel,
                dt_bias,
                a,
                beta,
                alpha,
                norm,
                output,
            } => {
                let (conv_dim, v_dim, heads) = (net.conv_dim(), net.v_dim(), net.v_heads);
                let dt = Tensor {
                    name: self.name(Role::SsmDt).bias(),
                    shape: Shape::Vector(heads),
                };
                Stage::DeltaNet {
                    net: *net,
                    qkv: self.linear(Role::AttnQkv, (conv_dim, hidden), qkv, m)?,
                    gate: self.linear(Role::AttnGate, (v_dim, hidden), gate, m)?,
                    kernel: self.filter(Role::SsmConv1d, (conv_dim, net.taps), kernel, m)?,
                    dt_bias: m.vector(&dt, dt_bias)?,
                    a: self.vector(Role::SsmA, heads, a, m)?,
                    beta: self.linear(Role::SsmBeta, (heads, hidden), beta, m)?,
                    alpha: self.linear(Role::SsmAlpha, (heads, hidden), alpha, m)?,
                    norm: self.vector(Role::SsmNorm, net.state, norm, m)?,
                    output: self.linear(Role::SsmOut, (hidden, v_dim), output, m)?,
                }
            }
            Stage::QkNorm { eps, q, k } => {
                let t = Tensor {
                    name: self.name(Role::AttnQNorm),
                    shape: Shape::Vector(c.head_dim),
                };
                let Some(q) = m.optional_vector(&t, q)? else {
                    return Ok(None);
                };
                Stage::QkNorm {
                    eps: *eps,
                    q,
                    k: self.vector(Role::AttnKNorm, c.head_dim, k, m)?,
                }
            }
            Stage::LatentQkv {
                mla,
                q,
                kv_a,
                kv_norm,
                k_b,
            } => {
                let q_width = c.heads * mla.q_head();
                Stage::LatentQkv {
                    mla: *mla,
                    q: match q {
                        LatentQ::Direct(l) => {
                            LatentQ::Direct(self.linear(Role::AttnQ, (q_width, hidden), l, m)?)
                        }
                        LatentQ::Lora { a, norm, b } => {
                            let lora = mla.q_lora.unwrap_or(0);
                            LatentQ::Lora {
                                a: self.linear(Role::AttnQA, (lora, hidden), a, m)?,
                                norm: self.norm(norm, lora, m)?,
                                b: self.linear(Role::AttnQB, (q_width, lora), b, m)?,
                            }
                        }
                    },
                    kv_a: self.linear(Role::AttnKvAMqa, (mla.latent(), hidden), kv_a, m)?,
                    kv_norm: self.norm(kv_norm, mla.kv_lora, m)?,
                    k_b: self.experts(Role::AttnKB, (c.heads, mla.kv_lora, mla.nope), k_b, m)?,
                }
            }
            Stage::LatentOutput { mla, v_b } => Stage::LatentOutput {
                mla: *mla,
                v_b: self.experts(Role::AttnVB, (c.heads, mla.v_head, mla.kv_lora), v_b, m)?,
            },
            Stage::Rope(params) => Stage::Rope(*params),
            Stage::Attention { params, sinks } => Stage::Attention {
                params: *params,
                sinks: match sinks {
                    Some(s) => Some(self.vector(Role::AttnSinks, c.heads, s, m)?),
                    None => None,
                },
            },
            Stage::AttentionOutput(l) => {
                let width = block.mla().map_or(q_dim, |mla| c.heads * mla.v_head);
                Stage::AttentionOutput(self.linear(Role::AttnOutput, (hidden, width), l, m)?)
            }
            Stage::PostAttentionNorm(n) => Stage::PostAttentionNorm(self.norm(n, hidden, m)?),
            Stage::AttentionResidual => Stage::AttentionResidual,
            Stage::FfnNorm(n) => Stage::FfnNorm(self.norm(n, hidden, m)?),
            Stage::Ffn {
                ffn: kind,
                up,
                down,
            } => Stage::Ffn {
                ffn: *kind,
                up: match up {
                    FfnUp::Gated { gate, up } => FfnUp::Gated {
                        gate: self.linear(Role::FfnGate, (ffn, hidden), gate, m)?,
                        up: self.linear(Role::FfnUp, (ffn, hidden), up, m)?,
                    },
                    FfnUp::FusedGated(l) => {
                        FfnUp::FusedGated(self.linear(Role::FfnUp, (2 * ffn, hidden), l, m)?)
                    }
                    FfnUp::Plain(l) => {
                        FfnUp::Plain(self.linear(Role::FfnUp, (ffn, hidden), l, m)?)
                    }
                },
                down: self.linear(Role::FfnDown, (hidden, ffn), down, m)?,
            },
            Stage::Router {
                router,
                scores,
                selection_bias,
            } => Stage::Router {
                router: *router,
                scores: self.linear(Role::FfnGateInp, (router.experts, hidden), scores, m)?,
                selection_bias: match selection_bias {
                    Some(b) => {
                        let t = Tensor {
                            name: self.name(Role::ExpProbsB).bias(),
                            shape: Shape::Vector(router.experts),
                        };
                        Some(m.vector(&t, b)?)
                    }
                    None => None,
                },
            },
            Stage::SharedExperts {
                experts,
                gate,
                up,
                down,
                gate_inp,
            } => {
                let f = experts.ffn_dim;
                Stage::SharedExperts {
                    experts: *experts,
                    gate: self.linear(Role::FfnGateShexp, (f, hidden), gate, m)?,
                    up: self.linear(Role::FfnUpShexp, (f, hidden), up, m)?,
                    down: self.linear(Role::FfnDownShexp, (hidden, f), down, m)?,
                    gate_inp: match gate_inp {
                        Some(g) => Some(self.vector(Role::FfnGateInpShexp, hidden, g, m)?),
                        None => None,
                    },
                }
            }
            Stage::Experts {
                experts,
                gate,
                up,
                down,
            } => {
                let count = block.router().map_or(0, |r| r.experts);
                let f = experts.ffn_dim;
                Stage::Experts {
                    experts: *experts,
                    gate: self.experts(Role::FfnGateExps, (count, f, hidden), gate, m)?,
                    up: self.experts(Role::FfnUpExps, (count, f, hidden), up, m)?,
                    down: self.experts(Role::FfnDownExps, (count, hidden, f), down, m)?,
                }
            }
            Stage::PostFfnNorm(n) => Stage::PostFfnNorm(self.norm(n, hidden, m)?),
            Stage::FfnResidual => Stage::FfnResidual,
            Stage::ParallelResidual => Stage::ParallelResidual,
        }))
    }
}
