//! `pfcsim`: the simulator on its own. It builds with cargo alone: no clang, libbpf,
//! kernel headers or root (`cargo build --release -p pfcsim`), and takes the
//! arguments of `pfctools sim`.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "pfcsim",
    version,
    about = "pfcswitch's engine on a simulated fabric: deterministic, no root, no network"
)]
struct Cli {
    #[command(flatten)]
    args: pfcsim::SimArgs,
}

fn main() -> anyhow::Result<()> {
    pfcsim::run(&Cli::parse().args)
}
