//! The scriptable commands: data on stdout (JSONL in the service's entity format, CSV or an
//! aligned table), messages on stderr, and an exit code that says what went wrong.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::azure::{
    Account, ClientOptions, Condition, EdmType, EdmValue, Entity, QuerySpec, RetryPolicy,
    SigningScheme, TableClient, TableError, UpdateMode,
};
use crate::config::{self, LoadedConfig, ProfileConfig};
use crate::journal::{self, Journal, JournalError, Mutation, Outcome, UndoError, UndoOutcome};

/// A terminal console and scriptable CLI for Azure Table Storage.
#[derive(Parser, Debug)]
#[command(name = "tabletop", version, about, long_about = None, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

const EXIT_CODES: &str = "Connection: --connection-string, else --profile, else $AZURE_STORAGE_CONNECTION_STRING, \
else the config's default_profile, else the local emulator (UseDevelopmentStorage=true).

Exit codes: 0 ok, 1 failed, 2 bad usage or input, 3 not found, 4 conflict (exists, or the ETag changed), 5 refused by read-only.";

#[derive(Args, Debug, Clone, Default)]
pub struct GlobalArgs {
    /// An Azure Storage or Cosmos DB for Table connection string (never printed).
    #[arg(long, global = true, value_name = "CS", conflicts_with = "profile")]
    pub connection_string: Option<String>,
    /// A profile from config.toml.
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// Refuse every write before it is sent.
    #[arg(long, global = true)]
    pub read_only: bool,
    /// The config file (default: the platform config dir's tabletop/config.toml, or $TABLETOP_CONFIG).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The console's theme: dark, light, high-contrast, ansi16, or one of yours.
    #[arg(long, global = true, value_name = "NAME")]
    pub theme: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start a local Azurite with sample data and open the console on it (stopped on exit).
    Demo,
    /// List tables, one per line; or create / delete one.
    Tables {
        #[command(subcommand)]
        action: Option<TablesAction>,
    },
    /// Query entities (follows continuation tokens until the end or --top).
    Query(QueryArgs),
    /// Read one entity by its keys.
    Get {
        table: String,
        partition_key: String,
        row_key: String,
    },
    /// Insert entities (fails if the keys exist).
    Insert(WriteArgs),
    /// Replace entities, conditional on their odata.etag (or --if-match); removes properties not given.
    Replace(ConditionalWriteArgs),
    /// Merge properties into entities, conditional on their odata.etag (or --if-match).
    Merge(ConditionalWriteArgs),
    /// Insert-or-merge (or insert-or-replace with --replace): unconditional by design.
    Upsert {
        #[command(flatten)]
        write: WriteArgs,
        /// Insert-or-replace instead of insert-or-merge.
        #[arg(long)]
        replace: bool,
    },
    /// Delete one entity, conditional on --if-match, or unconditionally with --force.
    Delete {
        table: String,
        partition_key: String,
        row_key: String,
        #[command(flatten)]
        condition: ConditionArgs,
    },
    /// List recent writes from the local journal (newest first), show one, or undo one.
    Journal(JournalArgs),
    /// Run a monitoring proxy in front of a Table endpoint: point an application's TableEndpoint at it.
    Proxy(ProxyArgs),
    /// The seeds' partition stress test: ramp concurrent writers on one partition (or N) in a
    /// throwaway table and report the knee, where throttling starts. Removes its table.
    Stress(StressArgs),
}

#[derive(Args, Debug, Clone)]
pub struct StressArgs {
    /// Partitions written at once (workers are spread over them).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub partitions: usize,
    /// Concurrent writers per step, comma-separated.
    #[arg(
        long,
        value_name = "C,C,…",
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64"
    )]
    pub steps: Vec<usize>,
    /// Seconds per step (the first second of each is warm-up, excluded from its rates).
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    pub step_secs: f64,
    /// Throttled % above which a step is past the knee.
    #[arg(long, value_name = "P", default_value_t = 5.0)]
    pub threshold_pct: f64,
    /// Stop after this many requests in all.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub max_requests: u64,
    /// Stop after this many seconds in all.
    #[arg(long, value_name = "S", default_value_t = 600)]
    pub max_secs: u64,
    /// Size of each entity's payload in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub entity_bytes: usize,
    /// Entities per request: 1 writes single entities, more sends batches (up to 100).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub batch: usize,
    /// Leave the test table in place at the end.
    #[arg(long)]
    pub keep_table: bool,
}

impl StressArgs {
    /// The engine's settings; the partition target comes from the config's targets.
    pub fn config(&self, partition_target: f64) -> Result<crate::stress::StressConfig, Failure> {
        if !(self.step_secs.is_finite() && (0.5..=3600.0).contains(&self.step_secs)) {
            return Err(Failure::usage("--step-secs must be from 0.5 to 3600"));
        }
        let config = crate::stress::StressConfig {
            partitions: self.partitions,
            steps: self.steps.clone(),
            step_duration: std::time::Duration::from_secs_f64(self.step_secs),
            threshold_pct: self.threshold_pct,
            max_requests: self.max_requests,
            max_duration: std::time::Duration::from_secs(self.max_secs),
            entity_bytes: self.entity_bytes,
            batch_size: self.batch,
            keep_table: self.keep_table,
            partition_target,
            ..crate::stress::StressConfig::default()
        };
        config.check().map_err(|e| Failure::usage(e.to_string()))?;
        Ok(config)
    }
}

#[derive(Args, Debug, Clone)]
pub struct ProxyArgs {
    /// Address to listen on (keep it on loopback unless others must reach it).
    #[arg(long, value_name = "ADDR", default_value = crate::proxy::DEFAULT_LISTEN)]
    pub listen: std::net::SocketAddr,
    /// The service to forward to: the emulator, or https://ACCOUNT.table.core.windows.net.
    #[arg(long, value_name = "URL", default_value = crate::proxy::DEFAULT_UPSTREAM)]
    pub upstream: String,
    /// Simulate the service's per-partition limit: 503 ServerBusy beyond N entities/s per partition.
    #[arg(long, value_name = "ENTITIES_PER_S")]
    pub throttle: Option<f64>,
    /// Print a summary line per interval instead of opening the dashboard.
    #[arg(long)]
    pub headless: bool,
    /// Seconds between summary lines.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub interval_secs: u64,
}

#[derive(Args, Debug)]
pub struct JournalArgs {
    #[command(subcommand)]
    pub action: Option<JournalAction>,
    /// List at most N entries.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
    /// Only entries for this table.
    #[arg(long, value_name = "TABLE")]
    pub table: Option<String>,
    /// text: one line per entry; jsonl: the folded records (intent with its outcome).
    #[arg(long, value_enum, default_value_t = JournalFormat::Text)]
    pub format: JournalFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum JournalFormat {
    Text,
    Jsonl,
}

#[derive(Subcommand, Debug)]
pub enum JournalAction {
    /// Print one entry in full: before-image, intended after-image, condition, outcome.
    Show {
        /// The entry's id, or a unique prefix of it.
        id: String,
    },
    /// Revert one entry, conditional on the ETag it produced (without --yes: say what it would do).
    Undo {
        /// The entry's id, or a unique prefix of it.
        id: String,
        /// Do it (otherwise print the plan and exit 2).
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum TablesAction {
    /// Create a table.
    Create { name: String },
    /// Delete a table and all its entities.
    Delete {
        name: String,
        /// Confirm the deletion (required).
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    pub table: String,
    /// OData filter, e.g. "PartitionKey eq 'EU' and Amount gt 100L".
    #[arg(long)]
    pub filter: Option<String>,
    /// Properties to return, comma-separated (PartitionKey and RowKey are always included).
    #[arg(long, value_delimiter = ',')]
    pub select: Option<Vec<String>>,
    /// Stop after N entities in total.
    #[arg(long, value_name = "N")]
    pub top: Option<u64>,
    /// Entities per request, 1..=1000 (default: the config's page_size).
    #[arg(long, value_name = "N")]
    pub page_size: Option<u32>,
    /// Output format. csv and table read every page before printing; jsonl streams.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Jsonl,
    Csv,
    Table,
}

#[derive(Args, Debug)]
pub struct WriteArgs {
    pub table: String,
    /// One entity as JSON, or '-' (the default) to read one or more from stdin (JSONL or concatenated JSON).
    #[arg(value_name = "JSON | -")]
    pub json: Option<String>,
}

#[derive(Args, Debug, Default)]
pub struct ConditionArgs {
    /// Only if the entity still has this ETag.
    #[arg(long, value_name = "ETAG", conflicts_with = "force")]
    pub if_match: Option<String>,
    /// Write unconditionally (If-Match: *), overwriting whatever changed meanwhile.
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug)]
pub struct ConditionalWriteArgs {
    #[command(flatten)]
    pub write: WriteArgs,
    #[command(flatten)]
    pub condition: ConditionArgs,
}

/// A failure with its exit code; the message is already user-facing.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
    /// The service rejected the credentials (worth checking the profile's other key).
    pub auth_failure: bool,
}

impl Failure {
    pub fn with_code(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            auth_failure: false,
        }
    }

    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
            auth_failure: false,
        }
    }

    pub fn from_table_error(e: &TableError) -> Failure {
        let code = match e {
            TableError::Invalid(_) | TableError::Connection(_) | TableError::NeedsCondition(_) => 2,
            TableError::ReadOnly { .. } => 5,
            TableError::Service(s) if s.status == 404 => 3,
            TableError::Service(s) if s.status == 409 || s.status == 412 => 4,
            _ => 1,
        };
        Failure {
            code,
            message: e.to_string(),
            auth_failure: e.service().is_some_and(|s| s.is_auth_failure()),
        }
    }
}

impl From<TableError> for Failure {
    fn from(e: TableError) -> Failure {
        Failure::from_table_error(&e)
    }
}

/// Everything needed to talk to one account.
pub struct Session {
    pub client: TableClient,
    pub profile_name: Option<String>,
    pub profile: Option<ProfileConfig>,
    pub config: LoadedConfig,
    /// Where the connection came from, as the journal records it: the profile name, or
    /// "command line", "environment", "local emulator".
    pub source: String,
}

/// Resolves the connection: flag, profile, environment, default profile, local emulator.
pub fn connect(global: &GlobalArgs) -> Result<Session, Failure> {
    connect_loaded(global, load_config(global)?)
}

fn load_config(global: &GlobalArgs) -> Result<LoadedConfig, Failure> {
    let loaded =
        config::load(global.config.as_deref()).map_err(|e| Failure::usage(e.to_string()))?;
    for w in &loaded.warnings {
        eprintln!("tabletop: warning: {w}");
    }
    Ok(loaded)
}

fn connect_loaded(global: &GlobalArgs, loaded: LoadedConfig) -> Result<Session, Failure> {
    let cfg = &loaded.config;
    let mut profile_name = None;
    let mut profile = None;
    let mut source = journal::PROFILE_LOCAL_EMULATOR.to_string();
    let account = if let Some(cs) = &global.connection_string {
        source = journal::PROFILE_COMMAND_LINE.to_string();
        Account::from_connection_string(cs).map_err(|e| Failure::usage(e.to_string()))?
    } else if let Some(name) = &global.profile {
        let p = cfg.profiles.get(name).ok_or_else(|| {
            let known: Vec<&str> = cfg.profiles.keys().map(String::as_str).collect();
            Failure::usage(format!(
                "no profile '{name}' in {} (known: {})",
                loaded
                    .path
                    .as_ref()
                    .map_or("the config".to_string(), |p| p.display().to_string()),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ))
        })?;
        profile_name = Some(name.clone());
        profile = Some(p.clone());
        source = name.clone();
        profile_account(name, p)?
    } else if let Some(env) = Account::from_env() {
        source = journal::PROFILE_ENVIRONMENT.to_string();
        env.map_err(|e| Failure::usage(format!("AZURE_STORAGE_CONNECTION_STRING: {e}")))?
    } else if let Some(name) = &cfg.default_profile {
        let p = cfg.profiles.get(name).ok_or_else(|| {
            Failure::usage(format!(
                "default_profile '{name}' is not defined under [profiles]"
            ))
        })?;
        profile_name = Some(name.clone());
        profile = Some(p.clone());
        source = name.clone();
        profile_account(name, p)?
    } else {
        Account::development()
    };
    let read_only = global.read_only || profile.as_ref().is_some_and(|p| p.read_only);
    let client = TableClient::new(
        account,
        ClientOptions {
            retry: retry_policy(&cfg.retry),
            read_only,
            ..ClientOptions::default()
        },
    )?;
    Ok(Session {
        client,
        profile_name,
        profile,
        config: loaded,
        source,
    })
}

impl Session {
    /// The journal every write goes through, opened once per run. Read-only refuses first (exit
    /// 5); a journal that cannot be opened refuses every write: nothing is sent unjournaled.
    pub fn journal_for_writes(&self, operation: &'static str) -> Result<Journal, Failure> {
        if self.client.is_read_only() {
            return Err(TableError::ReadOnly { operation }.into());
        }
        let path = Journal::configured_path(&self.config).ok_or_else(|| {
            Failure::with_code(
                1,
                format!(
                    "refusing to {operation}: no data directory for the journal on this system; set ${} or journal_path in the config",
                    journal::JOURNAL_ENV
                ),
            )
        })?;
        Journal::open(path).map_err(|e| {
            Failure::with_code(1, format!("refusing to {operation} without a journal: {e}"))
        })
    }
}

/// The exit code and message of a journaled write's failure.
pub fn journal_failure(e: &JournalError) -> Failure {
    match e {
        JournalError::Table { source, .. } => Failure::from_table_error(source),
        JournalError::Io { .. } => Failure::with_code(1, format!("{e}; nothing was sent")),
        JournalError::NotFound { .. } => Failure::with_code(3, e.to_string()),
        JournalError::Ambiguous { .. } => Failure::usage(e.to_string()),
        JournalError::OutcomeNotRecorded { .. } => Failure::with_code(1, e.to_string()),
    }
}

pub fn retry_policy(r: &config::RetrySettings) -> RetryPolicy {
    use std::time::Duration;
    RetryPolicy {
        max_attempts: r.max_attempts,
        base_delay: Duration::from_millis(r.base_delay_ms),
        min_delay: Duration::from_millis(r.min_delay_ms),
        max_delay: Duration::from_millis(r.max_delay_ms),
        attempt_timeout: Duration::from_millis(r.attempt_timeout_ms),
    }
}

pub fn profile_account(name: &str, p: &ProfileConfig) -> Result<Account, Failure> {
    let cs = p
        .connection_string(name)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let account = Account::from_connection_string(cs.expose())
        .map_err(|e| Failure::usage(format!("profile '{name}': {e}")))?;
    Ok(account.with_scheme(match p.signing {
        config::Signing::SharedKeyLite => SigningScheme::SharedKeyLite,
        config::Signing::SharedKey => SigningScheme::SharedKey,
    }))
}

/// After an authentication failure, says whether the profile's other key works.
pub async fn diagnose_auth(session: &Session) -> Option<String> {
    let (name, profile) = (session.profile_name.as_ref()?, session.profile.as_ref()?);
    let secondary = profile.secondary_connection_string(name).ok()??;
    let account = Account::from_connection_string(secondary.expose()).ok()?;
    let other = session.client.with_account(account).ok()?;
    Some(match other.probe().await {
        Ok(()) => format!(
            "profile '{name}': the secondary key works but the primary key was rejected; the primary was probably rotated: update it, or swap the keys in the profile"
        ),
        Err(e) if e.service().is_some_and(|s| s.is_auth_failure()) => {
            format!("profile '{name}': the secondary key is rejected too; check the account name and this machine's clock")
        }
        Err(e) => format!("profile '{name}': could not check the secondary key: {e}"),
    })
}

/// Writes to stdout, treating a closed pipe (`| head`) as a normal end.
pub struct Out {
    inner: io::BufWriter<io::Stdout>,
}

impl Out {
    pub fn new() -> Out {
        Out {
            inner: io::BufWriter::with_capacity(64 * 1024, io::stdout()),
        }
    }

    pub fn line(&mut self, text: &str) -> Result<(), Failure> {
        writeln!(self.inner, "{text}").map_err(pipe_failure)
    }

    pub fn flush(&mut self) -> Result<(), Failure> {
        self.inner.flush().map_err(pipe_failure)
    }
}

impl Default for Out {
    fn default() -> Self {
        Out::new()
    }
}

fn pipe_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Failure::with_code(0, String::new())
    } else {
        Failure::with_code(1, format!("cannot write to stdout: {e}"))
    }
}

pub async fn run(command: Command, session: &Session) -> Result<(), Failure> {
    let client = &session.client;
    let mut out = Out::new();
    match command {
        Command::Demo => {
            return Err(Failure::usage(
                "demo opens the console; run it from a terminal",
            ))
        }
        Command::Proxy(_) => {
            return Err(Failure::usage(
                "proxy needs no connection; it is run by the binary's run_proxy",
            ))
        }
        Command::Stress(args) => {
            // Without a signal to stop on, the test runs to its own bounds.
            stress(args, session, std::future::pending()).await?
        }
        Command::Tables { action: None } => {
            let mut next: Option<String> = None;
            loop {
                let page = client.list_tables_page(None, None, next.as_deref()).await?;
                for name in &page.names {
                    out.line(name)?;
                }
                match page.next_table_name {
                    Some(n) => next = Some(n),
                    None => break,
                }
            }
        }
        Command::Tables {
            action: Some(TablesAction::Create { name }),
        } => {
            client.create_table(&name).await?;
            eprintln!("tabletop: created table {name}");
        }
        Command::Tables {
            action: Some(TablesAction::Delete { name, yes }),
        } => {
            if !yes {
                return Err(Failure::usage(format!(
                    "deleting table {name} removes all its entities; add --yes to confirm"
                )));
            }
            client.delete_table(&name).await?;
            eprintln!("tabletop: deleted table {name}");
        }
        Command::Query(args) => {
            query(client, args, session.config.config.page_size, &mut out).await?
        }
        Command::Get {
            table,
            partition_key,
            row_key,
        } => {
            let e = client.get_entity(&table, &partition_key, &row_key).await?;
            out.line(&e.to_json_line())?;
        }
        Command::Insert(w) => {
            let entities = read_entities(&w)?;
            let journal = session.journal_for_writes("insert")?;
            for entity in entities {
                let (outcome, _) = journal::journaled_write(
                    &journal,
                    client,
                    &session.source,
                    &w.table,
                    Mutation::Insert(entity.clone()),
                )
                .await
                .map_err(|e| journal_failure(&e))?;
                report_write(&mut out, &entity, &outcome)?;
            }
        }
        Command::Replace(args) => {
            conditional_write(session, args, UpdateMode::Replace, &mut out).await?
        }
        Command::Merge(args) => {
            conditional_write(session, args, UpdateMode::Merge, &mut out).await?
        }
        Command::Upsert { write, replace } => {
            let mode = if replace {
                UpdateMode::Replace
            } else {
                UpdateMode::Merge
            };
            let entities = read_entities(&write)?;
            let journal = session.journal_for_writes("upsert")?;
            for entity in entities {
                let (outcome, _) = journal::journaled_write(
                    &journal,
                    client,
                    &session.source,
                    &write.table,
                    Mutation::Upsert {
                        entity: entity.clone(),
                        mode,
                    },
                )
                .await
                .map_err(|e| journal_failure(&e))?;
                report_write(&mut out, &entity, &outcome)?;
            }
        }
        Command::Delete {
            table,
            partition_key,
            row_key,
            condition,
        } => {
            let cond = match (condition.if_match, condition.force) {
                (Some(etag), _) => Condition::IfMatch(etag),
                (None, true) => Condition::Force,
                (None, false) => {
                    return Err(Failure::usage(
                        "delete needs a condition: pass --if-match ETAG (the odata.etag printed by `tabletop get`) \
                         to delete only the version you saw, or --force to delete whatever is there",
                    ))
                }
            };
            let journal = session.journal_for_writes("delete")?;
            let (outcome, _) = journal::journaled_write(
                &journal,
                client,
                &session.source,
                &table,
                Mutation::Delete {
                    partition_key: partition_key.clone(),
                    row_key: row_key.clone(),
                    condition: cond,
                },
            )
            .await
            .map_err(|e| journal_failure(&e))?;
            if let Some(note) = outcome.note() {
                eprintln!("tabletop: note: {note}");
            }
            eprintln!("tabletop: deleted {partition_key} / {row_key}");
        }
        Command::Journal(_) => {
            return Err(Failure::usage(
                "journal is handled before connecting; run it as `tabletop journal`",
            ))
        }
    }
    out.flush()
}

/// `tabletop stress`: each step's line on stdout as it completes, then the knee and why it
/// stopped; progress on stderr. `stop` (Ctrl-C, SIGTERM) cancels the test, which still removes
/// its table; a cancelled test prints what it measured and exits 1.
pub async fn stress(
    args: StressArgs,
    session: &Session,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), Failure> {
    use crate::stress::{self, StopReason};
    use tokio_util::sync::CancellationToken;

    // Refused before anything is created (the engine checks too).
    if session.client.is_read_only() {
        return Err(TableError::ReadOnly {
            operation: "stress test",
        }
        .into());
    }
    let config = args.config(f64::from(
        session.config.config.targets.partition_entities_per_s,
    ))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let engine = stress::run(&session.client, config, tx, cancel.clone());
    tokio::pin!(engine);
    tokio::pin!(stop);
    let mut out = Out::new();
    let mut stopping = false;
    let mut progress_shown = false;
    let result = loop {
        tokio::select! {
            r = &mut engine => break r,
            _ = &mut stop, if !stopping => {
                stopping = true;
                eprintln!("\ntabletop stress: stopping; removing the test table…");
                cancel.cancel();
            }
            Some(event) = rx.recv() => show_stress_event(event, &mut out, &mut progress_shown)?,
        }
    };
    // The last step's line may still be queued when the engine returns.
    while let Ok(event) = rx.try_recv() {
        show_stress_event(event, &mut out, &mut progress_shown)?;
    }
    if progress_shown {
        eprint!("\r\x1b[2K");
    }
    let report = result.map_err(|e| match e {
        stress::StressError::Config(m) => Failure::usage(m),
        stress::StressError::ReadOnly => Failure::with_code(5, e.to_string()),
        other => Failure::with_code(1, other.to_string()),
    })?;
    out.line(&report.summary())?;
    out.flush()?;
    if let Some(e) = &report.cleanup_error {
        return Err(Failure::with_code(
            1,
            format!("table {}: {e}", report.table),
        ));
    }
    if report.stopped == StopReason::Cancelled {
        return Err(Failure::with_code(1, "stress test cancelled"));
    }
    Ok(())
}

/// One engine event on the terminal: lines on stdout, the live progress line on stderr.
fn show_stress_event(
    event: crate::stress::StressEvent,
    out: &mut Out,
    progress_shown: &mut bool,
) -> Result<(), Failure> {
    use crate::stress::{self, StressEvent};
    match event {
        StressEvent::Started {
            table,
            partitions,
            steps,
            step_duration,
            warm_up,
            ..
        } => {
            eprintln!(
                "tabletop stress: {} steps of {:.1} s on table {table}; Ctrl-C stops and removes it",
                steps.len(),
                step_duration.as_secs_f64()
            );
            out.line(&stress::heading(&table, partitions, warm_up))?;
            out.line(stress::StepResult::header())?;
            out.flush()?;
        }
        // A live line only on a terminal: in a log it would be noise.
        StressEvent::Progress(p) if io::IsTerminal::is_terminal(&io::stderr()) => {
            eprint!(
                "\r\x1b[2Kstep {} · concurrency {} · {:.1}/{:.1} s · {:.0} ok entities/s · {} throttled",
                p.step,
                p.concurrency,
                p.elapsed.as_secs_f64(),
                p.step_duration.as_secs_f64(),
                p.rate(),
                p.throttled_so_far
            );
            *progress_shown = true;
        }
        StressEvent::Step(s) => {
            if *progress_shown {
                eprint!("\r\x1b[2K");
                *progress_shown = false;
            }
            out.line(&s.line())?;
            out.flush()?;
        }
        StressEvent::Progress(_) | StressEvent::Finished(_) | StressEvent::Failed(_) => {}
    }
    Ok(())
}

fn report_write(
    out: &mut Out,
    entity: &Entity,
    outcome: &crate::azure::WriteOutcome,
) -> Result<(), Failure> {
    if let Some(note) = outcome.note() {
        eprintln!(
            "tabletop: note: {} / {}: {note}",
            entity.partition_key, entity.row_key
        );
    }
    let keys = Entity {
        etag: outcome.etag.clone(),
        ..Entity::new(entity.partition_key.clone(), entity.row_key.clone())
    };
    out.line(&keys.to_json_line())
}

async fn conditional_write(
    session: &Session,
    args: ConditionalWriteArgs,
    mode: UpdateMode,
    out: &mut Out,
) -> Result<(), Failure> {
    let verb = if mode == UpdateMode::Replace {
        "replace"
    } else {
        "merge"
    };
    let entities = read_entities(&args.write)?;
    if args.condition.if_match.is_some() && entities.len() > 1 {
        return Err(Failure::usage(format!(
            "--if-match names one ETag but {} entities were given; let each line carry its own odata.etag",
            entities.len()
        )));
    }
    let mut journal = None;
    for entity in entities {
        let condition = match (&args.condition.if_match, args.condition.force, &entity.etag) {
            (Some(etag), _, _) => Condition::IfMatch(etag.clone()),
            (None, true, _) => Condition::Force,
            (None, false, Some(etag)) => Condition::IfMatch(etag.clone()),
            (None, false, None) => {
                return Err(Failure::usage(format!(
                    "{verb} of {} / {} needs a condition: the JSON has no odata.etag. Feed a line printed by \
                     `tabletop get` or `query` (it carries odata.etag), pass --if-match ETAG, or --force to overwrite \
                     whatever is there",
                    entity.partition_key, entity.row_key
                )))
            }
        };
        let journal = match &journal {
            Some(j) => j,
            None => journal.insert(session.journal_for_writes(verb)?),
        };
        let (outcome, _) = journal::journaled_write(
            journal,
            &session.client,
            &session.source,
            &args.write.table,
            Mutation::Update {
                entity: entity.clone(),
                mode,
                condition,
            },
        )
        .await
        .map_err(|e| {
            let mut f = journal_failure(&e);
            if e.table_error().is_some_and(TableError::is_precondition_failed) {
                f.message.push_str(&format!(
                    "\nhint: run `tabletop get {} '{}' '{}'` to see the current version, re-apply your change to it, and {verb} again",
                    args.write.table, entity.partition_key, entity.row_key
                ));
            }
            f
        })?;
        report_write(out, &entity, &outcome)?;
    }
    Ok(())
}

fn read_entities(w: &WriteArgs) -> Result<Vec<Entity>, Failure> {
    let text = match w.json.as_deref() {
        Some("-") | None => {
            let mut s = String::new();
            io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| Failure::usage(format!("cannot read stdin: {e}")))?;
            s
        }
        Some(json) => json.to_string(),
    };
    let parsed = crate::azure::edm::parse_entities(&text);
    if parsed.is_empty() {
        return Err(Failure::usage(
            "no entity given: pass JSON as an argument or on stdin",
        ));
    }
    parsed
        .into_iter()
        .map(|r| r.map_err(Failure::usage))
        .collect()
}

async fn query(
    client: &TableClient,
    args: QueryArgs,
    default_page_size: u32,
    out: &mut Out,
) -> Result<(), Failure> {
    if let Some(f) = &args.filter {
        crate::azure::filter::parse(f).map_err(|e| Failure::usage(e.to_string()))?;
    }
    let spec = QuerySpec {
        filter: args.filter.clone(),
        select: args.select.clone(),
        page_size: Some(args.page_size.unwrap_or(default_page_size)),
    };
    if args.top == Some(0) {
        return Ok(());
    }
    let mut stream = client.query_stream(&args.table, spec, None, args.top);
    let mut rows: Vec<Entity> = Vec::new();
    while let Some(page) = stream.next_page().await {
        let page = page?;
        match args.format {
            Format::Jsonl => {
                for e in &page.entities {
                    out.line(&e.to_json_line())?;
                }
            }
            Format::Csv | Format::Table => rows.extend(page.entities),
        }
    }
    match args.format {
        Format::Jsonl => Ok(()),
        Format::Csv => write_csv(&rows, out),
        Format::Table => write_table(&rows, out),
    }
}

/// Property columns in first-seen order with their type (the first type seen wins the header).
fn columns(rows: &[Entity]) -> Vec<(String, EdmType)> {
    let mut cols: Vec<(String, EdmType)> = Vec::new();
    for e in rows {
        for p in &e.properties {
            if !cols.iter().any(|(n, _)| *n == p.name) {
                cols.push((p.name.clone(), p.value.edm_type()));
            }
        }
    }
    cols
}

/// Typed CSV in Storage Explorer's layout: each property column followed by `Name@type`.
fn write_csv(rows: &[Entity], out: &mut Out) -> Result<(), Failure> {
    let cols = columns(rows);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec![
        "PartitionKey".to_string(),
        "RowKey".to_string(),
        "Timestamp".to_string(),
    ];
    for (name, _) in &cols {
        header.push(name.clone());
        header.push(format!("{name}@type"));
    }
    let csv_err = |e: csv::Error| Failure::with_code(1, format!("csv: {e}"));
    w.write_record(&header).map_err(csv_err)?;
    for e in rows {
        let mut rec = vec![
            e.partition_key.clone(),
            e.row_key.clone(),
            e.timestamp.map(|t| t.to_string()).unwrap_or_default(),
        ];
        for (name, _) in &cols {
            match e.get(name) {
                Some(v) => {
                    rec.push(v.to_text());
                    rec.push(v.edm_type().odata_name().to_string());
                }
                None => {
                    rec.push(String::new());
                    rec.push(String::new());
                }
            }
        }
        w.write_record(&rec).map_err(csv_err)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| Failure::with_code(1, format!("csv: {e}")))?;
    out.line(String::from_utf8_lossy(&bytes).trim_end_matches('\n'))
}

/// An aligned table for people: one column per property, `Name:type` headers for non-strings.
fn write_table(rows: &[Entity], out: &mut Out) -> Result<(), Failure> {
    const MAX_WIDTH: usize = 40;
    let cols = columns(rows);
    let mut header = vec![
        "PartitionKey".to_string(),
        "RowKey".to_string(),
        "Timestamp".to_string(),
    ];
    header.extend(cols.iter().map(|(n, t)| match t {
        EdmType::String => n.clone(),
        t => format!("{n}:{}", t.short_name()),
    }));
    let cell = |v: Option<&EdmValue>| -> String {
        match v {
            None => "·".to_string(),
            Some(EdmValue::Binary(b)) => format!("<{} bytes>", b.len()),
            Some(v) => v.to_text().replace(['\n', '\r', '\t'], " "),
        }
    };
    let mut table: Vec<Vec<String>> = vec![header];
    for e in rows {
        let mut r = vec![
            e.partition_key.clone(),
            e.row_key.clone(),
            e.timestamp.map(|t| t.to_string()).unwrap_or_default(),
        ];
        r.extend(cols.iter().map(|(n, _)| cell(e.get(n))));
        table.push(r);
    }
    let widths: Vec<usize> = (0..table[0].len())
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count().min(MAX_WIDTH))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in &table {
        let mut line = String::new();
        for (i, v) in r.iter().enumerate() {
            let shown: String = if v.chars().count() > MAX_WIDTH {
                v.chars()
                    .take(MAX_WIDTH - 1)
                    .chain(std::iter::once('…'))
                    .collect()
            } else {
                v.clone()
            };
            let pad = widths[i].saturating_sub(shown.chars().count());
            line.push_str(&shown);
            if i + 1 < r.len() {
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        out.line(line.trim_end())?;
    }
    Ok(())
}

// ---- journal ----------------------------------------------------------------------------------

/// `tabletop journal [show ID | undo ID]`: reads the journal; only undo connects.
pub async fn journal(args: JournalArgs, global: &GlobalArgs) -> Result<(), Failure> {
    let loaded = load_config(global)?;
    let path = Journal::configured_path(&loaded).ok_or_else(|| {
        Failure::with_code(
            1,
            format!(
                "no data directory for the journal on this system; set ${} or journal_path in the config",
                journal::JOURNAL_ENV
            ),
        )
    })?;
    let reader = Journal::for_reading(&path);
    let mut out = Out::new();
    match args.action {
        None => list_journal(&reader, &args, &mut out)?,
        Some(JournalAction::Show { id }) => {
            let entry = reader.find(&id).map_err(|e| journal_failure(&e))?;
            let entries = reader.entries().map_err(|e| journal_failure(&e))?;
            show_entry(&entry, &entries, &mut out)?;
        }
        Some(JournalAction::Undo { id, yes }) => {
            let entry = reader.find(&id).map_err(|e| journal_failure(&e))?;
            undo_entry(&reader, &entry, yes, global, loaded, &mut out).await?;
        }
    }
    out.flush()
}

fn list_journal(reader: &Journal, args: &JournalArgs, out: &mut Out) -> Result<(), Failure> {
    let entries = reader.entries().map_err(|e| journal_failure(&e))?;
    let shown: Vec<&journal::Entry> = entries
        .iter()
        .rev()
        .filter(|e| args.table.as_ref().is_none_or(|t| e.intent.table == *t))
        .take(args.limit)
        .collect();
    if args.format == JournalFormat::Jsonl {
        for e in shown {
            out.line(&e.to_json_line())?;
        }
        return Ok(());
    }
    if shown.is_empty() {
        eprintln!(
            "tabletop: no journal entries in {}",
            reader.path().display()
        );
        return Ok(());
    }
    let mut rows: Vec<Vec<String>> = vec![[
        "ID",
        "TIME",
        "PROFILE",
        "TABLE",
        "KEYS",
        "OPERATION",
        "OUTCOME",
        "ETAG",
    ]
    .map(String::from)
    .to_vec()];
    for e in shown {
        let i = &e.intent;
        let mut operation = i.operation.to_string();
        if let Some(of) = &i.undo_of {
            operation.push_str(&format!(" (undo of {of})"));
        }
        let mut outcome = e.outcome.label();
        if let Some(by) = journal::undone_by(&entries, &e.id) {
            outcome.push_str(&format!(", undone by {}", by.id));
        }
        rows.push(vec![
            e.id.to_string(),
            short_time(&e.time),
            i.profile.clone(),
            i.table.clone(),
            clip(&format!("{} / {}", i.partition_key, i.row_key), 40),
            operation,
            outcome,
            e.outcome.etag().unwrap_or("").to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        out.line(line.join("  ").trim_end())?;
    }
    Ok(())
}

/// `2026-11-02T10:01:03.123456Z` → `2026-11-02 10:01:03Z`.
fn short_time(rfc3339: &str) -> String {
    match rfc3339.get(..19) {
        Some(head) => format!("{}Z", head.replace('T', " ")),
        None => rfc3339.to_string(),
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.replace(['\n', '\r', '\t'], " ");
    }
    let head: String = s.chars().take(max - 1).collect();
    format!("{}…", head.replace(['\n', '\r', '\t'], " "))
}

fn image_text(e: Option<&Entity>, absent: &str) -> String {
    e.map_or_else(|| absent.to_string(), Entity::to_json_line)
}

fn show_entry(
    e: &journal::Entry,
    entries: &[journal::Entry],
    out: &mut Out,
) -> Result<(), Failure> {
    let i = &e.intent;
    let field = |out: &mut Out, name: &str, value: &str| out.line(&format!("{name:<11} {value}"));
    field(out, "id:", e.id.as_str())?;
    field(out, "time:", &e.time)?;
    field(out, "session:", &e.session)?;
    field(out, "profile:", &i.profile)?;
    field(out, "account:", &format!("{} at {}", i.account, i.endpoint))?;
    field(out, "table:", &i.table)?;
    field(
        out,
        "keys:",
        &format!("{} / {}", i.partition_key, i.row_key),
    )?;
    field(out, "operation:", i.operation.name())?;
    field(
        out,
        "condition:",
        &i.condition
            .as_ref()
            .map_or("none (no If-Match)".to_string(), |c| {
                format!("If-Match {c}")
            }),
    )?;
    let outcome = match &e.outcome {
        Outcome::Ok { .. } => "ok".to_string(),
        Outcome::Failed { message, .. } => format!("{}: {message}", e.outcome.label()),
        Outcome::Unknown { message } => format!("unknown: {message}"),
    };
    field(out, "outcome:", &outcome)?;
    if let Some(t) = &e.outcome_time {
        field(out, "answered:", t)?;
    }
    if let Some(etag) = e.outcome.etag() {
        field(out, "new etag:", etag)?;
    }
    if let Some(of) = &i.undo_of {
        field(out, "undo of:", of.as_str())?;
    }
    if let Some(by) = journal::undone_by(entries, &e.id) {
        field(out, "undone by:", by.id.as_str())?;
    }
    field(
        out,
        "before:",
        &image_text(i.before.as_ref(), "(did not exist)"),
    )?;
    field(out, "after:", &image_text(i.after.as_ref(), "(deleted)"))?;
    if let Some(sent) = &i.sent {
        field(out, "sent:", &sent.to_json_line())?;
    }
    Ok(())
}

/// Connects to the account of `entry`: the given --connection-string / --profile, else the
/// entry's own profile; refuses another account.
fn connect_for_entry(
    global: &GlobalArgs,
    loaded: LoadedConfig,
    entry: &journal::Entry,
) -> Result<Session, Failure> {
    let i = &entry.intent;
    let mut global = global.clone();
    if global.connection_string.is_none() && global.profile.is_none() {
        match i.profile.as_str() {
            journal::PROFILE_COMMAND_LINE => {
                return Err(Failure::usage(format!(
                    "entry {} was made with --connection-string; pass a connection to account {} again (--connection-string CS or --profile NAME)",
                    entry.id, i.account
                )))
            }
            journal::PROFILE_ENVIRONMENT => {
                if Account::from_env().is_none() {
                    return Err(Failure::usage(format!(
                        "entry {} was made with $AZURE_STORAGE_CONNECTION_STRING, which is not set now; set it or pass --connection-string / --profile for account {}",
                        entry.id, i.account
                    )));
                }
            }
            journal::PROFILE_LOCAL_EMULATOR => {
                global.connection_string = Some("UseDevelopmentStorage=true".into());
            }
            name if loaded.config.profiles.contains_key(name) => {
                global.profile = Some(name.to_string());
            }
            name => {
                return Err(Failure::usage(format!(
                    "entry {} was made with profile '{name}', which the config no longer defines; pass --profile or --connection-string for account {}",
                    entry.id, i.account
                )))
            }
        }
    }
    let session = connect_loaded(&global, loaded)?;
    let account = &session.client.account().name;
    if *account != i.account {
        return Err(Failure::usage(format!(
            "entry {} was made on account {}, but this connection is to account {account}; undo only on the same account",
            entry.id, i.account
        )));
    }
    Ok(session)
}

/// Refusals first (failed, already undone), then the plan (without --yes) or the connection
/// checks (read-only, same account) and the undo.
async fn undo_entry(
    reader: &Journal,
    entry: &journal::Entry,
    yes: bool,
    global: &GlobalArgs,
    loaded: LoadedConfig,
    out: &mut Out,
) -> Result<(), Failure> {
    let plan = journal::undo_plan(reader, entry).map_err(|e| undo_failure(entry, &e))?;
    if !yes {
        out.line(&format!("undo {} would {plan}", entry.id))?;
        out.flush()?;
    }
    let session = connect_for_entry(global, loaded, entry)?;
    if session.client.is_read_only() {
        return Err(TableError::ReadOnly { operation: "undo" }.into());
    }
    if !yes {
        return Err(Failure::usage(format!(
            "nothing was done; add --yes to undo entry {}",
            entry.id
        )));
    }
    let journal = session.journal_for_writes("undo")?;
    match journal::undo(&journal, &session.client, entry).await {
        Ok(UndoOutcome::Reverted {
            entry: undo_id,
            action,
            etag,
        }) => {
            eprintln!(
                "tabletop: undid {} ({}), recorded as entry {undo_id}",
                entry.id,
                action.describe()
            );
            if etag.is_some() {
                let keys = Entity {
                    etag,
                    ..Entity::new(
                        entry.intent.partition_key.clone(),
                        entry.intent.row_key.clone(),
                    )
                };
                out.line(&keys.to_json_line())?;
            }
            Ok(())
        }
        Ok(UndoOutcome::NothingToUndo { reason }) => {
            eprintln!("tabletop: nothing to undo: {reason}");
            Ok(())
        }
        Err(e) => Err(undo_failure(entry, &e)),
    }
}

fn undo_failure(entry: &journal::Entry, e: &UndoError) -> Failure {
    let i = &entry.intent;
    match e {
        UndoError::Conflict(c) => {
            let journal::UndoConflict {
                current,
                expected_after,
                before,
            } = c.as_ref();
            let changed = match (current, expected_after) {
                (None, _) => "it has been deleted since".to_string(),
                (Some(_), None) => "an entity with these keys has been created since".to_string(),
                (Some(c), Some(a)) => {
                    let names = changed_properties(a, c);
                    if names.is_empty() {
                        "it has been written since (same content, new ETag)".to_string()
                    } else {
                        format!("changed since: {}", names.join(", "))
                    }
                }
            };
            let mut msg = format!(
                "conflict: {} / {} in table {} no longer is what entry {} left ({changed}); undo wrote nothing\n  now:          {}\n  change left:  {}\n  before it:    {}",
                i.partition_key,
                i.row_key,
                i.table,
                entry.id,
                image_text(current.as_ref(), "(absent)"),
                image_text(expected_after.as_ref(), "(absent)"),
                image_text(before.as_ref(), "(absent)"),
            );
            if before.is_some() {
                msg.push_str(&format!(
                    "\nhint: to restore the before-image anyway, pipe the 'before it' line to `tabletop upsert --replace {} -`",
                    i.table
                ));
            }
            Failure::with_code(4, msg)
        }
        UndoError::Refused(reason) => Failure::usage(reason.clone()),
        UndoError::Journal(j) => journal_failure(j),
    }
}

/// Property names whose value differs between two images (added, removed or changed).
fn changed_properties(a: &Entity, b: &Entity) -> Vec<String> {
    let mut names: Vec<String> = a
        .properties
        .iter()
        .filter(|p| b.get(&p.name) != Some(&p.value))
        .map(|p| p.name.clone())
        .collect();
    names.extend(
        b.properties
            .iter()
            .filter(|p| a.get(&p.name).is_none())
            .map(|p| p.name.clone()),
    );
    names
}
