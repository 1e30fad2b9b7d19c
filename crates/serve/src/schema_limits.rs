//! Size caps on the JSON schemas a request asks to follow (`response_format`, the parameters
//! of `tools`), checked before anything compiles them.
//!
//! The constraint engine's compiler recurses once per property, `$ref` and alternative, and
//! some constructs cost it far more than their size: `patternProperties` are checked pairwise
//! for overlap (800 patterns ran for minutes), and an object of a few thousand properties
//! overflows a thread's stack. So a schema is walked here first, iteratively (its depth is
//! what is being checked), and refused with the cap it breaks when it is larger than any
//! schema a model can usefully follow. The caps are near OpenAI's own for structured outputs,
//! tighter where the compiler's cost grows faster than the schema.

use serde_json::Value;

/// Most bytes of a schema (its strings and keys, plus a byte per value).
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;
/// Most JSON values in a schema.
pub const MAX_SCHEMA_VALUES: usize = 8_000;
/// Deepest nesting of JSON values.
pub const MAX_SCHEMA_DEPTH: usize = 48;
/// Most properties of one object (also the most names in one `required`).
pub const MAX_OBJECT_PROPERTIES: usize = 256;
/// Most properties over the whole schema.
pub const MAX_TOTAL_PROPERTIES: usize = 2_000;
/// Most `patternProperties` of one object, and over the whole schema (they are compared
/// pairwise).
pub const MAX_PATTERN_PROPERTIES: usize = 16;
/// Most `$ref`s and most definitions (`$defs`, `definitions`).
pub const MAX_REFS: usize = 256;
/// Most alternatives of one `anyOf`, `oneOf` or `allOf`, and over the whole schema.
pub const MAX_ALTERNATIVES: usize = 64;
/// Most alternatives over the whole schema.
pub const MAX_TOTAL_ALTERNATIVES: usize = 512;
/// Most values of one `enum`.
pub const MAX_ENUM_VALUES: usize = 1_024;

/// What a schema holds, counted as it is walked.
#[derive(Default)]
struct Totals {
    bytes: usize,
    values: usize,
    properties: usize,
    patterns: usize,
    refs: usize,
    definitions: usize,
    alternatives: usize,
}

/// Refuses `schema` when it breaks a cap; the message names the cap and what to do.
pub fn check(schema: &Value) -> Result<(), String> {
    let mut totals = Totals::default();
    check_into(schema, &mut totals)
}

/// Refuses `schemas` when one breaks a cap or all of them together do.
pub fn check_all<'a>(schemas: impl IntoIterator<Item = &'a Value>) -> Result<(), String> {
    let mut totals = Totals::default();
    schemas
        .into_iter()
        .try_for_each(|schema| check_into(schema, &mut totals))
}

fn check_into(schema: &Value, totals: &mut Totals) -> Result<(), String> {
    let mut pending = vec![(schema, 1usize)];
    while let Some((value, depth)) = pending.pop() {
        totals.values += 1;
        totals.bytes += 1;
        if depth > MAX_SCHEMA_DEPTH {
            return Err(format!(
                "the schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
            ));
        }
        if totals.values > MAX_SCHEMA_VALUES {
            return Err(format!(
                "the schema has more than {MAX_SCHEMA_VALUES} JSON values"
            ));
        }
        match value {
            Value::String(s) => totals.bytes += s.len(),
            Value::Array(items) => pending.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(object) => {
                for (key, child) in object {
                    totals.bytes += key.len();
                    keyword(key, child, totals)?;
                    pending.push((child, depth + 1));
                }
            }
            _ => {}
        }
        if totals.bytes > MAX_SCHEMA_BYTES {
            return Err(format!(
                "the schema is larger than {} KiB",
                MAX_SCHEMA_BYTES >> 10
            ));
        }
    }
    Ok(())
}

/// Counts what keyword `key` with value `value` adds, refusing it past a cap. A keyword name
/// used as a property name is counted too: that only makes the caps err on the safe side.
fn keyword(key: &str, value: &Value, totals: &mut Totals) -> Result<(), String> {
    let len = match value {
        Value::Object(o) => o.len(),
        Value::Array(a) => a.len(),
        _ => 0,
    };
    match key {
        "properties" => {
            let caps = [MAX_OBJECT_PROPERTIES, MAX_TOTAL_PROPERTIES];
            return add_counted(
                &mut totals.properties,
                len,
                ("an object", "properties"),
                caps,
            );
        }
        "required" if len > MAX_OBJECT_PROPERTIES => {
            return over(
                &format!("a `required` of the schema names {len} properties"),
                MAX_OBJECT_PROPERTIES,
            );
        }
        "patternProperties" => {
            totals.patterns += len;
            if totals.patterns > MAX_PATTERN_PROPERTIES {
                return over(
                    "the schema has too many `patternProperties`",
                    MAX_PATTERN_PROPERTIES,
                );
            }
        }
        "$ref" => {
            totals.refs += 1;
            if totals.refs > MAX_REFS {
                return over("the schema has too many `$ref`s", MAX_REFS);
            }
        }
        "$defs" | "definitions" => {
            totals.definitions += len;
            if totals.definitions > MAX_REFS {
                return over("the schema has too many definitions", MAX_REFS);
            }
        }
        "anyOf" | "oneOf" | "allOf" => {
            let caps = [MAX_ALTERNATIVES, MAX_TOTAL_ALTERNATIVES];
            let subject = format!("a `{key}`");
            return add_counted(
                &mut totals.alternatives,
                len,
                (&subject, "alternatives"),
                caps,
            );
        }
        "enum" if len > MAX_ENUM_VALUES => {
            return over(
                &format!("an `enum` of the schema has {len} values"),
                MAX_ENUM_VALUES,
            );
        }
        _ => {}
    }
    Ok(())
}

/// The error of a schema past a cap: `what` says what is over `cap`.
fn over(what: &str, cap: usize) -> Result<(), String> {
    Err(format!("{what} (at most {cap})"))
}

/// Adds the `len` `things` of one keyword (`subject`) to their running `total`: an error when
/// `len` is over the first cap, or the total then passes the second.
fn add_counted(
    total: &mut usize,
    len: usize,
    (subject, things): (&str, &str),
    [cap, total_cap]: [usize; 2],
) -> Result<(), String> {
    *total += len;
    if len > cap {
        return over(&format!("{subject} of the schema has {len} {things}"), cap);
    }
    if *total > total_cap {
        return over(
            &format!("the schema has too many {things} in all"),
            total_cap,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;

    fn object_of(n: usize) -> Value {
        let properties: Map<String, Value> = (0..n)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        json!({"type": "object", "properties": properties})
    }

    #[test]
    fn ordinary_schemas_pass() {
        check(&object_of(40)).unwrap();
        check(&json!({
            "type": "object",
            "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            "patternProperties": {"^x-": {"type": "string"}},
            "$defs": {"n": {"type": "number"}},
            "required": ["a"]
        }))
        .unwrap();
    }

    #[test]
    fn schemas_past_a_cap_are_refused_naming_it() {
        let required: Vec<String> = (0..6_000).map(|i| format!("name_{i:05}")).collect();
        let mut chain = Map::new();
        for i in 0..5_000 {
            chain.insert(
                format!("d{i}"),
                json!({"$ref": format!("#/$defs/d{}", i + 1)}),
            );
        }
        let patterns: Map<String, Value> = (0..800)
            .map(|i| (format!("^p{i}_[a-z]+$"), json!({"type": "string"})))
            .collect();
        let mut nested = json!({"type": "string"});
        for _ in 0..100 {
            nested = json!({"anyOf": [nested]});
        }
        let cases = [
            (
                json!({"type": "object", "required": required}),
                "`required`",
            ),
            (json!({"$ref": "#/$defs/d0", "$defs": chain}), "definitions"),
            (
                json!({"type": "object", "patternProperties": patterns}),
                "patternProperties",
            ),
            (object_of(4_500), "properties"),
            (nested, "deeper"),
        ];
        for (schema, cap) in cases {
            let err = check(&schema).unwrap_err();
            assert!(err.contains(cap), "{err}");
        }
    }

    #[test]
    fn the_caps_hold_over_several_schemas_together() {
        let schemas: Vec<Value> = (0..10).map(|_| object_of(250)).collect();
        assert!(check_all(&schemas).unwrap_err().contains("in all"));
    }
}
