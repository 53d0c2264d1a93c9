//! Every route through the router (`tower::ServiceExt::oneshot`, no socket), on a store holding sessions of every
//! kind: what each page shows, the 404s and 400s, the hostile transcript shown as text, the token rule, GET only.

mod support;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use headstart::store::{SessionQueue as _, TranscriptStore};
use headstart_serve::data::inspect_json;
use headstart_serve::Options;
use serde_json::Value;
use support::{get, hostile_text, request, send, server, write_sample, StoreFile};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listing_shows_sessions_newest_first_and_filters_by_state() {
    let file = StoreFile::new();
    let sample = write_sample(&file.writer()).await;
    let app = server(&file.path, &Options::default());

    let page = get(&app, "/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.headers[header::CONTENT_TYPE]
        .to_str()
        .is_ok_and(|t| t.starts_with("text/html")));
    let order: Vec<usize> = [&sample.taken_over, &sample.running, &sample.hostile, &sample.plain]
        .iter()
        .map(|id| page.body.find(&format!("data-session-id=\"{id}\"")).expect("listed"))
        .collect();
    assert!(
        order.windows(2).all(|pair| pair[0] < pair[1]),
        "newest first: {order:?}"
    );
    assert!(
        page.body.contains("running by w1 (epoch 1)"),
        "who runs it and in which epoch"
    );
    assert!(page.body.contains("Look up tokio"), "the prompt's first line");
    assert!(!page.body.contains("and write it down"), "only its first line");
    assert!(page.body.contains("page 1 of 1 (4 sessions)"));

    let running = get(&app, "/?state=running").await;
    assert_eq!(running.status, StatusCode::OK);
    assert_eq!(running.body.matches("<tr class=\"session\"").count(), 2);
    assert!(!running.body.contains(&sample.plain.0));

    let past = get(&app, "/?page=9").await;
    assert_eq!(past.status, StatusCode::OK);
    assert!(past.body.contains("No sessions."));

    let api = get(&app, "/api/sessions?state=unqueued").await;
    let json: Value = serde_json::from_str(&api.body).expect("JSON");
    assert_eq!(json["total"], 2);
    assert_eq!(json["sessions"][0]["session"], sample.hostile.0.as_str());
    let plain = &json["sessions"][1];
    assert_eq!(
        plain["state_words"], "unqueued · waits for the model",
        "where a session outside any queue stands: its last results wait for the model"
    );
    assert_eq!(
        (
            &plain["requests"],
            &plain["early"],
            &plain["after_stream"],
            &plain["failed"],
            &plain["unfinished"]
        ),
        (
            &Value::from(1),
            &Value::from(1),
            &Value::from(1),
            &Value::from(1),
            &Value::from(0)
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_listing_parameters_are_400s_that_name_them() {
    let file = StoreFile::new();
    write_sample(&file.writer()).await;
    let app = server(&file.path, &Options::default());
    for (uri, says) in [
        ("/?page=0", "page must be a whole number"),
        ("/?page=-1", "page must be a whole number"),
        ("/?page=abc", "\"abc\""),
        ("/?page=99999999999999999999", "page must be"),
        ("/?state=bogus", "state must be one of"),
        ("/?colour=red", "unknown parameter \"colour\""),
        ("/api/sessions?page=1.5", "page must be"),
    ] {
        let answer = get(&app, uri).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri}");
        assert!(answer.body.contains(says), "{uri}: {}", answer.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_page_shows_its_transcript_beside_its_timeline() {
    let file = StoreFile::new();
    let sample = write_sample(&file.writer()).await;
    let app = server(&file.path, &Options::default());
    let page = get(&app, &format!("/sessions/{}", sample.plain)).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    assert!(body.contains("id=\"transcript\"") && body.contains("id=\"timeline\""));
    assert!(body.contains("<svg"), "the timeline SVG");
    assert!(
        body.contains("<rect class=\"call\" data-call-id=\"early\""),
        "a bar per executed call"
    );
    assert!(body.contains("<title>"), "hover details");
    assert!(body.contains("<details class=\"thinking\""), "thinking collapsed");
    assert!(body.contains("<li class=\"call\" data-call-id=\"early\" data-state=\"finished\""));
    assert!(
        body.contains("<li class=\"call failed\" data-call-id=\"sync\" data-state=\"error\""),
        "errors marked"
    );
    assert!(body.contains("<div class=\"result error\" data-call-id=\"sync\""));
    assert!(body.contains("tokio 1.x") && body.contains("permission denied"));
    assert!(
        body.contains(
            "<div class=\"figures\">sealed +0.8 ms · headroom 1.2 ms · seal→start 0.3 ms · overlap 0.9 of 1.9 ms</div>"
        ),
        "the early call's figures: {body}"
    );
    assert!(
        body.contains("<div class=\"round\">tool round 2 ms (end-of-stream batching: 2 ms)</div>"),
        "the response's round"
    );
    assert!(body.contains("data-events=\"/sessions/"), "the live events' address");
    assert!(body.contains("/assets/live.js"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_sessions_and_pages_are_404s() {
    let file = StoreFile::new();
    write_sample(&file.writer()).await;
    let app = server(&file.path, &Options::default());
    for uri in [
        "/sessions/no-such-session",
        "/sessions/no-such-session/events",
        "/api/sessions/no-such-session",
        "/nowhere",
        "/sessions/",
    ] {
        let answer = get(&app, uri).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}");
    }
    assert!(get(&app, "/sessions/ghost").await.body.contains("no session ghost"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_transcript_is_shown_as_text() {
    let file = StoreFile::new();
    let sample = write_sample(&file.writer()).await;
    let app = server(&file.path, &Options::default());
    let page = get(&app, &format!("/sessions/{}", sample.hostile)).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    // The page's only script is its own, by address; every piece of markup from the store is text.
    assert_eq!(body.matches("<script").count(), 1, "{}", &body[..2000]);
    for raw in ["<script>alert", "<img src=x", "<b>bold", "<i>hi", "</pre><script>"] {
        assert!(!body.contains(raw), "{raw} reached the page as markup");
    }
    assert!(body.contains("&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;"));
    assert!(body.contains("&lt;img src=x onerror=alert(1)&gt;"));
    // Control characters and bidi overrides are shown as escapes, the undecodable bytes as replacements.
    assert!(!body.contains('\x1b') && !body.contains('\u{202e}'));
    assert!(body.contains("\\x1b[2K\\u{202e}txt.exe"));
    assert!(body.contains("bytes \u{fffd}\u{fffd}\u{fffd} end"));
    // The long line is cut for the page; the API has it whole.
    assert!(body.contains("more characters (the JSON API has the whole text)"));
    assert!(body.len() < 100_000, "page of {} bytes", body.len());
    let api = get(&app, &format!("/api/sessions/{}", sample.hostile)).await;
    let json: Value = serde_json::from_str(&api.body).expect("JSON");
    assert_eq!(json["transcript"][2]["text"], hostile_text().as_str());
    assert_eq!(api.headers[header::CONTENT_TYPE], "application/json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_as_json_is_what_inspect_prints() {
    let file = StoreFile::new();
    let writer = file.writer();
    let sample = write_sample(&writer).await;
    let app = server(&file.path, &Options::default());
    let answer = get(&app, &format!("/api/sessions/{}", sample.running)).await;
    assert_eq!(answer.status, StatusCode::OK);
    let json: Value = serde_json::from_str(&answer.body).expect("JSON");
    let info = writer.session(&sample.running).await.expect("read").expect("there");
    let log = writer.load_log(&sample.running).await.expect("log");
    let runs = writer.tool_runs(&sample.running).await.expect("runs");
    assert_eq!(json, inspect_json(&info, &log, &runs));
    assert_eq!(
        (&json["state"], &json["owner"], &json["epoch"]),
        (&Value::from("running"), &Value::from("w1"), &Value::from(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_shows_workers_their_leases_and_takeovers() {
    let file = StoreFile::new();
    let writer = file.writer();
    let sample = write_sample(&writer).await;
    // A session of another queue, released once because its worker's provider was down (issue 44).
    let gpu = headstart::store::QueueName::new("gpu").expect("a queue name");
    let settings = headstart::store::SessionSettings {
        queue: Some(gpu.clone()),
        ..Default::default()
    };
    let retried = writer
        .submit_with(&headstart::UserMessage::new("gpu work"), &settings, 40_000)
        .await
        .expect("submit");
    let claim = writer
        .claim_from("w3", &[gpu], std::time::Duration::from_secs(600), 1)
        .await
        .expect("claim")
        .remove(0);
    let retry = headstart::store::SessionEnd::Retry {
        reason: "HTTP 503 from the provider".to_owned(),
        after: std::time::Duration::from_secs(600),
    };
    writer.finish(&claim.lease, retry).await.expect("release for a retry");
    let app = server(&file.path, &Options::default());
    let page = get(&app, "/fleet").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("data-worker=\"w1\"") && page.body.contains("data-worker=\"w2\""));
    assert!(page.body.contains("lease ends in"));
    assert!(page.body.contains("Takeovers"));
    let api = get(&app, "/api/fleet").await;
    let json: Value = serde_json::from_str(&api.body).expect("JSON");
    assert_eq!(json["queue"], true);
    assert_eq!(json["workers"][0]["name"], "w1");
    assert_eq!(json["workers"][0]["running"][0]["session"], sample.running.0.as_str());
    assert_eq!(
        json["workers"][1]["running"][0]["session"],
        sample.taken_over.0.as_str()
    );
    assert_eq!(json["takeovers"][0]["session"], sample.taken_over.0.as_str());
    assert_eq!(json["takeovers"][0]["epoch"], 2);
    assert_eq!(
        json["queues"],
        serde_json::json!([
            {"name": "default", "pending": 0, "retrying": 0, "running": 2},
            {"name": "gpu", "pending": 1, "retrying": 1, "running": 0},
        ])
    );
    assert!(page.body.contains("data-queue=\"gpu\""));
    let session = get(&app, &format!("/sessions/{retried}")).await;
    assert!(
        session
            .body
            .contains("pending in queue gpu, released 1 time(s) for a provider outage, not claimed before "),
        "{}",
        session.body
    );
    assert!(session.body.contains("(last error: attempt") || session.body.contains("(last error: HTTP 503"));

    let empty = StoreFile::new();
    drop(empty.writer());
    let single = server(&empty.path, &Options::default());
    assert!(get(&single, "/fleet").await.body.contains("no queued sessions"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_get_is_answered() {
    let file = StoreFile::new();
    let sample = write_sample(&file.writer()).await;
    let app = server(&file.path, &Options::default());
    let session = format!("/sessions/{}", sample.plain);
    let api = format!("/api/sessions/{}", sample.plain);
    for uri in [
        "/",
        session.as_str(),
        api.as_str(),
        "/api/sessions",
        "/fleet",
        "/api/fleet",
    ] {
        for method in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            let answer = request(&app, method.clone(), uri).await;
            assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        }
        assert_eq!(
            request(&app, Method::HEAD, uri).await.status,
            StatusCode::OK,
            "HEAD {uri}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assets_are_embedded_and_every_answer_carries_the_policy() {
    let file = StoreFile::new();
    drop(file.writer());
    let app = server(&file.path, &Options::default());
    let css = get(&app, "/assets/style.css").await;
    assert_eq!(css.headers[header::CONTENT_TYPE], "text/css; charset=utf-8");
    let js = get(&app, "/assets/live.js").await;
    assert!(js.body.contains("EventSource"));
    for answer in [css, js, get(&app, "/").await, get(&app, "/nowhere").await] {
        let policy = answer.headers[header::CONTENT_SECURITY_POLICY].to_str().expect("ASCII");
        assert!(policy.contains("default-src 'none'") && policy.contains("script-src 'self'"));
        assert_eq!(answer.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_every_request_must_carry_it() {
    let file = StoreFile::new();
    let sample = write_sample(&file.writer()).await;
    let options = Options {
        token: Some("s3cret".to_owned()),
        ..Options::default()
    };
    let app = server(&file.path, &options);
    let session = format!("/sessions/{}", sample.plain);
    for uri in ["/", session.as_str(), "/api/sessions", "/assets/live.js", "/nowhere"] {
        assert_eq!(get(&app, uri).await.status, StatusCode::UNAUTHORIZED, "{uri}");
        assert_eq!(
            get(&app, &format!("{uri}?token=wrong")).await.status,
            StatusCode::UNAUTHORIZED,
            "{uri}"
        );
    }
    let refused = get(&app, "/").await;
    assert!(refused.body.contains("needs its token"));

    let bearer = |value: &str| {
        Request::get("/api/sessions")
            .header(header::AUTHORIZATION, value)
            .body(Body::empty())
            .expect("request")
    };
    assert_eq!(send(&app, bearer("Bearer s3cret")).await.status, StatusCode::OK);
    assert_eq!(
        send(&app, bearer("Bearer s3cre")).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(send(&app, bearer("s3cret")).await.status, StatusCode::UNAUTHORIZED);

    // The URL's token becomes a cookie, and the URL loses it.
    let visit = get(&app, "/?state=running&token=s3cret").await;
    assert_eq!(visit.status, StatusCode::SEE_OTHER);
    assert_eq!(visit.headers[header::LOCATION], "/?state=running");
    let cookie = visit.headers[header::SET_COOKIE].to_str().expect("ASCII").to_owned();
    assert!(
        cookie.starts_with("headstart_token=s3cret;") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let with_cookie = Request::get(&session)
        .header(header::COOKIE, "other=1; headstart_token=s3cret")
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(&app, with_cookie).await.status, StatusCode::OK);
    let wrong_cookie = Request::get(&session)
        .header(header::COOKIE, "headstart_token=s3cre")
        .body(Body::empty())
        .expect("request");
    assert_eq!(send(&app, wrong_cookie).await.status, StatusCode::UNAUTHORIZED);
}
