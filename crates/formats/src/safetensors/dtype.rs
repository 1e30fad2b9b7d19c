//! Element types of safetensors tensors.

use std::fmt;

macro_rules! dtypes {
    ($( $(#[$doc:meta])* $variant:ident, $name:literal, $bits:literal; )*) => {
        /// The element type of a safetensors tensor, as the file's header names it.
        ///
        /// rinfer's own enum rather than the `safetensors` crate's, so that a new type in that
        /// crate is an explicit error at load instead of a silent change in this crate's API.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Dtype {
            $( $(#[$doc])* $variant, )*
        }

        impl Dtype {
            /// Every type, in the order above.
            pub const ALL: &'static [Dtype] = &[$(Dtype::$variant),*];

            /// The name the header uses for this type (`"F32"`, `"BF16"` …).
            pub fn name(self) -> &'static str {
                match self { $( Dtype::$variant => $name, )* }
            }

            /// Bits per element (4 and 6 for the sub-byte micro-scaling float types).
            pub fn bits(self) -> usize {
                match self { $( Dtype::$variant => $bits, )* }
            }

            /// The type the header calls `name`, or `None`.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $( $name => Some(Dtype::$variant), )*
                    _ => None,
                }
            }
        }
    };
}

dtypes! {
    /// Booleans, one byte each.
    Bool, "BOOL", 8;
    /// OCP MX 4-bit float (E2M1).
    F4, "F4", 4;
    /// OCP MX 6-bit float (E2M3).
    F6E2M3, "F6_E2M3", 6;
    /// OCP MX 6-bit float (E3M2).
    F6E3M2, "F6_E3M2", 6;
    /// Unsigned bytes.
    U8, "U8", 8;
    /// Signed bytes.
    I8, "I8", 8;
    /// 8-bit float, 5 exponent and 2 mantissa bits.
    F8E5M2, "F8_E5M2", 8;
    /// 8-bit float, 4 exponent and 3 mantissa bits.
    F8E4M3, "F8_E4M3", 8;
    /// 8-bit power-of-two scale (OCP MX E8M0).
    F8E8M0, "F8_E8M0", 8;
    /// Signed 16-bit integers.
    I16, "I16", 16;
    /// Unsigned 16-bit integers.
    U16, "U16", 16;
    /// IEEE half precision.
    F16, "F16", 16;
    /// bfloat16.
    BF16, "BF16", 16;
    /// Signed 32-bit integers.
    I32, "I32", 32;
    /// Unsigned 32-bit integers.
    U32, "U32", 32;
    /// IEEE single precision.
    F32, "F32", 32;
    /// IEEE double precision.
    F64, "F64", 64;
    /// Signed 64-bit integers.
    I64, "I64", 64;
    /// Unsigned 64-bit integers.
    U64, "U64", 64;
}

impl Dtype {
    /// This type as the `safetensors` crate spells it, for writing files.
    pub fn to_safetensors(self) -> ::safetensors::Dtype {
        use ::safetensors::Dtype as S;
        match self {
            Dtype::Bool => S::BOOL,
            Dtype::F4 => S::F4,
            Dtype::F6E2M3 => S::F6_E2M3,
            Dtype::F6E3M2 => S::F6_E3M2,
            Dtype::U8 => S::U8,
            Dtype::I8 => S::I8,
            Dtype::F8E5M2 => S::F8_E5M2,
            Dtype::F8E4M3 => S::F8_E4M3,
            Dtype::F8E8M0 => S::F8_E8M0,
            Dtype::I16 => S::I16,
            Dtype::U16 => S::U16,
            Dtype::F16 => S::F16,
            Dtype::BF16 => S::BF16,
            Dtype::I32 => S::I32,
            Dtype::U32 => S::U32,
            Dtype::F32 => S::F32,
            Dtype::F64 => S::F64,
            Dtype::I64 => S::I64,
            Dtype::U64 => S::U64,
        }
    }

    /// The type the `safetensors` crate parsed, or `None` for one newer than this enum.
    ///
    /// Goes through the header name so that every type both sides know maps one to one.
    pub fn from_safetensors(dtype: ::safetensors::Dtype) -> Option<Self> {
        Self::from_name(&dtype.to_string())
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
