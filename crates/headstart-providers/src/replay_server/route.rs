//! [`Route`]: scripted answers to GETs of one path beyond a plain page (redirects, large and trickled bodies, a
//! result ready only once the model was asked again), and how each is answered.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::StreamBody;
use hyper::body::Frame;
use hyper::Response;

use super::{response, whole, Body};

/// A scripted answer to GETs of one path, beyond a plain [`Page`](super::Page); added with [`ReplayServer::route`](super::ReplayServer::route).
#[derive(Debug, Clone)]
pub enum Route {
    /// A redirect: this status (301, 302, 303, 307 or 308) with this `Location`.
    Redirect {
        /// The status.
        status: u16,
        /// The `Location` header, absolute or relative.
        location: String,
    },
    /// A 200 whose body is `bytes` bytes of `fill`, sent as fast as the client reads, in chunks of 64 KiB.
    Large {
        /// The body's length.
        bytes: u64,
        /// The byte repeated.
        fill: u8,
    },
    /// A 200 with `body`, sent once the server has received `posts` model requests (POSTs), or after `timeout`: a
    /// tool's result that is ready only once the model was asked that often, whatever the machine's load.
    AfterPosts {
        /// The model requests to wait for.
        posts: usize,
        /// The body (text/plain).
        body: String,
        /// How long it waits at most.
        timeout: Duration,
    },
    /// A 200 whose body is `chunk`, sent `chunks` times, `interval` apart.
    Trickle {
        /// What each send carries.
        chunk: String,
        /// The pause before each.
        interval: Duration,
        /// How many sends.
        chunks: usize,
    },
}

/// The answer of `route`.
pub(super) fn routed(route: Route) -> Response<Body> {
    match route {
        Route::Redirect { status, location } => response(
            status,
            &[("location".to_owned(), location)],
            "text/plain",
            whole(String::new()),
        ),
        Route::AfterPosts { body, .. } => response(200, &[], "text/plain", whole(body)),
        Route::Large { bytes, fill } => {
            const CHUNK: u64 = 64 * 1024;
            let chunk = Bytes::from(vec![fill; CHUNK as usize]);
            let frames = futures::stream::unfold(bytes, move |left| {
                let chunk = chunk.clone();
                async move {
                    let size = left.min(CHUNK);
                    (size > 0).then(|| (Ok(Frame::data(chunk.slice(..size as usize))), left - size))
                }
            });
            response(200, &[], "text/plain", StreamBody::new(frames.boxed()))
        }
        Route::Trickle {
            chunk,
            interval,
            chunks,
        } => {
            let frames = futures::stream::unfold(chunks, move |left| {
                let chunk = chunk.clone();
                async move {
                    if left == 0 {
                        return None;
                    }
                    tokio::time::sleep(interval).await;
                    Some((Ok(Frame::data(Bytes::from(chunk))), left - 1))
                }
            });
            response(200, &[], "text/plain", StreamBody::new(frames.boxed()))
        }
    }
}
