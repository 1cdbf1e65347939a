//! `cargo xtask dist [--no-build]`: what a person downloads, with its debug information split
//! off. Builds the `ba-agent` binary in the `dist` profile (the release profile with line tables
//! kept), then writes `target/release-files/`: `ba-agent` without symbols or debug information,
//! `ba-agent.debug` holding them (compressed, linked from the binary by a `.gnu_debuglink`, so a
//! debugger or `addr2line` finds it beside the binary), and `SHA256SUMS`.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::root;

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let build = match args {
        [] => true,
        [flag] if flag == "--no-build" => false,
        _ => bail!("usage: cargo xtask dist [--no-build]"),
    };
    let root = root();
    if build {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--locked", "--profile", "dist", "-p", "ba-cli"])
            .args(["--bin", "ba-agent"])
            .current_dir(&root)
            .status()
            .context("running cargo build")?;
        if !status.success() {
            bail!("cargo build --profile dist failed ({status})");
        }
    }
    let built = root.join("target/dist/ba-agent");
    if !built.is_file() {
        bail!(
            "{} is missing: run `cargo xtask dist` without --no-build first",
            built.display()
        );
    }
    let out = root.join("target/release-files");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let binary = out.join("ba-agent");
    let debug = out.join("ba-agent.debug");
    objcopy(
        &root,
        &[
            "--only-keep-debug",
            "--compress-debug-sections=zlib",
            path(&built)?,
            path(&debug)?,
        ],
    )?;
    objcopy(&root, &["--strip-all", path(&built)?, path(&binary)?])?;
    // The link names the file only: the debugger looks for it beside the binary. objcopy
    // reads it from the current folder to checksum it.
    objcopy(&out, &["--add-gnu-debuglink=ba-agent.debug", "ba-agent"])?;
    let mut sums = String::new();
    for file in [&binary, &debug] {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        sums.push_str(&format!("{:x}  {name}\n", Sha256::digest(&bytes)));
        println!("{name}: {:.1} MB", bytes.len() as f64 / 1e6);
    }
    std::fs::write(out.join("SHA256SUMS"), sums).context("writing SHA256SUMS")?;
    println!("written to {}", out.display());
    Ok(())
}

fn path(p: &Path) -> anyhow::Result<&str> {
    p.to_str()
        .with_context(|| format!("{} is not UTF-8", p.display()))
}

/// Runs Debian's `objcopy` with `args` in `dir`.
fn objcopy(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("objcopy")
        .args(args)
        .current_dir(dir)
        .status()
        .context("running objcopy (Debian's binutils)")?;
    if !status.success() {
        bail!("objcopy {} failed ({status})", args.join(" "));
    }
    Ok(())
}
