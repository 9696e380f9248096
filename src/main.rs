//! The `rooftop` binary: parse arguments, run the command, print its output. Errors print
//! their whole cause chain and exit 1; bad usage exits 2 (clap).

use clap::Parser;
use rooftop::cli::{Cli, Command};
use rooftop::commands;
use std::io::Write;
use std::process::ExitCode;

fn run(cli: Cli) -> anyhow::Result<String> {
    let out = match cli.command {
        None => commands::predict::run(
            &rooftop::cli::ScenarioArgs {
                model: "kimi-k2.5-int4".into(),
                system: "8x-rtx-pro-6000-pcie".into(),
                tp: None,
                ep: None,
                pp: None,
                dp: None,
            },
            1,
            1024,
            false,
            Default::default(),
        )?,
        Some(Command::Predict {
            scenario,
            batch,
            context,
            ops,
            format,
        }) => commands::predict::run(&scenario, batch, context, ops, format)?,
        Some(Command::Op(op)) => commands::op::run(&op)?,
        Some(Command::List { kind, format }) => commands::catalog::list(&kind, format)?,
        Some(Command::Show { name }) => commands::catalog::show(&name)?,
        Some(Command::ImportHf {
            path,
            name,
            quant_config,
            out,
        }) => commands::import_hf::run(
            &path,
            name.as_deref(),
            quant_config.as_deref(),
            out.as_deref(),
        )?,
    };
    Ok(out)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (e.g. `| head`) is not an error worth a panic.
            let _ = stdout.write_all(out.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::from(1)
        }
    }
}
