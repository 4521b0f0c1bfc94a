//! The `tabletop` binary: the console (no command), `demo`, and the scriptable commands.

use std::process::ExitCode;

use clap::Parser;
use tabletop::cli::{self, Cli, Command, Failure};

fn main() -> ExitCode {
    let args = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tabletop: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.message.is_empty() {
                eprintln!("tabletop: error: {}", f.message);
            }
            ExitCode::from(u8::try_from(f.code).unwrap_or(1))
        }
    }
}

async fn run(args: Cli) -> Result<(), Failure> {
    let global = args.global;
    match args.command {
        None => tabletop::console::open(&global, global.theme.as_deref(), Default::default())
            .await
            .map_err(|e| Failure::with_code(1, format!("console: {e:#}"))),
        Some(Command::Demo) => demo(&global).await,
        // Listing and showing need no connection; undo connects to the entry's account.
        Some(Command::Journal(args)) => cli::journal(args, &global).await,
        Some(Command::Proxy(args)) => {
            let dashboard = !args.headless;
            run_proxy(args, dashboard, &global).await
        }
        Some(Command::Stress(args)) => {
            let session = cli::connect(&global)?;
            cli::stress(args, &session, shutdown_signal()).await
        }
        Some(command) => {
            let session = cli::connect(&global)?;
            match cli::run(command, &session).await {
                Ok(()) => Ok(()),
                Err(mut f) => {
                    if f.auth_failure {
                        if let Some(hint) = cli::diagnose_auth(&session).await {
                            f.message.push_str(&format!("\n{hint}"));
                        }
                    }
                    Err(f)
                }
            }
        }
    }
}

/// Starts Azurite with sample data and a synthetic application sent through the throttling
/// proxy, opens the console on it, and stops everything on exit.
async fn demo(global: &cli::GlobalArgs) -> Result<(), Failure> {
    use tabletop::proxy::{Proxy, ProxyConfig};
    let mut progress = |line: &str| eprintln!("tabletop demo: {line}");
    let env = tabletop::demo::prepare(&mut progress)
        .await
        .map_err(|e| Failure::with_code(1, format!("demo: {e}")))?;
    let account = tabletop::azure::Account::from_connection_string(&env.connection_string)
        .map_err(|e| Failure::with_code(1, e.to_string()))?;
    // The synthetic application's traffic goes through a throttling proxy whose records feed
    // the dashboard, together with the console's own requests.
    let telemetry = tabletop::azure::Telemetry::new();
    let upstream = account
        .endpoint
        .trim_end_matches(tabletop::emulator::DEV_ACCOUNT)
        .trim_end_matches('/')
        .to_string();
    let proxy = Proxy::start(
        ProxyConfig {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            upstream,
            throttle: Some(tabletop::demo::DEMO_THROTTLE),
            account: None,
        },
        telemetry.clone(),
    )
    .await
    .map_err(|e| Failure::with_code(1, format!("demo: proxy: {e}")))?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let traffic = tokio::spawn(tabletop::demo::synthetic_traffic(
        proxy.table_endpoint(),
        cancel.clone(),
    ));
    progress(&format!(
        "a synthetic application writes {} through a proxy that throttles each partition at {} entities/s: press 4 for the dashboard",
        tabletop::demo::TRAFFIC_TABLE,
        tabletop::demo::DEMO_THROTTLE
    ));
    let setup = tabletop::console::ConsoleSetup {
        extra: vec![tabletop::console::ExtraSource {
            name: "demo".into(),
            account,
        }],
        telemetry: Some(telemetry),
        dashboard_source: Some(format!(
            "demo app via proxy (limit {} entities/s per partition) + console",
            tabletop::demo::DEMO_THROTTLE
        )),
        start_on_dashboard: false,
        // Judge partitions against the limit the proxy simulates.
        targets: Some(tabletop::config::Targets {
            partition_entities_per_s: tabletop::demo::DEMO_THROTTLE as u32,
            account_entities_per_s: 2_000,
        }),
    };
    let result = tabletop::console::open(global, global.theme.as_deref(), setup).await;
    cancel.cancel();
    let _ = traffic.await;
    proxy.stop().await;
    env.emulator.stop();
    result.map_err(|e| Failure::with_code(1, format!("console: {e:#}")))
}

/// `tabletop proxy`: starts the proxy and, until Ctrl-C or SIGTERM, shows its traffic: the
/// dashboard (wired in by the console integration) or, headless, a summary line per interval.
async fn run_proxy(
    args: cli::ProxyArgs,
    dashboard: bool,
    global: &cli::GlobalArgs,
) -> Result<(), Failure> {
    use std::io::Write;
    use tabletop::proxy::{summary_line, Proxy, ProxyConfig, Summary};

    if args.interval_secs == 0 {
        return Err(Failure::usage("--interval-secs must be at least 1"));
    }
    let telemetry = tabletop::azure::Telemetry::new();
    let summary = Summary::attach(&telemetry);
    let config = ProxyConfig {
        listen: args.listen,
        upstream: args.upstream.clone(),
        throttle: args.throttle,
        account: None,
    };
    let proxy = Proxy::start(config, telemetry.clone())
        .await
        .map_err(|e| Failure::usage(e.to_string()))?;
    eprintln!(
        "tabletop proxy: forwarding http://{} to {}{}",
        proxy.addr(),
        args.upstream,
        args.throttle
            .map(|r| format!(", throttling at {r} entities/s per partition"))
            .unwrap_or_default()
    );
    eprintln!(
        "tabletop proxy: point the application's table endpoint at {}",
        proxy.table_endpoint()
    );
    eprintln!(
        "tabletop proxy: e.g. {}  (keep your own key; the proxy never needs it)",
        proxy.connection_string_hint()
    );
    if dashboard {
        let setup = tabletop::console::ConsoleSetup {
            telemetry: Some(telemetry),
            dashboard_source: Some(format!("proxy {} → {}", proxy.addr(), args.upstream)),
            start_on_dashboard: true,
            ..Default::default()
        };
        let result = tabletop::console::open(global, global.theme.as_deref(), setup).await;
        proxy.stop().await;
        return result.map_err(|e| Failure::with_code(1, format!("console: {e:#}")));
    }
    let interval = std::time::Duration::from_secs(args.interval_secs);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    let mut last = std::time::Instant::now();
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = ticks.tick() => {
                let now = std::time::Instant::now();
                let line = summary_line(&summary.take(), now - last);
                last = now;
                let stamp = time::OffsetDateTime::now_utc()
                    .format(time::macros::format_description!("[hour]:[minute]:[second]Z"))
                    .unwrap_or_default();
                if writeln!(std::io::stdout(), "{stamp}  {line}").is_err() {
                    break;
                }
            }
        }
    }
    eprintln!("tabletop proxy: stopping");
    proxy.stop().await;
    Ok(())
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
