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
        None => tabletop::console::open(&global, global.theme.as_deref(), Vec::new())
            .await
            .map_err(|e| Failure::with_code(1, format!("console: {e:#}"))),
        Some(Command::Demo) => demo(&global).await,
        // Listing and showing need no connection; undo connects to the entry's account.
        Some(Command::Journal(args)) => cli::journal(args, &global).await,
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

/// Starts Azurite with sample data, opens the console on it, and stops the emulator on exit.
async fn demo(global: &cli::GlobalArgs) -> Result<(), Failure> {
    let mut progress = |line: &str| eprintln!("tabletop demo: {line}");
    let env = tabletop::demo::prepare(&mut progress)
        .await
        .map_err(|e| Failure::with_code(1, format!("demo: {e}")))?;
    let account = tabletop::azure::Account::from_connection_string(&env.connection_string)
        .map_err(|e| Failure::with_code(1, e.to_string()))?;
    let extra = vec![tabletop::console::ExtraSource {
        name: "demo".into(),
        account,
    }];
    let result = tabletop::console::open(global, global.theme.as_deref(), extra).await;
    env.emulator.stop();
    result.map_err(|e| Failure::with_code(1, format!("console: {e:#}")))
}
