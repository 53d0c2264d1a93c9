//! `bench sessions --store URL --restate`: the same sessions, run by `headstart restate serve` deployments behind a
//! Restate server that the benchmark starts on loopback (`headstart_restate::local`), writing to the same store.
//!
//! For each deployment count N: a fresh server, N deployments (each running up to `concurrency` turns at once),
//! registered directly when N is 1 and behind a [`Balancer`] otherwise. Submission is closed-loop as for workers:
//! N × `concurrency` turns are submitted and unfinished at any time, each awaited through the ingress
//! (`attach`), the next submitted when one ends. Submit→begin comes from the store (each session is created by
//! its turn's `begin`), seal→body and the journal entries from the deployments' `/metrics`.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use headstart::{Clock, SystemClock};
use headstart_bench::fleet::{FleetLoad, FleetRun};
use headstart_restate::local::{free_port, LocalServer};
use headstart_restate::{new_session_id, Balancer, RestateClient, TurnRequest};
use tokio::sync::mpsc;

use super::workers::Workers;
use super::{commits, histogram_ms, per_session, scrape, throughput, FleetOptions, STALL_AFTER};
use crate::store_url::{runtime, Access, StoreUrl};

/// Runs `options.sessions` turns on `deployments` deployments under `load`, closed-loop.
pub(super) fn measure(
    server_binary: &Path,
    url: &str,
    scenario: &Path,
    deployments: usize,
    load: FleetLoad,
    options: &FleetOptions,
) -> Result<FleetRun, String> {
    let dir = tempfile::tempdir().map_err(|error| format!("cannot create a temporary folder: {error}"))?;
    let server = LocalServer::start(server_binary, dir.path())?;
    let ports = (0..deployments).map(|_| free_port()).collect::<Result<Vec<_>, _>>()?;
    let processes = Workers::spawn(url, deployments, |index| {
        let mut args: Vec<OsString> = vec!["restate".into(), "serve".into(), "--addr".into()];
        args.push(format!("127.0.0.1:{}", ports[index]).into());
        args.push("--scenario".into());
        args.push(scenario.into());
        args.push("--concurrency".into());
        args.push(options.concurrency.to_string().into());
        args
    })?;
    let endpoints = processes.endpoints(Duration::from_secs(60))?;
    let runtime = runtime()?;
    let store = runtime.block_on(StoreUrl::parse(url).open(Access::Create))?;
    let ingress = RestateClient::new(&server.ingress_url(0));
    let started = runtime.block_on(async {
        let target = if deployments == 1 {
            format!("http://127.0.0.1:{}", ports[0])
        } else {
            let balancer = Balancer::new(
                &ports
                    .iter()
                    .map(|port| format!("http://127.0.0.1:{port}"))
                    .collect::<Vec<_>>(),
            )
            .map_err(|error| error.to_string())?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|error| format!("cannot listen for the balancer: {error}"))?;
            let addr = listener.local_addr().map_err(|error| error.to_string())?;
            tokio::spawn(balancer.serve(listener));
            format!("http://{addr}")
        };
        crate::restate::register_when_up(&server.admin_url(0), &target).await?;
        closed_loop(&ingress, deployments * options.concurrency, options.sessions).await
    })?;
    let Finished {
        seconds,
        submitted_at_us,
    } = started;
    let pages = scrape(&endpoints)?;
    drop(processes);
    drop(server);
    let ours: HashSet<String> = submitted_at_us.keys().cloned().collect();
    let commits = runtime.block_on(commits(store.as_ref(), &ours))?;
    let waits = runtime.block_on(async {
        let infos = store.sessions().await.map_err(|error| error.to_string())?;
        Ok::<_, String>(
            infos
                .iter()
                .filter_map(|info| {
                    let submitted = submitted_at_us.get(&info.id.0)?;
                    Some((info.created_at_us - submitted).max(0) as f64 / 1000.0)
                })
                .collect::<Vec<f64>>(),
        )
    })?;
    let sessions = options.sessions;
    let mut run = throughput("restate", deployments, load, sessions, seconds, commits, &waits);
    run.seal_to_start_ms = histogram_ms(&pages, headstart_restate::metrics::SEAL_TO_BODY, &[]);
    run.statements_per_session = per_session(&pages, headstart_postgres::metrics::STATEMENTS, sessions);
    run.journal_entries_per_session = per_session(&pages, headstart_restate::metrics::JOURNAL_ENTRIES, sessions);
    Ok(run)
}

/// What a closed-loop run measured.
struct Finished {
    /// From the first submission to the last turn's end.
    seconds: f64,
    /// When each session was submitted, on the wall clock (µs).
    submitted_at_us: HashMap<String, i64>,
}

/// Keeps `in_flight` turns submitted and unfinished until `sessions` have completed.
async fn closed_loop(ingress: &RestateClient, in_flight: usize, sessions: usize) -> Result<Finished, String> {
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let mut submitted_at_us = HashMap::new();
    let submit = |submitted_at_us: &mut HashMap<String, i64>| {
        let session = new_session_id();
        submitted_at_us.insert(session.clone(), SystemClock.now_us());
        let (ingress, done_tx) = (ingress.clone(), done_tx.clone());
        tokio::spawn(async move {
            let request = TurnRequest {
                prompt: "go".to_owned(),
                ..TurnRequest::default()
            };
            let report = match ingress.submit(&session, &request, &session).await {
                Ok(invocation) => ingress.attach(&invocation).await,
                Err(error) => Err(error),
            };
            let _ = done_tx.send((session, report));
        });
    };
    let started = Instant::now();
    for _ in 0..in_flight.min(sessions) {
        submit(&mut submitted_at_us);
    }
    let mut finished = 0;
    let mut last = started;
    while finished < sessions {
        let Ok(Some((session, report))) = tokio::time::timeout(STALL_AFTER, done.recv()).await else {
            return Err(format!(
                "no turn ended for {} s ({finished} of {sessions} finished)",
                STALL_AFTER.as_secs()
            ));
        };
        let report = report.map_err(|error| format!("session {session}: {error}"))?;
        if report.stop != headstart::AgentStop::Completed {
            return Err(format!("session {session} did not complete: {:?}", report.stop));
        }
        finished += 1;
        last = Instant::now();
        if submitted_at_us.len() < sessions {
            submit(&mut submitted_at_us);
        }
    }
    Ok(Finished {
        seconds: last.saturating_duration_since(started).as_secs_f64(),
        submitted_at_us,
    })
}
