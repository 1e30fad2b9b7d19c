//! Safetensors and Hugging Face model directories: the HF twin of llama3bpe-tiny opens with the
//! tensors and config its files describe, a sharded copy of it loads identically, and broken or
//! inconsistent files give the error that names what is wrong instead of a panic.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rinfer_formats::hf_config::{HfConfig, HfError, HfModelDir, TokenIds};
use rinfer_formats::safetensors::{
    Dtype, SafetensorView, SafetensorsError, SafetensorsModel, WeightFiles,
};
use safetensors::tensor::TensorView;

const TWIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/llama3bpe-tiny-hf"
);

fn twin() -> &'static Path {
    Path::new(TWIN)
}

/// Serializes `(name, view)` pairs with the `safetensors` crate's own writer.
fn serialize<'a>(tensors: impl IntoIterator<Item = SafetensorView<'a>>) -> Vec<u8> {
    let views: Vec<(String, TensorView<'a>)> = tensors
        .into_iter()
        .map(|t| {
            let view = TensorView::new(t.dtype.to_safetensors(), t.shape.to_vec(), t.bytes);
            (t.name.to_owned(), view.expect("view"))
        })
        .collect();
    safetensors::serialize(views, None).expect("serialize")
}

/// Writes a shard index mapping each tensor to its file.
fn write_index(dir: &Path, weight_map: &BTreeMap<String, String>) {
    let index = serde_json::json!({ "metadata": { "total_size": 0 }, "weight_map": weight_map });
    fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
}

/// The twin split into two shards (layer 0 and the embedding in the first, the rest in the
/// second) with an index and the twin's config, in a fresh directory.
fn sharded_twin() -> (tempfile::TempDir, BTreeMap<String, String>) {
    let model = SafetensorsModel::open(twin()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (first, second): (Vec<_>, Vec<_>) = model
        .tensors()
        .partition(|t| t.name.contains("layers.0.") || t.name.contains("embed_tokens"));
    assert!(!first.is_empty() && !second.is_empty());
    let mut weight_map = BTreeMap::new();
    for (file, part) in [
        ("model-00001-of-00002.safetensors", first),
        ("model-00002-of-00002.safetensors", second),
    ] {
        for t in &part {
            weight_map.insert(t.name.to_owned(), file.to_owned());
        }
        fs::write(dir.path().join(file), serialize(part)).unwrap();
    }
    write_index(dir.path(), &weight_map);
    fs::copy(twin().join("config.json"), dir.path().join("config.json")).unwrap();
    (dir, weight_map)
}

fn assert_same_tensors(a: &SafetensorsModel, b: &SafetensorsModel) {
    assert_eq!(
        a.tensor_names().collect::<Vec<_>>(),
        b.tensor_names().collect::<Vec<_>>()
    );
    for t in a.tensors() {
        assert_eq!(b.tensor(t.name).unwrap(), t, "{}", t.name);
    }
}

#[test]
fn twin_has_the_tensors_its_config_describes() {
    let model = SafetensorsModel::open(twin()).unwrap();
    let (vocab, hidden, ff, heads, kv_heads, head_dim) = (4010, 256, 384, 8, 4, 32);

    let mut expected: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    expected.insert("model.embed_tokens.weight".into(), vec![vocab, hidden]);
    expected.insert("model.norm.weight".into(), vec![hidden]);
    for layer in 0..2 {
        let p = format!("model.layers.{layer}");
        for (name, shape) in [
            ("input_layernorm", vec![hidden]),
            ("post_attention_layernorm", vec![hidden]),
            ("self_attn.q_proj", vec![heads * head_dim, hidden]),
            ("self_attn.k_proj", vec![kv_heads * head_dim, hidden]),
            ("self_attn.v_proj", vec![kv_heads * head_dim, hidden]),
            ("self_attn.o_proj", vec![hidden, heads * head_dim]),
            ("mlp.gate_proj", vec![ff, hidden]),
            ("mlp.up_proj", vec![ff, hidden]),
            ("mlp.down_proj", vec![hidden, ff]),
        ] {
            expected.insert(format!("{p}.{name}.weight"), shape);
        }
    }

    assert_eq!(model.len(), 20);
    let names: Vec<_> = model.tensor_names().collect();
    assert_eq!(
        names,
        expected.keys().map(String::as_str).collect::<Vec<_>>()
    );
    for (name, shape) in &expected {
        let t = model.tensor(name).unwrap();
        assert_eq!(t.name, name);
        assert_eq!(t.shape, shape.as_slice(), "{name}");
        assert_eq!(t.dtype, Dtype::F32, "{name}");
        assert_eq!(t.bytes.len(), t.n_elements() * 4, "{name}");
    }
    // Tied embeddings: no separate output projection.
    assert!(!model.contains("lm_head.weight"));
    assert_eq!(
        model.metadata().get("format").map(String::as_str),
        Some("pt")
    );
    assert_eq!(model.files().count(), 1);

    // Norm weights are 1 + N(0, 0.1): a cheap check that the bytes are the tensor's own.
    let norm = model.tensor("model.norm.weight").unwrap();
    let mean = norm
        .bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .sum::<f32>()
        / hidden as f32;
    assert!(
        (mean - 1.0).abs() < 0.05,
        "mean of model.norm.weight is {mean}"
    );
}

#[test]
fn twin_opens_the_same_from_its_directory_and_its_file() {
    let from_dir = SafetensorsModel::open(twin()).unwrap();
    let from_file = SafetensorsModel::open(&twin().join("model.safetensors")).unwrap();
    assert_same_tensors(&from_dir, &from_file);
    let bytes = fs::read(twin().join("model.safetensors")).unwrap();
    assert_same_tensors(&from_dir, &SafetensorsModel::from_bytes(bytes).unwrap());
}

#[test]
fn twin_config_matches_its_config_json() {
    let dir = HfModelDir::discover(twin()).unwrap();
    let c = &dir.config;
    assert_eq!(
        c.architectures.as_deref(),
        Some(&["LlamaForCausalLM".to_owned()][..])
    );
    assert_eq!(c.model_type.as_deref(), Some("llama"));
    assert_eq!(c.vocab_size, Some(4010));
    assert_eq!(c.hidden_size, Some(256));
    assert_eq!(c.intermediate_size, Some(384));
    assert_eq!(c.num_hidden_layers, Some(2));
    assert_eq!(c.num_attention_heads, Some(8));
    assert_eq!(c.num_key_value_heads, Some(4));
    assert_eq!(c.head_dim, Some(32));
    assert_eq!(c.hidden_act.as_deref(), Some("silu"));
    assert_eq!(c.max_position_embeddings, Some(2048));
    assert_eq!(c.rms_norm_eps, Some(1e-5));
    assert_eq!(c.rope_theta, Some(50000.0));
    assert_eq!(c.rope_scaling, None, "null is None");
    assert_eq!(c.tie_word_embeddings, Some(true));
    assert_eq!(c.bos_token_id, Some(TokenIds::One(4000)));
    assert_eq!(c.eos_token_id, Some(TokenIds::One(4001)));
    assert_eq!(c.torch_dtype.as_deref(), Some("float32"));
    assert_eq!((c.attention_bias, c.mlp_bias), (Some(false), Some(false)));
    assert_eq!((c.layer_norm_eps, c.sliding_window), (None, None));

    // Every field the struct does not type is kept, with its value, in file order.
    let raw: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&fs::read(twin().join("config.json")).unwrap()).unwrap();
    let extra: Vec<_> = c.extra.keys().map(String::as_str).collect();
    assert_eq!(
        extra,
        [
            "attention_dropout",
            "pretraining_tp",
            "initializer_range",
            "use_cache"
        ]
    );
    for (key, value) in &c.extra {
        assert_eq!(raw.get(key), Some(value), "{key}");
    }

    assert_eq!(dir.tokenizer, Some(twin().join("tokenizer.json")));
    assert_eq!(
        dir.tokenizer_config,
        Some(twin().join("tokenizer_config.json"))
    );
    assert_eq!(
        dir.generation_config,
        Some(twin().join("generation_config.json"))
    );
    assert_eq!(
        dir.weights,
        WeightFiles::Single(twin().join("model.safetensors"))
    );
    assert_eq!(dir.open_weights().unwrap().len(), 20);
}

#[test]
fn sharded_twin_loads_identically() {
    let (dir, weight_map) = sharded_twin();
    let sharded = SafetensorsModel::open(dir.path()).unwrap();
    assert_eq!(sharded.files().count(), 2);
    assert_same_tensors(&SafetensorsModel::open(twin()).unwrap(), &sharded);
    assert_eq!(sharded.len(), weight_map.len());

    let hf = HfModelDir::discover(dir.path()).unwrap();
    assert_eq!(
        hf.weights,
        WeightFiles::Sharded(dir.path().join("model.safetensors.index.json"))
    );
    assert_eq!(hf.tokenizer, None);
    assert_same_tensors(&sharded, &hf.open_weights().unwrap());
}

#[test]
fn missing_shard_names_the_file_and_the_index() {
    let (dir, _) = sharded_twin();
    let shard = dir.path().join("model-00002-of-00002.safetensors");
    fs::remove_file(&shard).unwrap();
    match SafetensorsModel::open(dir.path()) {
        Err(e @ SafetensorsError::MissingShard { .. }) => {
            let SafetensorsError::MissingShard {
                ref path,
                ref index,
                ..
            } = e
            else {
                unreachable!()
            };
            assert_eq!(path, &shard);
            assert!(index.ends_with("model.safetensors.index.json"));
            assert!(
                e.to_string().contains("model-00002-of-00002.safetensors"),
                "{e}"
            );
        }
        other => panic!("expected MissingShard, got {other:?}"),
    }
}

/// The sharded twin opened with an index that also places `tensor` in `shard`.
fn open_with_index_entry(tensor: &str, shard: &str) -> Result<SafetensorsModel, SafetensorsError> {
    let (dir, mut weight_map) = sharded_twin();
    weight_map.insert(tensor.into(), shard.into());
    write_index(dir.path(), &weight_map);
    SafetensorsModel::open(dir.path())
}

#[test]
fn tensor_in_the_index_but_not_in_its_shard_is_an_error() {
    let shard = "model-00001-of-00002.safetensors";
    match open_with_index_entry("lm_head.weight", shard) {
        Err(SafetensorsError::TensorNotInShard { tensor, shard, .. }) => {
            assert_eq!(tensor, "lm_head.weight");
            assert!(shard.ends_with("model-00001-of-00002.safetensors"));
        }
        other => panic!("expected TensorNotInShard, got {other:?}"),
    }

    // The index placing a tensor in the wrong shard is the same error.
    assert!(matches!(
        open_with_index_entry("model.norm.weight", shard),
        Err(SafetensorsError::TensorNotInShard { tensor, .. }) if tensor == "model.norm.weight"
    ));
}

#[test]
fn tensor_stored_in_two_shards_is_an_error() {
    let (dir, weight_map) = sharded_twin();
    let model = SafetensorsModel::open(twin()).unwrap();
    let norm = model.tensor("model.norm.weight").unwrap();
    let layer0 = model
        .tensors()
        .filter(|t| weight_map[t.name].starts_with("model-00001"));
    fs::write(
        dir.path().join("model-00001-of-00002.safetensors"),
        serialize(layer0.chain([norm])),
    )
    .unwrap();
    match SafetensorsModel::open(dir.path()) {
        Err(SafetensorsError::DuplicateTensor {
            tensor,
            first,
            second,
        }) => {
            assert_eq!(tensor, "model.norm.weight");
            assert!(first.ends_with("model-00001-of-00002.safetensors"));
            assert!(second.ends_with("model-00002-of-00002.safetensors"));
        }
        other => panic!("expected DuplicateTensor, got {other:?}"),
    }
}

#[test]
fn shard_names_that_leave_the_directory_are_refused() {
    assert!(matches!(
        open_with_index_entry("x", "../model.safetensors"),
        Err(SafetensorsError::InvalidShardName { shard, .. }) if shard == "../model.safetensors"
    ));
}

#[test]
fn invalid_index_json_is_an_index_error() {
    let (dir, _) = sharded_twin();
    let index = dir.path().join("model.safetensors.index.json");
    for text in ["{", r#"{"metadata": {}}"#, r#"{"weight_map": {"a": 1}}"#] {
        fs::write(&index, text).unwrap();
        match SafetensorsModel::open(dir.path()) {
            Err(SafetensorsError::Index { path, .. }) => assert_eq!(path, index),
            other => panic!("{text}: expected Index, got {other:?}"),
        }
    }
}

/// A valid file of two small tensors.
fn small_file() -> Vec<u8> {
    let a = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let b = [9u8; 6];
    let tensors = [
        SafetensorView {
            name: "a",
            dtype: Dtype::F32,
            shape: &[2],
            bytes: &a,
        },
        SafetensorView {
            name: "b",
            dtype: Dtype::BF16,
            shape: &[1, 3],
            bytes: &b,
        },
    ];
    serialize(tensors)
}

fn open_bytes_as_file(
    bytes: &[u8],
) -> (
    tempfile::TempDir,
    PathBuf,
    Result<SafetensorsModel, SafetensorsError>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    fs::write(&path, bytes).unwrap();
    let result = SafetensorsModel::open(dir.path());
    (dir, path, result)
}

#[test]
fn bad_header_names_the_file() {
    let mut bytes = small_file();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    bytes[8..8 + header_len].fill(b'x');
    let (_dir, path, result) = open_bytes_as_file(&bytes);
    match result {
        Err(e @ SafetensorsError::Header { .. }) => {
            assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            assert!(e.to_string().contains("invalid JSON"), "{e}");
        }
        other => panic!("expected Header, got {other:?}"),
    }

    // Offsets that do not match the shape.
    let text = r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#;
    let mut bytes = (text.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(text.as_bytes());
    bytes.extend_from_slice(&[0; 8]);
    let (_dir, _, result) = open_bytes_as_file(&bytes);
    assert!(
        matches!(result, Err(SafetensorsError::Header { .. })),
        "{result:?}"
    );

    // An absurd header length.
    let mut bytes = u64::MAX.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    assert!(matches!(
        SafetensorsModel::from_bytes(bytes),
        Err(SafetensorsError::Header { .. })
    ));
}

#[test]
fn truncated_file_says_how_long_it_should_be() {
    let whole = fs::read(twin().join("model.safetensors")).unwrap();
    for keep in [0, 5, 100, whole.len() / 2, whole.len() - 1] {
        let (_dir, path, result) = open_bytes_as_file(&whole[..keep]);
        match result {
            Err(SafetensorsError::Truncated {
                path: p,
                expected,
                actual,
            }) => {
                assert_eq!(p, path);
                assert_eq!(actual, keep as u64);
                let header_len = 8 + u64::from_le_bytes(whole[..8].try_into().unwrap());
                let whole_len = whole.len() as u64;
                assert!(
                    expected == whole_len || (keep < header_len as usize && expected <= header_len),
                    "keep {keep}: expected {expected}"
                );
            }
            other => panic!("keep {keep}: expected Truncated, got {other:?}"),
        }
    }
}

#[test]
fn every_prefix_and_every_byte_flip_of_a_small_file_is_handled() {
    let bytes = small_file();
    for keep in 0..bytes.len() {
        assert!(
            SafetensorsModel::from_bytes(bytes[..keep].to_vec()).is_err(),
            "prefix {keep}"
        );
    }
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[at] ^= 1 << bit;
            if let Ok(model) = SafetensorsModel::from_bytes(flipped) {
                for t in model.tensors() {
                    assert_eq!(t.bytes.len() * 8, t.n_elements() * t.dtype.bits());
                }
            }
        }
    }
}

#[test]
fn missing_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        HfModelDir::discover(dir.path()),
        Err(HfError::MissingConfig { dir: d }) if d == dir.path()
    ));
    fs::write(dir.path().join("config.json"), r#"{"model_type": "llama"}"#).unwrap();
    fs::write(dir.path().join("pytorch_model.bin"), b"").unwrap();
    match HfModelDir::discover(dir.path()) {
        Err(HfError::Weights(e @ SafetensorsError::NoWeights { .. })) => {
            assert!(e.to_string().contains("PyTorch"), "{e}");
        }
        other => panic!("expected NoWeights, got {other:?}"),
    }
    fs::write(
        dir.path().join("config.json"),
        r#"{"num_hidden_layers": -1}"#,
    )
    .unwrap();
    assert!(matches!(
        HfModelDir::discover(dir.path()),
        Err(HfError::Config { .. })
    ));

    let missing = dir.path().join("nope.safetensors");
    assert!(matches!(
        SafetensorsModel::open(&missing),
        Err(SafetensorsError::Io { path, .. }) if path == missing
    ));

    let model = SafetensorsModel::open(twin()).unwrap();
    let err = model.tensor("lm_head.weight").unwrap_err();
    assert!(matches!(err, SafetensorsError::TensorNotFound { .. }));
    assert!(err.to_string().contains("lm_head.weight"), "{err}");
}

#[test]
fn config_from_file_keeps_unknown_nested_fields() {
    let config = HfConfig::from_json(
        r#"{"model_type": "gemma3", "text_config": {"hidden_size": 640}, "eos_token_id": [1, 106]}"#,
    )
    .unwrap();
    assert_eq!(config.extra["text_config"]["hidden_size"], 640);
    assert_eq!(config.eos_token_id.unwrap().as_slice(), &[1, 106]);
}

/// Element types whose size is a whole number of bytes, so any shape is valid.
fn byte_sized_dtype() -> impl Strategy<Value = Dtype> {
    prop::sample::select(
        Dtype::ALL
            .iter()
            .copied()
            .filter(|d| d.bits() % 8 == 0)
            .collect::<Vec<_>>(),
    )
}

/// Up to five tensors of up to three dimensions, with random names, types and bytes.
fn tensor_set() -> impl Strategy<Value = BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)>> {
    let tensor = (byte_sized_dtype(), prop::collection::vec(0usize..5, 0..4)).prop_flat_map(
        |(dtype, shape)| {
            let len = shape.iter().product::<usize>() * dtype.bits() / 8;
            (
                Just(dtype),
                Just(shape),
                prop::collection::vec(any::<u8>(), len),
            )
        },
    );
    prop::collection::btree_map("[a-z][a-z0-9_.]{0,20}", tensor, 0..6)
}

proptest! {
    #[test]
    fn serialized_tensors_read_back_identical(tensors in tensor_set()) {
        let views = tensors.iter().map(|(name, (dtype, shape, bytes))| SafetensorView {
            name,
            dtype: *dtype,
            shape,
            bytes,
        });
        let model = SafetensorsModel::from_bytes(serialize(views)).unwrap();
        prop_assert_eq!(model.len(), tensors.len());
        for (name, (dtype, shape, bytes)) in &tensors {
            let t = model.tensor(name).unwrap();
            prop_assert_eq!(t.dtype, *dtype);
            prop_assert_eq!(t.shape, shape.as_slice());
            prop_assert_eq!(t.bytes, bytes.as_slice());
        }
    }

    #[test]
    fn random_bytes_after_a_valid_length_prefix_never_panic(
        header in prop::collection::vec(any::<u8>(), 0..200),
        data in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(&data);
        let _ = SafetensorsModel::from_bytes(bytes);
    }
}
