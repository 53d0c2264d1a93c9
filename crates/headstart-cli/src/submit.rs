//! `headstart submit (--store URL [--queue NAME] | --restate INGRESS_URL [--wait]) [--scenario FILE] [--count N]
//! [--system TEXT] [--model NAME] ["PROMPT"]`: put sessions in a fleet's queue (contract §7.5), where a worker of
//! that queue claims them, or send them to a Restate server, where a deployment runs them (docs/restate.md). Prints
//! each new session's id.

use std::path::PathBuf;

use headstart::store::{QueueName, SessionSettings};
use headstart::{Clock, SystemClock, UserMessage};
use headstart_sim::Scenario;

use crate::store_url::{runtime, Access, StoreUrl};

/// Arguments of `headstart submit`.
#[derive(clap::Args)]
pub struct Args {
    /// The store: a SQLite file (created if missing), or a PostgreSQL connection string (postgresql://… or
    /// host=… dbname=…).
    #[arg(long, required_unless_present = "restate", conflicts_with = "restate")]
    store: Option<String>,
    /// Send each session to the `Session` object of this Restate server's ingress instead, e.g.
    /// `--restate http://127.0.0.1:8080`.
    #[arg(long, value_name = "INGRESS_URL")]
    restate: Option<String>,
    /// With --restate: wait for each session's turn to end and print its report (one JSON line) before its id.
    #[arg(long, requires = "restate")]
    wait: bool,
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
    /// The queue the sessions wait in: only a worker serving it (`worker --queue NAME`) claims them, e.g.
    /// `--queue gpu-batch`. At most 64 bytes of printable characters, no whitespace.
    #[arg(long, value_name = "NAME", default_value = QueueName::DEFAULT, conflicts_with = "restate")]
    queue: QueueName,
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
        queue: Some(args.queue.clone()),
    };
    if settings.model.as_deref().is_some_and(|model| model.trim().is_empty()) {
        eprintln!("headstart submit: --model needs a model name");
        return 2;
    }
    let submitted = runtime().and_then(|runtime| {
        runtime.block_on(async {
            #[cfg(feature = "restate")]
            if let Some(ingress) = &args.restate {
                return to_restate(ingress, args, &prompt, &settings).await;
            }
            let Some(store) = &args.store else {
                return Err("--restate needs a binary built with the `restate` feature".to_owned());
            };
            let store = StoreUrl::parse(store).open(Access::Create).await?;
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

/// Sends `count` new sessions to a Restate server, each under its own id (the object's key, and its idempotency
/// key: a retried submission is refused, never run twice).
#[cfg(feature = "restate")]
async fn to_restate(ingress: &str, args: &Args, prompt: &str, settings: &SessionSettings) -> Result<(), String> {
    use headstart_restate::{new_session_id, RestateClient, TurnRequest};
    let client = RestateClient::new(ingress);
    let request = TurnRequest {
        prompt: prompt.to_owned(),
        model: settings.model.clone(),
        system: settings.system.clone(),
    };
    for _ in 0..args.count {
        let session = new_session_id();
        let invocation = client
            .submit(&session, &request, &session)
            .await
            .map_err(|error| error.to_string())?;
        if args.wait {
            let report = client.attach(&invocation).await.map_err(|error| error.to_string())?;
            println!("{}", serde_json::to_string(&report).map_err(|error| error.to_string())?);
        }
        println!("{session}");
    }
    Ok(())
}
