//! `cargo xtask assets`: the page's third-party assets, fetched into `target/assets` (ignored by
//! git, never committed): ECharts for the page's charts and axe-core for the browser tests'
//! accessibility checks, each from the npm registry at a pinned version, its tarball checked
//! against the registry's sha512 integrity before anything is taken out of it. `ba-agent serve` serves `target/assets/echarts.min.js` at
//! `/assets/echarts.min.js` (or from `--assets DIR` / `BA_AGENT_ASSETS`).
//!
//! The download and the extraction use the machine's `curl` and `tar`, so xtask needs no HTTP
//! or archive crates.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail, ensure};
use base64::Engine as _;
use sha2::{Digest as _, Sha512};

/// The pinned ECharts release.
pub(crate) const ECHARTS_VERSION: &str = "6.1.0";
/// Its tarball's integrity, as the registry publishes it (`npm view echarts@VERSION dist.integrity`).
pub(crate) const ECHARTS_INTEGRITY: &str = "sha512-q0yaFPggC9FUdsWH4blavRWFmxdrIodbkoKNAjJudAI6CA9gNPxHtV2RcZNEepZVlk4yvBYkOkbk6HIVpIyHZA==";

/// The pinned axe-core release: the browser tests run its accessibility rules on the page.
pub(crate) const AXE_VERSION: &str = "4.14.1";
/// Its tarball's integrity (`npm view axe-core@VERSION dist.integrity`).
pub(crate) const AXE_INTEGRITY: &str = "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==";

/// The folder the assets go to.
pub(crate) fn dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::root().join("target"))
        .join("assets")
}

/// The `sha512-…` integrity string of `bytes`.
pub(crate) fn integrity(bytes: &[u8]) -> String {
    let digest = Sha512::digest(bytes);
    format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// One npm package the page or its tests need: its tarball's members to take, each to a file
/// of the assets folder.
struct Package {
    name: &'static str,
    version: &'static str,
    integrity: &'static str,
    members: &'static [(&'static str, &'static str)],
}

const PACKAGES: &[Package] = &[
    Package {
        name: "echarts",
        version: ECHARTS_VERSION,
        integrity: ECHARTS_INTEGRITY,
        members: &[
            ("package/dist/echarts.min.js", "echarts.min.js"),
            ("package/LICENSE", "echarts.LICENSE"),
        ],
    },
    Package {
        name: "axe-core",
        version: AXE_VERSION,
        integrity: AXE_INTEGRITY,
        members: &[
            ("package/axe.min.js", "axe.min.js"),
            ("package/LICENSE", "axe.LICENSE"),
        ],
    },
];

pub(crate) fn run() -> anyhow::Result<()> {
    let dir = dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for package in PACKAGES {
        fetch(&dir, package)?;
    }
    Ok(())
}

fn fetch(dir: &Path, package: &Package) -> anyhow::Result<()> {
    let Package {
        name,
        version,
        integrity: pinned,
        members,
    } = package;
    let target = dir.join(members[0].1);
    let stamp = dir.join(format!("{name}.version"));
    if target.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|v| v.trim() == *version) {
        println!("{} is {name} {version} already", target.display());
        return Ok(());
    }
    let url = format!("https://registry.npmjs.org/{name}/-/{name}-{version}.tgz");
    let tgz = dir.join(format!("{name}-{version}.tgz"));
    println!("fetching {url}");
    let status = Command::new("curl")
        .args(["-fsSL", "--retry", "3", "--max-time", "300", "-o"])
        .arg(&tgz)
        .arg(&url)
        .status()
        .with_context(|| {
            format!(
                "running curl (install it, or put {} in target/assets by hand)",
                members[0].1
            )
        })?;
    ensure!(status.success(), "curl could not fetch {url}");
    let bytes = std::fs::read(&tgz).with_context(|| format!("reading {}", tgz.display()))?;
    let got = integrity(&bytes);
    if got != *pinned {
        let _ = std::fs::remove_file(&tgz);
        bail!("{url}: integrity {got} is not the pinned {pinned}; nothing was installed");
    }
    for (member, file) in *members {
        extract(&tgz, dir, member, &dir.join(file))?;
    }
    std::fs::write(&stamp, version)?;
    std::fs::remove_file(&tgz)?;
    let size = std::fs::metadata(&target)?.len();
    println!(
        "wrote {} ({name} {version}, {size} bytes, integrity checked)",
        target.display()
    );
    Ok(())
}

/// Takes one member out of the tarball into `to`.
fn extract(tgz: &Path, dir: &Path, member: &str, to: &Path) -> anyhow::Result<()> {
    let out = Command::new("tar")
        .arg("-xzOf")
        .arg(tgz)
        .arg(member)
        .current_dir(dir)
        .output()
        .context("running tar")?;
    ensure!(
        out.status.success() && !out.stdout.is_empty(),
        "{member} is not in {}: {}",
        tgz.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let tmp = to.with_extension("part");
    std::fs::write(&tmp, &out.stdout)?;
    std::fs::rename(&tmp, to)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrity_is_the_registry_format() {
        // `printf abc | openssl dgst -sha512 -binary | base64`
        assert_eq!(
            integrity(b"abc"),
            "sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0/BqDa6PCOj/uu9RU1EI2Q86A4qmslPpUyknw=="
        );
        assert!(ECHARTS_INTEGRITY.starts_with("sha512-"));
        assert!(AXE_INTEGRITY.starts_with("sha512-"));
    }
}
