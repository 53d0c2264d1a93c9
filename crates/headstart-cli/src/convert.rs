//! `headstart convert --format F CAPTURE [--exchange N | --out-dir DIR] [--seal-at RULE]`: turn a recorded
//! provider stream (raw SSE text, or a YAML cassette of several exchanges) into delta logs `headstart replay`
//! accepts.

use std::path::PathBuf;
use std::str::FromStr;

use headstart::core::delta_log::{write_delta_log, TimedDelta};
use headstart_providers::capture::convert_capture;
use headstart_providers::{ConvertOptions, SealAt, WireFormat};

/// Arguments of `headstart convert`.
#[derive(clap::Args)]
pub struct Args {
    /// The wire format: openai-chat, openai-responses, anthropic or gemini.
    #[arg(long, value_parser = parse_format)]
    format: WireFormat,
    /// The capture: raw SSE text, or a YAML cassette.
    capture: PathBuf,
    /// Only this exchange (0-based) of a multi-exchange cassette, to standard output.
    #[arg(long, conflicts_with = "out_dir")]
    exchange: Option<usize>,
    /// Write every exchange to `DIR/<capture name>.<n>.jsonl`.
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Chat Completions only: when a call is sealed, `complete` (the default), `next-index` or `finish`.
    #[arg(long, value_name = "RULE", default_value_t = SealAt::Complete, value_parser = crate::agent::parse_seal_at)]
    seal_at: SealAt,
}

fn parse_format(name: &str) -> Result<WireFormat, String> {
    WireFormat::from_str(name).map_err(|error| error.to_string())
}

/// Converts; exit status 1 when the capture cannot be read or converted.
pub fn run(args: &Args) -> u8 {
    match convert(args) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("headstart convert: {error}");
            1
        }
    }
}

fn convert(args: &Args) -> Result<(), String> {
    let text = std::fs::read_to_string(&args.capture)
        .map_err(|error| format!("cannot read {}: {error}", args.capture.display()))?;
    let options = ConvertOptions {
        seal_at: args.seal_at,
        ..ConvertOptions::default()
    };
    let logs = convert_capture(args.format, &text, &options).map_err(|error| error.to_string())?;
    if logs.is_empty() {
        return Err(format!("{} holds no exchange", args.capture.display()));
    }
    if let Some(dir) = &args.out_dir {
        std::fs::create_dir_all(dir).map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
        let stem = args
            .capture
            .file_stem()
            .map_or("capture".into(), |stem| stem.to_string_lossy());
        for (n, log) in logs.iter().enumerate() {
            let path = dir.join(format!("{stem}.{n}.jsonl"));
            write_log(
                std::fs::File::create(&path).map_err(|error| format!("{}: {error}", path.display()))?,
                log,
            )?;
            eprintln!("wrote {}", path.display());
        }
        return Ok(());
    }
    let n = args.exchange.unwrap_or(0);
    let log = logs
        .get(n)
        .ok_or_else(|| format!("no exchange {n}: the capture has {}", logs.len()))?;
    if args.exchange.is_none() && logs.len() > 1 {
        eprintln!(
            "note: the capture has {} exchanges; wrote exchange 0 (use --exchange N or --out-dir DIR)",
            logs.len()
        );
    }
    write_log(std::io::stdout().lock(), log)
}

fn write_log(sink: impl std::io::Write, log: &[TimedDelta]) -> Result<(), String> {
    write_delta_log(std::io::BufWriter::new(sink), log).map_err(|error| format!("cannot write the log: {error}"))
}
