//! The tools `headstart run` offers without any server, all safe by default: they read, never write.
//!
//! - `read_file` and `list_dir` see only the working directory: a path that resolves outside it (`..`, an absolute
//!   path, a symbolic link leading out) is refused. Reading has no side effect, so both are async (they start
//!   while the model still streams) and idempotent (recovery may run them again).
//! - `fetch_url` makes an HTTP(S) GET, which is safe by HTTP's definition: async and idempotent too.
//!
//! A tool that writes would be declared sync, so that it runs only once the response is complete (contract §4).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use headstart::{Arguments, Tool, ToolContext, ToolError, ToolOutput, Toolbox, ToolboxError};
use serde_json::{json, Value};

/// The most a tool returns to the model, in bytes; longer output is cut with a note.
const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// Why a built-in tool failed.
#[derive(Debug, thiserror::Error)]
pub enum BuiltinError {
    /// A required argument is missing or not a string.
    #[error("the argument {0:?} is required and must be a string")]
    MissingArgument(&'static str),
    /// The path leads outside the working directory.
    #[error("{path} is outside the working directory {root}")]
    OutsideWorkdir {
        /// The path as given.
        path: String,
        /// The working directory.
        root: String,
    },
    /// The file system refused.
    #[error("{path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Only `http` and `https` URLs are fetched.
    #[error("cannot fetch {0:?}: only http and https URLs are allowed")]
    Scheme(String),
    /// The request failed or the server answered with an error status.
    #[error("fetching {url} failed: {message}")]
    Fetch {
        /// The URL.
        url: String,
        /// What happened.
        message: String,
    },
}

impl From<BuiltinError> for ToolError {
    fn from(error: BuiltinError) -> Self {
        ToolError::new(error.to_string())
    }
}

fn string_argument<'a>(arguments: &'a Arguments, name: &'static str) -> Result<&'a str, BuiltinError> {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .ok_or(BuiltinError::MissingArgument(name))
}

/// Text cut to [`MAX_OUTPUT_BYTES`] at a character boundary.
fn bounded(mut text: String) -> String {
    if text.len() > MAX_OUTPUT_BYTES {
        let mut end = MAX_OUTPUT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n[output cut at 256 KiB]");
    }
    text
}

/// The directory the file tools are confined to.
#[derive(Debug, Clone)]
pub struct Workdir {
    root: PathBuf,
}

impl Workdir {
    /// Confines the file tools to `root` (resolved once, symbolic links included).
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Workdir {
            root: root.canonicalize()?,
        })
    }

    /// Resolves `path` (relative to the root, or absolute) and refuses anything that ends up outside the root.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, BuiltinError> {
        let outside = || BuiltinError::OutsideWorkdir {
            path: path.to_owned(),
            root: self.root.display().to_string(),
        };
        let joined = self.root.join(path);
        // Refused before touching the file system, so a missing file outside the root is not reported as missing.
        if Path::new(path).components().any(|c| c == Component::ParentDir) && !joined.starts_with(&self.root) {
            return Err(outside());
        }
        let resolved = joined.canonicalize().map_err(|source| BuiltinError::Io {
            path: path.to_owned(),
            source,
        })?;
        // After resolution, so `..` and symbolic links leading out are caught too.
        if resolved.starts_with(&self.root) {
            Ok(resolved)
        } else {
            Err(outside())
        }
    }
}

/// `read_file {path}`: a UTF-8 text file under the working directory.
pub struct ReadFile(pub Arc<Workdir>);

#[async_trait]
impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a text file under the working directory. `path` is relative to it."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string", "description": "e.g. src/main.rs"}},
               "required": ["path"]})
    }

    fn is_async(&self) -> bool {
        true
    }

    fn idempotent(&self) -> bool {
        true
    }

    async fn execute(&self, arguments: Arguments, _: ToolContext) -> Result<ToolOutput, ToolError> {
        let path = string_argument(&arguments, "path")?;
        let resolved = self.0.resolve(path)?;
        let bytes = tokio::fs::read(&resolved).await.map_err(|source| BuiltinError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(ToolOutput::text(bounded(String::from_utf8_lossy(&bytes).into_owned())))
    }
}

/// `list_dir {path}`: the entries of a directory under the working directory, one a line, directories with `/`.
pub struct ListDir(pub Arc<Workdir>);

#[async_trait]
impl Tool for ListDir {
    fn name(&self) -> &str {
        "list_dir"
    }

    fn description(&self) -> &str {
        "List a directory under the working directory (default: the working directory itself)."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string", "description": "e.g. src, or ."}}})
    }

    fn is_async(&self) -> bool {
        true
    }

    fn idempotent(&self) -> bool {
        true
    }

    async fn execute(&self, arguments: Arguments, _: ToolContext) -> Result<ToolOutput, ToolError> {
        let path = arguments.get("path").and_then(Value::as_str).unwrap_or(".");
        let resolved = self.0.resolve(path)?;
        let io = |source| BuiltinError::Io {
            path: path.to_owned(),
            source,
        };
        let mut entries = tokio::fs::read_dir(&resolved).await.map_err(io)?;
        let mut names = Vec::new();
        while let Some(entry) = entries.next_entry().await.map_err(io)? {
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().await.map_err(io)?.is_dir() {
                name.push('/');
            }
            names.push(name);
        }
        names.sort();
        Ok(ToolOutput::text(bounded(names.join("\n"))))
    }
}

/// `fetch_url {url}`: an HTTP(S) GET; the body as text.
pub struct FetchUrl {
    client: reqwest::Client,
}

impl FetchUrl {
    /// A fetcher with a 30 s limit per request.
    pub fn new() -> Result<Self, BuiltinError> {
        headstart_providers::http::ensure_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("headstart/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| BuiltinError::Fetch {
                url: String::new(),
                message: error.to_string(),
            })?;
        Ok(FetchUrl { client })
    }
}

#[async_trait]
impl Tool for FetchUrl {
    fn name(&self) -> &str {
        "fetch_url"
    }

    fn description(&self) -> &str {
        "Fetch a web page or API response with HTTP GET and return its body as text."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"url": {"type": "string", "description": "e.g. https://example.com"}},
               "required": ["url"]})
    }

    fn is_async(&self) -> bool {
        true
    }

    fn idempotent(&self) -> bool {
        true
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let url = string_argument(&arguments, "url")?;
        let parsed = reqwest::Url::parse(url).map_err(|_| BuiltinError::Scheme(url.to_owned()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(BuiltinError::Scheme(url.to_owned()).into());
        }
        let fail = |message: String| BuiltinError::Fetch {
            url: url.to_owned(),
            message,
        };
        let response = tokio::select! {
            response = self.client.get(parsed).send() => response.map_err(|error| fail(error.to_string()))?,
            () = context.cancel.cancelled() => return Err(fail("cancelled".to_owned()).into()),
        };
        let status = response.status();
        let body = response.text().await.map_err(|error| fail(error.to_string()))?;
        if !status.is_success() {
            return Err(fail(format!("HTTP {status}: {}", bounded(body))).into());
        }
        Ok(ToolOutput::text(bounded(body)))
    }
}

/// The built-in tools confined to `workdir`, plus `extra` (the seam where tools from MCP servers plug in).
pub fn toolbox(workdir: &Path, extra: Vec<Arc<dyn Tool>>) -> Result<Toolbox, String> {
    let workdir =
        Arc::new(Workdir::new(workdir).map_err(|error| format!("working directory {}: {error}", workdir.display()))?);
    let fetch = FetchUrl::new().map_err(|error| error.to_string())?;
    let register = |error: ToolboxError| error.to_string();
    let mut toolbox = Toolbox::new()
        .with(ReadFile(Arc::clone(&workdir)))
        .map_err(register)?
        .with(ListDir(workdir))
        .map_err(register)?
        .with(fetch)
        .map_err(register)?;
    for tool in extra {
        toolbox.register_arc(tool).map_err(register)?;
    }
    Ok(toolbox)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> ToolContext {
        ToolContext {
            call_id: "c".into(),
            idempotency_key: "k".into(),
            cancel: headstart::CancellationToken::new(),
            updates: headstart::UpdateSink::disconnected(),
        }
    }

    fn arguments(value: Value) -> Arguments {
        value.as_object().cloned().unwrap_or_default()
    }

    #[tokio::test]
    async fn files_inside_are_read_and_paths_outside_are_refused() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("work");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.txt"), "hello").unwrap();
        std::fs::write(outer.path().join("secret.txt"), "no").unwrap();
        let workdir = Arc::new(Workdir::new(&root).unwrap());
        let read = ReadFile(Arc::clone(&workdir));

        let output = read
            .execute(arguments(json!({"path": "src/a.txt"})), context())
            .await
            .unwrap();
        assert_eq!(output, ToolOutput::text("hello"));
        for path in [
            "../secret.txt",
            "src/../../secret.txt",
            &outer.path().join("secret.txt").display().to_string(),
        ] {
            let error = read
                .execute(arguments(json!({"path": path})), context())
                .await
                .unwrap_err();
            assert!(
                error.message.contains("outside the working directory"),
                "{path}: {error}"
            );
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outer.path().join("secret.txt"), root.join("link")).unwrap();
            let error = read
                .execute(arguments(json!({"path": "link"})), context())
                .await
                .unwrap_err();
            assert!(error.message.contains("outside the working directory"), "{error}");
        }
        let error = read
            .execute(arguments(json!({"path": "missing"})), context())
            .await
            .unwrap_err();
        assert!(error.message.starts_with("missing:"), "{error}");
        let error = read.execute(arguments(json!({})), context()).await.unwrap_err();
        assert!(error.message.contains("\"path\" is required"), "{error}");

        let listed = ListDir(workdir).execute(arguments(json!({})), context()).await.unwrap();
        let expected = if cfg!(unix) { "link\nsrc/" } else { "src/" };
        assert_eq!(listed, ToolOutput::text(expected));
    }

    #[tokio::test]
    async fn only_http_urls_are_fetched() {
        let fetch = FetchUrl::new().unwrap();
        for url in ["file:///etc/passwd", "not a url"] {
            let error = fetch
                .execute(arguments(json!({"url": url})), context())
                .await
                .unwrap_err();
            assert!(error.message.contains("only http and https"), "{error}");
        }
    }

    #[test]
    fn output_is_bounded_at_a_character_boundary() {
        let text = "é".repeat(MAX_OUTPUT_BYTES);
        let cut = bounded(text);
        assert!(cut.ends_with("[output cut at 256 KiB]"));
        assert!(cut.len() < MAX_OUTPUT_BYTES + 40);
    }
}
