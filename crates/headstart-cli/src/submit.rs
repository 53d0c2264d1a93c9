//! `headstart submit --store URL [--scenario FILE] [--count N] [--system TEXT] [--model NAME] ["PROMPT"]`: put
//! sessions in a fleet's queue (contract §7.5); a worker claims them. Prints each new session's id.

use std::path::PathBuf;

use headstart::store::SessionSettings;
use headstart::{Clock, SystemClock, UserMessage};
use headstart_sim::Scenario;

use crate::store_url::{runtime, Access, StoreUrl};

/// Arguments of `headstart submit`.
#[derive(clap::Args)]
pub struct Args {
    /// The store: a SQLite file (created if missing), or a PostgreSQL connection string (postgresql://… or
    /// host=… dbname=…).
    #[arg(long)]
    store: String,
    /// Take the prompt from this scenario when none is given.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// How many sessions to submit, each with the same prompt.
    #[arg(long, default_value_t = 1)]
    count: usize,
    /// The session's own system prompt, used by the worker that runs it instead of the worker's `--system`,
    /// e.g. `--system "Answer in one paragraph."`.
    #[arg(long)]
    system: Option<String>,
    /// The model the session's requests ask for, instead of the worker's `--model` (same provider and endpoint),
    /// e.g. `--model gpt-4.1-mini`.
    #[arg(long)]
    model: Option<String>,
    /// The prompt (message 1 of the session).
    prompt: Option<String>,
}

/// Submits; exit status 1 when nothing could be submitted, 2 on bad arguments.
pub fn run(args: &Args) -> u8 {
    let prompt = match (&args.prompt, &args.scenario) {
        (Some(prompt), _) => prompt.clone(),
        (None, Some(path)) => match Scenario::load(path) {
            Ok(scenario) => scenario.prompt,
            Err(error) => {
                eprintln!("headstart submit: {error}");
                return 2;
            }
        },
        (None, None) => {
            eprintln!("headstart submit: give a PROMPT or a --scenario to take it from");
            return 2;
        }
    };
    let settings = SessionSettings {
        system: args.system.clone(),
        model: args.model.clone(),
    };
    if settings.model.as_deref().is_some_and(|model| model.trim().is_empty()) {
        eprintln!("headstart submit: --model needs a model name");
        return 2;
    }
    let submitted = runtime().and_then(|runtime| {
        runtime.block_on(async {
            let store = StoreUrl::parse(&args.store).open(Access::Create).await?;
            let message = UserMessage::new(prompt);
            for _ in 0..args.count {
                let session = store
                    .submit_with(&message, &settings, SystemClock.now_us())
                    .await
                    .map_err(|error| error.to_string())?;
                println!("{session}");
            }
            Ok::<_, String>(())
        })
    });
    match submitted {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("headstart submit: {error}");
            1
        }
    }
}
