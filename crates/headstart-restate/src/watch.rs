//! [`watch_failing_calls`]: a deployment's look at the calls Restate keeps retrying, through the admin API.

use std::collections::HashSet;

use crate::client::RestateClient;
use crate::metrics::{record_failing_calls, FAILING_CALLS_EVERY};

/// Asks the admin API at `admin` which calls fail, every [`FAILING_CALLS_EVERY`], for as long as the task runs:
/// [`CALLS_FAILING`](crate::metrics::CALLS_FAILING), and a warning in the log, once per call, for each call whose
/// replay contradicts its journal (code 570), which Restate would otherwise retry without a word. An admin API that
/// does not answer is said once, then again when it has answered since.
pub async fn watch_failing_calls(admin: String) {
    let client = RestateClient::new(&admin);
    let mut unreachable = false;
    let mut warned = HashSet::new();
    loop {
        match client.failing_calls().await {
            Ok(calls) => {
                unreachable = false;
                record_failing_calls(&calls);
                for call in calls.iter().filter(|call| call.code() == Some(570)) {
                    if warned.insert(call.invocation.clone()) {
                        tracing::warn!(
                            invocation = %call.invocation,
                            retries = call.retries,
                            failure = call.last_failure.as_deref().unwrap_or_default(),
                            "a call's replay contradicts its journal; Restate retries it until it is fixed or cancelled"
                        );
                    }
                }
            }
            Err(error) if !unreachable => {
                unreachable = true;
                tracing::warn!(%error, "cannot ask the admin API which calls fail");
            }
            Err(_) => {}
        }
        tokio::time::sleep(FAILING_CALLS_EVERY).await;
    }
}
