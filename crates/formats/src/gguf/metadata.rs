//! GGUF metadata: typed values, and getters whose errors name the key.

use std::collections::HashMap;

use crate::error::{GgufError, Result};

use super::cursor::Cursor;

/// The type of a metadata value, numbered as in the GGUF specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    /// `u8`.
    U8 = 0,
    /// `i8`.
    I8 = 1,
    /// `u16`.
    U16 = 2,
    /// `i16`.
    I16 = 3,
    /// `u32`.
    U32 = 4,
    /// `i32`.
    I32 = 5,
    /// `f32`.
    F32 = 6,
    /// A byte that is 0 or 1.
    Bool = 7,
    /// A UTF-8 string.
    String = 8,
    /// An array of one value type.
    Array = 9,
    /// `u64`.
    U64 = 10,
    /// `i64`.
    I64 = 11,
    /// `f64`.
    F64 = 12,
}

impl ValueType {
    /// The type with this id.
    pub fn from_id(id: u32) -> Option<Self> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The type's lower-case name (`"u32"`, `"string"` …).
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// The fewest bytes a value of this type takes in a file.
    fn min_bytes(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetadataValue {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `f32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// A string.
    String(String),
    /// An array; `element` is kept so that empty arrays write back with their type.
    Array {
        /// The type of every item.
        element: ValueType,
        /// The items.
        items: Vec<MetadataValue>,
    },
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f64`.
    F64(f64),
}

/// How deep arrays may nest; GGUF files in the wild use one level.
const MAX_NESTING: usize = 8;

/// Most metadata values (array items included) one file may hold. The largest vocabularies in
/// use (262 144 tokens with scores and types, or 128 256 tokens with 280 147 merges) need under
/// a million; at most 32 bytes each in memory, the limit keeps a crafted file's metadata under
/// 128 MiB however its bytes are spent.
pub const MAX_METADATA_VALUES: u64 = 1 << 22;

/// Items reserved up front for an array; longer arrays grow as their items are read.
const ARRAY_RESERVE: u64 = 1024;

/// The metadata values a file may still hold, charged as they are read.
pub(crate) struct ValueBudget {
    used: u64,
}

impl ValueBudget {
    pub(crate) fn new() -> Self {
        Self { used: 0 }
    }

    /// Fails if `count` more values would pass [`MAX_METADATA_VALUES`].
    fn check_fits(&self, count: u64, offset: u64) -> Result<()> {
        let total = self.used.saturating_add(count);
        if total > MAX_METADATA_VALUES {
            return Err(GgufError::CountOverLimit {
                what: "metadata values (array items included)",
                count: total,
                offset,
                limit: MAX_METADATA_VALUES,
            });
        }
        Ok(())
    }

    fn charge(&mut self, count: u64, offset: u64) -> Result<()> {
        self.check_fits(count, offset)?;
        self.used += count;
        Ok(())
    }
}

impl MetadataValue {
    /// This value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            MetadataValue::U8(_) => ValueType::U8,
            MetadataValue::I8(_) => ValueType::I8,
            MetadataValue::U16(_) => ValueType::U16,
            MetadataValue::I16(_) => ValueType::I16,
            MetadataValue::U32(_) => ValueType::U32,
            MetadataValue::I32(_) => ValueType::I32,
            MetadataValue::F32(_) => ValueType::F32,
            MetadataValue::Bool(_) => ValueType::Bool,
            MetadataValue::String(_) => ValueType::String,
            MetadataValue::Array { .. } => ValueType::Array,
            MetadataValue::U64(_) => ValueType::U64,
            MetadataValue::I64(_) => ValueType::I64,
            MetadataValue::F64(_) => ValueType::F64,
        }
    }

    /// The value as an integer, if it is one of the integer types.
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            MetadataValue::U8(v) => v.into(),
            MetadataValue::I8(v) => v.into(),
            MetadataValue::U16(v) => v.into(),
            MetadataValue::I16(v) => v.into(),
            MetadataValue::U32(v) => v.into(),
            MetadataValue::I32(v) => v.into(),
            MetadataValue::U64(v) => v.into(),
            MetadataValue::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// The value as a float, if it is `f32` or `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetadataValue::F32(v) => Some(v.into()),
            MetadataValue::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a string slice, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetadataValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The items, if the value is an array.
    pub fn as_array(&self) -> Option<&[MetadataValue]> {
        match self {
            MetadataValue::Array { items, .. } => Some(items),
            _ => None,
        }
    }

    /// Reads a value of type `ty`, charging it and every array item to `budget`.
    pub(crate) fn read(
        cursor: &mut Cursor<'_>,
        ty: ValueType,
        depth: usize,
        budget: &mut ValueBudget,
    ) -> Result<Self> {
        budget.charge(1, cursor.offset())?;
        Ok(match ty {
            ValueType::U8 => MetadataValue::U8(cursor.u8("u8 value")?),
            ValueType::I8 => MetadataValue::I8(cursor.u8("i8 value")? as i8),
            ValueType::U16 => MetadataValue::U16(cursor.u16("u16 value")?),
            ValueType::I16 => MetadataValue::I16(cursor.u16("i16 value")? as i16),
            ValueType::U32 => MetadataValue::U32(cursor.u32("u32 value")?),
            ValueType::I32 => MetadataValue::I32(cursor.u32("i32 value")? as i32),
            ValueType::F32 => MetadataValue::F32(cursor.f32("f32 value")?),
            ValueType::U64 => MetadataValue::U64(cursor.u64("u64 value")?),
            ValueType::I64 => MetadataValue::I64(cursor.u64("i64 value")? as i64),
            ValueType::F64 => MetadataValue::F64(cursor.f64("f64 value")?),
            ValueType::Bool => {
                let offset = cursor.offset();
                match cursor.u8("bool value")? {
                    0 => MetadataValue::Bool(false),
                    1 => MetadataValue::Bool(true),
                    value => return Err(GgufError::InvalidBool { value, offset }),
                }
            }
            ValueType::String => MetadataValue::String(cursor.string("string value")?),
            ValueType::Array => {
                let offset = cursor.offset();
                if depth >= MAX_NESTING {
                    return Err(GgufError::NestingTooDeep {
                        limit: MAX_NESTING,
                        offset,
                    });
                }
                let element = read_value_type(cursor)?;
                let count_offset = cursor.offset();
                let len = cursor.count("array length", element.min_bytes())?;
                budget.check_fits(len, count_offset)?;
                // Items are stored as they are read: the vector grows with the bytes read, never
                // ahead of them, whatever the count claims.
                let mut items = Vec::with_capacity(len.min(ARRAY_RESERVE) as usize);
                for _ in 0..len {
                    items.push(MetadataValue::read(cursor, element, depth + 1, budget)?);
                }
                MetadataValue::Array { element, items }
            }
        })
    }

    /// Appends this value's encoding (without its type id) to `out`.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match self {
            MetadataValue::U8(v) => out.push(*v),
            MetadataValue::I8(v) => out.push(*v as u8),
            MetadataValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
            MetadataValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
            MetadataValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            MetadataValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            MetadataValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
            MetadataValue::Bool(v) => out.push(u8::from(*v)),
            MetadataValue::String(s) => write_string(s, out),
            MetadataValue::Array { element, items } => {
                out.extend_from_slice(&(*element as u32).to_le_bytes());
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for item in items {
                    item.write(out);
                }
            }
            MetadataValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            MetadataValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            MetadataValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
}

pub(crate) fn write_string(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

pub(crate) fn read_value_type(cursor: &mut Cursor<'_>) -> Result<ValueType> {
    let offset = cursor.offset();
    let type_id = cursor.u32("value type")?;
    ValueType::from_id(type_id).ok_or(GgufError::UnknownValueType { type_id, offset })
}

/// The key–value metadata of a GGUF file, in file order, with typed getters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, MetadataValue)>,
    index: HashMap<String, usize>,
}

impl Metadata {
    /// Adds an entry; a key already present is an error.
    pub fn insert(&mut self, key: impl Into<String>, value: MetadataValue) -> Result<()> {
        let key = key.into();
        if self.index.contains_key(&key) {
            return Err(GgufError::DuplicateKey { key });
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        Ok(())
    }

    /// Sets `key` to `value`: in its place when present, else as a new last entry.
    pub fn set(&mut self, key: &str, value: MetadataValue) {
        match self.index.get(key) {
            Some(&i) => self.entries[i].1 = value,
            None => {
                self.index.insert(key.into(), self.entries.len());
                self.entries.push((key.into(), value));
            }
        }
    }

    /// Removes `key`'s entry and gives back its value, if present (to hand a large value, like a
    /// vocabulary, to whatever keeps it instead of holding two copies).
    pub fn remove(&mut self, key: &str) -> Option<MetadataValue> {
        let i = self.index.remove(key)?;
        let (_, value) = self.entries.remove(i);
        for slot in self.index.values_mut() {
            if *slot > i {
                *slot -= 1;
            }
        }
        Some(value)
    }

    /// The entries in file order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &MetadataValue)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value for `key`, if present.
    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// The value for `key`, or [`GgufError::MissingKey`].
    pub fn require(&self, key: &str) -> Result<&MetadataValue> {
        self.get(key)
            .ok_or_else(|| GgufError::MissingKey { key: key.into() })
    }

    fn wrong_type(key: &str, expected: &'static str, found: &MetadataValue) -> GgufError {
        GgufError::WrongType {
            key: key.into(),
            expected,
            found: found.value_type().name(),
        }
    }

    /// A string value.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        let v = self.require(key)?;
        v.as_str().ok_or_else(|| Self::wrong_type(key, "string", v))
    }

    /// An integer value of any integer type that fits in `u64` (converters differ on the width).
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        let v = self.require(key)?;
        v.as_i128()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| Self::wrong_type(key, "non-negative integer", v))
    }

    /// An integer value of any integer type that fits in `u32`.
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        let v = self.require(key)?;
        v.as_i128()
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| Self::wrong_type(key, "integer fitting in u32", v))
    }

    /// A float value (`f32` or `f64`).
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        let v = self.require(key)?;
        v.as_f64()
            .map(|f| f as f32)
            .ok_or_else(|| Self::wrong_type(key, "float", v))
    }

    /// A boolean value.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        match self.require(key)? {
            MetadataValue::Bool(b) => Ok(*b),
            v => Err(Self::wrong_type(key, "bool", v)),
        }
    }

    /// An array value's items.
    pub fn get_array(&self, key: &str) -> Result<&[MetadataValue]> {
        let v = self.require(key)?;
        v.as_array()
            .ok_or_else(|| Self::wrong_type(key, "array", v))
    }
}
