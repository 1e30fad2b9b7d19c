//! A small JSON-schema checker for the keywords the structured-output tests use: `type`,
//! `properties`, `required`, `additionalProperties: false`, `items`, `minItems`, `maxItems`,
//! `enum`, `const`, `minimum`, `maximum`, `minLength`, `maxLength`, `$ref` to `#/$defs/...`.
//! A keyword outside that list fails the check, so a test cannot pass by ignoring one.

#![allow(dead_code)]

use serde_json::Value;

/// Why `value` does not follow `schema`, or `Ok` when it does.
pub fn check(value: &Value, schema: &Value) -> Result<(), String> {
    check_at(value, schema, schema, "$")
}

fn check_at(value: &Value, schema: &Value, root: &Value, path: &str) -> Result<(), String> {
    let Some(rules) = schema.as_object() else {
        return match schema {
            Value::Bool(true) => Ok(()),
            _ => Err(format!("{path}: schema {schema} allows nothing")),
        };
    };
    let fail = |what: String| Err(format!("{path}: {what} (value {value})"));
    for (keyword, rule) in rules {
        match keyword.as_str() {
            "type" => {
                let ok = match rule.as_str().unwrap_or_default() {
                    "object" => value.is_object(),
                    "array" => value.is_array(),
                    "string" => value.is_string(),
                    "integer" => value.is_i64() || value.is_u64(),
                    "number" => value.is_number(),
                    "boolean" => value.is_boolean(),
                    "null" => value.is_null(),
                    other => return fail(format!("unknown type {other}")),
                };
                if !ok {
                    return fail(format!("not of type {rule}"));
                }
            }
            "properties" => {
                if let Some(object) = value.as_object() {
                    for (name, sub) in rule.as_object().into_iter().flatten() {
                        if let Some(v) = object.get(name) {
                            check_at(v, sub, root, &format!("{path}.{name}"))?;
                        }
                    }
                }
            }
            "required" => {
                for name in rule.as_array().into_iter().flatten() {
                    let name = name.as_str().unwrap_or_default();
                    if value.as_object().is_some_and(|o| !o.contains_key(name)) {
                        return fail(format!("missing required {name}"));
                    }
                }
            }
            "additionalProperties" => {
                let known = rules.get("properties").and_then(Value::as_object);
                if rule == &Value::Bool(false)
                    && let Some(object) = value.as_object()
                    && let Some(extra) = object
                        .keys()
                        .find(|k| known.is_none_or(|p| !p.contains_key(*k)))
                {
                    return fail(format!("unexpected property {extra}"));
                }
            }
            "items" => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    check_at(item, rule, root, &format!("{path}[{i}]"))?;
                }
            }
            "minItems" | "maxItems" => {
                let bound = rule.as_u64().unwrap_or_default() as usize;
                if !within(keyword, value.as_array().map(Vec::len), bound) {
                    return fail(format!("{keyword} {bound}"));
                }
            }
            "minLength" | "maxLength" => {
                let bound = rule.as_u64().unwrap_or_default() as usize;
                if !within(keyword, value.as_str().map(|s| s.chars().count()), bound) {
                    return fail(format!("{keyword} {bound}"));
                }
            }
            "minimum" | "maximum" => {
                let bound = rule.as_f64().unwrap_or_default();
                if !within(keyword, value.as_f64(), bound) {
                    return fail(format!("{keyword} {bound}"));
                }
            }
            "enum" => {
                if !rule.as_array().is_some_and(|a| a.contains(value)) {
                    return fail(format!("not in {rule}"));
                }
            }
            "const" => {
                if rule != value {
                    return fail(format!("not {rule}"));
                }
            }
            "$ref" => {
                let pointer = rule.as_str().unwrap_or_default().trim_start_matches('#');
                let target = root
                    .pointer(pointer)
                    .ok_or_else(|| format!("{path}: no {rule}"))?;
                check_at(value, target, root, path)?;
            }
            "$defs" | "title" | "description" => {}
            other => return Err(format!("{path}: the checker does not know `{other}`")),
        }
    }
    Ok(())
}

/// Whether `measure` (absent: the keyword does not apply to the value) keeps `bound`, a lower
/// bound for the keywords `min*`, an upper one for `max*`.
fn within<T: PartialOrd>(keyword: &str, measure: Option<T>, bound: T) -> bool {
    measure.is_none_or(|n| {
        if keyword.starts_with("min") {
            n >= bound
        } else {
            n <= bound
        }
    })
}
