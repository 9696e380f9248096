//! The `rooftop` binary: parse arguments, run the command, print its output. Errors print
//! their whole cause chain and exit 1; bad usage exits 2 (clap's, and `Error::Usage`).

use clap::Parser;
use rooftop::cli::{Cli, Command};
use rooftop::commands;
use std::io::Write;
use std::process::ExitCode;

fn run(command: Command) -> anyhow::Result<Vec<u8>> {
    Ok(match command {
        Command::Predict(a) => commands::predict::run(&a)?,
        Command::Sweep(a) => commands::sweep::run(&a)?,
        Command::Calibrate(a) => commands::calibrate::run_calibrate(&a)?,
        Command::Explain(a) => commands::explain::run(&a)?,
        Command::Validate(a) => commands::calibrate::run_validate(&a)?,
        Command::Specdec(a) => commands::specdec::run(&a)?,
        Command::Compare(a) => commands::whatif::run_compare(&a)?,
        Command::Sensitivity(a) => commands::whatif::run_sensitivity(&a)?,
        Command::Explore(a) => commands::whatif::run_explore(&a)?,
        Command::Plan(a) => commands::plan::run(&a)?,
        Command::Plot(p) => commands::plot::run(&p)?.into_bytes(),
        Command::Op(op) => commands::op::run(&op)?,
        Command::List(a) => commands::catalog::list(&a)?,
        Command::Show(a) => commands::catalog::show(&a)?.into_bytes(),
        Command::ImportHf(a) => commands::import_hf::run(&a)?.into_bytes(),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // No subcommand: the embedded default scenario, the team's box against its measurement,
    // with its charts written into plots/.
    let default_run = cli.command.is_none();
    if cli.plots.is_some() && !default_run {
        rooftop::cli::stderr_line(
            "error: --plots applies only to a bare `rooftop` (no subcommand); plot commands take --out",
        );
        return ExitCode::from(2);
    }
    if let Err(e) = rooftop::cli::install_kernels(&cli.kernels) {
        rooftop::cli::stderr_line(&format!("Error: {e:#}"));
        return ExitCode::from(1);
    }
    // Acceptance figures that cannot mean what --acceptance-stat says are bad usage, as a
    // malformed number is.
    if let Some(Command::Specdec(a)) = &cli.command {
        if let Some(Err(e)) = commands::specdec::given_acceptance(a) {
            rooftop::cli::stderr_line(&format!("error: invalid value for '--acceptance': {e}"));
            return ExitCode::from(2);
        }
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let plots_dir = rooftop::cli::default_plots_dir(cli.plots.as_deref(), &cwd);
    let command = match cli.command {
        Some(c) => c,
        None => match Cli::parse_from(["rooftop", "validate"]).command {
            Some(c) => c,
            None => unreachable!("`validate` parses to a command"),
        },
    };
    let result = run(command).and_then(|mut out| {
        if default_run {
            match &plots_dir {
                Some(dir) => {
                    let files = commands::plot::default_plots(dir)?;
                    let names: Vec<String> = files
                        .iter()
                        .filter_map(|p| p.file_name())
                        .map(|n| n.to_string_lossy().to_string())
                        .collect();
                    out.extend_from_slice(
                        format!(
                            "\ncharts written to {}: {}\n",
                            dir.display(),
                            names.join(", ")
                        )
                        .as_bytes(),
                    );
                }
                None => out.extend_from_slice(
                    b"\ncharts not written: outside the rooftop checkout, pass --plots DIR to write them\n",
                ),
            }
        }
        Ok(out)
    });
    if result.is_ok() {
        for (path, generation) in rooftop::cost::generation::unread_kernel_files() {
            rooftop::cli::stderr_line(&format!(
                "note: --kernels {path} replaces the {generation} kernel constants, but this run \
                 priced no GPU of that generation: it changed no number"
            ));
        }
    }
    match result {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(&out).and_then(|_| stdout.flush()) {
                // A reader that stopped reading (`| head`) took what it wanted.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                // A full disk or device (`> /dev/full`) lost the output: say so, exit 1.
                Err(e) => {
                    rooftop::cli::stderr_line(&format!("Error: writing the output failed: {e}"));
                    ExitCode::from(1)
                }
                Ok(()) if rooftop::cli::stderr_failed() => ExitCode::from(1),
                Ok(()) => ExitCode::SUCCESS,
            }
        }
        Err(e) => match e.downcast_ref::<rooftop::error::Error>() {
            Some(rooftop::error::Error::Usage(m)) => {
                rooftop::cli::stderr_line(&format!("error: {m}"));
                ExitCode::from(2)
            }
            _ => {
                rooftop::cli::stderr_line(&format!("Error: {e:#}"));
                ExitCode::from(1)
            }
        },
    }
}
