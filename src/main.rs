//! The `tabletop` binary: the scriptable commands (and, with no command, the console).

use std::process::ExitCode;

use clap::Parser;
use tabletop::cli::{self, Cli, Failure};

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
    let Some(command) = args.command else {
        use clap::CommandFactory;
        let _ = Cli::command().print_help();
        return Ok(());
    };
    let session = cli::connect(&args.global)?;
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
