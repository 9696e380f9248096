//! The `rooftop` binary: parse arguments, run the command, print its output. Errors print
//! their whole cause chain and exit 1; bad usage exits 2 (clap).

use clap::Parser;
use rooftop::cli::{Cli, Command};
use rooftop::commands;
use std::io::Write;
use std::process::ExitCode;

fn run(command: Command) -> anyhow::Result<Vec<u8>> {
    Ok(match command {
        Command::Predict {
            scenario,
            batch,
            context,
            ops,
            format,
        } => commands::predict::run(&scenario, batch, context, ops, format)?,
        Command::Sweep {
            scenario,
            serving,
            format,
        } => commands::sweep::run(&scenario, &serving, format)?,
        Command::Calibrate {
            scenario,
            measured,
            out,
            format,
        } => commands::calibrate::run_calibrate(&scenario, &measured, out.as_deref(), format)?,
        Command::Explain { scenario, measured } => commands::explain::run(&scenario, &measured)?,
        Command::Validate {
            scenario,
            measured,
            format,
        } => commands::calibrate::run_validate(&scenario, &measured, format)?,
        Command::Specdec {
            scenario,
            draft,
            k,
            acceptance,
            concurrency,
            context,
            format,
        } => commands::specdec::run(
            &scenario,
            &draft,
            &k,
            &acceptance,
            &concurrency,
            context,
            format,
        )?,
        Command::Compare {
            scenario,
            systems,
            parallel,
            concurrency,
            context,
            input_len,
            output_len,
            format,
        } => commands::whatif::run_compare(
            &scenario,
            &systems,
            &parallel,
            &concurrency,
            context,
            input_len,
            output_len,
            format,
        )?,
        Command::Sensitivity {
            scenario,
            concurrency,
            context,
            input_len,
            output_len,
            target_tpot,
            format,
        } => commands::whatif::run_sensitivity(
            &scenario,
            concurrency,
            context,
            input_len,
            output_len,
            target_tpot,
            format,
        )?,
        Command::Explore {
            scenario,
            systems,
            parallel,
            batch,
            context,
            quant,
            pareto,
            format,
        } => commands::whatif::run_explore(
            &scenario,
            systems.as_ref(),
            &parallel,
            &batch,
            &context,
            &quant,
            pareto,
            format,
        )?,
        Command::Plot(p) => commands::plot::run(&p)?.into_bytes(),
        Command::Op(op) => commands::op::run(&op)?,
        Command::List { kind, format } => commands::catalog::list(&kind, format)?,
        Command::Show { name } => commands::catalog::show(&name)?.into_bytes(),
        Command::ImportHf {
            path,
            name,
            quant_config,
            out,
        } => commands::import_hf::run(
            &path,
            name.as_deref(),
            quant_config.as_deref(),
            out.as_deref(),
        )?
        .into_bytes(),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // No subcommand: the embedded default scenario, the team's box against its measurement,
    // with its charts written into plots/.
    let default_run = cli.command.is_none();
    let command = match cli.command {
        Some(c) => c,
        None => match Cli::parse_from(["rooftop", "validate"]).command {
            Some(c) => c,
            None => unreachable!("`validate` parses to a command"),
        },
    };
    let result = run(command).and_then(|mut out| {
        if default_run {
            let files = commands::plot::default_plots(std::path::Path::new("plots"))?;
            let names: Vec<String> = files
                .iter()
                .filter_map(|p| p.file_name())
                .map(|n| n.to_string_lossy().to_string())
                .collect();
            out.extend_from_slice(
                format!("\ncharts written to plots/: {}\n", names.join(", ")).as_bytes(),
            );
        }
        Ok(out)
    });
    match result {
        Ok(out) => {
            // A closed pipe (e.g. `| head`) is not an error worth a panic.
            let _ = std::io::stdout().lock().write_all(&out);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::from(1)
        }
    }
}
