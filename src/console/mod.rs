//! The interactive console: state and update (`app`), the grid's paging model (`grid`),
//! drawing (`ui`), background jobs (`jobs`), the event loop (`run`), the terminal guard,
//! themes and the keymap.

pub mod app;
pub mod dashboard;
pub mod editor;
pub mod editor_view;
pub mod event;
pub mod grid;
pub mod input;
pub mod jobs;
pub mod keys;
pub mod run;
pub mod stress_view;
pub mod terminal;
pub mod theme;
pub mod ui;

use crate::azure::{Account, ClientOptions, TableClient, Telemetry};
use crate::cli::{self, GlobalArgs};
use crate::config::{self, LoadedConfig};

use app::{App, AppOptions, Source, TrafficCounters};

/// What opens the console besides the config: extra sources (the demo's emulator), the
/// telemetry that feeds the dashboard (a proxy's), and where to start.
#[derive(Default)]
pub struct ConsoleSetup {
    pub extra: Vec<ExtraSource>,
    /// Records from elsewhere (a proxy) that the dashboard shows with the console's own.
    pub telemetry: Option<Telemetry>,
    /// The dashboard's label of what feeds it.
    pub dashboard_source: Option<String>,
    pub start_on_dashboard: bool,
    /// Targets to judge against instead of the config's (the demo's simulated limit).
    pub targets: Option<config::Targets>,
}

/// An extra source the caller supplies (the demo's emulator).
pub struct ExtraSource {
    pub name: String,
    pub account: Account,
}

/// Builds the app from the command line and the config: profiles, the local emulator and a
/// `--connection-string` become sources; a bad config is reported in the status bar and the
/// console starts on defaults.
pub fn build_app(global: &GlobalArgs, theme_flag: Option<&str>, setup: ConsoleSetup) -> App {
    // The console's own requests; the status bar counts only these, the dashboard also sees
    // whatever the caller feeds it (a proxy's traffic).
    let own = Telemetry::new();
    let telemetry = &own;
    let external = setup.telemetry.clone();
    let ConsoleSetup {
        extra,
        dashboard_source,
        start_on_dashboard,
        targets,
        ..
    } = setup;
    let loaded_for_journal = config::load_or_default(global.config.as_deref());
    let LoadedConfig {
        config,
        path,
        mut warnings,
    } = loaded_for_journal.clone();
    let user_dir = path
        .as_ref()
        .and_then(|p| p.parent().map(|d| d.to_path_buf()))
        .or_else(|| config::default_path().and_then(|p| p.parent().map(|d| d.to_path_buf())));
    let retry = cli::retry_policy(&config.retry);
    let options = |read_only: bool| ClientOptions {
        retry: retry.clone(),
        read_only: read_only || global.read_only,
        telemetry: telemetry.clone(),
    };
    let client =
        |account: Result<Account, String>, read_only: bool| -> Result<TableClient, String> {
            account.and_then(|a| TableClient::new(a, options(read_only)).map_err(|e| e.to_string()))
        };

    let mut sources = Vec::new();
    for e in extra {
        sources.push(Source::new(
            e.name,
            client(Ok(e.account), false),
            false,
            None,
        ));
    }
    if let Some(cs) = &global.connection_string {
        let account = Account::from_connection_string(cs).map_err(|e| e.to_string());
        sources.push(Source::new(
            "command line",
            client(account, false),
            false,
            None,
        ));
    }
    if let Some(env) = Account::from_env() {
        let account = env.map_err(|e| format!("AZURE_STORAGE_CONNECTION_STRING: {e}"));
        sources.push(Source::new(
            "environment",
            client(account, false),
            false,
            None,
        ));
    }
    // The default profile (or --profile) first, then the others by name.
    let mut names: Vec<&String> = config.profiles.keys().collect();
    let first = global.profile.as_ref().or(config.default_profile.as_ref());
    names.sort_by_key(|n| (Some(*n) != first, (*n).clone()));
    for name in names {
        let p = &config.profiles[name];
        let account = cli::profile_account(name, p).map_err(|f| f.message);
        sources.push(Source::new(
            name.clone(),
            client(account, p.read_only),
            p.read_only,
            p.color.as_ref().map(|c| c.to_string()),
        ));
    }
    let points_at_emulator = sources.iter().any(|s| {
        s.client
            .as_ref()
            .is_ok_and(|c| c.account().endpoint == crate::azure::connection::DEV_TABLE_ENDPOINT)
    });
    if !points_at_emulator {
        sources.push(Source::new(
            "local emulator",
            client(Ok(Account::development()), false),
            false,
            None,
        ));
    }
    if let Some(wanted) = &global.profile {
        if !config.profiles.contains_key(wanted) {
            warnings.push(format!("no profile '{wanted}' in the config"));
        }
    }

    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let theme_name = theme_flag
        .map(str::to_string)
        .or(config.theme.clone())
        .unwrap_or_else(|| "dark".into());
    let (theme, theme_warnings) = theme::load(&theme_name, user_dir.as_deref(), no_color);
    warnings.extend(theme_warnings);
    let journal = match crate::journal::Journal::configured_path(&loaded_for_journal) {
        Some(path) => crate::journal::Journal::open(path)
            .map(std::sync::Arc::new)
            .map_err(|e| e.to_string()),
        None => Err(
            "no data directory for the journal: set TABLETOP_JOURNAL or journal_path".to_string(),
        ),
    };
    if let Err(e) = &journal {
        warnings.push(format!("writes are disabled: {e}"));
    }
    let hub = std::sync::Arc::new(crate::metrics::Hub::new(
        targets.unwrap_or(config.targets),
        std::time::SystemTime::now,
    ));
    hub.attach(telemetry);
    if let Some(ext) = &external {
        hub.attach(ext);
    }
    let dashboard = dashboard::Dashboard::new(
        hub,
        dashboard_source.unwrap_or_else(|| "this console's traffic".into()),
    );
    let (keymap, key_warnings) = keys::Keymap::with_overrides(&config.keys);
    warnings.extend(key_warnings);
    let mut app = App::new(AppOptions {
        sources,
        keymap,
        theme,
        user_config_dir: user_dir,
        no_color,
        page_size: config.page_size,
        traffic: TrafficCounters::attach(telemetry),
        read_only_flag: global.read_only,
        warnings,
        journal,
        dashboard,
    });
    if start_on_dashboard {
        app.on_action(keys::Action::FocusDashboard);
    }
    app
}

/// Opens the console and returns when the user quits.
pub async fn open(
    global: &GlobalArgs,
    theme_flag: Option<&str>,
    setup: ConsoleSetup,
) -> anyhow::Result<()> {
    let app = build_app(global, theme_flag, setup);
    run::run(app).await
}
