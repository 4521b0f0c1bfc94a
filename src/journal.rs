//! The local mutation journal: an append-only JSON Lines file that records every entity write
//! before it is sent (intent: keys, operation, before-image, intended after-image, condition) and
//! after it returns (outcome and new ETag); journaled writes; and undo of a recorded write.
//!
//! Format: one JSON object per line. An `"kind":"intent"` line is written and fsync'd before the
//! request goes out; an `"kind":"outcome"` line with the same `id` follows the response. Lines
//! are only ever appended; readers fold intent and outcome by id, and an intent without an
//! outcome (a crash in between) reads as outcome "unknown", which undo resolves by reading the
//! entity. When the file is over [`ROTATE_AT_BYTES`] at open it is renamed to `journal.1.jsonl`
//! (replacing the older one); readers read both. No secret is ever written: the account is named
//! by its account name and its endpoint (which never holds a query string, key or SAS).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::azure::{
    validate, Condition, Entity, TableClient, TableError, UpdateMode, WriteOutcome,
};
use crate::config::LoadedConfig;

/// Environment variable naming the journal file (wins over the config's `journal_path`).
pub const JOURNAL_ENV: &str = "TABLETOP_JOURNAL";
/// The journal's file name in the platform data directory.
pub const FILE_NAME: &str = "journal.jsonl";
/// A journal larger than this at open is rotated to `journal.1.jsonl`.
pub const ROTATE_AT_BYTES: u64 = 50 * 1024 * 1024;

/// Profile labels for connections that did not come from a named profile.
pub const PROFILE_COMMAND_LINE: &str = "command line";
pub const PROFILE_ENVIRONMENT: &str = "environment";
pub const PROFILE_LOCAL_EMULATOR: &str = "local emulator";

// ---- records ------------------------------------------------------------------------------

/// A journal entry's id: `YYYYMMDD-HHMMSSmmm-xxxx` (UTC time to the millisecond, then four
/// random base32 characters), so ids sort by time and a short prefix names one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EntryId(pub String);

impl EntryId {
    fn generate(now: time::OffsetDateTime) -> EntryId {
        const BASE32: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
        let suffix: String = (0..4)
            .map(|_| BASE32[fastrand::usize(..32)] as char)
            .collect();
        EntryId(format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}{:03}-{suffix}",
            now.year(),
            u8::from(now.month()),
            now.day(),
            now.hour(),
            now.minute(),
            now.second(),
            now.millisecond()
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for EntryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a journaled write does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteKind {
    Insert,
    Replace,
    Merge,
    UpsertReplace,
    UpsertMerge,
    Delete,
}

impl WriteKind {
    pub fn name(self) -> &'static str {
        match self {
            WriteKind::Insert => "insert",
            WriteKind::Replace => "replace",
            WriteKind::Merge => "merge",
            WriteKind::UpsertReplace => "upsert-replace",
            WriteKind::UpsertMerge => "upsert-merge",
            WriteKind::Delete => "delete",
        }
    }
}

impl std::fmt::Display for WriteKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything recorded before a write is sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Intent {
    /// The profile name, or "command line" / "environment" / "local emulator".
    pub profile: String,
    pub account: String,
    /// The table endpoint, without query string (never a key or SAS).
    pub endpoint: String,
    pub table: String,
    pub partition_key: String,
    pub row_key: String,
    pub operation: WriteKind,
    /// The `If-Match` value (an ETag or "*"); `None` for insert and upserts, which send none.
    pub condition: Option<String>,
    /// The entity as read just before the write; `None` if it did not exist.
    pub before: Option<Entity>,
    /// The entity the write should leave (for merges: the before-image with the sent properties
    /// applied); `None` for a delete.
    pub after: Option<Entity>,
    /// For merges: the properties actually sent.
    pub sent: Option<Entity>,
    /// Set when this write undoes another entry.
    pub undo_of: Option<EntryId>,
}

/// How a write ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Applied; the entity's new ETag (none after a delete).
    Ok { etag: Option<String> },
    /// Refused by the service or the client: nothing changed.
    Failed {
        status: Option<u16>,
        code: Option<String>,
        message: String,
    },
    /// The request went out but its effect is not known (no answer, a server error, or no
    /// outcome line at all after a crash). Undo resolves it by reading the entity.
    Unknown { message: String },
}

impl Outcome {
    /// Classifies a write's result: a lost answer or a server error may still have been applied.
    pub fn of(result: &Result<WriteOutcome, TableError>) -> Outcome {
        match result {
            Ok(w) => Outcome::Ok {
                etag: w.etag.clone(),
            },
            Err(
                e
                @ (TableError::Transport { .. } | TableError::Protocol(_) | TableError::Cancelled),
            ) => Outcome::Unknown {
                message: e.to_string(),
            },
            Err(TableError::Service(s)) if s.status >= 500 => Outcome::Unknown {
                message: s.to_string(),
            },
            Err(e) => Outcome::Failed {
                status: e.status(),
                code: e.code().map(str::to_string),
                message: e.to_string(),
            },
        }
    }

    /// A short label: `ok`, `failed 412 UpdateConditionNotSatisfied`, `unknown`.
    pub fn label(&self) -> String {
        match self {
            Outcome::Ok { .. } => "ok".into(),
            Outcome::Failed { status, code, .. } => {
                let mut s = "failed".to_string();
                if let Some(st) = status {
                    s.push_str(&format!(" {st}"));
                }
                if let Some(c) = code {
                    s.push_str(&format!(" {c}"));
                }
                s
            }
            Outcome::Unknown { .. } => "unknown".into(),
        }
    }

    pub fn etag(&self) -> Option<&str> {
        match self {
            Outcome::Ok { etag } => etag.as_deref(),
            _ => None,
        }
    }
}

/// One journaled write: its intent folded with its outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub id: EntryId,
    /// RFC 3339 UTC time of the intent.
    pub time: String,
    /// The process that made it (one id per process).
    pub session: String,
    pub intent: Intent,
    /// `Unknown` when no outcome line was written.
    pub outcome: Outcome,
    /// RFC 3339 UTC time of the outcome line, if any.
    pub outcome_time: Option<String>,
}

impl Entry {
    /// The folded record as one JSON line (the images as nested entity objects).
    pub fn to_json_line(&self) -> String {
        let line = FoldedLine {
            intent: IntentLine::new(self),
            outcome: OutcomeLine::new(&self.id, self.outcome_time.clone(), &self.outcome),
        };
        serde_json::to_string(&line).unwrap_or_default()
    }
}

/// This process's session id (all entries written by one run share it).
pub fn session_id() -> &'static str {
    static SESSION: OnceLock<String> = OnceLock::new();
    SESSION.get_or_init(|| {
        let id = EntryId::generate(now());
        format!("{}-{}", id.0, std::process::id())
    })
}

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

// ---- the file's lines -----------------------------------------------------------------------

#[derive(Serialize, Deserialize)]
struct IntentLine {
    kind: String,
    id: EntryId,
    time: String,
    session: String,
    profile: String,
    account: String,
    endpoint: String,
    table: String,
    partition_key: String,
    row_key: String,
    operation: WriteKind,
    condition: Option<String>,
    before: Option<Box<RawValue>>,
    after: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sent: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    undo_of: Option<EntryId>,
}

fn image(e: &Option<Entity>) -> Option<Box<RawValue>> {
    // to_json_line always produces one JSON object, so this never fails in practice.
    e.as_ref()
        .and_then(|e| RawValue::from_string(e.to_json_line()).ok())
}

fn parse_image(raw: &Option<Box<RawValue>>) -> Result<Option<Entity>, String> {
    raw.as_ref().map(|r| Entity::from_json(r.get())).transpose()
}

impl IntentLine {
    fn new(entry: &Entry) -> IntentLine {
        let i = &entry.intent;
        IntentLine {
            kind: "intent".into(),
            id: entry.id.clone(),
            time: entry.time.clone(),
            session: entry.session.clone(),
            profile: i.profile.clone(),
            account: i.account.clone(),
            endpoint: i.endpoint.clone(),
            table: i.table.clone(),
            partition_key: i.partition_key.clone(),
            row_key: i.row_key.clone(),
            operation: i.operation,
            condition: i.condition.clone(),
            before: image(&i.before),
            after: image(&i.after),
            sent: image(&i.sent),
            undo_of: i.undo_of.clone(),
        }
    }

    fn into_entry(self) -> Result<Entry, String> {
        Ok(Entry {
            intent: Intent {
                profile: self.profile,
                account: self.account,
                endpoint: self.endpoint,
                table: self.table,
                partition_key: self.partition_key,
                row_key: self.row_key,
                operation: self.operation,
                condition: self.condition,
                before: parse_image(&self.before)?,
                after: parse_image(&self.after)?,
                sent: parse_image(&self.sent)?,
                undo_of: self.undo_of,
            },
            id: self.id,
            time: self.time,
            session: self.session,
            outcome: Outcome::Unknown {
                message: "no outcome was recorded (the process ended before the answer arrived)"
                    .into(),
            },
            outcome_time: None,
        })
    }
}

#[derive(Serialize, Deserialize)]
struct OutcomeLine {
    kind: String,
    id: EntryId,
    #[serde(default)]
    time: Option<String>,
    /// ok, failed or unknown.
    result: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

impl OutcomeLine {
    fn new(id: &EntryId, time: Option<String>, outcome: &Outcome) -> OutcomeLine {
        let mut line = OutcomeLine {
            kind: "outcome".into(),
            id: id.clone(),
            time,
            result: String::new(),
            etag: None,
            status: None,
            code: None,
            message: None,
        };
        match outcome {
            Outcome::Ok { etag } => {
                line.result = "ok".into();
                line.etag = etag.clone();
            }
            Outcome::Failed {
                status,
                code,
                message,
            } => {
                line.result = "failed".into();
                line.status = *status;
                line.code = code.clone();
                line.message = Some(message.clone());
            }
            Outcome::Unknown { message } => {
                line.result = "unknown".into();
                line.message = Some(message.clone());
            }
        }
        line
    }

    fn outcome(self) -> Outcome {
        match self.result.as_str() {
            "ok" => Outcome::Ok { etag: self.etag },
            "failed" => Outcome::Failed {
                status: self.status,
                code: self.code,
                message: self.message.unwrap_or_default(),
            },
            _ => Outcome::Unknown {
                message: self.message.unwrap_or_default(),
            },
        }
    }
}

#[derive(Serialize)]
struct FoldedLine {
    #[serde(flatten)]
    intent: IntentLine,
    outcome: OutcomeLine,
}

#[derive(Deserialize)]
struct KindOnly {
    kind: String,
}

// ---- errors ---------------------------------------------------------------------------------

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The journal file could not be opened, locked, written or read.
    #[error("journal {}: cannot {action}: {source} (set journal_path in the config or ${JOURNAL_ENV} to a writable file)", path.display())]
    Io {
        path: PathBuf,
        action: &'static str,
        source: io::Error,
    },
    /// The write (or the read of the before-image) failed; `entry` is its journal entry when the
    /// intent had been recorded.
    #[error("{source}")]
    Table {
        source: TableError,
        entry: Option<EntryId>,
    },
    /// The write was sent but its outcome line could not be written; the entry stays "unknown".
    #[error("the write was sent ({}) but its outcome could not be recorded in the journal {}: {source}; entry {entry} stays 'unknown' (undo resolves it by reading the entity)",
        match write.as_ref() { Ok(_) => "it succeeded".to_string(), Err(e) => format!("it failed: {e}") },
        path.display())]
    OutcomeNotRecorded {
        entry: EntryId,
        path: PathBuf,
        source: io::Error,
        write: Box<Result<WriteOutcome, TableError>>,
    },
    #[error("no journal entry id starts with '{prefix}' in {} (run `tabletop journal` to list them)", path.display())]
    NotFound { prefix: String, path: PathBuf },
    #[error("'{prefix}' names several journal entries ({}); give more of the id", matches.join(", "))]
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },
}

impl JournalError {
    /// The service or client error inside, if the failure was the write's own.
    pub fn table_error(&self) -> Option<&TableError> {
        match self {
            JournalError::Table { source, .. } => Some(source),
            JournalError::OutcomeNotRecorded { write, .. } => write.as_ref().as_ref().err(),
            _ => None,
        }
    }
}

impl From<TableError> for JournalError {
    fn from(source: TableError) -> JournalError {
        JournalError::Table {
            source,
            entry: None,
        }
    }
}

// ---- the file -------------------------------------------------------------------------------

/// The journal file; cheap to keep, each append opens, locks, writes and syncs the file.
#[derive(Clone, Debug)]
pub struct Journal {
    path: PathBuf,
}

impl Journal {
    /// Opens (creating it and its directory) the journal at `path`, rotating it when it is
    /// over [`ROTATE_AT_BYTES`]. Fails if the file cannot be written: writes must then be refused.
    pub fn open(path: impl Into<PathBuf>) -> Result<Journal, JournalError> {
        Journal::open_with_rotation(path, ROTATE_AT_BYTES)
    }

    /// [`Journal::open`] with another rotation threshold.
    pub fn open_with_rotation(
        path: impl Into<PathBuf>,
        rotate_at: u64,
    ) -> Result<Journal, JournalError> {
        let journal = Journal { path: path.into() };
        let err = |action, source| JournalError::Io {
            path: journal.path.clone(),
            action,
            source,
        };
        if let Some(dir) = journal.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err("create its directory", e))?;
        }
        let file = open_append(&journal.path).map_err(|e| err("open it for appending", e))?;
        let lock = Lock::exclusive(&file).map_err(|e| err("lock it", e))?;
        // Checked by path under the lock: a concurrent opener may have rotated it already.
        let size = std::fs::metadata(&journal.path)
            .map(|m| m.len())
            .unwrap_or(0);
        if size > rotate_at {
            std::fs::rename(&journal.path, journal.rotated_path())
                .map_err(|e| err("rotate it", e))?;
            drop(lock);
            open_append(&journal.path).map_err(|e| err("open it for appending", e))?;
        }
        Ok(journal)
    }

    /// The journal at `path` for reading only: nothing is created or rotated.
    pub fn for_reading(path: impl Into<PathBuf>) -> Journal {
        Journal { path: path.into() }
    }

    /// `$TABLETOP_JOURNAL`, else `journal.jsonl` in the platform data directory.
    pub fn default_path() -> Option<PathBuf> {
        match std::env::var_os(JOURNAL_ENV) {
            Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
            _ => directories::ProjectDirs::from("", "", "tabletop")
                .map(|d| d.data_dir().join(FILE_NAME)),
        }
    }

    /// `$TABLETOP_JOURNAL`, else the config's `journal_path` (relative to the config file's
    /// directory), else the platform default.
    pub fn configured_path(config: &LoadedConfig) -> Option<PathBuf> {
        Journal::configured_path_from(std::env::var_os(JOURNAL_ENV), config)
    }

    fn configured_path_from(
        env: Option<std::ffi::OsString>,
        config: &LoadedConfig,
    ) -> Option<PathBuf> {
        if let Some(v) = env.filter(|v| !v.is_empty()) {
            return Some(PathBuf::from(v));
        }
        match &config.config.journal_path {
            Some(p) if p.is_relative() => Some(
                config
                    .path
                    .as_deref()
                    .and_then(Path::parent)
                    .map_or_else(|| p.clone(), |dir| dir.join(p)),
            ),
            Some(p) => Some(p.clone()),
            None => Journal::default_path(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the previous generation goes on rotation: `journal.1.jsonl` beside it.
    pub fn rotated_path(&self) -> PathBuf {
        let stem = self
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "journal".into());
        let name = match self.path.extension() {
            Some(ext) => format!("{stem}.1.{}", ext.to_string_lossy()),
            None => format!("{stem}.1"),
        };
        self.path.with_file_name(name)
    }

    /// Records an intent, synced to disk; returns its id. Call before sending the write.
    pub fn begin(&self, intent: &Intent) -> Result<EntryId, JournalError> {
        let t = now();
        let entry = Entry {
            id: EntryId::generate(t),
            time: rfc3339(t),
            session: session_id().to_string(),
            intent: Intent {
                endpoint: safe_endpoint(&intent.endpoint),
                ..intent.clone()
            },
            outcome: Outcome::Unknown {
                message: String::new(),
            },
            outcome_time: None,
        };
        let line =
            serde_json::to_string(&IntentLine::new(&entry)).map_err(|e| JournalError::Io {
                path: self.path.clone(),
                action: "encode the record",
                source: io::Error::other(e),
            })?;
        self.append(&line)?;
        Ok(entry.id)
    }

    /// Records how the write `id` ended, synced to disk.
    pub fn finish(&self, id: &EntryId, outcome: &Outcome) -> Result<(), JournalError> {
        let line = OutcomeLine::new(id, Some(rfc3339(now())), outcome);
        let text = serde_json::to_string(&line).map_err(|e| JournalError::Io {
            path: self.path.clone(),
            action: "encode the record",
            source: io::Error::other(e),
        })?;
        self.append(&text)
    }

    fn append(&self, line: &str) -> Result<(), JournalError> {
        let err = |action, source| JournalError::Io {
            path: self.path.clone(),
            action,
            source,
        };
        let file = open_append(&self.path).map_err(|e| err("open it for appending", e))?;
        // Appends are atomic for small lines, the lock makes large images safe too.
        let _lock = Lock::exclusive(&file).map_err(|e| err("lock it", e))?;
        let mut buf = String::with_capacity(line.len() + 2);
        // A line torn by a crash would swallow this record: start on a fresh line.
        if !ends_with_newline(&file).map_err(|e| err("read it", e))? {
            buf.push('\n');
        }
        buf.push_str(line);
        buf.push('\n');
        (&file)
            .write_all(buf.as_bytes())
            .map_err(|e| err("write to it", e))?;
        file.sync_data().map_err(|e| err("sync it to disk", e))
    }

    /// Every entry, oldest first (the rotated file, then the current one). Unreadable lines
    /// (a record torn by a crash) are skipped.
    pub fn entries(&self) -> Result<Vec<Entry>, JournalError> {
        let mut entries: Vec<Entry> = Vec::new();
        let mut index: HashMap<EntryId, usize> = HashMap::new();
        for path in [self.rotated_path(), self.path.clone()] {
            let file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(JournalError::Io {
                        path,
                        action: "read it",
                        source: e,
                    })
                }
            };
            for line in io::BufReader::new(file).lines() {
                let line = line.map_err(|e| JournalError::Io {
                    path: path.clone(),
                    action: "read it",
                    source: e,
                })?;
                fold_line(&line, &mut entries, &mut index);
            }
        }
        Ok(entries)
    }

    /// The entry whose id is `prefix` or starts with it (exactly one).
    pub fn find(&self, prefix: &str) -> Result<Entry, JournalError> {
        find_in(self.entries()?, prefix, &self.path)
    }

    /// The newest change of `session` that can still be undone (not failed, not an undo itself,
    /// not undone): what the console's `:undo` reverts.
    pub fn last_undoable(&self, session: &str) -> Result<Option<Entry>, JournalError> {
        let entries = self.entries()?;
        Ok(entries
            .iter()
            .rev()
            .find(|e| {
                e.session == session
                    && e.intent.undo_of.is_none()
                    && !matches!(e.outcome, Outcome::Failed { .. })
                    && undone_by(&entries, &e.id).is_none()
            })
            .cloned())
    }
}

fn fold_line(line: &str, entries: &mut Vec<Entry>, index: &mut HashMap<EntryId, usize>) {
    let line = line.trim();
    if line.is_empty() {
        return;
    }
    let Ok(kind) = serde_json::from_str::<KindOnly>(line) else {
        return;
    };
    match kind.kind.as_str() {
        "intent" => {
            let Some(entry) = serde_json::from_str::<IntentLine>(line)
                .ok()
                .and_then(|l| l.into_entry().ok())
            else {
                return;
            };
            index.insert(entry.id.clone(), entries.len());
            entries.push(entry);
        }
        "outcome" => {
            let Ok(o) = serde_json::from_str::<OutcomeLine>(line) else {
                return;
            };
            if let Some(&i) = index.get(&o.id) {
                entries[i].outcome_time = o.time.clone();
                entries[i].outcome = o.outcome();
            }
        }
        _ => {}
    }
}

fn find_in(entries: Vec<Entry>, prefix: &str, path: &Path) -> Result<Entry, JournalError> {
    let prefix = prefix.trim();
    let not_found = || JournalError::NotFound {
        prefix: prefix.to_string(),
        path: path.to_path_buf(),
    };
    if prefix.is_empty() {
        return Err(not_found());
    }
    let mut matches: Vec<Entry> = entries
        .into_iter()
        .filter(|e| e.id.0.starts_with(prefix))
        .collect();
    if let Some(exact) = matches.iter().position(|e| e.id.0 == prefix) {
        return Ok(matches.swap_remove(exact));
    }
    match matches.len() {
        0 => Err(not_found()),
        1 => Ok(matches.swap_remove(0)),
        _ => Err(JournalError::Ambiguous {
            prefix: prefix.to_string(),
            matches: matches.iter().take(5).map(|e| e.id.0.clone()).collect(),
        }),
    }
}

/// The entry that undid `id` (applied, or with an unknown outcome), if any.
pub fn undone_by<'a>(entries: &'a [Entry], id: &EntryId) -> Option<&'a Entry> {
    entries.iter().rev().find(|e| {
        e.intent.undo_of.as_ref() == Some(id) && !matches!(e.outcome, Outcome::Failed { .. })
    })
}

/// The endpoint without any query string or fragment (a SAS must never reach the file).
fn safe_endpoint(endpoint: &str) -> String {
    endpoint
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .to_string()
}

fn open_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true);
    // Entity images are data: readable by the owner only.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

#[cfg(unix)]
fn ends_with_newline(file: &File) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8; 1];
    file.read_at(&mut last, len - 1)?;
    Ok(last[0] == b'\n')
}

#[cfg(not(unix))]
fn ends_with_newline(_file: &File) -> io::Result<bool> {
    Ok(true)
}

/// An exclusive advisory lock (`flock`), released on drop; a no-op off Unix.
struct Lock<'a> {
    #[cfg_attr(not(unix), allow(dead_code))]
    file: &'a File,
}

impl<'a> Lock<'a> {
    fn exclusive(file: &'a File) -> io::Result<Lock<'a>> {
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            loop {
                // SAFETY: the descriptor is valid for the borrow of `file`.
                let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
                if rc == 0 {
                    break;
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
        Ok(Lock { file })
    }
}

impl Drop for Lock<'_> {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            // SAFETY: the descriptor is valid for the borrow of `file`.
            unsafe {
                libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
            }
        }
    }
}

// ---- journaled writes -----------------------------------------------------------------------

/// A write to journal and send.
#[derive(Clone, Debug, PartialEq)]
pub enum Mutation {
    Insert(Entity),
    Update {
        entity: Entity,
        mode: UpdateMode,
        condition: Condition,
    },
    Upsert {
        entity: Entity,
        mode: UpdateMode,
    },
    Delete {
        partition_key: String,
        row_key: String,
        condition: Condition,
    },
}

impl Mutation {
    pub fn kind(&self) -> WriteKind {
        match self {
            Mutation::Insert(_) => WriteKind::Insert,
            Mutation::Update {
                mode: UpdateMode::Replace,
                ..
            } => WriteKind::Replace,
            Mutation::Update {
                mode: UpdateMode::Merge,
                ..
            } => WriteKind::Merge,
            Mutation::Upsert {
                mode: UpdateMode::Replace,
                ..
            } => WriteKind::UpsertReplace,
            Mutation::Upsert {
                mode: UpdateMode::Merge,
                ..
            } => WriteKind::UpsertMerge,
            Mutation::Delete { .. } => WriteKind::Delete,
        }
    }

    /// "merge PK / RK (forced)" and the like, for messages.
    pub fn describe(&self) -> String {
        let (pk, rk) = self.keys();
        let forced = |c: &Condition| {
            if *c == Condition::Force {
                " (forced)"
            } else {
                ""
            }
        };
        let what = match self {
            Mutation::Insert(_) => "insert".to_string(),
            Mutation::Update {
                mode: UpdateMode::Merge,
                condition,
                ..
            } => format!("merge{}", forced(condition)),
            Mutation::Update {
                mode: UpdateMode::Replace,
                condition,
                ..
            } => format!("replace{}", forced(condition)),
            Mutation::Upsert {
                mode: UpdateMode::Replace,
                ..
            } => "insert-or-replace".into(),
            Mutation::Upsert {
                mode: UpdateMode::Merge,
                ..
            } => "insert-or-merge".into(),
            Mutation::Delete { condition, .. } => format!("delete{}", forced(condition)),
        };
        format!("{what} {pk} / {rk}")
    }

    pub fn keys(&self) -> (&str, &str) {
        match self {
            Mutation::Insert(e)
            | Mutation::Update { entity: e, .. }
            | Mutation::Upsert { entity: e, .. } => (&e.partition_key, &e.row_key),
            Mutation::Delete {
                partition_key,
                row_key,
                ..
            } => (partition_key, row_key),
        }
    }

    fn condition(&self) -> Option<String> {
        match self {
            Mutation::Update { condition, .. } | Mutation::Delete { condition, .. } => {
                Some(match condition {
                    Condition::IfMatch(etag) => etag.clone(),
                    Condition::Force => "*".into(),
                })
            }
            Mutation::Insert(_) | Mutation::Upsert { .. } => None,
        }
    }

    /// The intended after-image and, for merges, the sent properties.
    fn images(&self, before: Option<&Entity>) -> (Option<Entity>, Option<Entity>) {
        match self {
            Mutation::Insert(e)
            | Mutation::Update {
                entity: e,
                mode: UpdateMode::Replace,
                ..
            }
            | Mutation::Upsert {
                entity: e,
                mode: UpdateMode::Replace,
            } => (Some(content(e)), None),
            Mutation::Update {
                entity: e,
                mode: UpdateMode::Merge,
                ..
            }
            | Mutation::Upsert {
                entity: e,
                mode: UpdateMode::Merge,
            } => {
                let sent = content(e);
                let after = match before {
                    Some(b) => {
                        let mut merged = content(b);
                        for p in &sent.properties {
                            merged.set(p.name.clone(), p.value.clone());
                        }
                        merged
                    }
                    None => sent.clone(),
                };
                (Some(after), Some(sent))
            }
            Mutation::Delete { .. } => (None, None),
        }
    }

    fn validate(&self, table: &str) -> Result<(), TableError> {
        validate::table_name(table)?;
        match self {
            Mutation::Insert(e)
            | Mutation::Update { entity: e, .. }
            | Mutation::Upsert { entity: e, .. } => validate::entity(e)?,
            Mutation::Delete {
                partition_key,
                row_key,
                ..
            } => {
                validate::key("PartitionKey", partition_key)?;
                validate::key("RowKey", row_key)?;
            }
        }
        Ok(())
    }
}

/// Keys and custom properties only: the ETag and Timestamp belong to a version, not content.
fn content(e: &Entity) -> Entity {
    Entity {
        etag: None,
        timestamp: None,
        ..e.clone()
    }
}

/// Journals and sends one write: reads the before-image, records the intent (synced), sends,
/// records the outcome (failures too, e.g. a 412 with its code).
///
/// The before-image costs one extra GET per write; undo needs it, and the ETag condition alone
/// does not say what the entity held. A read-only client is refused before anything is read,
/// journaled or sent.
pub async fn journaled_write(
    journal: &Journal,
    client: &TableClient,
    profile: &str,
    table: &str,
    op: Mutation,
) -> Result<(WriteOutcome, EntryId), JournalError> {
    write_inner(journal, client, profile, table, op, None).await
}

async fn write_inner(
    journal: &Journal,
    client: &TableClient,
    profile: &str,
    table: &str,
    op: Mutation,
    undo_of: Option<&EntryId>,
) -> Result<(WriteOutcome, EntryId), JournalError> {
    let kind = op.kind();
    if client.is_read_only() {
        return Err(TableError::ReadOnly {
            operation: kind.name(),
        }
        .into());
    }
    op.validate(table)?;
    let (pk, rk) = op.keys();
    let before = client.try_get_entity(table, pk, rk).await?;
    let (after, sent) = op.images(before.as_ref());
    let account = client.account();
    let intent = Intent {
        profile: profile.to_string(),
        account: account.name.clone(),
        endpoint: account.endpoint.clone(),
        table: table.to_string(),
        partition_key: pk.to_string(),
        row_key: rk.to_string(),
        operation: kind,
        condition: op.condition(),
        before,
        after,
        sent,
        undo_of: undo_of.cloned(),
    };
    let id = journal.begin(&intent)?;
    let result = match &op {
        Mutation::Insert(e) => client.insert(table, e).await,
        Mutation::Update {
            entity,
            mode,
            condition,
        } => client.update(table, entity, *mode, condition).await,
        Mutation::Upsert { entity, mode } => client.upsert(table, entity, *mode).await,
        Mutation::Delete {
            partition_key,
            row_key,
            condition,
        } => {
            client
                .delete_entity(table, partition_key, row_key, condition)
                .await
        }
    };
    if let Err(e) = journal.finish(&id, &Outcome::of(&result)) {
        let JournalError::Io { path, source, .. } = e else {
            return Err(e);
        };
        return Err(JournalError::OutcomeNotRecorded {
            entry: id,
            path,
            source,
            write: Box::new(result),
        });
    }
    match result {
        Ok(w) => Ok((w, id)),
        Err(source) => Err(JournalError::Table {
            source,
            entry: Some(id),
        }),
    }
}

// ---- undo -----------------------------------------------------------------------------------

/// The inverse write undo sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UndoAction {
    /// The change created the entity: delete it.
    Delete,
    /// The change modified the entity: replace it with the before-image.
    Restore,
    /// The change deleted the entity: insert the before-image again.
    Reinsert,
}

impl UndoAction {
    pub fn describe(self) -> &'static str {
        match self {
            UndoAction::Delete => "delete the entity the change created",
            UndoAction::Restore => "replace the entity with its before-image",
            UndoAction::Reinsert => "insert the deleted entity again (its before-image)",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum UndoOutcome {
    /// The inverse write was applied; `entry` is its own journal entry.
    Reverted {
        entry: EntryId,
        action: UndoAction,
        etag: Option<String>,
    },
    /// The change never took effect (its outcome was unknown and the entity is as before).
    NothingToUndo { reason: String },
}

/// The three versions the console's conflict view shows when an undo meets a changed entity.
#[derive(Clone, Debug, PartialEq)]
pub struct UndoConflict {
    /// What is there now (`None`: absent).
    pub current: Option<Entity>,
    /// What the change left (`None` after a delete).
    pub expected_after: Option<Entity>,
    /// What was there before the change (`None`: absent).
    pub before: Option<Entity>,
}

#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// The entity changed since the change (its ETag or content is not what the change left):
    /// nothing was written.
    #[error("the entity changed since this change was made (someone else wrote it): undo wrote nothing, to avoid overwriting that change")]
    Conflict(Box<UndoConflict>),
    /// Undo does not apply (a failed write, already undone, another account).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

impl UndoError {
    pub fn table_error(&self) -> Option<&TableError> {
        match self {
            UndoError::Journal(j) => j.table_error(),
            _ => None,
        }
    }
}

impl From<TableError> for UndoError {
    fn from(e: TableError) -> UndoError {
        UndoError::Journal(e.into())
    }
}

fn action_for(entry: &Entry) -> Option<UndoAction> {
    match (&entry.intent.before, &entry.intent.after) {
        (None, None) => None,
        (None, Some(_)) => Some(UndoAction::Delete),
        (Some(_), Some(_)) => Some(UndoAction::Restore),
        (Some(_), None) => Some(UndoAction::Reinsert),
    }
}

/// Refuses entries that cannot be undone: failed writes and entries already undone.
fn check_undoable(journal: &Journal, entry: &Entry) -> Result<(), UndoError> {
    if let Outcome::Failed { message, .. } = &entry.outcome {
        return Err(UndoError::Refused(format!(
            "entry {} failed ({message}): nothing changed, so there is nothing to undo",
            entry.id
        )));
    }
    let entries = journal.entries()?;
    if let Some(by) = undone_by(&entries, &entry.id) {
        let how = match by.outcome {
            Outcome::Ok { .. } => "",
            _ => " (its outcome is unknown: check the entity with `tabletop get`)",
        };
        return Err(UndoError::Refused(format!(
            "entry {} was already undone by entry {}{how}",
            entry.id, by.id
        )));
    }
    Ok(())
}

/// What undo of `entry` would do, in words, without sending anything; refusals as errors.
pub fn undo_plan(journal: &Journal, entry: &Entry) -> Result<String, UndoError> {
    check_undoable(journal, entry)?;
    let i = &entry.intent;
    let Some(action) = action_for(entry) else {
        return Ok("nothing: the entity existed neither before nor after the change".into());
    };
    let cond = match (&entry.outcome, entry.outcome.etag()) {
        (Outcome::Ok { .. }, Some(etag)) => format!("only if its ETag is still {etag} (the ETag the change produced)"),
        (Outcome::Ok { .. }, None) if action == UndoAction::Reinsert => {
            "only if no entity has been created with these keys since".into()
        }
        _ => "after reading the entity: the outcome is unknown, so undo first checks whether the change happened".into(),
    };
    Ok(format!(
        "{} in table {} ({} / {}) on account {} ({}), {cond}",
        action.describe(),
        i.table,
        i.partition_key,
        i.row_key,
        i.account,
        i.endpoint
    ))
}

fn matches_image(current: Option<&Entity>, image: Option<&Entity>) -> bool {
    match (current, image) {
        (None, None) => true,
        (Some(c), Some(i)) => c.same_content(i),
        _ => false,
    }
}

/// Reverts `entry`, conditional on the ETag the change produced; the undo is journaled with
/// `undo_of`. An entry with an unknown outcome is resolved by reading the entity first.
pub async fn undo(
    journal: &Journal,
    client: &TableClient,
    entry: &Entry,
) -> Result<UndoOutcome, UndoError> {
    let i = &entry.intent;
    if client.is_read_only() {
        return Err(TableError::ReadOnly { operation: "undo" }.into());
    }
    if client.account().name != i.account {
        return Err(UndoError::Refused(format!(
            "entry {} was made on account {}, but this connection is to account {}: connect to the same account (--profile or --connection-string)",
            entry.id,
            i.account,
            client.account().name
        )));
    }
    check_undoable(journal, entry)?;
    let Some(action) = action_for(entry) else {
        return Ok(UndoOutcome::NothingToUndo {
            reason: "the entity existed neither before nor after the change".into(),
        });
    };
    let conflict = |current: Option<Entity>| {
        UndoError::Conflict(Box::new(UndoConflict {
            current,
            expected_after: i.after.clone(),
            before: i.before.clone(),
        }))
    };
    // The ETag the change left; a reinsert has none (the change left no entity).
    let etag = match (&entry.outcome, entry.outcome.etag()) {
        (Outcome::Ok { .. }, Some(etag)) => Some(etag.to_string()),
        (Outcome::Ok { .. }, None) if action == UndoAction::Reinsert => None,
        _ => {
            let current = client
                .try_get_entity(&i.table, &i.partition_key, &i.row_key)
                .await?;
            if matches_image(current.as_ref(), i.before.as_ref()) {
                return Ok(UndoOutcome::NothingToUndo {
                    reason: format!(
                        "the entity is as it was before entry {}: that change did not happen (or changed nothing)",
                        entry.id
                    ),
                });
            }
            if !matches_image(current.as_ref(), i.after.as_ref()) {
                return Err(conflict(current));
            }
            current.and_then(|c| c.etag)
        }
    };
    let (pk, rk) = (i.partition_key.clone(), i.row_key.clone());
    let op = match (action, &i.before, etag) {
        (UndoAction::Delete, _, Some(etag)) => Mutation::Delete {
            partition_key: pk,
            row_key: rk,
            condition: Condition::IfMatch(etag),
        },
        (UndoAction::Restore, Some(before), Some(etag)) => Mutation::Update {
            entity: content(before),
            mode: UpdateMode::Replace,
            condition: Condition::IfMatch(etag),
        },
        (UndoAction::Reinsert, Some(before), _) => Mutation::Insert(content(before)),
        _ => {
            return Err(UndoError::Refused(format!(
            "entry {} recorded no ETag for the entity it left, so undo cannot be made conditional",
            entry.id
        )))
        }
    };
    match write_inner(journal, client, &i.profile, &i.table, op, Some(&entry.id)).await {
        Ok((w, id)) => Ok(UndoOutcome::Reverted {
            entry: id,
            action,
            etag: w.etag,
        }),
        Err(JournalError::Table { source, entry: e })
            if matches!(source.status(), Some(412 | 409))
                || (source.is_not_found() && source.code() != Some("TableNotFound")) =>
        {
            // The ETag moved, the entity vanished, or someone recreated it: show what is there.
            match client
                .try_get_entity(&i.table, &i.partition_key, &i.row_key)
                .await
            {
                Ok(current) => Err(conflict(current)),
                Err(_) => Err(UndoError::Journal(JournalError::Table { source, entry: e })),
            }
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::{Account, ClientOptions, EdmValue};

    fn temp_journal() -> (tempfile::TempDir, Journal) {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("sub").join("journal.jsonl")).unwrap();
        (dir, j)
    }

    fn intent(op: WriteKind) -> Intent {
        let before = Entity::new("p", "r")
            .with("A", EdmValue::Int64(i64::MAX))
            .with("D", EdmValue::Double(0.1));
        Intent {
            profile: "prod".into(),
            account: "acct".into(),
            endpoint: "https://acct.table.core.windows.net".into(),
            table: "Orders".into(),
            partition_key: "p".into(),
            row_key: "r".into(),
            operation: op,
            condition: Some("W/\"datetime'2024'\"".into()),
            before: Some(Entity {
                etag: Some("W/\"datetime'2024'\"".into()),
                ..before.clone()
            }),
            after: Some(before.with("B", EdmValue::String("x\ny \"q\"".into()))),
            sent: None,
            undo_of: None,
        }
    }

    #[test]
    fn intent_and_outcome_fold_by_id_and_unknown_without_outcome() {
        let (_d, j) = temp_journal();
        let a = j.begin(&intent(WriteKind::Replace)).unwrap();
        let b = j.begin(&intent(WriteKind::Merge)).unwrap();
        let c = j.begin(&intent(WriteKind::Delete)).unwrap();
        j.finish(
            &a,
            &Outcome::Ok {
                etag: Some("e2".into()),
            },
        )
        .unwrap();
        j.finish(
            &c,
            &Outcome::Failed {
                status: Some(412),
                code: Some("UpdateConditionNotSatisfied".into()),
                message: "changed".into(),
            },
        )
        .unwrap();
        let entries = j.entries().unwrap();
        assert_eq!(
            entries.iter().map(|e| &e.id).collect::<Vec<_>>(),
            vec![&a, &b, &c]
        );
        assert_eq!(entries[0].outcome.etag(), Some("e2"));
        assert_eq!(entries[0].intent, intent(WriteKind::Replace));
        assert!(matches!(entries[1].outcome, Outcome::Unknown { .. }));
        assert_eq!(
            entries[2].outcome.label(),
            "failed 412 UpdateConditionNotSatisfied"
        );
        assert_eq!(entries[0].session, session_id());
        // Two lines per finished entry, one for the unfinished one; nothing rewritten.
        let text = std::fs::read_to_string(j.path()).unwrap();
        assert_eq!(text.lines().count(), 5);
        assert!(
            text.lines().all(|l| l.starts_with(r#"{"kind":""#)),
            "{text}"
        );
    }

    #[test]
    fn ids_are_sortable_and_unique_and_a_prefix_finds_one() {
        let (_d, j) = temp_journal();
        let ids: Vec<EntryId> = (0..50)
            .map(|_| j.begin(&intent(WriteKind::Insert)).unwrap())
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 50);
        assert_eq!(ids[0].0.len(), "20240101-120000123-abcd".len());
        // A unique prefix (the whole id minus nothing) works, a common one is ambiguous.
        assert_eq!(j.find(&ids[7].0).unwrap().id, ids[7]);
        let common = &ids[0].0[..8];
        assert!(matches!(
            j.find(common),
            Err(JournalError::Ambiguous { .. })
        ));
        assert!(matches!(j.find("1999"), Err(JournalError::NotFound { .. })));
        assert!(matches!(j.find(""), Err(JournalError::NotFound { .. })));
        let entries: Vec<Entry> = ids
            .iter()
            .map(|id| Entry {
                id: id.clone(),
                time: String::new(),
                session: String::new(),
                intent: intent(WriteKind::Insert),
                outcome: Outcome::Unknown {
                    message: String::new(),
                },
                outcome_time: None,
            })
            .collect();
        let unique = &ids[3].0[..ids[3].0.len() - 1];
        let hits = entries
            .iter()
            .filter(|e| e.id.0.starts_with(unique))
            .count();
        if hits == 1 {
            assert_eq!(find_in(entries, unique, j.path()).unwrap().id, ids[3]);
        }
    }

    #[test]
    fn rotation_moves_a_large_file_aside_and_readers_see_both() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let j = Journal::open_with_rotation(&path, 100).unwrap();
        let old = j.begin(&intent(WriteKind::Replace)).unwrap();
        let j = Journal::open_with_rotation(&path, 100).unwrap();
        assert!(j.rotated_path().exists());
        assert_eq!(j.rotated_path(), dir.path().join("journal.1.jsonl"));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        // The outcome lands in the new file and still folds onto the rotated intent.
        j.finish(&old, &Outcome::Ok { etag: None }).unwrap();
        let entries = j.entries().unwrap();
        assert_eq!(entries.len(), 1);
        assert!(matches!(entries[0].outcome, Outcome::Ok { .. }));
        // Under the threshold nothing moves.
        let j = Journal::open_with_rotation(&path, 1_000_000).unwrap();
        assert!(std::fs::metadata(j.path()).unwrap().len() > 0);
    }

    #[test]
    fn a_torn_line_is_skipped_and_does_not_swallow_the_next_record() {
        let (_d, j) = temp_journal();
        let a = j.begin(&intent(WriteKind::Replace)).unwrap();
        let mut f = OpenOptions::new().append(true).open(j.path()).unwrap();
        f.write_all(br#"{"kind":"intent","id":"torn"#).unwrap();
        drop(f);
        j.finish(&a, &Outcome::Ok { etag: None }).unwrap();
        let entries = j.entries().unwrap();
        assert_eq!(entries.len(), 1);
        assert!(matches!(entries[0].outcome, Outcome::Ok { .. }));
    }

    #[test]
    fn failures_are_classified_by_whether_the_write_may_have_happened() {
        let transport: Result<WriteOutcome, TableError> = Err(TableError::Transport {
            message: "reset".into(),
            timed_out: false,
        });
        assert!(matches!(Outcome::of(&transport), Outcome::Unknown { .. }));
        let svc = |status, code: &str| {
            Err(TableError::Service(crate::azure::ServiceError {
                status,
                code: Some(code.into()),
                message: String::new(),
                request_id: None,
            }))
        };
        assert!(matches!(
            Outcome::of(&svc(500, "OperationTimedOut")),
            Outcome::Unknown { .. }
        ));
        assert_eq!(
            Outcome::of(&svc(412, "UpdateConditionNotSatisfied")).label(),
            "failed 412 UpdateConditionNotSatisfied"
        );
    }

    #[test]
    fn merge_images_apply_the_sent_properties_to_the_before_image() {
        let before = Entity {
            etag: Some("e1".into()),
            ..Entity::new("p", "r")
                .with("A", EdmValue::Int32(1))
                .with("B", EdmValue::Int32(2))
        };
        let sent = Entity::new("p", "r")
            .with("B", EdmValue::Int32(3))
            .with("C", EdmValue::Boolean(true));
        let op = Mutation::Update {
            entity: sent.clone(),
            mode: UpdateMode::Merge,
            condition: Condition::Force,
        };
        let (after, s) = op.images(Some(&before));
        let after = after.unwrap();
        assert!(after.same_content(
            &Entity::new("p", "r")
                .with("A", EdmValue::Int32(1))
                .with("B", EdmValue::Int32(3))
                .with("C", EdmValue::Boolean(true))
        ));
        assert_eq!(after.etag, None);
        assert_eq!(s, Some(sent));
        assert_eq!(op.condition().as_deref(), Some("*"));
    }

    #[tokio::test]
    async fn no_secret_reaches_the_journal() {
        let (_d, j) = temp_journal();
        let key = "c2VjcmV0LWtleS12YWx1ZS1mb3ItdGVzdHMtb25seQ==";
        let sig = "SIGNATUREVALUE123";
        // Nothing listens on port 9: the write's answer is lost, the intent must be written.
        let with_key = format!(
            "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey={key};TableEndpoint=http://127.0.0.1:9/acct"
        );
        let with_sas = format!(
            "TableEndpoint=http://127.0.0.1:9/acct;SharedAccessSignature=sv=2019-02-02&ss=t&sig={sig}"
        );
        for cs in [with_key, with_sas] {
            let account = Account::from_connection_string(&cs).unwrap();
            let client = TableClient::new(
                account,
                ClientOptions {
                    retry: crate::azure::RetryPolicy {
                        max_attempts: 1,
                        ..crate::azure::RetryPolicy::default()
                    },
                    ..ClientOptions::default()
                },
            )
            .unwrap();
            // Reading the before-image fails first (nothing listens), so journal by hand too.
            let e = Entity::new("p", "r").with("A", EdmValue::Int32(1));
            let r =
                journaled_write(&j, &client, "prod", "Orders", Mutation::Insert(e.clone())).await;
            assert!(r.is_err());
            let id = j
                .begin(&Intent {
                    profile: "prod".into(),
                    account: client.account().name.clone(),
                    endpoint: format!("{}?sv=1&sig={sig}", client.account().endpoint),
                    table: "Orders".into(),
                    partition_key: "p".into(),
                    row_key: "r".into(),
                    operation: WriteKind::Insert,
                    condition: None,
                    before: None,
                    after: Some(e.clone()),
                    sent: None,
                    undo_of: None,
                })
                .unwrap();
            let result = client.insert("Orders", &e).await;
            j.finish(&id, &Outcome::of(&result)).unwrap();
        }
        let text = std::fs::read_to_string(j.path()).unwrap();
        assert!(text.contains("\"kind\":\"outcome\""), "{text}");
        assert!(!text.contains(key) && !text.contains(&key[..20]), "{text}");
        assert!(!text.contains("sig=") && !text.contains(sig), "{text}");
        let entries = j.entries().unwrap();
        assert!(entries
            .iter()
            .all(|e| e.intent.endpoint == "http://127.0.0.1:9/acct"));
        assert!(entries
            .iter()
            .all(|e| matches!(e.outcome, Outcome::Unknown { .. })));
    }

    #[test]
    fn the_folded_line_nests_images_and_the_outcome() {
        let (_d, j) = temp_journal();
        let id = j.begin(&intent(WriteKind::Replace)).unwrap();
        j.finish(
            &id,
            &Outcome::Ok {
                etag: Some("e2".into()),
            },
        )
        .unwrap();
        let line = j.find(&id.0).unwrap().to_json_line();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["operation"], "replace");
        assert_eq!(v["before"]["A@odata.type"], "Edm.Int64");
        assert_eq!(v["after"]["B"], "x\ny \"q\"");
        assert_eq!(v["outcome"]["result"], "ok");
        assert_eq!(v["outcome"]["etag"], "e2");
    }

    #[test]
    fn the_path_comes_from_the_env_then_the_config_then_the_data_dir() {
        let mut loaded = LoadedConfig {
            path: Some(PathBuf::from("/etc/tabletop/config.toml")),
            ..LoadedConfig::default()
        };
        let from = |env: Option<&str>, l: &LoadedConfig| {
            Journal::configured_path_from(env.map(Into::into), l)
        };
        let default = from(None, &loaded).unwrap();
        assert!(
            default.ends_with(Path::new("tabletop").join(FILE_NAME)),
            "{default:?}"
        );
        loaded.config.journal_path = Some(PathBuf::from("j/journal.jsonl"));
        assert_eq!(
            from(None, &loaded),
            Some(PathBuf::from("/etc/tabletop/j/journal.jsonl"))
        );
        loaded.config.journal_path = Some(PathBuf::from("/var/j.jsonl"));
        assert_eq!(from(None, &loaded), Some(PathBuf::from("/var/j.jsonl")));
        assert_eq!(from(Some(""), &loaded), Some(PathBuf::from("/var/j.jsonl")));
        assert_eq!(
            from(Some("/tmp/t.jsonl"), &loaded),
            Some(PathBuf::from("/tmp/t.jsonl"))
        );
    }

    #[test]
    fn an_unwritable_journal_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "x").unwrap();
        let err = Journal::open(blocker.join("journal.jsonl")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&blocker.display().to_string()), "{msg}");
        assert!(msg.contains(JOURNAL_ENV), "{msg}");
    }
}
