//! bench
pub(crate) fn run(_: &[String]) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
