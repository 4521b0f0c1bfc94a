//! Entities and the eight EDM value types, with exact conversion to and from the service's
//! JSON entity format (`Name@odata.type` annotations, `odata.etag`).

use std::fmt;

use base64::Engine as _;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// 100-nanosecond ticks in one second.
const TICKS_PER_SECOND: i64 = 10_000_000;
/// Days from 0001-01-01 to 1970-01-01 (proleptic Gregorian).
const DAYS_TO_UNIX_EPOCH: i64 = 719_162;

/// A UTC instant with the service's full precision: 100 ns ticks since 0001-01-01T00:00:00Z.
/// Kept as an integer so nothing is ever rounded (Storage Explorer rounds to milliseconds).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    ticks: i64,
}

impl DateTime {
    /// The earliest value the service accepts.
    pub const MIN: DateTime = DateTime { ticks: 0 };

    pub fn from_ticks(ticks: i64) -> DateTime {
        DateTime { ticks }
    }

    pub fn ticks(self) -> i64 {
        self.ticks
    }

    pub fn from_unix_nanos(nanos: i128) -> DateTime {
        let ticks =
            nanos.div_euclid(100) + i128::from(DAYS_TO_UNIX_EPOCH * 86_400 * TICKS_PER_SECOND);
        DateTime {
            ticks: i64::try_from(ticks).unwrap_or(i64::MAX),
        }
    }

    pub fn now() -> DateTime {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        DateTime::from_unix_nanos(nanos)
    }

    /// Seconds since the Unix epoch (fraction dropped).
    pub fn unix_seconds(self) -> i64 {
        self.ticks.div_euclid(TICKS_PER_SECOND) - DAYS_TO_UNIX_EPOCH * 86_400
    }

    /// Parses ISO-8601 as the service writes it: `YYYY-MM-DDTHH:MM:SS[.f{1,7}][Z|±HH:MM]`.
    /// No zone means UTC, as the service assumes.
    pub fn parse(s: &str) -> Result<DateTime, String> {
        let b = s.as_bytes();
        let err = |why: &str| {
            format!("'{s}' is not an ISO-8601 UTC date-time ({why}); expected e.g. 2024-01-31T12:00:00.1234567Z")
        };
        if b.len() < 19 {
            return Err(err("too short"));
        }
        let num = |range: std::ops::Range<usize>| -> Result<i64, String> {
            let part = &s[range];
            if part.bytes().all(|c| c.is_ascii_digit()) {
                part.parse::<i64>().map_err(|_| err("bad number"))
            } else {
                Err(err("digits expected"))
            }
        };
        if b[4] != b'-'
            || b[7] != b'-'
            || (b[10] != b'T' && b[10] != b't')
            || b[13] != b':'
            || b[16] != b':'
        {
            return Err(err("separators"));
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            return Err(err("no such date"));
        }
        if hour > 23 || minute > 59 || second > 59 {
            return Err(err("no such time"));
        }
        if year < 1 {
            return Err(err("year before 0001"));
        }
        let mut i = 19;
        let mut fraction: i64 = 0;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let digits = &s[start..i];
            if digits.is_empty() {
                return Err(err("empty fraction"));
            }
            if digits.len() > 7 {
                // More precision than the service keeps: only zeros may be dropped, never rounded.
                if digits[7..].bytes().any(|c| c != b'0') {
                    return Err(err("more than 7 fractional digits (100 ns is the finest)"));
                }
            }
            let kept = &digits[..digits.len().min(7)];
            fraction = kept.parse::<i64>().map_err(|_| err("bad fraction"))?
                * 10_i64.pow(7 - kept.len() as u32);
        }
        let mut offset_seconds = 0;
        if i < b.len() {
            match b[i] {
                b'Z' | b'z' if i + 1 == b.len() => {}
                b'+' | b'-' if b.len() == i + 6 && b[i + 3] == b':' => {
                    let oh = num(i + 1..i + 3)?;
                    let om = num(i + 4..i + 6)?;
                    if oh > 23 || om > 59 {
                        return Err(err("bad offset"));
                    }
                    let sign = if b[i] == b'+' { 1 } else { -1 };
                    offset_seconds = sign * (oh * 3600 + om * 60);
                }
                _ => return Err(err("unexpected text after the time")),
            }
        }
        let days = days_from_civil(year, month, day);
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
        let ticks = (seconds + DAYS_TO_UNIX_EPOCH * 86_400) * TICKS_PER_SECOND + fraction;
        if ticks < 0 {
            return Err(err("before 0001-01-01"));
        }
        Ok(DateTime { ticks })
    }

    /// Calendar parts: (year, month, day, hour, minute, second, 100 ns fraction).
    pub fn parts(self) -> (i64, i64, i64, i64, i64, i64, i64) {
        let fraction = self.ticks.rem_euclid(TICKS_PER_SECOND);
        let total_seconds = self.ticks.div_euclid(TICKS_PER_SECOND) - DAYS_TO_UNIX_EPOCH * 86_400;
        let days = total_seconds.div_euclid(86_400);
        let secs = total_seconds.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        (y, m, d, secs / 3600, secs % 3600 / 60, secs % 60, fraction)
    }

    /// Shifts by a number of seconds (for showing local time).
    pub fn offset_by_seconds(self, seconds: i64) -> DateTime {
        DateTime {
            ticks: self
                .ticks
                .saturating_add(seconds.saturating_mul(TICKS_PER_SECOND)),
        }
    }
}

/// The wire form: always 7 fractional digits and `Z`.
impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, mo, d, h, mi, s, frac) = self.parts();
        write!(f, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{frac:07}Z")
    }
}

impl fmt::Debug for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DateTime({self})")
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// RFC 1123 date for `x-ms-date`, e.g. `Mon, 01 Jan 2024 00:00:00 GMT`.
pub fn rfc1123(unix_seconds: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix_seconds.div_euclid(86_400);
    let secs = unix_seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The EDM type of a property.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdmType {
    String,
    Boolean,
    Int32,
    Int64,
    Double,
    DateTime,
    Guid,
    Binary,
}

impl EdmType {
    pub const ALL: [EdmType; 8] = [
        EdmType::String,
        EdmType::Boolean,
        EdmType::Int32,
        EdmType::Int64,
        EdmType::Double,
        EdmType::DateTime,
        EdmType::Guid,
        EdmType::Binary,
    ];

    /// The annotation value, e.g. `Edm.Int64`.
    pub fn odata_name(self) -> &'static str {
        match self {
            EdmType::String => "Edm.String",
            EdmType::Boolean => "Edm.Boolean",
            EdmType::Int32 => "Edm.Int32",
            EdmType::Int64 => "Edm.Int64",
            EdmType::Double => "Edm.Double",
            EdmType::DateTime => "Edm.DateTime",
            EdmType::Guid => "Edm.Guid",
            EdmType::Binary => "Edm.Binary",
        }
    }

    /// Short name used in column headers and the CSV header (`Name@type`, as Storage Explorer).
    pub fn short_name(self) -> &'static str {
        match self {
            EdmType::String => "String",
            EdmType::Boolean => "Boolean",
            EdmType::Int32 => "Int32",
            EdmType::Int64 => "Int64",
            EdmType::Double => "Double",
            EdmType::DateTime => "DateTime",
            EdmType::Guid => "Guid",
            EdmType::Binary => "Binary",
        }
    }

    pub fn from_name(name: &str) -> Option<EdmType> {
        let bare = name.strip_prefix("Edm.").unwrap_or(name);
        EdmType::ALL
            .into_iter()
            .find(|t| t.short_name().eq_ignore_ascii_case(bare))
    }

    /// Whether JSON alone implies this type, so no annotation is needed.
    /// Double is never implied: `2.0` would be read back as Int32 by some parsers.
    fn implied_by_json(self) -> bool {
        matches!(self, EdmType::String | EdmType::Boolean | EdmType::Int32)
    }
}

impl fmt::Display for EdmType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.odata_name())
    }
}

/// A typed property value.
#[derive(Clone, Debug)]
pub enum EdmValue {
    String(String),
    Boolean(bool),
    Int32(i32),
    Int64(i64),
    Double(f64),
    DateTime(DateTime),
    Guid(uuid::Uuid),
    Binary(Vec<u8>),
}

/// Equality as a user sees it: NaN equals NaN, and -0.0 differs from 0.0 (bitwise doubles).
impl PartialEq for EdmValue {
    fn eq(&self, other: &Self) -> bool {
        use EdmValue::*;
        match (self, other) {
            (String(a), String(b)) => a == b,
            (Boolean(a), Boolean(b)) => a == b,
            (Int32(a), Int32(b)) => a == b,
            (Int64(a), Int64(b)) => a == b,
            (Double(a), Double(b)) => (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            (DateTime(a), DateTime(b)) => a == b,
            (Guid(a), Guid(b)) => a == b,
            (Binary(a), Binary(b)) => a == b,
            _ => false,
        }
    }
}

impl EdmValue {
    pub fn edm_type(&self) -> EdmType {
        match self {
            EdmValue::String(_) => EdmType::String,
            EdmValue::Boolean(_) => EdmType::Boolean,
            EdmValue::Int32(_) => EdmType::Int32,
            EdmValue::Int64(_) => EdmType::Int64,
            EdmValue::Double(_) => EdmType::Double,
            EdmValue::DateTime(_) => EdmType::DateTime,
            EdmValue::Guid(_) => EdmType::Guid,
            EdmValue::Binary(_) => EdmType::Binary,
        }
    }

    /// Parses the text form of a value of the given type (what a user types in the editor or a
    /// CSV cell holds). The error names the rule.
    pub fn parse_as(ty: EdmType, text: &str) -> Result<EdmValue, String> {
        match ty {
            EdmType::String => Ok(EdmValue::String(text.to_string())),
            EdmType::Boolean => match text.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(EdmValue::Boolean(true)),
                "false" => Ok(EdmValue::Boolean(false)),
                _ => Err(format!("'{text}' is not a Boolean (true or false)")),
            },
            EdmType::Int32 => text.trim().parse::<i32>().map(EdmValue::Int32).map_err(|_| {
                format!("'{text}' is not an Int32 (a whole number from -2147483648 to 2147483647; use Int64 for larger)")
            }),
            EdmType::Int64 => text.trim().parse::<i64>().map(EdmValue::Int64).map_err(|_| {
                format!("'{text}' is not an Int64 (a whole number from -9223372036854775808 to 9223372036854775807)")
            }),
            EdmType::Double => parse_double(text.trim()).map(EdmValue::Double).ok_or_else(|| {
                format!("'{text}' is not a Double (a number such as 1.5, 2, -3e10, or NaN, Infinity, -Infinity)")
            }),
            EdmType::DateTime => DateTime::parse(text.trim()).map(EdmValue::DateTime),
            EdmType::Guid => uuid::Uuid::try_parse(text.trim()).map(EdmValue::Guid).map_err(|_| {
                format!("'{text}' is not a Guid (like 4185404a-5818-48c3-b9be-f217df0dba6f)")
            }),
            EdmType::Binary => parse_binary(text.trim()).map(EdmValue::Binary),
        }
    }

    /// The canonical text form (inverse of `parse_as`): Int64 exact, DateTime with 7 digits,
    /// Binary as Base64, Double as the shortest exact decimal or NaN/Infinity/-Infinity.
    pub fn to_text(&self) -> String {
        match self {
            EdmValue::String(s) => s.clone(),
            EdmValue::Boolean(b) => b.to_string(),
            EdmValue::Int32(v) => v.to_string(),
            EdmValue::Int64(v) => v.to_string(),
            EdmValue::Double(v) => double_text(*v),
            EdmValue::DateTime(d) => d.to_string(),
            EdmValue::Guid(g) => g.hyphenated().to_string(),
            EdmValue::Binary(b) => B64.encode(b),
        }
    }

    /// Bytes this value counts for in the service's size limits (strings as UTF-16).
    pub fn size_bytes(&self) -> usize {
        match self {
            EdmValue::String(s) => s.encode_utf16().count() * 2,
            EdmValue::Boolean(_) => 1,
            EdmValue::Int32(_) => 4,
            EdmValue::Int64(_) | EdmValue::Double(_) | EdmValue::DateTime(_) => 8,
            EdmValue::Guid(_) => 16,
            EdmValue::Binary(b) => b.len(),
        }
    }
}

fn double_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "Infinity".into()
    } else if v == f64::NEG_INFINITY {
        "-Infinity".into()
    } else {
        // serde_json prints the shortest text that parses back to the same bits, with ".0" for
        // integral values so it stays visibly a Double.
        serde_json::Number::from_f64(v)
            .map(|n| n.to_string())
            .unwrap_or_else(|| v.to_string())
    }
}

fn parse_double(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "Infinity" | "INF" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" | "-INF" => Some(f64::NEG_INFINITY),
        _ => {
            // Rust also accepts "inf" and "nan" spelled other ways; only plain numbers here.
            if text.is_empty()
                || !text
                    .bytes()
                    .all(|c| c.is_ascii_digit() || b"+-.eE".contains(&c))
            {
                return None;
            }
            text.parse::<f64>().ok().filter(|v| v.is_finite())
        }
    }
}

/// Binary from Base64 (standard, padded) or hex (`0x…` or an even run of hex digits).
pub fn parse_binary(text: &str) -> Result<Vec<u8>, String> {
    let hex = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"));
    if let Some(hex) = hex {
        return decode_hex(hex).ok_or_else(|| {
            format!("'{text}' is not valid hex (an even number of 0-9a-f digits after 0x)")
        });
    }
    B64.decode(text).map_err(|_| format!("'{text}' is not Binary: use Base64 (e.g. AQID) or hex with a 0x prefix (e.g. 0x010203)"))
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// One named property.
#[derive(Clone, Debug, PartialEq)]
pub struct Property {
    pub name: String,
    pub value: EdmValue,
}

/// An entity: keys, system properties, and custom properties in the order they arrived.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Entity {
    pub partition_key: String,
    pub row_key: String,
    /// Server-maintained; never sent.
    pub timestamp: Option<DateTime>,
    /// Opaque; echoed verbatim in `If-Match`.
    pub etag: Option<String>,
    pub properties: Vec<Property>,
}

impl Entity {
    pub fn new(partition_key: impl Into<String>, row_key: impl Into<String>) -> Entity {
        Entity {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
            ..Entity::default()
        }
    }

    pub fn with(mut self, name: impl Into<String>, value: EdmValue) -> Entity {
        self.set(name, value);
        self
    }

    pub fn get(&self, name: &str) -> Option<&EdmValue> {
        self.properties
            .iter()
            .find(|p| p.name == name)
            .map(|p| &p.value)
    }

    /// Sets a property, replacing one of the same name in place.
    pub fn set(&mut self, name: impl Into<String>, value: EdmValue) {
        let name = name.into();
        match self.properties.iter_mut().find(|p| p.name == name) {
            Some(p) => p.value = value,
            None => self.properties.push(Property { name, value }),
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<EdmValue> {
        let i = self.properties.iter().position(|p| p.name == name)?;
        Some(self.properties.remove(i).value)
    }

    /// Same keys and the same custom properties (in any order), ignoring Timestamp and ETag.
    pub fn same_content(&self, other: &Entity) -> bool {
        self.partition_key == other.partition_key
            && self.row_key == other.row_key
            && self.properties.len() == other.properties.len()
            && self
                .properties
                .iter()
                .all(|p| other.get(&p.name) == Some(&p.value))
    }

    /// The request body for insert/update/merge: keys and custom properties, no system or
    /// metadata fields, every non-implied type annotated.
    pub fn to_request_json(&self) -> String {
        self.write_json(false)
    }

    /// The service's own JSON entity format as the CLI prints it: `odata.etag`, keys,
    /// `Timestamp`, then the properties with annotations.
    pub fn to_json_line(&self) -> String {
        self.write_json(true)
    }

    fn write_json(&self, with_system: bool) -> String {
        let mut out = String::with_capacity(64 + self.properties.len() * 32);
        out.push('{');
        let mut first = true;
        let mut field = |out: &mut String, name: &str, value: &str| {
            if !first {
                out.push(',');
            }
            first = false;
            push_json_string(out, name);
            out.push(':');
            out.push_str(value);
        };
        if with_system {
            if let Some(etag) = &self.etag {
                field(&mut out, "odata.etag", &json_string(etag));
            }
        }
        field(&mut out, "PartitionKey", &json_string(&self.partition_key));
        field(&mut out, "RowKey", &json_string(&self.row_key));
        if with_system {
            if let Some(ts) = &self.timestamp {
                field(&mut out, "Timestamp", &json_string(&ts.to_string()));
            }
        }
        for p in &self.properties {
            let ty = p.value.edm_type();
            if !ty.implied_by_json() {
                field(
                    &mut out,
                    &format!("{}@odata.type", p.name),
                    &json_string(ty.odata_name()),
                );
            }
            let value = match &p.value {
                EdmValue::String(s) => json_string(s),
                EdmValue::Boolean(b) => b.to_string(),
                EdmValue::Int32(v) => v.to_string(),
                EdmValue::Double(v) if v.is_finite() => double_text(*v),
                other => json_string(&other.to_text()),
            };
            field(&mut out, &p.name, &value);
        }
        out.push('}');
        out
    }

    /// Parses one entity in the service's JSON format (a line printed by `query`/`get`, or
    /// user input). `odata.etag` is kept; other `odata.*` metadata is ignored.
    pub fn from_json(text: &str) -> Result<Entity, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        let raw = RawEntity::deserialize_from(&mut de)
            .map_err(|e| format!("invalid entity JSON: {e}"))?;
        de.end().map_err(|e| format!("invalid entity JSON: {e}"))?;
        raw.into_entity()
    }
}

/// One or more entities in the service's JSON format, concatenated or one per line (JSONL).
/// Each error names the entity's position and line.
pub fn parse_entities(text: &str) -> Vec<Result<Entity, String>> {
    struct One(RawEntity);
    impl<'de> serde::Deserialize<'de> for One {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<One, D::Error> {
            RawEntity::deserialize_from(d).map(One)
        }
    }
    let mut out = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<One>();
    loop {
        let n = out.len() + 1;
        match stream.next() {
            None => break,
            Some(Ok(One(raw))) => {
                out.push(raw.into_entity().map_err(|e| format!("entity {n}: {e}")))
            }
            Some(Err(e)) => {
                // The stream cannot resynchronise after a syntax error.
                out.push(Err(format!("entity {n}: invalid JSON: {e}")));
                break;
            }
        }
    }
    out
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_json_string(&mut out, s);
    out
}

fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON scalar as it arrived, before its EDM type is known.
enum RawValue {
    Str(String),
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Null,
}

struct RawValueSeed;

impl<'de> DeserializeSeed<'de> for RawValueSeed {
    type Value = RawValue;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawValue, D::Error> {
        d.deserialize_any(RawValueVisitor)
    }
}

struct RawValueVisitor;

impl<'de> Visitor<'de> for RawValueVisitor {
    type Value = RawValue;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON string, number, boolean or null")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<RawValue, E> {
        Ok(RawValue::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<RawValue, E> {
        Ok(RawValue::Str(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawValue, E> {
        Ok(RawValue::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawValue, E> {
        Ok(RawValue::UInt(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawValue, E> {
        Ok(RawValue::Float(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawValue, E> {
        Ok(RawValue::Bool(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<RawValue, E> {
        Ok(RawValue::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<RawValue, E> {
        Ok(RawValue::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<RawValue, A::Error> {
        Err(de::Error::custom("arrays are not entity property values"))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<RawValue, A::Error> {
        Err(de::Error::custom("objects are not entity property values"))
    }
}

/// An entity's JSON members, split into values, annotations and metadata.
#[derive(Default)]
struct RawEntity {
    etag: Option<String>,
    values: Vec<(String, RawValue)>,
    annotations: Vec<(String, String)>,
}

impl RawEntity {
    fn deserialize_from<'de, D: Deserializer<'de>>(d: D) -> Result<RawEntity, D::Error> {
        d.deserialize_map(RawEntityVisitor)
    }

    fn into_entity(self) -> Result<Entity, String> {
        let mut entity = Entity {
            etag: self.etag,
            ..Entity::default()
        };
        let mut have_pk = false;
        let mut have_rk = false;
        entity.properties.reserve(self.values.len());
        for (name, raw) in self.values {
            let annotation = self
                .annotations
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, t)| t.as_str());
            let ty = match annotation {
                Some(t) => Some(
                    EdmType::from_name(t)
                        .ok_or_else(|| format!("property '{name}': unknown type '{t}'"))?,
                ),
                None => None,
            };
            match name.as_str() {
                "PartitionKey" | "RowKey" => {
                    let RawValue::Str(s) = raw else {
                        return Err(format!("{name} must be a string"));
                    };
                    if name == "PartitionKey" {
                        entity.partition_key = s;
                        have_pk = true;
                    } else {
                        entity.row_key = s;
                        have_rk = true;
                    }
                }
                "Timestamp" => {
                    if let RawValue::Str(s) = raw {
                        entity.timestamp =
                            Some(DateTime::parse(&s).map_err(|e| format!("Timestamp: {e}"))?);
                    }
                }
                _ => {
                    if let Some(value) = typed_value(&name, raw, ty)? {
                        if entity.get(&name).is_some() {
                            return Err(format!("property '{name}' appears twice"));
                        }
                        entity.properties.push(Property { name, value });
                    }
                }
            }
        }
        if !have_pk || !have_rk {
            return Err(format!(
                "the entity has no {}: every entity needs a PartitionKey and a RowKey",
                if have_pk { "RowKey" } else { "PartitionKey" }
            ));
        }
        Ok(entity)
    }
}

/// Decodes one value; `None` for JSON null (the service treats null as absent).
fn typed_value(name: &str, raw: RawValue, ty: Option<EdmType>) -> Result<Option<EdmValue>, String> {
    let bad = |what: &str| format!("property '{name}': {what}");
    let value = match (ty, raw) {
        (_, RawValue::Null) => return Ok(None),
        (None | Some(EdmType::String), RawValue::Str(s)) => EdmValue::String(s),
        (None | Some(EdmType::Boolean), RawValue::Bool(b)) => EdmValue::Boolean(b),
        (None, RawValue::Int(v)) => match i32::try_from(v) {
            Ok(v) => EdmValue::Int32(v),
            // An unannotated integer beyond Int32 would be truncated by the service: keep it exact.
            Err(_) => EdmValue::Int64(v),
        },
        (None, RawValue::UInt(v)) => match i32::try_from(v) {
            Ok(v) => EdmValue::Int32(v),
            Err(_) => EdmValue::Int64(i64::try_from(v).map_err(|_| bad("integer beyond Int64"))?),
        },
        (None | Some(EdmType::Double), RawValue::Float(v)) => EdmValue::Double(v),
        (Some(EdmType::Int32), RawValue::Int(v)) => EdmValue::Int32(
            i32::try_from(v).map_err(|_| bad("value out of Int32 range (use Edm.Int64)"))?,
        ),
        (Some(EdmType::Int32), RawValue::UInt(v)) => EdmValue::Int32(
            i32::try_from(v).map_err(|_| bad("value out of Int32 range (use Edm.Int64)"))?,
        ),
        (Some(EdmType::Int64), RawValue::Str(s)) => EdmValue::Int64(
            s.parse::<i64>()
                .map_err(|_| bad(&format!("'{s}' is not an Int64")))?,
        ),
        // Accepted on input for convenience; always written back as a string.
        (Some(EdmType::Int64), RawValue::Int(v)) => EdmValue::Int64(v),
        (Some(EdmType::Int64), RawValue::UInt(v)) => {
            EdmValue::Int64(i64::try_from(v).map_err(|_| bad("integer beyond Int64"))?)
        }
        (Some(EdmType::Double), RawValue::Int(v)) => EdmValue::Double(v as f64),
        (Some(EdmType::Double), RawValue::UInt(v)) => EdmValue::Double(v as f64),
        (Some(EdmType::Double), RawValue::Str(s)) => EdmValue::Double(match s.as_str() {
            "NaN" => f64::NAN,
            "Infinity" | "INF" => f64::INFINITY,
            "-Infinity" | "-INF" => f64::NEG_INFINITY,
            _ => parse_double(&s).ok_or_else(|| bad(&format!("'{s}' is not a Double")))?,
        }),
        (Some(EdmType::DateTime), RawValue::Str(s)) => {
            EdmValue::DateTime(DateTime::parse(&s).map_err(|e| bad(&e))?)
        }
        (Some(EdmType::Guid), RawValue::Str(s)) => EdmValue::Guid(
            uuid::Uuid::try_parse(&s).map_err(|_| bad(&format!("'{s}' is not a Guid")))?,
        ),
        (Some(EdmType::Binary), RawValue::Str(s)) => EdmValue::Binary(
            B64.decode(&s)
                .map_err(|_| bad("Binary value is not valid Base64"))?,
        ),
        (Some(t), _) => return Err(bad(&format!("the JSON value does not match its type {t}"))),
    };
    Ok(Some(value))
}

struct RawEntityVisitor;

impl<'de> Visitor<'de> for RawEntityVisitor {
    type Value = RawEntity;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an entity object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEntity, A::Error> {
        let mut raw = RawEntity::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let value = map.next_value_seed(RawValueSeed)?;
            if let Some(prop) = key.strip_suffix("@odata.type") {
                if let RawValue::Str(t) = value {
                    raw.annotations.push((prop.to_string(), t));
                }
            } else if key == "odata.etag" {
                if let RawValue::Str(t) = value {
                    raw.etag = Some(t);
                }
            } else if key.starts_with("odata.") || key.contains('@') {
                // Other metadata (odata.metadata, odata.id, …) says nothing about the data.
            } else {
                raw.values.push((key.into_owned(), value));
            }
        }
        Ok(raw)
    }
}

/// The body of a query response: `{"odata.metadata": …, "value": [entity, …]}`.
pub fn parse_entity_page(body: &[u8]) -> Result<Vec<Entity>, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let raws = de
        .deserialize_map(PageVisitor)
        .map_err(|e| format!("unexpected query response: {e}"))?;
    raws.into_iter().map(RawEntity::into_entity).collect()
}

struct PageVisitor;

impl<'de> Visitor<'de> for PageVisitor {
    type Value = Vec<RawEntity>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a query response object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<RawEntity>, A::Error> {
        let mut out = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "value" {
                out = map.next_value_seed(EntityListSeed)?;
            } else {
                map.next_value::<de::IgnoredAny>()?;
            }
        }
        Ok(out)
    }
}

struct EntityListSeed;

impl<'de> DeserializeSeed<'de> for EntityListSeed {
    type Value = Vec<RawEntity>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(EntityListSeed)
    }
}

impl<'de> Visitor<'de> for EntityListSeed {
    type Value = Vec<RawEntity>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of entities")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1000));
        while let Some(raw) = seq.next_element_seed(EntitySeed)? {
            out.push(raw);
        }
        Ok(out)
    }
}

struct EntitySeed;

impl<'de> DeserializeSeed<'de> for EntitySeed {
    type Value = RawEntity;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawEntity, D::Error> {
        RawEntity::deserialize_from(d)
    }
}

/// The body of a Query Tables response: table names.
pub fn parse_table_names(body: &[u8]) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Row {
        #[serde(rename = "TableName")]
        table_name: String,
    }
    #[derive(serde::Deserialize)]
    struct Page {
        value: Vec<Row>,
    }
    let page: Page =
        serde_json::from_slice(body).map_err(|e| format!("unexpected table list response: {e}"))?;
    Ok(page.value.into_iter().map(|r| r.table_name).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_types_entity() -> Entity {
        Entity::new("p'1 é", "r%2")
            .with("S", EdmValue::String("0152".into()))
            .with("B", EdmValue::Boolean(true))
            .with("I", EdmValue::Int32(i32::MIN))
            .with("L", EdmValue::Int64(9_007_199_254_740_993))
            .with("D", EdmValue::Double(2.0))
            .with("N", EdmValue::Double(f64::NAN))
            .with("Inf", EdmValue::Double(f64::NEG_INFINITY))
            .with(
                "T",
                EdmValue::DateTime(DateTime::parse("2024-02-29T23:59:59.1234567Z").unwrap()),
            )
            .with(
                "G",
                EdmValue::Guid(
                    uuid::Uuid::try_parse("4185404a-5818-48c3-b9be-f217df0dba6f").unwrap(),
                ),
            )
            .with("Bin", EdmValue::Binary(vec![0, 1, 2, 255]))
    }

    #[test]
    fn datetime_keeps_all_seven_fractional_digits() {
        let d = DateTime::parse("2013-08-02T17:37:43.9004348Z").unwrap();
        assert_eq!(d.to_string(), "2013-08-02T17:37:43.9004348Z");
        let d = DateTime::parse("2013-08-02T17:37:43.9Z").unwrap();
        assert_eq!(d.to_string(), "2013-08-02T17:37:43.9000000Z");
        let d = DateTime::parse("2013-08-02T17:37:43Z").unwrap();
        assert_eq!(d.to_string(), "2013-08-02T17:37:43.0000000Z");
    }

    #[test]
    fn datetime_refuses_to_round_extra_digits() {
        assert!(DateTime::parse("2013-08-02T17:37:43.12345678Z").is_err());
        assert_eq!(
            DateTime::parse("2013-08-02T17:37:43.123456700Z")
                .unwrap()
                .to_string(),
            "2013-08-02T17:37:43.1234567Z"
        );
    }

    #[test]
    fn datetime_applies_offsets_and_rejects_impossible_dates() {
        let d = DateTime::parse("2024-01-01T02:00:00+02:00").unwrap();
        assert_eq!(d.to_string(), "2024-01-01T00:00:00.0000000Z");
        assert!(DateTime::parse("2023-02-29T00:00:00Z").is_err());
        assert!(DateTime::parse("2024-13-01T00:00:00Z").is_err());
        assert!(DateTime::parse("2024-01-01 00:00:00Z").is_err());
        assert_eq!(
            DateTime::parse("1601-01-01T00:00:00Z").unwrap().to_string(),
            "1601-01-01T00:00:00.0000000Z"
        );
        assert_eq!(
            DateTime::parse("9999-12-31T23:59:59.9999999Z")
                .unwrap()
                .to_string(),
            "9999-12-31T23:59:59.9999999Z"
        );
    }

    #[test]
    fn rfc1123_matches_the_protocol_example() {
        // 2024-01-01T00:00:00Z
        assert_eq!(rfc1123(1_704_067_200), "Mon, 01 Jan 2024 00:00:00 GMT");
        assert_eq!(rfc1123(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn request_json_annotates_every_type_json_cannot_imply() {
        let json = all_types_entity().to_request_json();
        assert!(
            json.contains(r#""L@odata.type":"Edm.Int64","L":"9007199254740993""#),
            "{json}"
        );
        assert!(
            json.contains(r#""D@odata.type":"Edm.Double","D":2.0"#),
            "{json}"
        );
        assert!(
            json.contains(r#""N@odata.type":"Edm.Double","N":"NaN""#),
            "{json}"
        );
        assert!(json.contains(r#""Inf":"-Infinity""#), "{json}");
        assert!(json.contains(r#""S":"0152""#), "{json}");
        assert!(!json.contains("S@odata.type"), "{json}");
        assert!(
            json.contains(r#""Bin@odata.type":"Edm.Binary","Bin":"AAEC/w==""#),
            "{json}"
        );
        assert!(!json.contains("odata.etag"));
    }

    #[test]
    fn json_line_round_trips_every_type_exactly() {
        let mut e = all_types_entity();
        e.etag = Some("W/\"datetime'2024-01-01T12%3A34%3A56.1234567Z'\"".into());
        e.timestamp = Some(DateTime::parse("2024-01-01T12:34:56.1234567Z").unwrap());
        let back = Entity::from_json(&e.to_json_line()).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn unannotated_json_infers_string_bool_int32_double() {
        let e = Entity::from_json(r#"{"PartitionKey":"a","RowKey":"b","S":"0152","B":false,"I":5,"D":2.0,"Big":9007199254740993}"#).unwrap();
        assert_eq!(e.get("S"), Some(&EdmValue::String("0152".into())));
        assert_eq!(e.get("B"), Some(&EdmValue::Boolean(false)));
        assert_eq!(e.get("I"), Some(&EdmValue::Int32(5)));
        assert_eq!(e.get("D"), Some(&EdmValue::Double(2.0)));
        assert_eq!(e.get("Big"), Some(&EdmValue::Int64(9_007_199_254_740_993)));
    }

    #[test]
    fn annotation_after_the_value_is_honoured() {
        let e = Entity::from_json(
            r#"{"PartitionKey":"a","RowKey":"b","L":"12","L@odata.type":"Edm.Int64"}"#,
        )
        .unwrap();
        assert_eq!(e.get("L"), Some(&EdmValue::Int64(12)));
    }

    #[test]
    fn bad_entity_json_names_the_property_and_rule() {
        let err = Entity::from_json(
            r#"{"PartitionKey":"a","RowKey":"b","L@odata.type":"Edm.Int64","L":"12x"}"#,
        )
        .unwrap_err();
        assert!(err.contains("'L'") && err.contains("Int64"), "{err}");
        let err = Entity::from_json(r#"{"RowKey":"b"}"#).unwrap_err();
        assert!(err.contains("PartitionKey"), "{err}");
        let err = Entity::from_json(r#"{"PartitionKey":"a","RowKey":"b","X":[1]}"#).unwrap_err();
        assert!(err.contains("arrays"), "{err}");
        let err = Entity::from_json(
            r#"{"PartitionKey":"a","RowKey":"b","X@odata.type":"Edm.Int32","X":3000000000}"#,
        )
        .unwrap_err();
        assert!(err.contains("Int32"), "{err}");
    }

    #[test]
    fn query_page_parses_azurite_output() {
        let body = br#"{"odata.metadata":"http://127.0.0.1:10412/devstoreaccount1/$metadata#t1","value":[{"odata.etag":"W/\"datetime'2026-11-22T02%3A15%3A11.1464459Z'\"","PartitionKey":"f","RowKey":"1","I64@odata.type":"Edm.Int64","I64":"9007199254740993","D2":2.0,"Timestamp":"2026-11-22T02:15:11.1464459Z"}]}"#;
        let page = parse_entity_page(body).unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!(
            page[0].get("I64"),
            Some(&EdmValue::Int64(9_007_199_254_740_993))
        );
        assert_eq!(page[0].get("D2"), Some(&EdmValue::Double(2.0)));
        assert_eq!(
            page[0].timestamp.unwrap().to_string(),
            "2026-11-22T02:15:11.1464459Z"
        );
        assert!(page[0].etag.as_deref().unwrap().starts_with("W/"));
    }

    #[test]
    fn text_forms_parse_back() {
        for v in all_types_entity().properties {
            let back = EdmValue::parse_as(v.value.edm_type(), &v.value.to_text()).unwrap();
            assert_eq!(back, v.value, "{}", v.name);
        }
        assert_eq!(
            EdmValue::parse_as(EdmType::Binary, "0x0102").unwrap(),
            EdmValue::Binary(vec![1, 2])
        );
        assert!(EdmValue::parse_as(EdmType::Int32, "2147483648")
            .unwrap_err()
            .contains("Int64"));
        assert!(EdmValue::parse_as(EdmType::Double, "inf").is_err());
    }

    #[test]
    fn several_entities_parse_from_jsonl_or_pretty_json() {
        let text = "{\"PartitionKey\":\"a\",\"RowKey\":\"1\"}\n\n{\n  \"PartitionKey\": \"a\",\n  \"RowKey\": \"2\"\n}\n";
        let all: Vec<_> = parse_entities(text)
            .into_iter()
            .map(|r| r.unwrap().row_key)
            .collect();
        assert_eq!(all, ["1", "2"]);
        let errs =
            parse_entities("{\"PartitionKey\":\"a\",\"RowKey\":\"1\"}\n{\"PartitionKey\":1}");
        assert!(
            errs[1].as_ref().unwrap_err().starts_with("entity 2:"),
            "{:?}",
            errs[1]
        );
        let errs = parse_entities("{nope");
        assert!(
            errs[0].as_ref().unwrap_err().contains("line 1"),
            "{:?}",
            errs[0]
        );
    }

    #[test]
    fn doubles_keep_their_bits() {
        // 18.647044298079962 is one serde_json parses 1 ULP off without `float_roundtrip`.
        for v in [0.1, -0.0, 1e300, 5e-324, f64::MAX, 2.0, 18.647044298079962] {
            let e = Entity::new("a", "b").with("D", EdmValue::Double(v));
            let back = Entity::from_json(&e.to_request_json()).unwrap();
            assert_eq!(back.get("D"), Some(&EdmValue::Double(v)), "{v}");
        }
    }
}
