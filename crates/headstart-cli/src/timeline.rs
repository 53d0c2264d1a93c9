//! `headstart timeline DB [--session ID] [--out timeline.svg]` and `headstart timeline --report REPORT.json
//! [--out …]`: render what happened as an SVG Gantt chart (model stream lanes, tool call lanes, a time axis in ms)
//! with the time saved over end-of-stream batching.

use std::path::PathBuf;

use headstart::store::SessionId;
use headstart_timeline::{format_ms, svg, Timeline};

use crate::store_url::{runtime, Access, StoreUrl};

/// Arguments of `headstart timeline`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["db", "report"])))]
pub struct Args {
    /// The store: a SQLite file, or a PostgreSQL connection string (postgresql://… or host=… dbname=…).
    db: Option<String>,
    /// The session to draw (default: the newest).
    #[arg(long, conflicts_with = "report")]
    session: Option<String>,
    /// Draw a replay report (`headstart replay` output) instead of a transcript file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Where the SVG goes.
    #[arg(long, default_value = "timeline.svg")]
    out: PathBuf,
}

/// Renders the timeline and prints where it went; exit status 1 on failure.
pub fn run(args: &Args) -> u8 {
    let result = load(args).and_then(|timeline| {
        let svg = svg::render(&timeline);
        std::fs::write(&args.out, svg).map_err(|error| format!("cannot write {}: {error}", args.out.display()))?;
        Ok(timeline)
    });
    match result {
        Ok(timeline) => {
            let savings = timeline.savings();
            println!("{}", args.out.display());
            println!(
                "  {}: {} request(s), {} tool call(s) ({} executed); actual {} ms, end-of-stream batching {} ms, \
                 saved {} ms",
                timeline.title,
                timeline.requests.len(),
                timeline.calls.len(),
                timeline.calls.iter().filter(|call| call.executed()).count(),
                format_ms(savings.actual_end_ms),
                format_ms(savings.batching_end_ms),
                format_ms(savings.saved_ms())
            );
            0
        }
        Err(error) => {
            eprintln!("headstart timeline: {error}");
            1
        }
    }
}

fn load(args: &Args) -> Result<Timeline, String> {
    if let Some(report) = &args.report {
        let text =
            std::fs::read_to_string(report).map_err(|error| format!("cannot read {}: {error}", report.display()))?;
        return Timeline::from_report_json(&text).map_err(|error| error.to_string());
    }
    let Some(db) = &args.db else {
        return Err("give a transcript file or --report".to_owned());
    };
    runtime()?.block_on(async {
        let url = StoreUrl::parse(db);
        let store = url.open(Access::Read).await?;
        let session = match &args.session {
            Some(id) => SessionId(id.clone()),
            None => store
                .sessions()
                .await
                .map_err(|error| error.to_string())?
                .into_iter()
                // The newest is the latest created; `max_by_key` keeps the last listed on ties.
                .max_by_key(|info| info.created_at_us)
                .map(|info| info.id)
                .ok_or_else(|| format!("{url} holds no sessions"))?,
        };
        let log = store.load_log(&session).await.map_err(|error| error.to_string())?;
        if log.is_empty() {
            return Err(format!("session {session} has no messages"));
        }
        let runs = store.tool_runs(&session).await.map_err(|error| error.to_string())?;
        Ok(Timeline::from_store(format!("session {session}"), &log, &runs))
    })
}
