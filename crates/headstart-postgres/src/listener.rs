//! The wake-up listener ([`SessionQueue::wake_ups`](headstart_store::SessionQueue::wake_ups) on PostgreSQL): a
//! connection of its own, outside the pool, that runs `LISTEN` on the queue's channel and turns each `pending`
//! notification of a session in one of the worker's queues (or naming no queue) into a [`WakeUp::Work`]. When the connection drops (the server restarted, an administrator ended
//! it, the network failed) it says so once ([`WakeUp::Lost`]) and reconnects after the waits of its [`Backoff`];
//! once listening again it says [`WakeUp::Listening`], and the worker looks once for what it missed meanwhile.
//!
//! A connection that dies silently (no reset, a frozen server) is found by a heartbeat: an empty query after
//! [`HEARTBEAT_AFTER`] without traffic, which must be answered within [`HEARTBEAT_TIMEOUT`].

use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::time::Duration;

use headstart_store::wake::{self, WakeSender, WakeUp, WakeUps};
use headstart_store::{Backoff, Failures, QueueName};
use tokio_postgres::{AsyncMessage, Config, Connection, Socket};

use crate::connect::{connect, Stream};
use crate::errors::describe;
use crate::sql;
use crate::tls::MakeRustls;

/// The `application_name` of the listener's connection, so that it can be told apart in `pg_stat_activity`.
pub const LISTENER_NAME: &str = "headstart-listener";

/// How long the connection may stay silent before the listener checks it is alive.
const HEARTBEAT_AFTER: Duration = Duration::from_secs(15);

/// How long the server has to answer the heartbeat before the connection counts as lost.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the listener connects with: the store's own settings (host, credentials, TLS), its own name.
pub(crate) struct Listener {
    config: Config,
    tls: MakeRustls,
    retry: Backoff,
}

impl Listener {
    /// A listener connecting as `config` says (the store's settings) through `tls`, waiting as `retry` says
    /// before each reconnection.
    pub(crate) fn new(mut config: Config, tls: MakeRustls, retry: Backoff) -> Self {
        config.application_name(LISTENER_NAME);
        Listener { config, tls, retry }
    }

    /// Starts listening for sessions of `queues` on a task of its own; `None` outside a tokio runtime. The task
    /// ends when the receiver is dropped.
    pub(crate) fn spawn(self: &Arc<Self>, queues: &[QueueName]) -> Option<WakeUps> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (sender, receiver) = wake::channel();
        let wanted = Wanted {
            sender,
            queues: queues.to_vec(),
        };
        let task = runtime.spawn(Arc::clone(self).listen(wanted));
        Some(receiver.stopping_on_drop(task.abort_handle()))
    }

    /// Listens, reconnecting whenever the connection is lost, for as long as the receiver is there.
    async fn listen(self: Arc<Self>, wanted: Wanted) {
        let sender = &wanted.sender;
        let mut failures = Failures::default();
        // Whether the receiver knows wake-ups are down (one `Lost` per outage, however many tries it takes).
        let mut down = false;
        while !sender.is_closed() {
            let lost = self.listen_once(&wanted, &mut failures, &mut down).await;
            if !down {
                sender.post(WakeUp::Lost(lost));
                down = true;
            }
            tokio::time::sleep(failures.failed(&self.retry, fastrand::f64())).await;
        }
    }

    /// One connection: connects, listens, passes notifications on until the connection is lost; returns why.
    async fn listen_once(&self, wanted: &Wanted, failures: &mut Failures, down: &mut bool) -> String {
        let sender = &wanted.sender;
        let (client, mut connection) = match connect(&self.config, &self.tls).await {
            Ok(connected) => connected,
            Err(error) => return format!("cannot connect: {}", describe(&error)),
        };
        match alongside(&mut connection, wanted, client.batch_execute(sql::LISTEN)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return format!("cannot listen: {}", describe(&error)),
            Err(lost) => return lost,
        }
        failures.succeeded();
        *down = false;
        sender.post(WakeUp::Listening);
        loop {
            tokio::select! {
                message = poll_fn(|cx| connection.poll_message(cx)) => {
                    if let Err(lost) = take(message, wanted) {
                        return lost;
                    }
                }
                () = tokio::time::sleep(HEARTBEAT_AFTER) => {
                    let ping = tokio::time::timeout(HEARTBEAT_TIMEOUT, client.simple_query(sql::HEARTBEAT));
                    match alongside(&mut connection, wanted, ping).await {
                        Ok(Ok(Ok(_))) => {}
                        Ok(Ok(Err(error))) => return format!("heartbeat failed: {}", describe(&error)),
                        Ok(Err(_)) => return format!("no answer to the heartbeat within {HEARTBEAT_TIMEOUT:?}"),
                        Err(lost) => return lost,
                    }
                }
            }
        }
    }
}

/// Runs `request` (a query of the connection's client) while driving the connection, which is what carries it,
/// passing on notifications that come meanwhile. `Err` when the connection is lost first.
async fn alongside<T>(
    connection: &mut Connection<Socket, Stream>,
    wanted: &Wanted,
    request: impl Future<Output = T>,
) -> Result<T, String> {
    tokio::pin!(request);
    loop {
        tokio::select! {
            answer = &mut request => return Ok(answer),
            message = poll_fn(|cx| connection.poll_message(cx)) => take(message, wanted)?,
        }
    }
}

/// One message from the connection: a notification is passed on; an error or the end of the connection is why
/// it was lost.
fn take(message: Option<Result<AsyncMessage, tokio_postgres::Error>>, wanted: &Wanted) -> Result<(), String> {
    match message {
        Some(Ok(AsyncMessage::Notification(notification))) => {
            if let Some(wake_up) = wake_up(notification.channel(), notification.payload(), &wanted.queues) {
                wanted.sender.post(wake_up);
            }
            Ok(())
        }
        // A notice (a warning from the server) says nothing about the queue.
        Some(Ok(_)) => Ok(()),
        Some(Err(error)) => Err(describe(&error)),
        None => Err("the server closed the connection".to_owned()),
    }
}

/// Where a listener's wake-ups go, and for which queues.
struct Wanted {
    sender: WakeSender,
    queues: Vec<QueueName>,
}

/// The wake-up a notification on `channel` with `payload` (`<state> <session id> [<queue>]`) calls for: work for a
/// session that became `pending` in one of `queues` (submitted), or in a queue it does not name (released at a
/// shutdown, by a worker that does not know the queue: a spurious wake-up costs one empty claim). A finished
/// session frees room only in the worker that finished it, which looks for work by itself.
fn wake_up(channel: &str, payload: &str, queues: &[QueueName]) -> Option<WakeUp> {
    let mut words = payload.split(' ');
    let state = words.next()?;
    let _session = words.next();
    let ours = words
        .next()
        .is_none_or(|queue| queues.iter().any(|wanted| wanted.as_str() == queue));
    (channel == sql::CHANNEL && state == "pending" && ours).then_some(WakeUp::Work)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pending_session_of_a_wanted_queue_on_the_queue_channel_is_work() {
        let session = "0190f4e1-0000-7000-8000-000000000001";
        let queues = [QueueName::default(), QueueName::new("gpu").expect("a name")];
        let work = |channel: &str, payload: &str| wake_up(channel, payload, &queues);
        assert_eq!(
            work(sql::CHANNEL, &format!("pending {session} default")),
            Some(WakeUp::Work)
        );
        assert_eq!(
            work(sql::CHANNEL, &format!("pending {session} gpu")),
            Some(WakeUp::Work)
        );
        assert_eq!(
            work(sql::CHANNEL, &format!("pending {session} cpu")),
            None,
            "another queue's"
        );
        assert_eq!(
            work(sql::CHANNEL, &format!("pending {session}")),
            Some(WakeUp::Work),
            "no queue named"
        );
        for finished in ["completed", "failed"] {
            assert_eq!(work(sql::CHANNEL, &format!("{finished} {session} default")), None);
        }
        assert_eq!(work("another_channel", &format!("pending {session} default")), None);
        assert_eq!(work(sql::CHANNEL, ""), None);
    }
}
