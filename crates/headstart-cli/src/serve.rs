//! `headstart serve [STORE] [--addr 127.0.0.1:7878] [--token TOKEN] [--restate ADMIN_URL]`: a read-only, live web
//! view of a store (docs/serve.md), and the server `demo --serve` and `run --serve` start beside their run.

use std::net::SocketAddr;
use std::sync::Arc;

use headstart::store::SqliteStore;
use headstart_serve::{check_bind, router, url, Changes, Options, Source};

use crate::restate_turns;
use crate::store_url::{runtime, Access, StoreUrl};

/// The address served when none is given.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7878";

/// Arguments of `headstart serve`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  headstart serve                                   # ./headstart.db on http://127.0.0.1:7878/
  headstart serve runs.db --addr 127.0.0.1:0        # any free port
  headstart serve postgresql://viewer@db/agents --addr 0.0.0.0:7878 --token \"$(openssl rand -hex 16)\"")]
pub struct Args {
    /// The store: a SQLite file, or a PostgreSQL connection string (postgresql://… or host=… dbname=…). Opened
    /// read-only.
    #[arg(default_value = "headstart.db")]
    store: String,
    /// Where to listen. Any address but loopback needs --token.
    #[arg(long, default_value = DEFAULT_ADDR)]
    addr: SocketAddr,
    /// A token every request must carry (the printed URL carries it; or `Authorization: Bearer TOKEN`): letters,
    /// digits and - . _ ~.
    #[arg(long)]
    token: Option<String>,
    /// Also show, on each session's page and in its JSON (`restate`), its turns as the Restate server whose admin
    /// API is here sees them, e.g. `--restate http://127.0.0.1:9070` (docs/restate.md).
    #[arg(long, value_name = "ADMIN_URL")]
    restate: Option<String>,
}

/// Serves until Ctrl-C; exit status 1 when the store cannot be opened or the address bound, 2 for an address
/// that needs a token.
pub fn run(args: &Args) -> u8 {
    if let Err(error) = check_bind(args.addr, args.token.as_deref()) {
        eprintln!("headstart serve: {error}");
        return 2;
    }
    let served = runtime().and_then(|runtime| {
        runtime.block_on(async {
            let store = StoreUrl::parse(&args.store);
            let options = Options {
                token: args.token.clone(),
                restate: args.restate.as_deref().map(restate_turns::source).transpose()?,
            };
            let url = start(&store, args.addr, options).await?;
            println!("headstart serve: {store} on {url} (read-only; Ctrl-C stops)");
            let _ = tokio::signal::ctrl_c().await;
            Ok::<(), String>(())
        })
    });
    match served {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("headstart serve: {error}");
            1
        }
    }
}

/// Opens `store` read-only, binds `addr` (checked by [`check_bind`] against `options`' token) and serves on the
/// current runtime until it ends; returns the URL to open.
pub async fn start(store: &StoreUrl, addr: SocketAddr, options: Options) -> Result<String, String> {
    check_bind(addr, options.token.as_deref())?;
    let source = match store {
        StoreUrl::Sqlite(path) => {
            if !path.exists() {
                return Err(format!("{} does not exist", path.display()));
            }
            let sqlite = Arc::new(SqliteStore::open_read_only(path).map_err(|error| error.to_string())?);
            Source {
                store: sqlite.clone(),
                changes: Changes::DataVersion(sqlite),
            }
        }
        // PostgreSQL's transcript writes notify nothing: the live pages poll.
        StoreUrl::Postgres(_) => Source {
            store: store.open(Access::Read).await?,
            changes: Changes::Poll,
        },
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| format!("cannot listen on {addr}: {error}"))?;
    let bound = listener.local_addr().map_err(|error| error.to_string())?;
    let app = router(source, &options);
    tokio::spawn(async move {
        if let Err(error) = headstart_serve::serve(listener, app, std::future::pending()).await {
            eprintln!("headstart serve: {error}");
        }
    });
    Ok(url(bound, options.token.as_deref()))
}

/// The flags `demo` and `run` take to serve their store while they run.
#[derive(clap::Args)]
pub struct ServeFlags {
    /// Also serve the store on this address while the run goes on, and after it until Ctrl-C, e.g. `--serve` (on
    /// 127.0.0.1:7878) or `--serve 127.0.0.1:0`.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_ADDR)]
    pub serve: Option<SocketAddr>,
    /// With --serve: the token the server asks for (needed on any address but loopback), e.g. `--serve 0.0.0.0:7878
    /// --serve-token 3f9c…`.
    #[arg(long, requires = "serve", value_name = "TOKEN")]
    pub serve_token: Option<String>,
}

impl ServeFlags {
    /// Starts the server on `store` when `--serve` was given; returns its URL.
    pub async fn start(&self, store: &StoreUrl) -> Result<Option<String>, String> {
        match self.serve {
            Some(addr) => {
                let options = Options {
                    token: self.serve_token.clone(),
                    restate: None,
                };
                start(store, addr, options).await.map(Some)
            }
            None => Ok(None),
        }
    }

    /// After the run: keeps serving until Ctrl-C when serving.
    pub async fn linger(&self, url: Option<&str>) {
        if let Some(url) = url {
            println!("Serving {url} until Ctrl-C.");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
