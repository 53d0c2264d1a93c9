//! `read_file` and `list_dir`: the tools over the [`Workdir`], whose reads run on a blocking thread that stops
//! when the call is cancelled.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use headstart::{Arguments, CancellationToken, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use serde_json::{json, Value};

use super::arguments::string_argument;
use super::output::{cut_text, MAX_OUTPUT_BYTES};
use super::workdir::{FileError, Workdir, MAX_LIST_ENTRIES};

/// Runs `work` on a blocking thread; returns at once with [`FileError::Cancelled`] when `cancel` fires (`work`
/// sees the same token and stops at its next check).
async fn blocking<T: Send + 'static>(
    cancel: &CancellationToken,
    work: impl FnOnce(CancellationToken) -> Result<T, FileError> + Send + 'static,
) -> Result<T, FileError> {
    let token = cancel.clone();
    let task = tokio::task::spawn_blocking(move || work(token));
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(FileError::Cancelled),
        joined = task => joined.unwrap_or(Err(FileError::Cancelled)),
    }
}

/// `read_file {path}`: a text file under the working directory.
pub struct ReadFile(pub Arc<Workdir>);

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec::new("read_file")
.description("Read a text file under the working directory; `path` is relative to it. Regular files only, at most \
         256 KiB; paths outside it (links included), secrets (.env, keys, credentials) and the run's transcript \
         are refused.")
.parameters(json!({"type": "object", "properties": {"path": {"type": "string", "description": "e.g. src/main.rs"}},
               "required": ["path"]}))
.early(true)
.idempotent(true)
        });
        &SPEC
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let path = string_argument(&arguments, "path")?.to_owned();
        let workdir = Arc::clone(&self.0);
        let bytes = blocking(&context.cancel, move |cancel| {
            workdir.read(&path, MAX_OUTPUT_BYTES, &cancel)
        })
        .await?;
        Ok(ToolOutput::text(cut_text(bytes, MAX_OUTPUT_BYTES, "file")))
    }
}

/// `list_dir {path}`: the entries of a directory under the working directory, one a line, directories with `/`.
pub struct ListDir(pub Arc<Workdir>);

#[async_trait]
impl Tool for ListDir {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec::new("list_dir")
.description("List a directory under the working directory (default: the working directory itself); directories end \
         with /.")
.parameters(json!({"type": "object", "properties": {"path": {"type": "string", "description": "e.g. src, or ."}}}))
.early(true)
.idempotent(true)
        });
        &SPEC
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let path = arguments.get("path").and_then(Value::as_str).unwrap_or(".").to_owned();
        let workdir = Arc::clone(&self.0);
        let (names, partial) = blocking(&context.cancel, move |cancel| workdir.list(&path, &cancel)).await?;
        let mut text = names.join("\n");
        if partial {
            text.push_str(&format!("\n[listing cut at {MAX_LIST_ENTRIES} entries]"));
        }
        Ok(ToolOutput::text(cut_text(
            text.into_bytes(),
            MAX_OUTPUT_BYTES,
            "listing",
        )))
    }
}

#[cfg(test)]
mod tests;
