//! `rinfer inspect`: what a model file holds, as text or one JSON object.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use rinfer_formats::gguf::{GgufError, GgufFile, MetadataValue, TensorView, open_shards};
use serde_json::{Value, json};

/// `writeln!` into a `String`, which cannot fail.
macro_rules! line {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Arrays longer than this are summarised: their length and first items.
const ARRAY_SHOWN_IN_FULL: usize = 32;
/// Items shown from a summarised array.
const ARRAY_HEAD: usize = 8;

/// Prints the format, version, architecture, parameter count, bytes per tensor type, metadata
/// and (with `tensors`, or always in JSON) the tensor table of the model at `path`. A split
/// model (`path` any of its shards) is reported whole: the first shard's header and metadata,
/// every shard's tensors, each with its shard number and its offset in that shard.
pub fn run(path: &Path, json: bool, tensors: bool) -> Result<()> {
    let shards = match open_shards(path) {
        Err(e @ (GgufError::Io { .. } | GgufError::MissingShard { .. })) => return Err(e.into()),
        opened => {
            opened.with_context(|| format!("{} is not a usable GGUF model", path.display()))?
        }
    };
    let report = Report::of(&shards);
    if json {
        let text = serde_json::to_string_pretty(&report.to_json(&shards))?;
        crate::stdout::print(&format!("{text}\n"))
    } else {
        crate::stdout::print(&report.text(&shards, tensors))
    }
}

/// Every tensor of the model with its shard number (from 1) and its offset in that shard.
fn all_tensors(shards: &[GgufFile]) -> impl Iterator<Item = (usize, TensorView<'_>, u64)> {
    shards.iter().enumerate().flat_map(|(i, file)| {
        let data_offset = file.header().data_offset;
        file.tensors()
            .map(move |t| (i + 1, t, data_offset + t.info.offset))
    })
}

struct Report {
    parameters: u64,
    /// Per type name: (tensor count, bytes).
    by_type: BTreeMap<&'static str, (usize, u64)>,
}

impl Report {
    fn of(shards: &[GgufFile]) -> Self {
        let mut by_type = BTreeMap::new();
        let mut parameters = 0;
        for (_, t, _) in all_tensors(shards) {
            parameters += t.info.element_count();
            let entry = by_type.entry(t.ty().name()).or_insert((0, 0));
            entry.0 += 1;
            entry.1 += t.info.size;
        }
        Self {
            parameters,
            by_type,
        }
    }

    fn to_json(&self, shards: &[GgufFile]) -> Value {
        let file = &shards[0];
        let header = file.header();
        let metadata: serde_json::Map<String, Value> = file
            .metadata()
            .iter()
            .map(|(k, v)| (k.to_string(), value_json(v)))
            .collect();
        let tensors: Vec<Value> = all_tensors(shards)
            .map(|(shard, t, offset)| {
                let mut entry = json!({
                    "name": t.name(),
                    "type": t.ty().name(),
                    "shape": t.dims(),
                    "offset": offset,
                    "bytes": t.info.size,
                });
                if shards.len() > 1 {
                    entry["shard"] = json!(shard);
                }
                entry
            })
            .collect();
        let tensor_count = tensors.len();
        let types: serde_json::Map<String, Value> = self
            .by_type
            .iter()
            .map(|(ty, (count, bytes))| (ty.to_string(), json!({"tensors": count, "bytes": bytes})))
            .collect();
        let mut report = json!({
            "format": "gguf",
            "version": header.version,
            "architecture": header.architecture(),
            "parameters": self.parameters,
            "tensor_count": tensor_count,
            "tensor_types": types,
            "metadata": metadata,
            "tensors": tensors,
        });
        if shards.len() > 1 {
            report["shards"] = json!(shards.len());
        }
        report
    }

    /// The text report: header, tensor types, metadata and (with `tensors`) the tensor table.
    fn text(&self, shards: &[GgufFile], tensors: bool) -> String {
        let mut out = String::new();
        let file = &shards[0];
        let header = file.header();
        line!(out, "format:       GGUF v{}", header.version);
        if shards.len() > 1 {
            line!(out, "shards:       {}", shards.len());
        }
        line!(
            out,
            "architecture: {}",
            header.architecture().unwrap_or("(none)")
        );
        line!(
            out,
            "parameters:   {} ({:.1} M)",
            self.parameters,
            self.parameters as f64 / 1e6
        );
        line!(
            out,
            "tensors:      {}",
            shards.iter().map(|f| f.tensors().len()).sum::<usize>()
        );
        for (ty, (count, bytes)) in &self.by_type {
            line!(
                out,
                "  {ty:<8} {count:>5} tensors {:>12.2} MiB",
                *bytes as f64 / (1 << 20) as f64
            );
        }
        line!(out, "metadata:     {} entries", file.metadata().len());
        for (key, value) in file.metadata().iter() {
            line!(out, "  {key} = {}", value_text(value));
        }
        if tensors {
            line!(
                out,
                "{:<48} {:<8} {:<24} {:>12}",
                "tensor",
                "type",
                "shape",
                "offset"
            );
            for (shard, t, offset) in all_tensors(shards) {
                let shape = format!("{:?}", t.dims());
                let at = if shards.len() > 1 {
                    format!("{shard}:{offset}")
                } else {
                    offset.to_string()
                };
                line!(
                    out,
                    "{:<48} {:<8} {:<24} {:>12}",
                    t.name(),
                    t.ty().name(),
                    shape,
                    at
                );
            }
        }
        out
    }
}

fn value_json(value: &MetadataValue) -> Value {
    match value {
        MetadataValue::Array { element, items } if items.len() > ARRAY_SHOWN_IN_FULL => json!({
            "array_of": element.name(),
            "len": items.len(),
            "first": items.iter().take(ARRAY_HEAD).map(value_json).collect::<Vec<_>>(),
        }),
        MetadataValue::Array { items, .. } => Value::Array(items.iter().map(value_json).collect()),
        MetadataValue::String(s) => Value::String(s.clone()),
        MetadataValue::Bool(b) => Value::Bool(*b),
        MetadataValue::F32(f) => json!(f),
        MetadataValue::F64(f) => json!(f),
        other => match other.as_i128() {
            Some(i) if i >= 0 => json!(i as u64),
            Some(i) => json!(i as i64),
            None => Value::Null,
        },
    }
}

fn value_text(value: &MetadataValue) -> String {
    match value {
        MetadataValue::Array { element, items } if items.len() > ARRAY_SHOWN_IN_FULL => {
            let head: Vec<String> = items.iter().take(ARRAY_HEAD).map(value_text).collect();
            format!(
                "[{} × {}: {}, …]",
                items.len(),
                element.name(),
                head.join(", ")
            )
        }
        MetadataValue::String(s) if s.len() > 120 => {
            let cut: String = s.chars().take(100).collect();
            format!("{cut:?}… ({} bytes)", s.len())
        }
        _ => value_json(value).to_string(),
    }
}
