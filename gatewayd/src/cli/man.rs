//! `gatewayd man DIR`: the man pages, made from the command-line definition itself
//! (`clap_mangen`): `gatewayd.1` and one `gatewayd-SUBCOMMAND.1` per subcommand (nested ones as
//! `gatewayd-policy-init.1`). `cargo xtask deb` packs them into `/usr/share/man/man1/`.
use std::{path::PathBuf, process::ExitCode};

use anyhow::Context as _;
use clap::CommandFactory as _;

use super::out::outln;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The directory the pages are written to (made if missing).
    dir: PathBuf,
}

pub(super) fn exec(args: Args) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir).with_context(|| format!("making {}", args.dir.display()))?;
    let mut written = 0;
    write_pages(&super::Cli::command(), "gatewayd", &args.dir, &mut written)?;
    outln!("{written} man page(s) in {}", args.dir.display())?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `cmd`'s page as `NAME.1`, then each visible subcommand's as `NAME-SUB.1`.
fn write_pages(
    cmd: &clap::Command,
    name: &str,
    dir: &std::path::Path,
    written: &mut usize,
) -> anyhow::Result<()> {
    let cmd = cmd.clone().name(name.to_owned());
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    *written += 1;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}
