//! Configuration: finds, reads and validates `config.toml` (profiles, page size, retry policy,
//! throttling targets, keybinding overrides, theme name) and builds connection strings from
//! profiles, reading secrets from environment variables. Secrets never appear in any message.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;
use toml::de::{DeTable, DeValue};

/// Environment variable that overrides the config file location.
pub const CONFIG_ENV: &str = "TABLETOP_CONFIG";
/// The endpoint suffix of public Azure.
pub const DEFAULT_ENDPOINT_SUFFIX: &str = "core.windows.net";

/// Allowed rows per request; the service returns at most 1,000.
pub const PAGE_SIZE_RANGE: std::ops::RangeInclusive<u32> = 1..=1000;
/// Allowed total attempts, including the first.
pub const MAX_ATTEMPTS_RANGE: std::ops::RangeInclusive<u32> = 1..=20;
/// Allowed base delay (z), in ms.
pub const BASE_DELAY_RANGE: std::ops::RangeInclusive<u64> = 1..=60_000;
/// Allowed lower bound (zmin), in ms.
pub const MIN_DELAY_RANGE: std::ops::RangeInclusive<u64> = 0..=60_000;
/// Allowed upper bound (zmax), in ms.
pub const MAX_DELAY_RANGE: std::ops::RangeInclusive<u64> = 1..=600_000;
/// Allowed per-attempt timeout, in ms.
pub const ATTEMPT_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 100..=600_000;

/// The whole configuration; every key is optional and defaults as documented in
/// `config.example.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub default_profile: Option<String>,
    pub page_size: u32,
    pub theme: Option<String>,
    pub retry: RetrySettings,
    pub targets: Targets,
    pub keys: BTreeMap<String, String>,
    pub profiles: BTreeMap<String, ProfileConfig>,
    /// The mutation journal's file (default: the platform data dir's `journal.jsonl`).
    pub journal_path: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            default_profile: None,
            page_size: 1000,
            theme: None,
            retry: RetrySettings::default(),
            targets: Targets::default(),
            keys: BTreeMap::new(),
            profiles: BTreeMap::new(),
            journal_path: None,
        }
    }
}

/// Exponential backoff: `y = rand(0.8z, 1.2z)·(2^x − 1)`, delay `= min(zmin + y, zmax)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrySettings {
    /// Total attempts including the first.
    pub max_attempts: u32,
    /// z.
    pub base_delay_ms: u64,
    /// zmin.
    pub min_delay_ms: u64,
    /// zmax.
    pub max_delay_ms: u64,
    /// Timeout of one HTTP attempt.
    pub attempt_timeout_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            max_attempts: 5,
            base_delay_ms: 200,
            min_delay_ms: 100,
            max_delay_ms: 5000,
            attempt_timeout_ms: 30_000,
        }
    }
}

/// Throttling targets the dashboard compares traffic against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Targets {
    pub partition_entities_per_s: u32,
    pub account_entities_per_s: u32,
}

impl Default for Targets {
    fn default() -> Self {
        Targets {
            partition_entities_per_s: 2000,
            account_entities_per_s: 20_000,
        }
    }
}

/// How requests made with an account key are signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Signing {
    #[default]
    SharedKey,
    SharedKeyLite,
}

/// One `[profiles.NAME]` table: where to connect and how to behave there.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfileConfig {
    pub connection_string: Option<Secret>,
    pub connection_string_env: Option<String>,
    pub account: Option<String>,
    pub key_env: Option<String>,
    pub secondary_key_env: Option<String>,
    pub endpoint: Option<String>,
    pub endpoint_suffix: Option<String>,
    pub sas_env: Option<String>,
    pub signing: Signing,
    pub read_only: bool,
    pub color: Option<ProfileColor>,
}

/// A secret string (connection string, key, SAS): Debug and Display print `<redacted>`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself; call only where it is sent, never where it is shown.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The 16 ANSI colours, named as terminal libraries name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NamedColor {
    Black,
    Red,
    Green,
    Yellow,
    Blue,
    Magenta,
    Cyan,
    Gray,
    DarkGray,
    LightRed,
    LightGreen,
    LightYellow,
    LightBlue,
    LightMagenta,
    LightCyan,
    White,
}

const NAMED_COLORS: [(&str, NamedColor); 16] = [
    ("black", NamedColor::Black),
    ("red", NamedColor::Red),
    ("green", NamedColor::Green),
    ("yellow", NamedColor::Yellow),
    ("blue", NamedColor::Blue),
    ("magenta", NamedColor::Magenta),
    ("cyan", NamedColor::Cyan),
    ("gray", NamedColor::Gray),
    ("darkgray", NamedColor::DarkGray),
    ("lightred", NamedColor::LightRed),
    ("lightgreen", NamedColor::LightGreen),
    ("lightyellow", NamedColor::LightYellow),
    ("lightblue", NamedColor::LightBlue),
    ("lightmagenta", NamedColor::LightMagenta),
    ("lightcyan", NamedColor::LightCyan),
    ("white", NamedColor::White),
];

/// A profile's badge colour: a named ANSI colour or `#rrggbb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub enum ProfileColor {
    Named(NamedColor),
    Rgb(u8, u8, u8),
}

impl FromStr for ProfileColor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let text = s.trim();
        if let Some(hex) = text.strip_prefix('#') {
            let channel = |i: usize| {
                hex.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            };
            if hex.len() == 6 && hex.is_ascii() {
                if let (Some(r), Some(g), Some(b)) = (channel(0), channel(2), channel(4)) {
                    return Ok(ProfileColor::Rgb(r, g, b));
                }
            }
        } else {
            // Accept "light-red", "Light Red", "bright_red", "grey" for the same colour.
            let mut key: String = text
                .chars()
                .filter(|c| !matches!(c, '-' | '_' | ' '))
                .collect::<String>()
                .to_ascii_lowercase()
                .replace("grey", "gray");
            if let Some(rest) = key.strip_prefix("bright") {
                key = format!("light{rest}");
            }
            if let Some((_, color)) = NAMED_COLORS.iter().find(|(name, _)| *name == key) {
                return Ok(ProfileColor::Named(*color));
            }
        }
        let names: Vec<&str> = NAMED_COLORS.iter().map(|(name, _)| *name).collect();
        Err(format!(
            "unknown colour '{s}' (expected #rrggbb or one of: {})",
            names.join(", ")
        ))
    }
}

impl TryFrom<String> for ProfileColor {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl fmt::Display for ProfileColor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileColor::Named(color) => {
                let name = NAMED_COLORS
                    .iter()
                    .find(|(_, c)| c == color)
                    .map_or("white", |(name, _)| *name);
                f.write_str(name)
            }
            ProfileColor::Rgb(r, g, b) => write!(f, "#{r:02x}{g:02x}{b:02x}"),
        }
    }
}

/// Where in a config file a problem is; Display: `/path/config.toml line 12, column 3`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    pub path: Option<PathBuf>,
    /// 1-based.
    pub line: Option<usize>,
    /// 1-based, in characters.
    pub column: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(path) = &self.path {
            write!(f, "{}", path.display())?;
            sep = " ";
        }
        if let Some(line) = self.line {
            write!(f, "{sep}line {line}")?;
            if let Some(column) = self.column {
                write!(f, ", column {column}")?;
            }
        } else if self.path.is_none() {
            f.write_str("(text)")?;
        }
        Ok(())
    }
}

/// Everything that can go wrong reading a config or building a connection string.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config {}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A syntax, type, unknown-key or validation problem, with its place in the file.
    #[error("config {location}: {message}")]
    Invalid { location: Location, message: String },
    /// An environment variable a profile names is unusable; the message names the variable.
    #[error("profile '{profile}': {field}: environment variable {var} {problem}")]
    Env {
        profile: String,
        field: &'static str,
        var: String,
        problem: &'static str,
    },
    /// A profile that cannot yield a connection (possible when built by hand, unvalidated).
    #[error("profile '{profile}': {message}")]
    Profile { profile: String, message: String },
}

/// The result of loading: the config, the file it came from, and warnings to show the user.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadedConfig {
    pub config: Config,
    /// The file that was read; `None` when defaults were used.
    pub path: Option<PathBuf>,
    pub warnings: Vec<String>,
}

/// The config file to use when no `--config` is given: `$TABLETOP_CONFIG`, else
/// `config.toml` in the platform config directory.
pub fn default_path() -> Option<PathBuf> {
    default_path_from(std::env::var_os(CONFIG_ENV))
}

fn default_path_from(env: Option<std::ffi::OsString>) -> Option<PathBuf> {
    match env {
        Some(value) if !value.is_empty() => Some(PathBuf::from(value)),
        _ => directories::ProjectDirs::from("", "", "tabletop")
            .map(|dirs| dirs.config_dir().join("config.toml")),
    }
}

/// Reads the file if it exists (a missing file is not an error: defaults). `path` is the
/// `--config` flag; `None` means [`default_path`]. A parse or validation error carries the path
/// and the 1-based line and column of the problem.
pub fn load(path: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
    let explicit = path.is_some() || std::env::var_os(CONFIG_ENV).is_some_and(|v| !v.is_empty());
    let Some(path) = path.map(Path::to_path_buf).or_else(default_path) else {
        return Ok(LoadedConfig::default());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut loaded = LoadedConfig::default();
            // A named file that is absent is probably a typo; say so rather than stay silent.
            if explicit {
                loaded.warnings.push(format!(
                    "config {}: file not found; using defaults",
                    path.display()
                ));
            }
            return Ok(loaded);
        }
        Err(source) => return Err(ConfigError::Read { path, source }),
    };
    let config = parse(&text, Some(&path))?;
    let warnings = permission_warnings(&path, &config);
    Ok(LoadedConfig {
        config,
        path: Some(path),
        warnings,
    })
}

/// For the console: never fails; on error returns defaults plus the error text as a warning.
pub fn load_or_default(path: Option<&Path>) -> LoadedConfig {
    match load(path) {
        Ok(loaded) => loaded,
        Err(e) => LoadedConfig {
            warnings: vec![format!("{e}; using defaults")],
            ..LoadedConfig::default()
        },
    }
}

/// Parses and validates config text; `path` only labels errors.
pub fn parse(text: &str, path: Option<&Path>) -> Result<Config, ConfigError> {
    let at = |span: Option<Range<usize>>, message: String| {
        let (line, column) = span.map(|s| line_col(text, s.start)).unzip();
        ConfigError::Invalid {
            location: Location {
                path: path.map(Path::to_path_buf),
                line,
                column,
            },
            message,
        }
    };
    let tree = DeTable::parse(text).map_err(|e| at(e.span(), tidy_message(e.message())))?;
    let tree = tree.get_ref();
    let config: Config = toml::from_str(text).map_err(|e| {
        let span = e.span();
        let message = tidy_message(e.message());
        let prefix = span.as_ref().and_then(|s| path_at(tree, s.start));
        match prefix {
            Some(prefix) if !prefix.is_empty() => at(span, format!("{prefix}: {message}")),
            _ => at(span, message),
        }
    })?;
    config.validate().map_err(|problem| {
        let span = problem
            .paths
            .iter()
            .find_map(|p| key_span(tree, p, false))
            .or_else(|| problem.paths.first().and_then(|p| key_span(tree, p, true)));
        at(span, problem.message)
    })?;
    Ok(config)
}

/// A validation failure: the message, and the keys to point at (first present wins).
struct Problem {
    paths: Vec<Vec<String>>,
    message: String,
}

fn key_path(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn check_range<T: PartialOrd + fmt::Display>(
    value: T,
    range: &std::ops::RangeInclusive<T>,
    parts: &[&str],
    what: &str,
) -> Result<(), Problem> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(Problem {
        paths: vec![key_path(parts)],
        message: format!(
            "{}: {value} is out of range {}..={} ({what})",
            parts.join("."),
            range.start(),
            range.end()
        ),
    })
}

impl Config {
    fn validate(&self) -> Result<(), Problem> {
        check_range(
            self.page_size,
            &PAGE_SIZE_RANGE,
            &["page_size"],
            "rows per request",
        )?;
        let r = &self.retry;
        check_range(
            r.max_attempts,
            &MAX_ATTEMPTS_RANGE,
            &["retry", "max_attempts"],
            "total attempts including the first",
        )?;
        check_range(
            r.base_delay_ms,
            &BASE_DELAY_RANGE,
            &["retry", "base_delay_ms"],
            "milliseconds",
        )?;
        check_range(
            r.min_delay_ms,
            &MIN_DELAY_RANGE,
            &["retry", "min_delay_ms"],
            "milliseconds",
        )?;
        check_range(
            r.max_delay_ms,
            &MAX_DELAY_RANGE,
            &["retry", "max_delay_ms"],
            "milliseconds",
        )?;
        check_range(
            r.attempt_timeout_ms,
            &ATTEMPT_TIMEOUT_RANGE,
            &["retry", "attempt_timeout_ms"],
            "milliseconds",
        )?;
        let both = |a: &str, b: &str| vec![key_path(&["retry", a]), key_path(&["retry", b])];
        if r.min_delay_ms > r.max_delay_ms {
            return Err(Problem {
                paths: both("min_delay_ms", "max_delay_ms"),
                message: format!(
                    "retry: min_delay_ms ({}) must be <= max_delay_ms ({})",
                    r.min_delay_ms, r.max_delay_ms
                ),
            });
        }
        if r.base_delay_ms > r.max_delay_ms {
            return Err(Problem {
                paths: both("base_delay_ms", "max_delay_ms"),
                message: format!(
                    "retry: base_delay_ms ({}) must be <= max_delay_ms ({})",
                    r.base_delay_ms, r.max_delay_ms
                ),
            });
        }
        for (field, value) in [
            (
                "partition_entities_per_s",
                self.targets.partition_entities_per_s,
            ),
            (
                "account_entities_per_s",
                self.targets.account_entities_per_s,
            ),
        ] {
            check_range(
                value,
                &(1..=u32::MAX),
                &["targets", field],
                "entities per second",
            )?;
        }
        for (name, profile) in &self.profiles {
            let valid_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if !valid_name {
                return Err(Problem {
                    paths: vec![key_path(&["profiles", name])],
                    message: format!(
                        "profiles: invalid profile name '{name}' (use letters, digits, '_', '.', '-')"
                    ),
                });
            }
            profile.check().map_err(|(field, rule)| {
                let mut paths = Vec::new();
                if let Some(field) = field {
                    paths.push(key_path(&["profiles", name, field]));
                }
                paths.push(key_path(&["profiles", name]));
                Problem {
                    paths,
                    message: match field {
                        Some(field) => format!("profiles.{name}: {field}: {rule}"),
                        None => format!("profiles.{name}: {rule}"),
                    },
                }
            })?;
        }
        if let Some(default) = &self.default_profile {
            if !self.profiles.contains_key(default) {
                let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
                let known = if known.is_empty() {
                    "no profiles are defined".to_string()
                } else {
                    format!("defined: {}", known.join(", "))
                };
                return Err(Problem {
                    paths: vec![key_path(&["default_profile"])],
                    message: format!("default_profile: no profile named '{default}' ({known})"),
                });
            }
        }
        Ok(())
    }
}

/// Where a profile's connection comes from, once its fields are known to be consistent.
enum Source<'a> {
    Literal(&'a Secret),
    Env(&'a str),
    SharedKey { account: &'a str, key_env: &'a str },
    Sas { sas_env: &'a str },
}

const SOURCES_HELP: &str =
    "set exactly one of connection_string, connection_string_env, account + key_env, or sas_env + endpoint";

impl ProfileConfig {
    /// Checks the profile's fields; on failure returns the offending field (if one) and the rule.
    fn check(&self) -> Result<Source<'_>, (Option<&'static str>, String)> {
        let err = |field: &'static str, rule: &str| Err((Some(field), rule.to_string()));
        let texts: [(&'static str, Option<&str>); 8] = [
            (
                "connection_string",
                self.connection_string.as_ref().map(Secret::expose),
            ),
            (
                "connection_string_env",
                self.connection_string_env.as_deref(),
            ),
            ("account", self.account.as_deref()),
            ("key_env", self.key_env.as_deref()),
            ("secondary_key_env", self.secondary_key_env.as_deref()),
            ("endpoint", self.endpoint.as_deref()),
            ("endpoint_suffix", self.endpoint_suffix.as_deref()),
            ("sas_env", self.sas_env.as_deref()),
        ];
        for (field, value) in texts {
            match value {
                Some(v) if v.trim().is_empty() => return err(field, "must not be empty"),
                // A ';' would split the connection string we build into extra fields.
                Some(v) if field != "connection_string" && v.contains(';') => {
                    return err(field, "must not contain ';'")
                }
                Some(v) if field.ends_with("_env") && (v.contains('=') || v.contains('\0')) => {
                    return err(field, "is not a valid environment variable name")
                }
                _ => {}
            }
        }
        let set: Vec<&'static str> = [
            ("connection_string", self.connection_string.is_some()),
            (
                "connection_string_env",
                self.connection_string_env.is_some(),
            ),
            ("key_env", self.key_env.is_some()),
            ("sas_env", self.sas_env.is_some()),
        ]
        .into_iter()
        .filter_map(|(field, is_set)| is_set.then_some(field))
        .collect();
        match set.as_slice() {
            [] => {
                return Err((None, format!("no connection source; {SOURCES_HELP}")));
            }
            [_] => {}
            [first, second, ..] => {
                return Err((
                    Some(second),
                    format!("conflicts with {first}; {SOURCES_HELP}"),
                ));
            }
        }
        if self.secondary_key_env.is_some() && self.key_env.is_none() {
            return err("secondary_key_env", "requires account + key_env");
        }
        if self.endpoint.is_some() && self.endpoint_suffix.is_some() {
            return err(
                "endpoint_suffix",
                "set endpoint or endpoint_suffix, not both",
            );
        }
        if let Some(endpoint) = &self.endpoint {
            if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
                return err(
                    "endpoint",
                    "must start with https:// (or http:// for an emulator)",
                );
            }
        }
        if let Some(secret) = &self.connection_string {
            let unused = self.first_endpoint_field();
            return match unused {
                Some(field) => err(
                    field,
                    "is not used with connection_string, which carries its own endpoint",
                ),
                None => Ok(Source::Literal(secret)),
            };
        }
        if let Some(var) = &self.connection_string_env {
            return match self.first_endpoint_field() {
                Some(field) => err(
                    field,
                    "is not used with connection_string_env, which carries its own endpoint",
                ),
                None => Ok(Source::Env(var)),
            };
        }
        if let Some(key_env) = &self.key_env {
            return match &self.account {
                Some(account) => Ok(Source::SharedKey { account, key_env }),
                None => err("key_env", "requires account (the storage account name)"),
            };
        }
        match &self.sas_env {
            Some(sas_env) if self.endpoint.is_some() || self.account.is_some() => {
                Ok(Source::Sas { sas_env })
            }
            _ => err(
                "sas_env",
                "requires endpoint (the table endpoint URL) or account",
            ),
        }
    }

    fn first_endpoint_field(&self) -> Option<&'static str> {
        [
            ("account", self.account.is_some()),
            ("endpoint", self.endpoint.is_some()),
            ("endpoint_suffix", self.endpoint_suffix.is_some()),
        ]
        .into_iter()
        .find_map(|(field, is_set)| is_set.then_some(field))
    }

    fn source(&self, name: &str) -> Result<Source<'_>, ConfigError> {
        self.check().map_err(|(field, rule)| ConfigError::Profile {
            profile: name.to_string(),
            message: match field {
                Some(field) => format!("{field}: {rule}"),
                None => rule,
            },
        })
    }

    /// The table endpoint URL this profile names or implies, without a trailing '/'.
    fn table_endpoint(&self, account: Option<&str>) -> Option<String> {
        if let Some(endpoint) = &self.endpoint {
            return Some(endpoint.trim_end_matches('/').to_string());
        }
        let suffix = self
            .endpoint_suffix
            .as_deref()
            .unwrap_or(DEFAULT_ENDPOINT_SUFFIX);
        account.map(|a| format!("https://{a}.table.{suffix}"))
    }

    fn shared_key_string(&self, account: &str, key: &str) -> Secret {
        match &self.endpoint {
            Some(endpoint) => {
                let protocol = if endpoint.starts_with("http://") {
                    "http"
                } else {
                    "https"
                };
                let endpoint = endpoint.trim_end_matches('/');
                Secret(format!(
                    "DefaultEndpointsProtocol={protocol};AccountName={account};AccountKey={key};TableEndpoint={endpoint}"
                ))
            }
            None => {
                let suffix = self
                    .endpoint_suffix
                    .as_deref()
                    .unwrap_or(DEFAULT_ENDPOINT_SUFFIX);
                Secret(format!(
                    "DefaultEndpointsProtocol=https;AccountName={account};AccountKey={key};EndpointSuffix={suffix}"
                ))
            }
        }
    }

    /// Builds the connection string for this profile, reading env vars; a missing env var is an
    /// error naming the variable (never any secret value).
    pub fn connection_string(&self, name: &str) -> Result<Secret, ConfigError> {
        match self.source(name)? {
            Source::Literal(secret) => Ok(secret.clone()),
            Source::Env(var) => Ok(Secret(read_env(name, "connection_string_env", var)?)),
            Source::SharedKey { account, key_env } => {
                let key = read_env(name, "key_env", key_env)?;
                Ok(self.shared_key_string(account, &key))
            }
            Source::Sas { sas_env } => {
                let endpoint = self
                    .table_endpoint(self.account.as_deref())
                    .ok_or_else(|| ConfigError::Profile {
                        profile: name.to_string(),
                        message: "sas_env: requires endpoint or account".to_string(),
                    })?;
                let sas = read_env(name, "sas_env", sas_env)?;
                // Tokens copied from the portal often start with '?'.
                let sas = sas.trim().trim_start_matches('?');
                Ok(Secret(format!(
                    "TableEndpoint={endpoint};SharedAccessSignature={sas}"
                )))
            }
        }
    }

    /// The same endpoint with the secondary key, when `secondary_key_env` is set.
    pub fn secondary_connection_string(&self, name: &str) -> Result<Option<Secret>, ConfigError> {
        let Some(var) = &self.secondary_key_env else {
            return Ok(None);
        };
        match self.source(name)? {
            Source::SharedKey { account, .. } => {
                let key = read_env(name, "secondary_key_env", var)?;
                Ok(Some(self.shared_key_string(account, &key)))
            }
            _ => Err(ConfigError::Profile {
                profile: name.to_string(),
                message: "secondary_key_env: requires account + key_env".to_string(),
            }),
        }
    }

    /// True when `connection_string` holds a literal key or SAS signature.
    fn has_literal_secret(&self) -> bool {
        self.connection_string.as_ref().is_some_and(|s| {
            let lower = s.expose().to_ascii_lowercase();
            ["accountkey=", "sharedaccesssignature=", "sig="]
                .iter()
                .any(|needle| lower.contains(needle))
        })
    }
}

fn read_env(profile: &str, field: &'static str, var: &str) -> Result<String, ConfigError> {
    let problem = match std::env::var(var) {
        Ok(value) if !value.trim().is_empty() => return Ok(value.trim().to_string()),
        Ok(_) => "is empty",
        Err(std::env::VarError::NotPresent) => "is not set",
        Err(std::env::VarError::NotUnicode(_)) => "is not valid Unicode",
    };
    Err(ConfigError::Env {
        profile: profile.to_string(),
        field,
        var: var.to_string(),
        problem,
    })
}

/// Warns about literal secrets in a file that group or others can read.
#[cfg(unix)]
fn permission_warnings(path: &Path, config: &Config) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Vec::new();
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o044 == 0 {
        return Vec::new();
    }
    config
        .profiles
        .iter()
        .filter(|(_, profile)| profile.has_literal_secret())
        .map(|(name, _)| {
            format!(
                "config {p}: profile '{name}' has a literal secret in connection_string and the \
                 file is readable by other users (mode {mode:03o}); run `chmod 600 {p}` or use \
                 connection_string_env",
                p = path.display()
            )
        })
        .collect()
}

#[cfg(not(unix))]
fn permission_warnings(_path: &Path, _config: &Config) -> Vec<String> {
    Vec::new()
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The dotted key path an error offset belongs to: the enclosing table for a key, the key
/// itself for a value.
fn path_at(table: &DeTable<'_>, offset: usize) -> Option<String> {
    fn walk(table: &DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
        for (key, value) in table.iter() {
            path.push(key.get_ref().to_string());
            // Header-table value spans do not cover their keys, so always descend first.
            if let DeValue::Table(inner) = value.get_ref() {
                if walk(inner, offset, path) {
                    return true;
                }
            }
            if key.span().contains(&offset) {
                path.pop();
                return true;
            }
            if value.span().contains(&offset) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut path = Vec::new();
    walk(table, offset, &mut path).then(|| dotted(&path))
}

/// Quotes keys that need it, so the path reads as TOML.
fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|k| {
            if !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                k.clone()
            } else {
                format!("{k:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The span of a key path's last key; with `nearest`, of the deepest ancestor present.
fn key_span(table: &DeTable<'_>, path: &[String], nearest: bool) -> Option<Range<usize>> {
    let mut table = table;
    let mut found = None;
    for (i, part) in path.iter().enumerate() {
        let Some((key, value)) = table.iter().find(|(k, _)| k.get_ref() == part) else {
            return if nearest { found } else { None };
        };
        found = Some(key.span());
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ if i + 1 < path.len() => return if nearest { found } else { None },
            _ => {}
        }
    }
    found
}

/// Rewrites serde's messages in the style of the rest (quotes, not backticks) and suggests
/// the nearest valid key for a typo.
fn tidy_message(message: &str) -> String {
    let strip = |s: &str| s.replace('`', "");
    let quote = |s: &str| s.replace('`', "'");
    for kind in ["unknown field `", "unknown variant `"] {
        if !message.starts_with(kind) {
            continue;
        }
        let Some((head, expected)) = message.split_once(", expected ") else {
            break;
        };
        let bad = head[kind.len()..].trim_end_matches('`');
        let list = expected.strip_prefix("one of ").unwrap_or(expected);
        let choices: Vec<String> = list
            .split([',', ' '])
            .map(strip)
            .filter(|s| !s.is_empty() && s != "or")
            .collect();
        let mut text = format!("{} (expected one of: {})", quote(head), choices.join(", "));
        if let Some(best) = nearest(bad, &choices) {
            text.push_str(&format!("; did you mean '{best}'?"));
        }
        return text;
    }
    quote(message)
}

fn nearest<'a>(bad: &str, choices: &'a [String]) -> Option<&'a str> {
    let norm = |s: &str| {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase()
    };
    let bad_norm = norm(bad);
    choices
        .iter()
        .map(|c| {
            let d = if norm(c) == bad_norm {
                0
            } else {
                edit_distance(bad, c)
            };
            (d, c)
        })
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../config.example.toml");

    fn invalid(text: &str) -> (Location, String) {
        match parse(text, Some(Path::new("/cfg/config.toml"))) {
            Err(ConfigError::Invalid { location, message }) => (location, message),
            other => panic!("expected an Invalid error, got {other:?}"),
        }
    }

    fn profile_error(body: &str) -> String {
        let (_, message) = invalid(&format!("[profiles.p]\n{body}\n"));
        message
    }

    #[test]
    fn missing_file_gives_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = load(Some(&dir.path().join("absent.toml"))).unwrap();
        assert_eq!(loaded.config, Config::default());
        assert_eq!(loaded.path, None);
        assert_eq!(loaded.warnings.len(), 1, "explicit path not found is noted");
        assert!(loaded.warnings[0].contains("absent.toml"));
        let c = Config::default();
        assert_eq!(c.page_size, 1000);
        assert_eq!(c.retry.max_attempts, 5);
        assert_eq!(c.retry.base_delay_ms, 200);
        assert_eq!(c.retry.min_delay_ms, 100);
        assert_eq!(c.retry.max_delay_ms, 5000);
        assert_eq!(c.retry.attempt_timeout_ms, 30_000);
        assert_eq!(c.targets.partition_entities_per_s, 2000);
        assert_eq!(c.targets.account_entities_per_s, 20_000);
        assert!(c.profiles.is_empty());
    }

    #[test]
    fn empty_text_gives_defaults() {
        assert_eq!(parse("", None).unwrap(), Config::default());
    }

    #[test]
    fn default_path_honours_env_then_platform_dir() {
        assert_eq!(
            default_path_from(Some("/x/my.toml".into())),
            Some(PathBuf::from("/x/my.toml"))
        );
        if let Some(p) = default_path_from(Some("".into())) {
            assert!(p.ends_with("config.toml"));
        }
        if let Some(p) = default_path_from(None) {
            assert!(p.ends_with("config.toml"));
        }
    }

    #[test]
    fn example_file_parses() {
        let c = parse(EXAMPLE, None).unwrap();
        assert_eq!(c.default_profile.as_deref(), Some("local"));
        let local = &c.profiles["local"];
        assert_eq!(
            local.connection_string.as_ref().map(Secret::expose),
            Some("UseDevelopmentStorage=true")
        );
        let prod = c.profiles.values().find(|p| p.read_only).unwrap();
        assert!(prod.account.is_some() && prod.key_env.is_some());
        assert_eq!(prod.color, Some(ProfileColor::Named(NamedColor::Red)));
        assert!(c.profiles.values().any(|p| p.sas_env.is_some()));
    }

    #[test]
    fn unknown_field_names_key_line_and_column() {
        let text = "page_size = 10\n\n[profiles.prod]\nconnection_string = \"UseDevelopmentStorage=true\"\n  readonly = true\n";
        let (loc, msg) = invalid(text);
        assert_eq!((loc.line, loc.column), (Some(5), Some(3)));
        assert!(
            msg.starts_with("profiles.prod: unknown field 'readonly' (expected one of: "),
            "{msg}"
        );
        assert!(msg.contains("did you mean 'read_only'?"), "{msg}");
        let err = parse(text, Some(Path::new("/cfg/config.toml"))).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "config /cfg/config.toml line 5, column 3: profiles.prod: unknown field 'readonly'"
            ),
            "{err}"
        );
    }

    #[test]
    fn unknown_top_level_and_retry_keys() {
        let (loc, msg) = invalid("pagesize = 10\n");
        assert_eq!(loc.line, Some(1));
        assert!(msg.starts_with("unknown field 'pagesize'"), "{msg}");
        let (loc, msg) = invalid("[retry]\nmax_attempts = 3\nmax_attempt = 3\n");
        assert_eq!(loc.line, Some(3));
        assert!(
            msg.starts_with("retry: unknown field 'max_attempt'"),
            "{msg}"
        );
    }

    #[test]
    fn syntax_and_type_errors_have_lines() {
        let (loc, _) = invalid("page_size = 1\ntheme = \n");
        assert_eq!(loc.line, Some(2));
        let (loc, msg) = invalid("\npage_size = \"big\"\n");
        assert_eq!(loc.line, Some(2));
        assert!(msg.starts_with("page_size: invalid type"), "{msg}");
        let msg = profile_error("connection_string_env = \"V\"\nsigning = \"hmac\"");
        assert!(
            msg.contains("profiles.p.signing: unknown variant 'hmac'"),
            "{msg}"
        );
    }

    #[test]
    fn page_size_range() {
        let (loc, msg) = invalid("page_size = 0\n");
        assert_eq!(loc.line, Some(1));
        assert_eq!(
            msg,
            "page_size: 0 is out of range 1..=1000 (rows per request)"
        );
        let (_, msg) = invalid("page_size = 1001\n");
        assert!(msg.contains("1001 is out of range"), "{msg}");
        assert_eq!(parse("page_size = 1\n", None).unwrap().page_size, 1);
    }

    #[test]
    fn retry_ranges() {
        let (loc, msg) = invalid("[retry]\n\nmax_attempts = 0\n");
        assert_eq!(loc.line, Some(3));
        assert!(
            msg.starts_with("retry.max_attempts: 0 is out of range 1..=20"),
            "{msg}"
        );
        let (_, msg) = invalid("[retry]\nmax_attempts = 21\n");
        assert!(msg.contains("21 is out of range"), "{msg}");
        let (loc, msg) = invalid("[retry]\nmax_delay_ms = 1000\nmin_delay_ms = 2000\n");
        assert_eq!(loc.line, Some(3));
        assert_eq!(
            msg,
            "retry: min_delay_ms (2000) must be <= max_delay_ms (1000)"
        );
        // Only max is written: point at it.
        let (loc, msg) = invalid("[retry]\nmax_delay_ms = 50\n");
        assert_eq!(loc.line, Some(2));
        assert!(
            msg.contains("min_delay_ms (100) must be <= max_delay_ms (50)"),
            "{msg}"
        );
        let (_, msg) = invalid("[retry]\nbase_delay_ms = 9000\n");
        assert!(
            msg.contains("base_delay_ms (9000) must be <= max_delay_ms (5000)"),
            "{msg}"
        );
        let (_, msg) = invalid("[retry]\nattempt_timeout_ms = 5\n");
        assert!(
            msg.starts_with("retry.attempt_timeout_ms: 5 is out of range"),
            "{msg}"
        );
        let (_, msg) = invalid("[retry]\nbase_delay_ms = -1\n");
        assert!(
            msg.starts_with("retry.base_delay_ms: invalid value"),
            "{msg}"
        );
        let (_, msg) = invalid("[targets]\naccount_entities_per_s = 0\n");
        assert!(
            msg.starts_with("targets.account_entities_per_s: 0 is out of range"),
            "{msg}"
        );
    }

    #[test]
    fn exactly_one_connection_source() {
        let msg = profile_error("read_only = true");
        assert!(
            msg.starts_with("profiles.p: no connection source; set exactly one of"),
            "{msg}"
        );
        let (loc, msg) = invalid(
            "[profiles.p]\nconnection_string = \"UseDevelopmentStorage=true\"\naccount = \"a\"\nkey_env = \"K\"\n",
        );
        assert_eq!(loc.line, Some(4));
        assert!(
            msg.starts_with("profiles.p: key_env: conflicts with connection_string"),
            "{msg}"
        );
        let msg = profile_error(
            "connection_string_env = \"A\"\nsas_env = \"B\"\nendpoint = \"https://x\"",
        );
        assert!(
            msg.contains("sas_env: conflicts with connection_string_env"),
            "{msg}"
        );
        let msg =
            profile_error("connection_string = \"UseDevelopmentStorage=true\"\naccount = \"a\"");
        assert!(
            msg.starts_with("profiles.p: account: is not used with connection_string"),
            "{msg}"
        );
    }

    #[test]
    fn profile_field_rules() {
        let msg = profile_error("key_env = \"K\"");
        assert_eq!(
            msg,
            "profiles.p: key_env: requires account (the storage account name)"
        );
        let msg = profile_error("sas_env = \"S\"");
        assert!(
            msg.starts_with("profiles.p: sas_env: requires endpoint"),
            "{msg}"
        );
        let msg = profile_error("connection_string_env = \"V\"\nsecondary_key_env = \"S\"");
        assert_eq!(
            msg,
            "profiles.p: secondary_key_env: requires account + key_env"
        );
        let msg = profile_error(
            "account = \"a\"\nkey_env = \"K\"\nendpoint = \"https://e\"\nendpoint_suffix = \"x\"",
        );
        assert!(
            msg.contains("endpoint_suffix: set endpoint or endpoint_suffix, not both"),
            "{msg}"
        );
        let msg = profile_error("account = \"a\"\nkey_env = \"K\"\nendpoint = \"ftp://e\"");
        assert!(msg.contains("endpoint: must start with https://"), "{msg}");
        let msg = profile_error("account = \"a;b\"\nkey_env = \"K\"");
        assert!(msg.contains("account: must not contain ';'"), "{msg}");
        let msg = profile_error("connection_string_env = \"\"");
        assert!(
            msg.contains("connection_string_env: must not be empty"),
            "{msg}"
        );
    }

    #[test]
    fn colour_parse() {
        let (loc, msg) = invalid("[profiles.p]\nconnection_string_env = \"V\"\ncolor = \"redd\"\n");
        assert_eq!(loc.line, Some(3));
        assert!(
            msg.starts_with("profiles.p.color: unknown colour 'redd' (expected #rrggbb"),
            "{msg}"
        );
        let msg = profile_error("connection_string_env = \"V\"\ncolor = \"#12345g\"");
        assert!(msg.contains("unknown colour '#12345g'"), "{msg}");
        assert_eq!("#FF0080".parse(), Ok(ProfileColor::Rgb(255, 0, 128)));
        assert_eq!(
            "Light-Blue".parse(),
            Ok(ProfileColor::Named(NamedColor::LightBlue))
        );
        assert_eq!(
            "bright red".parse(),
            Ok(ProfileColor::Named(NamedColor::LightRed))
        );
        assert_eq!(
            "dark_grey".parse(),
            Ok(ProfileColor::Named(NamedColor::DarkGray))
        );
        assert_eq!(ProfileColor::Rgb(1, 2, 255).to_string(), "#0102ff");
        assert_eq!(
            ProfileColor::Named(NamedColor::LightCyan).to_string(),
            "lightcyan"
        );
    }

    #[test]
    fn profile_names() {
        let (loc, msg) = invalid("[profiles.\"bad name\"]\nconnection_string_env = \"V\"\n");
        assert_eq!(loc.line, Some(1));
        assert!(
            msg.starts_with("profiles: invalid profile name 'bad name'"),
            "{msg}"
        );
        let (_, msg) = invalid("[profiles.\"\"]\nconnection_string_env = \"V\"\n");
        assert!(
            msg.starts_with("profiles: invalid profile name ''"),
            "{msg}"
        );
        let ok = "[profiles.\"prod-eu.v2_x\"]\nconnection_string_env = \"V\"\n";
        assert!(parse(ok, None).is_ok());
    }

    #[test]
    fn default_profile_must_exist() {
        let (loc, msg) = invalid("default_profile = \"prod\"\n");
        assert_eq!(loc.line, Some(1));
        assert_eq!(
            msg,
            "default_profile: no profile named 'prod' (no profiles are defined)"
        );
        let (_, msg) =
            invalid("default_profile = \"prd\"\n[profiles.prod]\nconnection_string_env = \"V\"\n");
        assert!(msg.contains("(defined: prod)"), "{msg}");
    }

    fn profile(text: &str) -> ProfileConfig {
        let c = parse(&format!("[profiles.p]\n{text}\n"), None).unwrap();
        c.profiles["p"].clone()
    }

    #[test]
    fn env_var_resolution() {
        std::env::set_var("TT_CFG_TEST_KEY_1", "a2V5MQ==");
        std::env::set_var("TT_CFG_TEST_KEY_2", "a2V5Mg==");
        let p = profile("account = \"acct\"\nkey_env = \"TT_CFG_TEST_KEY_1\"\nsecondary_key_env = \"TT_CFG_TEST_KEY_2\"");
        assert_eq!(
            p.connection_string("p").unwrap().expose(),
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5MQ==;EndpointSuffix=core.windows.net"
        );
        assert_eq!(
            p.secondary_connection_string("p").unwrap().unwrap().expose(),
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5Mg==;EndpointSuffix=core.windows.net"
        );

        let p = profile("account = \"devstoreaccount1\"\nkey_env = \"TT_CFG_TEST_KEY_1\"\nendpoint = \"http://127.0.0.1:10002/devstoreaccount1/\"");
        assert_eq!(
            p.connection_string("p").unwrap().expose(),
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5MQ==;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1"
        );
        assert_eq!(p.secondary_connection_string("p").unwrap(), None);

        let p = profile("account = \"acct\"\nkey_env = \"TT_CFG_TEST_KEY_1\"\nendpoint_suffix = \"core.chinacloudapi.cn\"");
        assert!(p
            .connection_string("p")
            .unwrap()
            .expose()
            .ends_with("EndpointSuffix=core.chinacloudapi.cn"));

        std::env::set_var("TT_CFG_TEST_SAS_1", "?sv=2024&sig=abc");
        let p = profile(
            "sas_env = \"TT_CFG_TEST_SAS_1\"\nendpoint = \"https://acct.table.core.windows.net\"",
        );
        assert_eq!(
            p.connection_string("p").unwrap().expose(),
            "TableEndpoint=https://acct.table.core.windows.net;SharedAccessSignature=sv=2024&sig=abc"
        );
        let p = profile("sas_env = \"TT_CFG_TEST_SAS_1\"\naccount = \"acct\"");
        assert!(p
            .connection_string("p")
            .unwrap()
            .expose()
            .starts_with("TableEndpoint=https://acct.table.core.windows.net;"));

        std::env::set_var("TT_CFG_TEST_CS_1", "UseDevelopmentStorage=true");
        let p = profile("connection_string_env = \"TT_CFG_TEST_CS_1\"");
        assert_eq!(
            p.connection_string("p").unwrap().expose(),
            "UseDevelopmentStorage=true"
        );

        let p = profile("connection_string = \"UseDevelopmentStorage=true\"");
        assert_eq!(
            p.connection_string("p").unwrap().expose(),
            "UseDevelopmentStorage=true"
        );
    }

    #[test]
    fn missing_env_var_names_the_variable() {
        let p = profile("account = \"acct\"\nkey_env = \"TT_CFG_TEST_MISSING_1\"");
        let err = p.connection_string("prod").unwrap_err();
        assert_eq!(
            err.to_string(),
            "profile 'prod': key_env: environment variable TT_CFG_TEST_MISSING_1 is not set"
        );
        std::env::set_var("TT_CFG_TEST_EMPTY_1", "  ");
        let p = profile("connection_string_env = \"TT_CFG_TEST_EMPTY_1\"");
        let err = p.connection_string("p").unwrap_err().to_string();
        assert!(err.contains("TT_CFG_TEST_EMPTY_1 is empty"), "{err}");
        std::env::set_var("TT_CFG_TEST_KEY_3", "c2VjcmV0");
        let p = profile("account = \"a\"\nkey_env = \"TT_CFG_TEST_KEY_3\"\nsecondary_key_env = \"TT_CFG_TEST_MISSING_2\"");
        let err = p.secondary_connection_string("p").unwrap_err().to_string();
        assert!(
            err.contains("secondary_key_env: environment variable TT_CFG_TEST_MISSING_2"),
            "{err}"
        );
        assert!(!err.contains("c2VjcmV0"));
    }

    #[test]
    fn hand_built_profile_without_source_is_an_error() {
        let err = ProfileConfig::default().connection_string("x").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("profile 'x': no connection source"),
            "{err}"
        );
    }

    #[cfg(unix)]
    fn write_mode(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[cfg(unix)]
    #[test]
    fn permission_warning_for_readable_literal_secret() {
        let secret = "c3VwZXJzZWNyZXRrZXk=";
        let text = format!(
            "[profiles.prod]\nconnection_string = \"DefaultEndpointsProtocol=https;AccountName=a;AccountKey={secret};EndpointSuffix=core.windows.net\"\n[profiles.local]\nconnection_string = \"UseDevelopmentStorage=true\"\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let open = write_mode(dir.path(), "open.toml", &text, 0o644);
        let loaded = load(Some(&open)).unwrap();
        assert_eq!(loaded.path.as_deref(), Some(open.as_path()));
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        let w = &loaded.warnings[0];
        assert!(w.contains(&open.display().to_string()), "{w}");
        assert!(w.contains("profile 'prod'"), "{w}");
        assert!(w.contains(&format!("chmod 600 {}", open.display())), "{w}");
        assert!(w.contains("connection_string_env"), "{w}");
        assert!(!w.contains(secret), "{w}");

        let closed = write_mode(dir.path(), "closed.toml", &text, 0o600);
        assert!(load(Some(&closed)).unwrap().warnings.is_empty());

        let sas = "[profiles.s]\nconnection_string = \"TableEndpoint=https://x;SharedAccessSignature=sv=1&sig=zz\"\n";
        let open_sas = write_mode(dir.path(), "sas.toml", sas, 0o640);
        assert_eq!(load(Some(&open_sas)).unwrap().warnings.len(), 1);
    }

    #[test]
    fn load_reports_path_and_line_and_load_or_default_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "page_size = 10\nread_only = true\n").unwrap();
        let err = load(Some(&path)).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "config {} line 2, column 1: unknown field 'read_only'",
                path.display()
            )),
            "{err}"
        );
        let loaded = load_or_default(Some(&path));
        assert_eq!(loaded.config, Config::default());
        assert_eq!(loaded.warnings.len(), 1);
        assert!(
            loaded.warnings[0].contains("line 2"),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn secret_is_never_printed() {
        let s = Secret::new("AccountKey=hunter2");
        assert_eq!(format!("{s:?}"), "<redacted>");
        assert_eq!(format!("{s}"), "<redacted>");
        assert_eq!(s.expose(), "AccountKey=hunter2");
        let p = profile("connection_string = \"AccountName=a;AccountKey=hunter2\"");
        let debug = format!(
            "{:?}",
            Config {
                profiles: [("p".into(), p)].into(),
                ..Config::default()
            }
        );
        assert!(!debug.contains("hunter2"), "{debug}");
    }

    #[test]
    fn journal_path_is_a_known_key() {
        let c = parse("journal_path = \"/var/lib/tabletop/j.jsonl\"\n", None).unwrap();
        assert_eq!(
            c.journal_path.as_deref(),
            Some(Path::new("/var/lib/tabletop/j.jsonl"))
        );
        assert_eq!(parse("", None).unwrap().journal_path, None);
        let (_, msg) = invalid("journal_pth = \"x\"\n");
        assert!(msg.starts_with("unknown field 'journal_pth'"), "{msg}");
    }

    #[test]
    fn keys_and_theme_are_free_form() {
        let c = parse("theme = \"light\"\n[keys]\nquit = \"ctrl-q\"\n", None).unwrap();
        assert_eq!(c.theme.as_deref(), Some("light"));
        assert_eq!(c.keys["quit"], "ctrl-q");
    }
}
