//! The CPU executor of multi-head latent attention's own stages (DeepSeek-V2/V3), in the
//! absorbed form: what the KV cache keeps per position is one latent row, not a key and a
//! value per head.
//!
//! With `[c | k_pe] = kv_a · h` (`c` of `kv_lora` values, RMS-normed), a head's key would be
//! `[W_kb[head]ᵀ · c | k_pe]` and its value `W_vb[head] · c`. Since
//! `q_nope · (W_kb[head]ᵀ · c) = (W_kb[head] · q_nope) · c`, each query head is absorbed into
//! the latent space instead: [`Model::latent_qkv`] writes the query head
//! `[q_pe | W_kb[head] · q_nope]` and the one latent row `[k_pe | c]`, which the ordinary
//! stages then rotate (the leading `rope` dimensions), store and attend over as a single kv
//! head whose values are its keys. A head's output is then `Σ p · [k_pe | c]`; its latent part
//! `Σ p · c` times `W_vb[head]` is the head's value output ([`Model::latent_output`]), exactly
//! `Σ p · v`. The cache holds `rope + kv_lora` values per position and layer, where plain
//! attention would hold `2 · heads · head_dim`.
//!
//! The per-head products run on all rows of the batch at once, one head after another, so a
//! row's result never depends on the batch.

use rinfer_transformer::{LatentQ, Mla};

use crate::compute::linear;
use crate::error::ModelError;
use crate::forward::Model;
use crate::scratch::Scratch;
use crate::weights::{Cpu, Linear, NormWeights};

impl Model {
    /// `s.q` (every row's absorbed query heads `[q_pe | W_kb · q_nope]`) and `s.k` (every row's
    /// latent `[k_pe | norm(c)]`) from the `n` rows of `s.h`.
    pub(crate) fn latent_qkv(
        &self,
        mla: &Mla,
        q: &LatentQ<Cpu>,
        (kv_a, kv_norm): (&Linear, &NormWeights),
        k_b: &[Linear],
        n: usize,
        s: &mut Scratch,
    ) -> Result<(), ModelError> {
        let heads = self.transformer().heads;
        let (q_head, latent, rope, nope, kv_lora) =
            (mla.q_head(), mla.latent(), mla.rope, mla.nope, mla.kv_lora);
        let l = &mut s.latent;
        match q {
            LatentQ::Direct(wq) => linear(wq, &s.h, n, &mut l.q, &mut s.products)?,
            LatentQ::Lora { a, norm, b } => {
                linear(a, &s.h, n, &mut l.q_lora, &mut s.products)?;
                Self::norm_in_place(norm, &mut l.q_lora, n);
                linear(b, &l.q_lora, n, &mut l.q, &mut s.products)?;
            }
        }
        linear(kv_a, &s.h, n, &mut l.kv, &mut s.products)?;
        let rows = l.kv[..n * latent].chunks_exact(latent);
        for (kv, k) in rows.zip(s.k.chunks_exact_mut(latent)) {
            k[..rope].copy_from_slice(&kv[kv_lora..]);
            Self::norm(kv_norm, &kv[..kv_lora], &mut k[rope..], 1);
        }
        for (head, k_b) in k_b.iter().enumerate().take(heads) {
            for i in 0..n {
                let projected = &l.q[(i * heads + head) * q_head..][..q_head];
                l.nope[i * nope..(i + 1) * nope].copy_from_slice(&projected[..nope]);
                let absorbed = &mut s.q[(i * heads + head) * latent..][..rope];
                absorbed.copy_from_slice(&projected[nope..]);
            }
            linear(k_b, &l.nope, n, &mut l.latent, &mut s.products)?;
            for i in 0..n {
                let absorbed = &mut s.q[(i * heads + head) * latent + rope..][..kv_lora];
                absorbed.copy_from_slice(&l.latent[i * kv_lora..(i + 1) * kv_lora]);
            }
        }
        Ok(())
    }

    /// `s.attn` `[n, heads · v_head]`: each head's latent output `Σ p · c` (the last `kv_lora`
    /// values of its attention output) times `W_vb[head]`.
    pub(crate) fn latent_output(
        &self,
        mla: &Mla,
        v_b: &[Linear],
        n: usize,
        s: &mut Scratch,
    ) -> Result<(), ModelError> {
        let heads = self.transformer().heads;
        let (latent, rope, kv_lora, v_head) = (mla.latent(), mla.rope, mla.kv_lora, mla.v_head);
        let l = &mut s.latent;
        for (head, v_b) in v_b.iter().enumerate().take(heads) {
            for i in 0..n {
                let out = &s.attn[(i * heads + head) * latent + rope..][..kv_lora];
                l.latent[i * kv_lora..(i + 1) * kv_lora].copy_from_slice(out);
            }
            linear(v_b, &l.latent, n, &mut l.value, &mut s.products)?;
            for i in 0..n {
                let value = &l.value[i * v_head..(i + 1) * v_head];
                l.values[(i * heads + head) * v_head..][..v_head].copy_from_slice(value);
            }
        }
        let width = n * heads * v_head;
        s.attn[..width].copy_from_slice(&l.values[..width]);
        Ok(())
    }
}
