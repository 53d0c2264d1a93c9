//! Progress: the client handler that receives a server's `notifications/progress`, and the routes that hand each to
//! the update sink of the call whose request carried its token.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use headstart::UpdateSink;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};

use crate::content::progress_update;

/// Progress notifications kept for tokens no call has registered yet (see [`ProgressRoutes`]).
const EARLY_PROGRESS: usize = 64;

/// Where progress notifications go: the update sink of the call whose request carried the token.
///
/// rmcp picks a request's progress token while sending it, so a fast server can report progress before the call
/// has registered its sink; those notifications wait here (a few, the oldest dropped first) for their call.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    inner: Mutex<Routes>,
}

#[derive(Default)]
struct Routes {
    sinks: HashMap<ProgressToken, UpdateSink>,
    early: VecDeque<ProgressNotificationParam>,
}

impl ProgressRoutes {
    fn lock(&self) -> MutexGuard<'_, Routes> {
        // Plain map and queue operations: a poisoned lock holds consistent data.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn deliver(&self, progress: ProgressNotificationParam) {
        let mut routes = self.lock();
        match routes.sinks.get(&progress.progress_token) {
            Some(sink) => sink.send(progress_update(&progress)),
            None => {
                if routes.early.len() == EARLY_PROGRESS {
                    routes.early.pop_front();
                }
                routes.early.push_back(progress);
            }
        }
    }

    pub(crate) fn register(self: &Arc<Self>, token: ProgressToken, sink: UpdateSink) -> Route {
        let mut routes = self.lock();
        let Routes { sinks, early } = &mut *routes;
        early.retain(|progress| {
            let mine = progress.progress_token == token;
            if mine {
                sink.send(progress_update(progress));
            }
            !mine
        });
        sinks.insert(token.clone(), sink);
        Route {
            routes: Arc::clone(self),
            token,
        }
    }
}

/// A call's registration for progress; unregisters when the call ends, however it ends.
pub(crate) struct Route {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.lock().sinks.remove(&self.token);
    }
}

/// headstart's side of the connection: it answers nothing, and routes progress.
pub(crate) struct Client {
    pub(crate) routes: Arc<ProgressRoutes>,
}

impl ClientHandler for Client {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.routes.deliver(params);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("headstart", env!("CARGO_PKG_VERSION")),
        )
    }
}
