//! `memscope mcp`: the thin shell over `memscope::mcp`, on the process's stdin and stdout.

use anyhow::Context;

use crate::cmd::cli::McpArgs;

pub fn mcp(a: &McpArgs) -> anyhow::Result<u8> {
    let (_, missing) = memscope::mcp::paths::Roots::new(&a.roots);
    if let Some(m) = missing.first() {
        anyhow::bail!("--root {}: not a directory", m.display());
    }
    let cfg = memscope::mcp::Config {
        roots: a.roots.clone(),
        ..Default::default()
    };
    // Replies are written from the thread that runs the tools too: `Stdout`, not its lock.
    memscope::mcp::serve_with(&cfg, std::io::stdin().lock(), std::io::stdout())
        .context("the MCP session")?;
    Ok(0)
}
