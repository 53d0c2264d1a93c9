//! The house rules a newcomer relies on, checked on the source tree itself:
//!
//! - no source file outside test code is over 500 lines (test code: files named `tests.rs`, files in a `tests/`
//!   folder; an inline `#[cfg(test)]` module counts toward its file), the language packages' JavaScript
//!   (`crates/*/*.js`, `crates/*/lib/**/*.js`) and Python (`crates/*/python/**/*.py`) included;
//! - no files of a crate import each other, two or in a circle of any length (a Rust file names another's module
//!   through `crate::` or `super::`; a JavaScript file imports another by a relative specifier; a Python file
//!   imports another of its package, relatively or by the package's name);
//! - `docs/architecture.md` names files and functions that exist, and its table of crates names exactly the
//!   workspace crates each crate's manifest depends on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 500;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `.rs` files below `dir`, skipping build output and hidden folders.
fn rust_files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !(name.starts_with('.') || name.starts_with("target") || name == "node_modules") {
                rust_files_below(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// Test code: a `tests.rs` module file, or anything in a `tests/` folder (integration tests and their support).
fn is_test_code(relative: &Path) -> bool {
    relative.file_name().is_some_and(|name| name == "tests.rs")
        || relative.components().any(|part| part.as_os_str() == "tests")
}

/// The source roots of the workspace: each crate's `src/` and the examples.
fn source_roots() -> Vec<PathBuf> {
    let mut roots = vec![root().join("examples")];
    let crates = std::fs::read_dir(root().join("crates")).expect("crates/ lists");
    let mut crate_dirs: Vec<PathBuf> = crates
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("src"))
        .collect();
    crate_dirs.sort();
    roots.extend(crate_dirs.into_iter().filter(|dir| dir.is_dir()));
    roots
}

#[test]
fn no_source_file_outside_tests_is_over_500_lines() {
    let root = root();
    let mut files = Vec::new();
    for dir in source_roots() {
        rust_files_below(&dir, &mut files);
    }
    assert!(
        files.len() > 50,
        "expected the workspace's sources, found {}",
        files.len()
    );
    let mut long = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&root).unwrap_or(&file).to_path_buf();
        if is_test_code(&relative) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_else(|err| panic!("{}: {err}", file.display()));
        let lines = text.lines().count();
        if lines > MAX_LINES {
            long.push(format!("{} has {lines} lines", relative.display()));
        }
    }
    assert!(
        long.is_empty(),
        "source files over {MAX_LINES} lines (split them by idea):\n{}",
        long.join("\n")
    );
}

/// The module path of a source file relative to its crate's `src/`: `lib.rs` and `main.rs` are the root, `a/mod.rs`
/// and `a.rs` are `a`, `a/b.rs` is `a::b`.
fn module_path(relative_to_src: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative_to_src
        .iter()
        .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The module paths a source text names through `crate::` or `super::`, resolved against the file's own module path.
/// Reading stops at the first `#[cfg(test)]`: a file's unit tests name their parent by design.
fn named_paths(text: &str, own: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.split("//").next().unwrap_or_default();
        for (at, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
                // `other_crate::`, a macro's `$crate::`, or the second `super::` of `super::super::`.
                continue;
            }
            let (mut path, rest) = if code[at..].starts_with("crate::") {
                (Vec::new(), &code[at + "crate::".len()..])
            } else {
                // `super::` in `a/b.rs` (module `a::b`) names `a`.
                let mut rest = &code[at..];
                let mut path = own.to_vec();
                while let Some(after) = rest.strip_prefix("super::") {
                    path.pop();
                    rest = after;
                }
                (path, rest)
            };
            for segment in rest.split("::") {
                let ident: String = segment
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if ident.is_empty() || ident.len() != segment.len() {
                    // The last segment (`{A, B}`, `Name;`, `func(`) ends the path; it may itself be a module.
                    if !ident.is_empty() {
                        path.push(ident);
                    }
                    break;
                }
                path.push(ident);
            }
            found.push(path);
        }
    }
    found
}

/// The longest prefix of `path` that is one of `modules`.
fn owning_module<'a>(path: &[String], modules: &'a BTreeSet<Vec<String>>) -> Option<&'a Vec<String>> {
    (0..=path.len()).rev().find_map(|len| modules.get(&path[..len]))
}

/// The circles of a graph: each set of two or more nodes in which every node reaches every other one (the strongly
/// connected components), its nodes sorted, the circles sorted.
fn circles<N: Ord + Clone>(edges: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    let nodes: BTreeSet<&N> = edges.keys().chain(edges.values().flatten()).collect();
    // Which nodes each node reaches, then the classes of nodes that reach each other.
    let reach = |from: &N| {
        let mut seen: BTreeSet<&N> = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(node) = stack.pop() {
            for next in edges.get(node).into_iter().flatten() {
                if seen.insert(next) {
                    stack.push(next);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&N, BTreeSet<&N>> = nodes.iter().map(|node| (*node, reach(node))).collect();
    let mut found: BTreeSet<Vec<N>> = BTreeSet::new();
    for node in &nodes {
        let circle: Vec<N> = nodes
            .iter()
            .filter(|other| reached[node].contains(*other) && reached[*other].contains(*node))
            .map(|other| (*other).clone())
            .collect();
        if circle.len() >= 2 {
            found.insert(circle);
        }
    }
    found.into_iter().collect()
}

/// The circles of imports among the files of one crate (Rust modules that name each other, see [`circles`]).
fn import_cycles(files: &BTreeMap<Vec<String>, String>) -> Vec<Vec<Vec<String>>> {
    let modules: BTreeSet<Vec<String>> = files.keys().cloned().collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, text) in files {
        for path in named_paths(text, module) {
            if let Some(target) = owning_module(&path, &modules) {
                if target != module {
                    edges.entry(module.clone()).or_default().insert(target.clone());
                }
            }
        }
    }
    circles(&edges)
}

#[test]
fn no_files_of_a_crate_import_each_other_in_a_circle() {
    let mut cycles = Vec::new();
    let mut crates = 0;
    for src in source_roots().into_iter().filter(|dir| dir.ends_with("src")) {
        crates += 1;
        let mut paths = Vec::new();
        rust_files_below(&src, &mut paths);
        let mut files = BTreeMap::new();
        for path in paths {
            let relative = path.strip_prefix(&src).unwrap_or(&path);
            if is_test_code(relative) || relative.starts_with("bin") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            files.insert(module_path(relative), text);
        }
        for circle in import_cycles(&files) {
            let names: Vec<String> = circle.iter().map(|module| format!("`{}`", module.join("::"))).collect();
            cycles.push(format!("{}: {}", src.display(), names.join(" <-> ")));
        }
    }
    assert!(crates >= 10, "expected the workspace's crates, found {crates}");
    assert!(
        cycles.is_empty(),
        "files that import each other, directly or in a circle:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn import_cycles_finds_circles_of_two_and_three_files_and_nothing_else() {
    let module = |path: &str| {
        path.split("::")
            .filter(|part| !part.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let files: BTreeMap<Vec<String>, String> = [
        ("", "mod tool;\nmod updates;\npub use tool::Tool;\n"),
        ("tool", "use crate::updates::UpdateSink;\n"),
        (
            "updates",
            "use crate::tool::{ToolOutput, Tool};\n// crate::events is a comment\n",
        ),
        (
            "events",
            "use super::tool::Tool;\n#[cfg(test)]\nmod tests { use crate::events::*; }\n",
        ),
        ("events::queue", "use super::Event; use crate::Tool;\n"),
    ]
    .into_iter()
    .map(|(path, text)| (module(path), text.to_owned()))
    .collect();
    assert_eq!(import_cycles(&files), [vec![module("tool"), module("updates")]]);
    let three: BTreeMap<Vec<String>, String> = [
        ("a", "use crate::b::B;\n"),
        ("b", "use crate::c::C;\n"),
        ("c", "use super::a::A;\n"),
        ("d", "use crate::a::A;\n"),
    ]
    .into_iter()
    .map(|(path, text)| (module(path), text.to_owned()))
    .collect();
    assert_eq!(
        import_cycles(&three),
        [vec![module("a"), module("b"), module("c")]],
        "a circle of three; `d` only imports into it"
    );
    assert_eq!(
        named_paths("use super::super::x::Y;", &module("a::b::c")),
        [module("a::x::Y")]
    );
    assert_eq!(
        named_paths("m!($crate::a); other_crate::b", &module("a")),
        Vec::<Vec<String>>::new()
    );
    assert_eq!(module_path(Path::new("response/mod.rs")), module("response"));
    assert_eq!(module_path(Path::new("response/driver.rs")), module("response::driver"));
    assert!(is_test_code(Path::new("crates/x/src/a/tests.rs")));
    assert!(is_test_code(Path::new("crates/x/tests/support/mod.rs")));
    assert!(!is_test_code(Path::new("crates/x/src/testing.rs")));
}

/// One hop of a path in `docs/architecture.md`: a table row `| what | `file.rs` | `function` |`.
#[derive(Debug, PartialEq)]
struct Hop {
    file: String,
    function: String,
}

/// The hops of the Markdown tables whose header reads `| step | file | function |`.
fn hops(markdown: &str) -> Vec<Hop> {
    let mut hops = Vec::new();
    let mut in_table = false;
    for line in markdown.lines() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if !line.trim_start().starts_with('|') {
            in_table = false;
            continue;
        }
        if cells.len() >= 3 && cells[1] == "file" && cells[2] == "function" {
            in_table = true;
            continue;
        }
        if in_table && cells.len() >= 3 && !cells[1].starts_with('-') {
            let code = |cell: &str| cell.trim_matches('`').to_owned();
            hops.push(Hop {
                file: code(cells[1]),
                function: code(cells[2]),
            });
        }
    }
    hops
}

/// Whether `text` defines `function`: `name` as a `fn`, or `Type::name` as a `fn` in a file that names `Type`.
fn defines(text: &str, function: &str) -> bool {
    let (owner, name) = function
        .rsplit_once("::")
        .map_or((None, function), |(owner, name)| (Some(owner), name));
    let name = name.trim_end_matches("()");
    let defined = text.contains(&format!("fn {name}(")) || text.contains(&format!("fn {name}<"));
    defined && owner.is_none_or(|owner| text.contains(owner.rsplit("::").next().unwrap_or(owner)))
}

#[test]
fn architecture_names_files_and_functions_that_exist() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md exists");
    let hops = hops(&doc);
    assert!(
        hops.len() >= 10,
        "expected the two paths' hops in docs/architecture.md, found {hops:?}"
    );
    let mut missing = Vec::new();
    for hop in &hops {
        match std::fs::read_to_string(root.join(&hop.file)) {
            Err(_) => missing.push(format!("{}: no such file", hop.file)),
            Ok(text) if !defines(&text, &hop.function) => {
                missing.push(format!("{}: defines no `{}`", hop.file, hop.function))
            }
            Ok(_) => {}
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md names what does not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn hops_reads_only_file_function_tables() {
    let doc = "| step | file | function |\n|---|---|---|\n| parse | `a/b.rs` | `Parser::next` |\n\n\
               | x | y | z |\n| 1 | `c.rs` | `f` |\n";
    assert_eq!(
        hops(doc),
        [Hop {
            file: "a/b.rs".into(),
            function: "Parser::next".into()
        }]
    );
    assert!(defines("impl Parser { fn next(&mut self) {} }", "Parser::next"));
    assert!(defines("pub fn run<T>(x: T) {}", "run"));
    assert!(!defines("impl Other { fn next() {} }", "Parser::next"));
    assert!(!defines("fn nexter() {}", "next"));
}

/// The rows of the Markdown table whose header reads `| crate | layer | depends on |`: each crate's name and its
/// "depends on" cell, as written.
fn crate_rows(markdown: &str) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in markdown.lines() {
        if !line.trim_start().starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() >= 3 && cells[0] == "crate" && cells[2] == "depends on" {
            in_table = true;
            continue;
        }
        if in_table && cells.len() >= 3 && !cells[0].starts_with('-') {
            rows.push((cells[0].trim_matches('`').to_owned(), cells[2].to_owned()));
        }
    }
    rows
}

/// The workspace crates (`headstart…`) a manifest's `[dependencies]` names; dev- and build-dependencies are not
/// arrows of the house.
fn manifest_deps(manifest: &str) -> BTreeSet<String> {
    let mut deps = BTreeSet::new();
    let mut in_dependencies = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if in_dependencies && line.starts_with("headstart") {
            if let Some(name) = line.split([' ', '=', '.']).next() {
                deps.insert(name.to_owned());
            }
        }
    }
    deps
}

/// What a "depends on" cell says: the crates it names (`core`, `store`, `headstart`, … short for `headstart-core`,
/// `headstart-store`, `headstart`), and `true`: exactly these; or, for `all of the above but X`, the crates of the
/// rows above but X, and `false`: at most these.
fn named_deps(cell: &str, above: &[String]) -> (BTreeSet<String>, bool) {
    let full = |short: &str| match short {
        "headstart" => "headstart".to_owned(),
        short => format!("headstart-{short}"),
    };
    if let Some(except) = cell.strip_prefix("all of the above but ") {
        let except: BTreeSet<String> = except.split(',').map(|short| full(short.trim())).collect();
        let bound = above.iter().filter(|name| !except.contains(*name)).cloned().collect();
        return (bound, false);
    }
    let named = cell
        .split(',')
        .map(str::trim)
        .filter(|short| !short.is_empty() && *short != "—")
        .map(full)
        .collect();
    (named, true)
}

/// Where the table of crates and the manifests disagree, one line per crate.
fn arrow_mismatches(rows: &[(String, String)], manifests: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut mismatches = Vec::new();
    let mut above = Vec::new();
    for (name, cell) in rows {
        let (named, exact) = named_deps(cell, &above);
        match manifests.get(name) {
            None => mismatches.push(format!("{name}: no such crate in crates/")),
            Some(actual) => {
                let missing: Vec<&String> = actual.difference(&named).collect();
                let extra: Vec<&String> = named.difference(actual).collect();
                if !missing.is_empty() || (exact && !extra.is_empty()) {
                    mismatches.push(format!(
                        "{name}: the manifest depends on {actual:?}; the table says {cell:?} (missing {missing:?}, \
                         not a dependency {extra:?})"
                    ));
                }
            }
        }
        above.push(name.clone());
    }
    for name in manifests.keys() {
        if !rows.iter().any(|(row, _)| row == name) {
            mismatches.push(format!("{name}: a crate the table does not list"));
        }
    }
    mismatches
}

#[test]
fn architecture_arrows_are_the_manifests_dependencies() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md exists");
    let rows = crate_rows(&doc);
    assert!(rows.len() >= 10, "expected the table of crates, found {rows:?}");
    let mut manifests = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let dir = entry.expect("an entry").path();
        if let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) {
            let name = dir
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            manifests.insert(name, manifest_deps(&manifest));
        }
    }
    let mismatches = arrow_mismatches(&rows, &manifests);
    assert!(
        mismatches.is_empty(),
        "docs/architecture.md's crate table disagrees with the manifests:\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn arrow_mismatches_finds_a_missing_arrow_and_honours_all_of_the_above() {
    let doc = "| crate | layer | depends on |\n|---|---|---|\n| `headstart-core` | types | — |\n\
               | `headstart` | engine | core |\n| `headstart-sim` | sim | headstart |\n\
               | `headstart-cli` | binary | all of the above but sim |\n\ntext after\n";
    let rows = crate_rows(doc);
    assert_eq!(rows.len(), 4);
    let manifest = |deps: &[&str]| deps.iter().map(|dep| (*dep).to_owned()).collect::<BTreeSet<String>>();
    let mut manifests: BTreeMap<String, BTreeSet<String>> = [
        ("headstart-core", manifest(&[])),
        ("headstart", manifest(&["headstart-core"])),
        ("headstart-sim", manifest(&["headstart"])),
        ("headstart-cli", manifest(&["headstart"])),
    ]
    .into_iter()
    .map(|(name, deps)| (name.to_owned(), deps))
    .collect();
    assert_eq!(arrow_mismatches(&rows, &manifests), Vec::<String>::new());
    // An arrow the manifest has and the table misses.
    manifests.insert("headstart-sim".to_owned(), manifest(&["headstart", "headstart-core"]));
    let found = arrow_mismatches(&rows, &manifests);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("headstart-sim: ") && found[0].contains("missing [\"headstart-core\"]"));
    // `all of the above but sim` bounds the binary's arrows: sim is refused, fewer is fine.
    manifests.insert("headstart-sim".to_owned(), manifest(&["headstart"]));
    manifests.insert("headstart-cli".to_owned(), manifest(&["headstart", "headstart-sim"]));
    assert_eq!(arrow_mismatches(&rows, &manifests).len(), 1);
    assert_eq!(
        manifest_deps("[dependencies]\nheadstart = { workspace = true }\nheadstart-core.workspace = true\nserde = \"1\"\n[dev-dependencies]\nheadstart-testkit = { workspace = true }\n"),
        manifest(&["headstart", "headstart-core"])
    );
}

// The language packages' JavaScript and Python: the same two rules.

/// A package source file: its path relative to its crate, and its text.
struct PackageFile {
    path: PathBuf,
    text: String,
}

/// The JavaScript (`*.js` at the crate's top and under `lib/`) and Python (`*.py` and stubs under `python/`) files of
/// each crate, by crate folder.
fn package_files() -> BTreeMap<PathBuf, Vec<PackageFile>> {
    fn below(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !(name.starts_with('.') || name == "node_modules" || name == "__pycache__") {
                    below(&path, extension, out);
                }
            } else if name.ends_with(extension) {
                out.push(path);
            }
        }
    }
    let mut packages = BTreeMap::new();
    for entry in std::fs::read_dir(root().join("crates"))
        .expect("crates/ lists")
        .filter_map(Result::ok)
    {
        let dir = entry.path();
        let mut paths = Vec::new();
        for file in std::fs::read_dir(&dir).into_iter().flatten().filter_map(Result::ok) {
            if file.file_name().to_string_lossy().ends_with(".js") {
                paths.push(file.path());
            }
        }
        below(&dir.join("lib"), ".js", &mut paths);
        // Stubs too (`.pyi`): a compiled module's (`_native.pyi`) stands for it.
        below(&dir.join("python"), ".py", &mut paths);
        below(&dir.join("python"), ".pyi", &mut paths);
        if paths.is_empty() {
            continue;
        }
        paths.sort();
        let files = paths
            .into_iter()
            .map(|path| PackageFile {
                text: std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display())),
                path: path.strip_prefix(&dir).expect("inside the crate").to_path_buf(),
            })
            .collect();
        packages.insert(dir, files);
    }
    packages
}

/// A JavaScript text without its comments: what runs. A JSDoc type (`@param {import("./x.js").X}`) names a shape,
/// not a module to load, and makes no circle at run time. Strings (and template literals) are kept whole, so a `//`
/// inside one stays.
fn js_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' | '`' => {
                out.push(c);
                while let Some(inner) = chars.next() {
                    out.push(inner);
                    if inner == '\\' {
                        if let Some(escaped) = chars.next() {
                            out.push(escaped);
                        }
                    } else if inner == c || (inner == '\n' && c != '`') {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for inner in chars.by_ref() {
                    if inner == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for inner in chars.by_ref() {
                    if last == '*' && inner == '/' {
                        break;
                    }
                    last = inner;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// The relative specifiers a JavaScript text imports in its code (`import … from "./x.js"`, `export … from
/// "../y.js"`, `import "./z.js"`, `import("./w.js")`).
fn js_imports(text: &str) -> Vec<String> {
    let text = &js_code(text);
    let mut found = Vec::new();
    for opener in ["from \"", "from '", "import \"", "import '", "import(\"", "import('"] {
        for (at, _) in text.match_indices(opener) {
            let rest = &text[at + opener.len()..];
            let quote = opener.chars().last().expect("a quote");
            let specifier: String = rest.chars().take_while(|c| *c != quote).collect();
            if specifier.starts_with("./") || specifier.starts_with("../") {
                found.push(specifier);
            }
        }
    }
    found
}

/// The modules a Python text imports from its own package: `(level, dotted name, imported names)` of each
/// `from <dots><name> import <names>` and `import <package>.<name>` (level 0 for an absolute import). What an `if
/// TYPE_CHECKING:` block imports is for the type checker only, never loaded, and is left out.
fn py_imports(text: &str) -> Vec<(usize, String, Vec<String>)> {
    let mut found = Vec::new();
    // The indentation of the `if TYPE_CHECKING:` whose block the lines are in.
    let mut typing_block: Option<usize> = None;
    for raw in text.lines() {
        let line = raw.trim();
        let indent = raw.len() - raw.trim_start().len();
        if let Some(block) = typing_block {
            if line.is_empty() || indent > block {
                continue;
            }
            typing_block = None;
        }
        if line == "if TYPE_CHECKING:" || line == "if typing.TYPE_CHECKING:" {
            typing_block = Some(indent);
            continue;
        }
        if let Some(rest) = line.strip_prefix("from ") {
            let Some((module, names)) = rest.split_once(" import ") else {
                continue;
            };
            let level = module.chars().take_while(|c| *c == '.').count();
            let names = names
                .trim_matches(|c| c == '(' || c == ')')
                .split(',')
                .map(|name| name.split_whitespace().next().unwrap_or_default().to_owned())
                .filter(|name| !name.is_empty())
                .collect();
            found.push((level, module[level..].to_owned(), names));
        } else if let Some(rest) = line.strip_prefix("import ") {
            for module in rest.split(',') {
                let module = module.split_whitespace().next().unwrap_or_default();
                found.push((0, module.to_owned(), Vec::new()));
            }
        }
    }
    found
}

/// The files of `files` each file imports.
fn package_edges(files: &[PackageFile]) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let known: BTreeSet<&PathBuf> = files.iter().map(|file| &file.path).collect();
    let normal = |path: PathBuf| -> PathBuf {
        let mut out = PathBuf::new();
        for part in path.components() {
            match part {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for file in files {
        let dir = file.path.parent().unwrap_or(Path::new("")).to_path_buf();
        let mut targets = Vec::new();
        if file.path.extension().is_some_and(|ext| ext == "pyi") {
            // A stub names what its module holds; its imports are its module's.
            continue;
        } else if file.path.extension().is_some_and(|ext| ext == "js") {
            targets.extend(
                js_imports(&file.text)
                    .into_iter()
                    .map(|specifier| normal(dir.join(specifier))),
            );
        } else {
            // The package's root: the folder under `python/` that holds the file.
            let package = file.path.iter().take(2).collect::<PathBuf>();
            let package_name = package
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            for (level, module, names) in py_imports(&file.text) {
                let base = if level == 0 {
                    let Some(inside) = module.strip_prefix(&package_name) else {
                        continue;
                    };
                    let inside = inside.trim_start_matches('.');
                    inside
                        .split('.')
                        .filter(|part| !part.is_empty())
                        .fold(package.clone(), |path, part| path.join(part))
                } else {
                    let mut base = dir.clone();
                    for _ in 1..level {
                        base.pop();
                    }
                    module
                        .split('.')
                        .filter(|part| !part.is_empty())
                        .fold(base, |path, part| path.join(part))
                };
                // Each imported name that is a module of the package is the import's target (`from . import a`,
                // `from .a import b` where `b` is a module inside `a`); any other name is the base module's.
                let module_file = |path: &Path| {
                    [
                        path.with_extension("py"),
                        path.join("__init__.py"),
                        path.with_extension("pyi"),
                    ]
                    .into_iter()
                    .find(|candidate| known.contains(candidate))
                };
                let mut named_module = false;
                for name in &names {
                    if let Some(found) = module_file(&base.join(name)) {
                        targets.push(found);
                        named_module = true;
                    }
                }
                if !named_module || names.len() > 1 {
                    targets.extend(module_file(&base));
                }
            }
        }
        for target in targets {
            if known.contains(&target) && target != file.path {
                edges.entry(file.path.clone()).or_default().insert(target);
            }
        }
    }
    edges
}

#[test]
fn no_package_source_file_is_over_500_lines_or_in_an_import_circle() {
    let packages = package_files();
    assert!(
        packages.len() >= 2,
        "expected the Node and Python packages, found {}",
        packages.len()
    );
    let mut long = Vec::new();
    let mut found = Vec::new();
    for (dir, files) in &packages {
        for file in files {
            let lines = file.text.lines().count();
            if lines > MAX_LINES {
                long.push(format!("{} has {lines} lines", dir.join(&file.path).display()));
            }
        }
        for circle in circles(&package_edges(files)) {
            let names: Vec<String> = circle.iter().map(|path| format!("`{}`", path.display())).collect();
            found.push(format!("{}: {}", dir.display(), names.join(" <-> ")));
        }
    }
    assert!(
        long.is_empty(),
        "package files over {MAX_LINES} lines (split them by idea):\n{}",
        long.join("\n")
    );
    assert!(
        found.is_empty(),
        "package files that import each other, directly or in a circle:\n{}",
        found.join("\n")
    );
}

#[test]
fn package_imports_are_read_for_both_languages() {
    let file = |path: &str, text: &str| PackageFile {
        path: PathBuf::from(path),
        text: text.to_owned(),
    };
    let js = [
        file("index.js", "export { Engine } from \"./lib/engine.js\";\n"),
        file(
            "lib/engine.js",
            "import {\n  a,\n} from \"./feed.js\";\nimport x from \"node:fs\";\n",
        ),
        file("lib/feed.js", "import { PiFeed } from \"./pi/feed.js\";\n"),
        file(
            "lib/pi/feed.js",
            "import { c } from \"./convert.js\";\nconst m = await import(\"../engine.js\");\n\
             /** @param {import(\"../../index.js\").X} x */\n",
        ),
        file(
            "lib/pi/convert.js",
            "// import(\"./feed.js\")\nconst url = \"http://a/*\"; /* import(\"./feed.js\") */\n",
        ),
    ];
    assert_eq!(
        circles(&package_edges(&js)),
        [vec![
            PathBuf::from("lib/engine.js"),
            PathBuf::from("lib/feed.js"),
            PathBuf::from("lib/pi/feed.js")
        ]],
        "a circle of three, through a dynamic import; index.js only imports into it, and a type in a comment, or a \
         comment after a string that looks like one, imports nothing"
    );
    let py = [
        file("python/pkg/__init__.py", "from ._a import A\nfrom . import _b\n"),
        file("python/pkg/_a.py", "import json\nfrom pkg._b import B\n"),
        file("python/pkg/_b.py", "def f():\n    from ._a import A\n"),
        file("python/pkg/_c.py", "from .sub import thing\nfrom . import _native\n"),
        file("python/pkg/_native.pyi", "from pkg import _c\n"),
        file("python/pkg/sub/__init__.py", "from .. import _c\n"),
        file(
            "python/pkg/_d.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._e import E\n\n    from . import _a\nx = 1\n",
        ),
        file("python/pkg/_e.py", "from ._d import D\n"),
    ];
    assert_eq!(
        circles(&package_edges(&py)),
        [
            vec![PathBuf::from("python/pkg/_a.py"), PathBuf::from("python/pkg/_b.py")],
            vec![
                PathBuf::from("python/pkg/_c.py"),
                PathBuf::from("python/pkg/sub/__init__.py")
            ],
        ],
        "an absolute import and a deferred one; a package's __init__ and a parent-relative import; a compiled module \
         (its stub) is a module, and a stub's own imports are not followed; a type checker's imports are not loaded"
    );
}
