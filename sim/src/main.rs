//! `pfcsim`: the simulator on its own. It builds with cargo alone: no clang, libbpf,
//! kernel headers or root (`cargo build --release -p pfcsim`), and takes the
//! arguments of `pfctools sim`.

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOC: pfcsim::alloc::SimAlloc = pfcsim::alloc::SimAlloc;

#[derive(Parser)]
#[command(
    name = "pfcsim",
    version,
    about = "pfcswitch's engine on a simulated fabric: deterministic, no root, no network",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    args: pfcsim::SimArgs,
}

#[derive(Subcommand)]
enum Command {
    /// A grid of runs (scenarios × loads × seeds) over this machine's cores or an MPI
    /// job's ranks: a report per run, a summary table and plot.
    Sweep(pfcsim::sweep::SweepArgs),
}

fn main() -> anyhow::Result<()> {
    // `pfcsim --json | head` ends as `head` ends the reader, not with a panic.
    pfcswitch_table::quiet_on_closed_stdout();
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::Sweep(args)) => pfcsim::sweep::run(args),
        None => pfcsim::run(&cli.args),
    }
}
