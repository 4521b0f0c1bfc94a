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
    /// Run a monitoring proxy in front of a Table endpoint: point an application's TableEndpoint at it.
    Proxy(ProxyArgs),
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
}

/// Resolves the connection: flag, profile, environment, default profile, local emulator.
pub fn connect(global: &GlobalArgs) -> Result<Session, Failure> {
    let loaded =
        config::load(global.config.as_deref()).map_err(|e| Failure::usage(e.to_string()))?;
    for w in &loaded.warnings {
        eprintln!("tabletop: warning: {w}");
    }
    let cfg = &loaded.config;
    let mut profile_name = None;
    let mut profile = None;
    let account = if let Some(cs) = &global.connection_string {
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
        profile_account(name, p)?
    } else if let Some(env) = Account::from_env() {
        env.map_err(|e| Failure::usage(format!("AZURE_STORAGE_CONNECTION_STRING: {e}")))?
    } else if let Some(name) = &cfg.default_profile {
        let p = cfg.profiles.get(name).ok_or_else(|| {
            Failure::usage(format!(
                "default_profile '{name}' is not defined under [profiles]"
            ))
        })?;
        profile_name = Some(name.clone());
        profile = Some(p.clone());
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
    })
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
            for entity in read_entities(&w)? {
                let outcome = client.insert(&w.table, &entity).await?;
                report_write(&mut out, &entity, &outcome)?;
            }
        }
        Command::Replace(args) => {
            conditional_write(client, args, UpdateMode::Replace, &mut out).await?
        }
        Command::Merge(args) => {
            conditional_write(client, args, UpdateMode::Merge, &mut out).await?
        }
        Command::Upsert { write, replace } => {
            let mode = if replace {
                UpdateMode::Replace
            } else {
                UpdateMode::Merge
            };
            for entity in read_entities(&write)? {
                let outcome = client.upsert(&write.table, &entity, mode).await?;
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
            let outcome = client
                .delete_entity(&table, &partition_key, &row_key, &cond)
                .await?;
            if let Some(note) = outcome.note() {
                eprintln!("tabletop: note: {note}");
            }
            eprintln!("tabletop: deleted {partition_key} / {row_key}");
        }
    }
    out.flush()
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
    client: &TableClient,
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
        let outcome = client.update(&args.write.table, &entity, mode, &condition).await.map_err(|e| {
            let mut f = Failure::from_table_error(&e);
            if e.is_precondition_failed() {
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
