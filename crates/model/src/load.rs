//! Loading weights into [`Weights`] from any [`TensorStore`]: the architecture's declared tree
//! ([`ModelConfig::transformer`]) mapped tensor by tensor, every tensor checked against the
//! shape the tree implies, every tensor in the store accounted for.
//!
//! The experts' gate and up projections may be one fused tensor, `blk.N.ffn_gate_up_exps`
//! (each expert's gate rows, then its up rows), where the architecture allows it
//! ([`MoeConfig::fused_gate_up`](crate::config::MoeConfig::fused_gate_up)): it is packed once,
//! and each expert's gate and up are matrices over their rows of it, so the products give each
//! row the bits the separate tensors give it.

use std::collections::{HashMap, HashSet};

use rinfer_formats::GgmlType;

use rinfer_transformer::{Mapper, Presence, Role, Shape, Tensor, TensorName};

use crate::config::ModelConfig;
use crate::error::ModelError;
use crate::tensor_store::{StoredTensor, TensorStore};
use crate::weights::{Cpu, Linear, Matrix, Weights};

/// Tensor types the CPU kernels can multiply with: those of the kernels' type registry.
fn supported_matrix_type(ty: GgmlType) -> bool {
    rinfer_kernels::Kernels::detected().multiplies(ty)
}

/// Fills an architecture's declared tree with the store's tensors ([`Mapper`] from the
/// declaration's [`Presence`] handles to the CPU's), remembering which tensors it used.
struct Loader<'a> {
    store: &'a dyn TensorStore,
    used: HashSet<String>,
    /// The architecture allows `ffn_gate_up_exps` in place of the gate and up experts.
    fused_gate_up: bool,
    /// The half of a fused gate-and-up tensor not yet handed out, by the name of the stacked
    /// role it stands for.
    fused_halves: HashMap<TensorName, Vec<Linear>>,
}

impl Loader<'_> {
    fn view(&mut self, name: &str) -> Result<Option<StoredTensor>, ModelError> {
        let tensor = self.store.tensor(name)?;
        if tensor.is_some() {
            self.used.insert(name.to_string());
        }
        Ok(tensor)
    }

    fn require(&mut self, name: &str) -> Result<StoredTensor, ModelError> {
        self.view(name)?
            .ok_or_else(|| ModelError::MissingTensor { name: name.into() })
    }

    /// Whether the store holds the tensor: always looked up for a required one (so that its
    /// absence is reported), only if present for an optional one.
    fn holds(&self, name: TensorName, presence: Presence) -> bool {
        presence == Presence::Required || self.store.contains(&name.to_string())
    }

    fn check_shape(tensor: &StoredTensor, expected: &[u64]) -> Result<(), ModelError> {
        if tensor.dims != expected {
            return Err(ModelError::TensorShape {
                name: tensor.name.clone(),
                expected: expected.to_vec(),
                found: tensor.dims.clone(),
            });
        }
        Ok(())
    }

    fn check_type(tensor: &StoredTensor, cols: usize) -> Result<(), ModelError> {
        if !supported_matrix_type(tensor.ty) || !cols.is_multiple_of(tensor.ty.block_size()) {
            return Err(ModelError::UnsupportedTensorType {
                name: tensor.name.clone(),
                ty: tensor.ty.name(),
            });
        }
        Ok(())
    }

    /// The matrix `t`, packed for this CPU unless it is a table read by rows (a tied output
    /// head is packed after loading).
    fn load_matrix(&mut self, t: &Tensor) -> Result<Matrix, ModelError> {
        let tensor = self.require(&t.name.to_string())?;
        let (rows, cols) = match t.shape {
            Shape::Matrix { rows, cols } => (rows, cols),
            Shape::Table { cols } => (tensor.dims.get(1).copied().unwrap_or(0) as usize, cols),
            Shape::Vector(_) | Shape::Filter { .. } | Shape::Experts { .. } => {
                return Err(ModelError::InvalidConfig(format!(
                    "{} is declared as a matrix of shape {:?}",
                    t.name, t.shape
                )));
            }
        };
        Self::check_shape(&tensor, &[cols as u64, rows as u64])?;
        if !supported_matrix_type(tensor.ty) {
            return Err(ModelError::UnsupportedTensorType {
                name: tensor.name,
                ty: tensor.ty.name(),
            });
        }
        let mut matrix = Matrix::new(tensor.ty, rows, cols, tensor.source, tensor.range);
        if !t.name.role.looked_up() {
            matrix.pack()?;
        }
        Ok(matrix)
    }

    fn load_vector(&mut self, t: &Tensor) -> Result<Vec<f32>, ModelError> {
        let view = self.require(&t.name.to_string())?;
        match t.shape {
            Shape::Vector(len) => Self::check_shape(&view, &[len as u64])?,
            // A convolution kernel, each channel's taps together.
            Shape::Filter { channels, taps } => {
                Self::check_shape(&view, &[taps as u64, channels as u64])?
            }
            _ => Self::check_shape(&view, &[0])?,
        }
        to_f32(&view)
    }

    /// The experts of the 3-D tensor `{name}` `[cols, rows, experts]`, each a matrix over its
    /// own slab of the tensor's bytes, with its row of the bias if there is one.
    fn merged_experts(
        &mut self,
        name: TensorName,
        (count, rows, cols): (usize, usize, usize),
        bias: Option<Presence>,
    ) -> Result<Vec<Linear>, ModelError> {
        let tensor = self.require(&name.to_string())?;
        Self::check_shape(&tensor, &[cols as u64, rows as u64, count as u64])?;
        Self::check_type(&tensor, cols)?;
        let biases = match bias.filter(|&p| self.holds(name.bias(), p)) {
            Some(_) => {
                let bias = self.require(&name.bias().to_string())?;
                Self::check_shape(&bias, &[rows as u64, count as u64])?;
                Some(to_f32(&bias)?)
            }
            None => None,
        };
        // Every expert's rows packed at once, into one allocation the experts share.
        let mut stacked = Matrix::new(
            tensor.ty,
            rows * count,
            cols,
            tensor.source.clone(),
            tensor.range.clone(),
        );
        stacked.pack()?;
        let weights = stacked.split_rows(count)?;
        Ok(weights
            .into_iter()
            .enumerate()
            .map(|(e, weight)| Linear {
                weight,
                bias: biases
                    .as_ref()
                    .map(|b| b[e * rows..(e + 1) * rows].to_vec()),
            })
            .collect())
    }

    /// The gate or up experts `name` from the layer's fused `ffn_gate_up_exps`, when the
    /// architecture allows it and the store has that tensor instead of `name`; `None` if not
    /// (nor where the declaration requires expert biases, which fused files do not have).
    /// The fused tensor is packed once; the other half waits in `fused_halves`.
    fn fused_half(
        &mut self,
        name: TensorName,
        (count, rows, cols): (usize, usize, usize),
        bias: Option<Presence>,
    ) -> Result<Option<Vec<Linear>>, ModelError> {
        if let Some(half) = self.fused_halves.remove(&name) {
            return Ok(Some(half));
        }
        let Some((fused, _)) = name.fused_gate_up() else {
            return Ok(None);
        };
        let fused_name = fused.to_string();
        if !self.fused_gate_up
            || bias == Some(Presence::Required)
            || self.store.contains(&name.to_string())
            || !self.store.contains(&fused_name)
        {
            return Ok(None);
        }
        let tensor = self.require(&fused_name)?;
        Self::check_shape(&tensor, &[cols as u64, 2 * rows as u64, count as u64])?;
        Self::check_type(&tensor, cols)?;
        let mut stacked = Matrix::new(
            tensor.ty,
            2 * rows * count,
            cols,
            tensor.source.clone(),
            tensor.range.clone(),
        );
        stacked.pack()?;
        let mut halves: [Vec<Linear>; 2] = Default::default();
        for (i, weight) in stacked.split_rows(2 * count)?.into_iter().enumerate() {
            halves[i % 2].push(Linear { weight, bias: None });
        }
        for role in [Role::FfnGateExps, Role::FfnUpExps] {
            let half = role.gate_up_half().unwrap_or_default();
            let experts = std::mem::take(&mut halves[half]);
            self.fused_halves
                .insert(TensorName { role, ..name }, experts);
        }
        Ok(self.fused_halves.remove(&name))
    }
}

impl<'t> Mapper<'t, Presence, Cpu> for Loader<'_> {
    type Error = ModelError;

    fn matrix(&mut self, t: &Tensor, _: &'t Presence) -> Result<Matrix, ModelError> {
        self.load_matrix(t)
    }

    fn vector(&mut self, t: &Tensor, _: &'t Presence) -> Result<Vec<f32>, ModelError> {
        self.load_vector(t)
    }

    fn optional_matrix(
        &mut self,
        t: &Tensor,
        p: &'t Presence,
    ) -> Result<Option<Matrix>, ModelError> {
        match self.holds(t.name, *p) {
            true => self.load_matrix(t).map(Some),
            false => Ok(None),
        }
    }

    fn optional_vector(
        &mut self,
        t: &Tensor,
        p: &'t Presence,
    ) -> Result<Option<Vec<f32>>, ModelError> {
        match self.holds(t.name, *p) {
            true => self.load_vector(t).map(Some),
            false => Ok(None),
        }
    }

    /// The 3-D tensor `blk.N.ffn_*_exps`, its half of the fused `blk.N.ffn_gate_up_exps`, or
    /// the per-expert matrices `blk.N.ffn_*.E` of older Mixtral files.
    fn experts(
        &mut self,
        t: &Tensor,
        bias: &'t Option<Presence>,
    ) -> Result<Vec<Linear>, ModelError> {
        let Shape::Experts { count, rows, cols } = t.shape else {
            return Err(ModelError::InvalidConfig(format!(
                "{} is declared as experts of shape {:?}",
                t.name, t.shape
            )));
        };
        if let Some(half) = self.fused_half(t.name, (count, rows, cols), *bias)? {
            return Ok(half);
        }
        let single = |e| t.name.single_expert(e);
        let per_expert = single(0).is_some_and(|first| self.store.contains(&first.to_string()));
        if self.store.contains(&t.name.to_string()) || !per_expert {
            return self.merged_experts(t.name, (count, rows, cols), *bias);
        }
        (0..count)
            .map(|e| {
                let name = single(e).unwrap_or(t.name);
                let one = Tensor {
                    name,
                    shape: Shape::Matrix { rows, cols },
                };
                let bias_name = Tensor {
                    name: name.bias(),
                    shape: Shape::Vector(rows),
                };
                Ok(Linear {
                    weight: self.load_matrix(&one)?,
                    bias: match bias {
                        Some(p) => self.optional_vector(&bias_name, p)?,
                        None => None,
                    },
                })
            })
            .collect()
    }
}

/// The number of rows of `token_embd.weight`, which fixes the vocabulary size.
pub(crate) fn vocab_rows(store: &dyn TensorStore) -> Result<usize, ModelError> {
    let name = TensorName::model(Role::TokenEmbd).to_string();
    let embd = store
        .tensor(&name)?
        .ok_or_else(|| ModelError::MissingTensor { name: name.clone() })?;
    match embd.dims[..] {
        [_, rows] => Ok(rows as usize),
        _ => Err(ModelError::TensorShape {
            name,
            expected: vec![0, 0],
            found: embd.dims.clone(),
        }),
    }
}

/// Builds the weights of the model in `store`, described by `config`: the tree its
/// architecture declares, every tensor checked against it, every tensor in the store used.
pub(crate) fn load(store: &dyn TensorStore, config: &ModelConfig) -> Result<Weights, ModelError> {
    let mut loader = Loader {
        store,
        used: HashSet::new(),
        fused_gate_up: config.experts.is_some_and(|m| m.fused_gate_up),
        fused_halves: HashMap::new(),
    };
    let mut transformer = config.transformer().map(&mut loader)?;
    // The output head is the largest product of a decode step: a tied one is packed too.
    if transformer.output.is_none() {
        transformer.token_embd.pack()?;
    }
    if let Some(extra) = store
        .names()
        .into_iter()
        .find(|name| !loader.used.contains(name))
    {
        return Err(ModelError::UnexpectedTensor {
            name: extra,
            arch: config.arch.clone(),
        });
    }
    Ok(Weights { transformer })
}

/// A 1-D tensor as f32 values.
fn to_f32(tensor: &StoredTensor) -> Result<Vec<f32>, ModelError> {
    let n = tensor.dims.iter().product::<u64>() as usize;
    let mut out = vec![0.0; n];
    rinfer_kernels::dequantize_row(tensor.ty, tensor.bytes(), &mut out).map_err(|_| {
        ModelError::UnsupportedTensorType {
            name: tensor.name.clone(),
            ty: tensor.ty.name(),
        }
    })?;
    Ok(out)
}
