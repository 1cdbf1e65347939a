//! `ba-agent tokens`: the token count of a text or a conversation.

use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use ba_context::{Encoding, MessageCounter, ModelTokenizer};
use ba_protocol::TokenCounter as _;

use crate::exit::CliResult;
use crate::input::{self, InputFormat};
use crate::out::outln;

/// Arguments of `tokens`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Encoding: cl100k_base (default) or o200k_base.
    #[arg(long, conflicts_with = "model")]
    encoding: Option<String>,
    /// Count with the encoding of this model (claude-* adds the +15 % safety margin).
    #[arg(long)]
    model: Option<String>,
    /// Print `{"tokens":N,"encoding":…,"bytes":N}`.
    #[arg(long)]
    json: bool,
    /// Read FILE as a conversation and count its messages, overhead included.
    #[arg(long)]
    conversation: bool,
    /// Input file, or `-` for stdin.
    #[arg(default_value = "-")]
    file: String,
}

/// The tokenizer named by `--encoding` / `--model` (default cl100k_base).
pub(crate) fn tokenizer(
    encoding: Option<&str>,
    model: Option<&str>,
) -> anyhow::Result<ModelTokenizer> {
    match (encoding, model) {
        (_, Some(m)) => ModelTokenizer::for_model(m).ok_or_else(|| {
            anyhow!("--model: unknown model `{m}`; give --encoding cl100k_base or o200k_base")
        }),
        (Some(e), None) => Ok(ModelTokenizer::exact(
            e.parse::<Encoding>()
                .map_err(|err| anyhow!("--encoding: {err}"))?,
        )),
        (None, None) => Ok(ModelTokenizer::exact(Encoding::Cl100kBase)),
    }
}

pub(crate) fn run(args: Args) -> CliResult {
    let tok = tokenizer(args.encoding.as_deref(), args.model.as_deref())?;
    let text = input::read_text(&args.file)?;
    let name = if args.file == "-" {
        "stdin"
    } else {
        &args.file
    };
    let tokens = if args.conversation {
        let loaded =
            input::load(&text, InputFormat::Auto).with_context(|| format!("reading {name}"))?;
        MessageCounter::new(tok).entries(&loaded.entries)
    } else {
        tok.count(&text)
    };
    if args.json {
        // Written by hand to keep the documented key order.
        outln!(
            "{{\"tokens\":{tokens},\"encoding\":\"{}\",\"bytes\":{}}}",
            tok.encoding.as_str(),
            text.len()
        );
    } else {
        outln!("{tokens}");
    }
    Ok(ExitCode::SUCCESS)
}
