//! The repository stands on its own: every relative link in its Markdown files resolves to a file inside it, and no
//! file refers to a folder beside the repository. `.ci/run` also runs the whole suite from a fresh clone with
//! nothing beside it.

use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file below `dir`, skipping build output, version control and installed packages.
fn files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()));
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            let skipped = name.starts_with('.') || name.starts_with("target") || name == "node_modules";
            if !skipped {
                files_below(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

fn markdown_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    files_below(&root(), &mut files);
    files.retain(|path| path.extension().is_some_and(|ext| ext == "md"));
    files.sort();
    files
}

/// The targets of the inline links and images (`[text](target)`, `![alt](target)`) and of the reference definitions
/// (`[label]: target`) of a Markdown text, outside fenced code blocks and inline code.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix('[') {
            if let Some((_, target)) = rest.split_once("]: ") {
                targets.push(target.split_whitespace().next().unwrap_or_default().to_owned());
                continue;
            }
        }
        // Drop inline code spans: `a](b)` inside backticks is not a link.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or_default();
            targets.push(target.trim_matches(['<', '>']).to_owned());
            rest = &after[end..];
        }
    }
    targets
}

fn is_relative(target: &str) -> bool {
    !(target.is_empty() || target.starts_with('#') || target.contains("://") || target.starts_with("mailto:"))
}

/// `path` with `.` and `..` folded, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn markdown_links_resolve_inside_the_repository() {
    let root = normalize(&root());
    let files = markdown_files();
    assert!(files.len() >= 5, "expected the README and the docs, found {files:?}");
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|err| panic!("{}: {err}", file.display()));
        let dir = file.parent().unwrap_or(&root);
        for target in link_targets(&text).iter().filter(|t| is_relative(t)) {
            let path_part = target.split('#').next().unwrap_or_default();
            let resolved = normalize(&dir.join(path_part));
            let shown = file.strip_prefix(&root).unwrap_or(file).display().to_string();
            if !resolved.starts_with(&root) {
                broken.push(format!("{shown}: {target} points outside the repository"));
            } else if !resolved.exists() {
                broken.push(format!("{shown}: {target} does not exist"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn link_targets_reads_inline_reference_and_image_links_only() {
    let text = "See [a](docs/a.md#x) and ![b](b.svg) but not `[c](c.md)`.\n```\n[d](d.md)\n```\n[e]: e.md \"t\"\n";
    assert_eq!(link_targets(text), ["docs/a.md#x", "b.svg", "e.md"]);
    assert!(!is_relative("https://example.invalid/x"));
    assert!(!is_relative("#section"));
    assert!(is_relative("../x.md"));
}

#[test]
fn no_file_refers_to_a_folder_beside_the_repository() {
    let mut files = Vec::new();
    files_below(&root(), &mut files);
    // Written in two pieces so that this file does not match itself.
    let beside = format!("../{}", "shared");
    let mut offenders = Vec::new();
    for file in files {
        if let Ok(text) = std::fs::read_to_string(&file) {
            if text.contains(&beside) {
                offenders.push(file.display().to_string());
            }
        }
    }
    assert!(offenders.is_empty(), "files referring to {beside}: {offenders:?}");
}
