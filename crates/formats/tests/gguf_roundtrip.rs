//! Property: whatever the writer writes, the reader reads back unchanged.

use proptest::prelude::*;
use rinfer_formats::GgmlType;
use rinfer_formats::gguf::{GgufFile, GgufWriter, Metadata, MetadataValue, ValueType};

fn scalar() -> impl Strategy<Value = MetadataValue> {
    prop_oneof![
        any::<u8>().prop_map(MetadataValue::U8),
        any::<i8>().prop_map(MetadataValue::I8),
        any::<u16>().prop_map(MetadataValue::U16),
        any::<i16>().prop_map(MetadataValue::I16),
        any::<u32>().prop_map(MetadataValue::U32),
        any::<i32>().prop_map(MetadataValue::I32),
        any::<u64>().prop_map(MetadataValue::U64),
        any::<i64>().prop_map(MetadataValue::I64),
        (-1e30f32..1e30).prop_map(MetadataValue::F32),
        (-1e300f64..1e300).prop_map(MetadataValue::F64),
        any::<bool>().prop_map(MetadataValue::Bool),
        ".{0,12}".prop_map(MetadataValue::String),
    ]
}

fn value() -> impl Strategy<Value = MetadataValue> {
    scalar().prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(any::<u32>(), 0..6).prop_map(|v| MetadataValue::Array {
                element: ValueType::U32,
                items: v.into_iter().map(MetadataValue::U32).collect(),
            }),
            prop::collection::vec(".{0,6}", 0..6).prop_map(|v| MetadataValue::Array {
                element: ValueType::String,
                items: v.into_iter().map(MetadataValue::String).collect(),
            }),
            // Nested: an array of arrays, every inner array of the same element type.
            prop::collection::vec(inner, 0..3).prop_map(|v| MetadataValue::Array {
                element: ValueType::Array,
                items: v
                    .into_iter()
                    .map(|item| MetadataValue::Array {
                        element: item.value_type(),
                        items: vec![item],
                    })
                    .collect(),
            }),
        ]
    })
}

fn tensor() -> impl Strategy<Value = (GgmlType, Vec<u64>)> {
    let ty = prop::sample::select(vec![
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q8_0,
        GgmlType::Q4K,
        GgmlType::Q6K,
    ]);
    (ty, 1u64..3, prop::collection::vec(1u64..4, 0..3)).prop_map(|(ty, blocks, rest)| {
        let mut dims = vec![blocks * ty.block_size() as u64];
        dims.extend(rest);
        (ty, dims)
    })
}

proptest! {
    #[test]
    fn write_then_read_gives_back_everything(
        entries in prop::collection::btree_map("[a-z.]{1,16}", value(), 0..8),
        tensors in prop::collection::vec((tensor(), any::<u8>()), 0..5),
        alignment in prop::sample::select(vec![None, Some(1u32), Some(8), Some(64)]),
    ) {
        let mut writer = GgufWriter::new();
        if let Some(a) = alignment {
            writer.add_metadata("general.alignment", MetadataValue::U32(a)).unwrap();
        }
        for (k, v) in &entries {
            writer.add_metadata(&format!("x.{k}"), v.clone()).unwrap();
        }
        let mut expected = Vec::new();
        for (i, ((ty, dims), fill)) in tensors.iter().enumerate() {
            let bytes = ty.row_bytes(dims[0]).unwrap() * dims[1..].iter().product::<u64>();
            let data = vec![*fill; bytes as usize];
            writer.add_tensor(&format!("t{i}"), *ty, dims, data.clone()).unwrap();
            expected.push((format!("t{i}"), *ty, dims.clone(), data));
        }
        let file = GgufFile::from_bytes(writer.to_bytes()).unwrap();
        for (k, v) in &entries {
            prop_assert_eq!(file.metadata().get(&format!("x.{k}")), Some(v));
        }
        prop_assert_eq!(file.tensors().len(), expected.len());
        for (name, ty, dims, data) in &expected {
            let t = file.tensor(name).unwrap();
            prop_assert_eq!(t.ty(), *ty);
            prop_assert_eq!(t.dims(), &dims[..]);
            prop_assert_eq!(t.data, &data[..]);
            prop_assert_eq!(t.info.offset % file.header().alignment, 0);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut framed = b"GGUF\x03\0\0\0".to_vec();
        framed.extend_from_slice(&bytes);
        let _ = GgufFile::from_bytes(framed);
        let _ = GgufFile::from_bytes(bytes);
    }
}

#[test]
fn removing_a_metadata_entry_keeps_the_others_reachable() {
    let mut meta = Metadata::default();
    for (i, key) in ["a", "b", "c", "d"].into_iter().enumerate() {
        meta.insert(key, MetadataValue::U32(i as u32)).unwrap();
    }
    assert!(matches!(meta.remove("b"), Some(MetadataValue::U32(1))));
    assert!(meta.remove("b").is_none());
    assert_eq!(meta.len(), 3);
    for (key, want) in [("a", 0), ("c", 2), ("d", 3)] {
        assert!(matches!(meta.get(key), Some(MetadataValue::U32(v)) if *v == want));
    }
    let keys: Vec<&str> = meta.iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["a", "c", "d"]);
}

#[test]
fn an_edited_copy_keeps_the_order_and_changes_only_what_was_edited() {
    let mut writer = GgufWriter::new();
    writer.add_metadata("a", MetadataValue::U32(0)).unwrap();
    writer.add_metadata("b", MetadataValue::U32(1)).unwrap();
    for name in ["x", "y"] {
        writer
            .add_tensor(name, GgmlType::F32, &[2], vec![0; 8])
            .unwrap();
    }
    let file = GgufFile::from_bytes(writer.to_bytes()).unwrap();
    let mut copy = GgufWriter::from_file(&file).unwrap();
    copy.set_metadata("a", MetadataValue::U32(7));
    copy.set_metadata("c", MetadataValue::U32(2));
    assert!(copy.remove_tensor("x"));
    assert!(!copy.remove_tensor("x"));
    let edited = GgufFile::from_bytes(copy.to_bytes()).unwrap();
    let entries: Vec<(&str, &MetadataValue)> = edited.metadata().iter().collect();
    assert!(matches!(
        entries[..],
        [
            ("a", MetadataValue::U32(7)),
            ("b", MetadataValue::U32(1)),
            ("c", MetadataValue::U32(2))
        ]
    ));
    let tensors: Vec<&str> = edited.tensors().map(|t| t.name()).collect();
    assert_eq!(tensors, ["y"]);
}
