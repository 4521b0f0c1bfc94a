//! Client-side checks of the service's limits (PROTOCOL.md §7), run before anything is sent so
//! a user learns which field broke which rule without a round trip.

use super::edm::{EdmValue, Entity};
use super::error::ValidationError;

/// Longest key the emulator accepts (512 UTF-16 units = 1 KiB); the service documents 1 KiB.
pub const MAX_KEY_CHARS: usize = 512;
pub const MAX_CUSTOM_PROPERTIES: usize = 252;
pub const MAX_PROPERTY_NAME_CHARS: usize = 255;
/// Strings are stored as UTF-16: 64 KiB is 32,768 units.
pub const MAX_STRING_UTF16_UNITS: usize = 32 * 1024;
pub const MAX_BINARY_BYTES: usize = 64 * 1024;
pub const MAX_ENTITY_BYTES: usize = 1024 * 1024;
const RESERVED_TABLE_NAMES: [&str; 1] = ["tables"];

pub fn table_name(name: &str) -> Result<(), ValidationError> {
    let field = || format!("table name '{name}'");
    let len = name.chars().count();
    if !(3..=63).contains(&len) {
        return Err(ValidationError::new(
            field(),
            format!("must be 3 to 63 characters long (it has {len})"),
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(ValidationError::new(field(), "must start with a letter"));
    }
    if let Some(bad) = name.chars().find(|c| !c.is_ascii_alphanumeric()) {
        return Err(ValidationError::new(
            field(),
            format!(
                "may contain only letters and digits (found '{}')",
                bad.escape_default()
            ),
        ));
    }
    if RESERVED_TABLE_NAMES
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
    {
        return Err(ValidationError::new(field(), "is reserved by the service"));
    }
    Ok(())
}

/// `which` is "PartitionKey" or "RowKey".
pub fn key(which: &str, value: &str) -> Result<(), ValidationError> {
    if let Some(bad) = value
        .chars()
        .find(|c| matches!(c, '/' | '\\' | '#' | '?') || c.is_control())
    {
        let shown = if bad.is_control() {
            format!("U+{:04X}", bad as u32)
        } else {
            format!("'{bad}'")
        };
        return Err(ValidationError::new(
            which,
            format!(
                "must not contain {shown} (forbidden in keys: / \\ # ? and control characters)"
            ),
        ));
    }
    let units = value.encode_utf16().count();
    if units > MAX_KEY_CHARS {
        return Err(ValidationError::new(
            which,
            format!("is {units} characters long; the limit is {MAX_KEY_CHARS} (1 KiB)"),
        ));
    }
    Ok(())
}

pub fn property_name(name: &str) -> Result<(), ValidationError> {
    let field = || format!("property name '{name}'");
    if name.is_empty() {
        return Err(ValidationError::new("property name", "must not be empty"));
    }
    let len = name.chars().count();
    if len > MAX_PROPERTY_NAME_CHARS {
        return Err(ValidationError::new(
            field(),
            format!("is {len} characters long; the limit is {MAX_PROPERTY_NAME_CHARS}"),
        ));
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(ValidationError::new(field(), "must not start with a digit"));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_alphanumeric() || *c == '_')) {
        return Err(ValidationError::new(
            field(),
            format!(
                "may contain only letters, digits and '_' (found '{}')",
                bad.escape_default()
            ),
        ));
    }
    if matches!(name, "PartitionKey" | "RowKey" | "Timestamp") {
        return Err(ValidationError::new(
            field(),
            "is a system property and cannot be set as a custom property",
        ));
    }
    if name.to_ascii_lowercase().starts_with("xml") {
        return Err(ValidationError::new(
            field(),
            "must not start with 'xml' (names must be valid XML names)",
        ));
    }
    Ok(())
}

pub fn value(name: &str, value: &EdmValue) -> Result<(), ValidationError> {
    match value {
        EdmValue::String(s) => {
            let units = s.encode_utf16().count();
            if units > MAX_STRING_UTF16_UNITS {
                return Err(ValidationError::new(
                    format!("property '{name}'"),
                    format!("string is {units} UTF-16 units; the limit is {MAX_STRING_UTF16_UNITS} (64 KiB)"),
                ));
            }
        }
        EdmValue::Binary(b) if b.len() > MAX_BINARY_BYTES => {
            return Err(ValidationError::new(
                format!("property '{name}'"),
                format!(
                    "binary is {} bytes; the limit is {MAX_BINARY_BYTES} (64 KiB)",
                    b.len()
                ),
            ));
        }
        EdmValue::DateTime(d) if d.parts().0 < 1601 => {
            return Err(ValidationError::new(
                format!("property '{name}'"),
                "DateTime must be 1601-01-01T00:00:00Z or later",
            ));
        }
        _ => {}
    }
    Ok(())
}

/// Everything about an entity that is about to be written.
pub fn entity(e: &Entity) -> Result<(), ValidationError> {
    key("PartitionKey", &e.partition_key)?;
    key("RowKey", &e.row_key)?;
    if e.properties.len() > MAX_CUSTOM_PROPERTIES {
        return Err(ValidationError::new(
            "entity",
            format!(
                "has {} custom properties; the limit is {MAX_CUSTOM_PROPERTIES}",
                e.properties.len()
            ),
        ));
    }
    for (i, p) in e.properties.iter().enumerate() {
        property_name(&p.name)?;
        if e.properties[..i].iter().any(|q| q.name == p.name) {
            return Err(ValidationError::new(
                format!("property '{}'", p.name),
                "is given twice",
            ));
        }
        value(&p.name, &p.value)?;
    }
    let size = entity_size(e);
    if size > MAX_ENTITY_BYTES {
        return Err(ValidationError::new(
            "entity",
            format!("is {size} bytes; the limit is {MAX_ENTITY_BYTES} (1 MiB)"),
        ));
    }
    Ok(())
}

/// The service's size formula: 4 + key sizes + per property 8 + name size + value size
/// (strings as UTF-16).
pub fn entity_size(e: &Entity) -> usize {
    let utf16 = |s: &str| s.encode_utf16().count() * 2;
    4 + utf16(&e.partition_key)
        + 2
        + utf16(&e.row_key)
        + 2
        + e.properties
            .iter()
            .map(|p| 8 + utf16(&p.name) + p.value.size_bytes())
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_follow_the_service_rules() {
        assert!(table_name("Orders2024").is_ok());
        let e = table_name("ab").unwrap_err();
        assert!(
            e.to_string().contains("3 to 63") && e.to_string().contains("'ab'"),
            "{e}"
        );
        assert!(table_name("1abc")
            .unwrap_err()
            .rule
            .contains("start with a letter"));
        assert!(table_name("my-table").unwrap_err().rule.contains("'-'"));
        assert!(table_name("Tables").unwrap_err().rule.contains("reserved"));
        assert!(table_name(&"a".repeat(64)).is_err());
    }

    #[test]
    fn keys_reject_forbidden_characters_by_name() {
        assert!(key("RowKey", "o'clock %20 é").is_ok());
        let e = key("RowKey", "a/b").unwrap_err();
        assert_eq!(e.field, "RowKey");
        assert!(e.rule.contains("'/'"), "{e}");
        assert!(key("PartitionKey", "a\tb")
            .unwrap_err()
            .rule
            .contains("U+0009"));
        assert!(key("PartitionKey", "\u{85}").is_err());
        assert!(key("RowKey", &"x".repeat(513))
            .unwrap_err()
            .rule
            .contains("512"));
    }

    #[test]
    fn property_names_are_identifiers() {
        assert!(property_name("Amount_2").is_ok());
        assert!(property_name("2fast").unwrap_err().rule.contains("digit"));
        assert!(property_name("my-prop").unwrap_err().rule.contains("'-'"));
        assert!(property_name("RowKey").unwrap_err().rule.contains("system"));
        assert!(property_name(&"a".repeat(256))
            .unwrap_err()
            .rule
            .contains("255"));
    }

    #[test]
    fn sizes_and_counts_are_enforced() {
        let mut e = Entity::new("p", "r");
        for i in 0..253 {
            e.set(format!("P{i}"), EdmValue::Int32(i));
        }
        assert!(entity(&e).unwrap_err().rule.contains("252"));
        let e = Entity::new("p", "r").with("S", EdmValue::String("x".repeat(32 * 1024 + 1)));
        assert!(entity(&e).unwrap_err().rule.contains("64 KiB"));
        let e = Entity::new("p", "r").with("B", EdmValue::Binary(vec![0; 64 * 1024 + 1]));
        assert!(entity(&e).unwrap_err().rule.contains("binary"));
        let mut e = Entity::new("p", "r");
        for i in 0..20 {
            e.set(format!("S{i}"), EdmValue::String("y".repeat(30_000)));
        }
        assert!(entity(&e).unwrap_err().rule.contains("1 MiB"));
    }
}
