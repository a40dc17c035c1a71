//! The layering gate (README's pipeline map, `lib.rs`'s module order): no import cycle between
//! the top-level modules of `src/`. This test reads every `src/**.rs` outside `#[cfg(test)]`
//! modules and comments, takes each `crate::X` path (in `use` lines and in code) as an edge
//! from the file's top-level module to `X`, and fails on any cycle, naming its modules and one
//! file per edge. It also checks that `lib.rs` declares the modules bottom-up (a module is
//! declared after every module it imports) and that the README's pipeline map lists them in
//! that order. `.ci/run` runs it with the rest of `cargo test`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without comment lines and without `#[cfg(test)]` modules (unit tests may reach
/// any module): a `#[cfg(test)]` line before a `mod … {` line is skipped with the module, up
/// to the `}` at the module's indentation (rustfmt's layout).
fn code_of(text: &str) -> String {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t == "#[cfg(test)]"
            && let Some(next) = lines.peek()
            && next
                .trim_start()
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ")
                .starts_with("mod ")
            && next.trim_end().ends_with('{')
        {
            let indent = &next[..next.len() - next.trim_start().len()];
            let end = format!("{indent}}}");
            for l in lines.by_ref() {
                if l == end {
                    break;
                }
            }
            continue;
        }
        if !t.starts_with("//") {
            out.push(line);
        }
    }
    out.join("\n")
}

/// `crate::X` names in `code` (X a lower-case identifier).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// Top-level module → module it names → the first file that names it.
fn import_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut g = Graph::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = top.trim_end_matches(".rs").to_owned();
        if top == "lib" || top == "main" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        for to in crate_paths(&code) {
            // a module of the crate (not a function of lib.rs such as `crate::json_reason`)
            let module = src.join(&to).is_dir() || src.join(format!("{to}.rs")).is_file();
            if to != top && module {
                g.entry(top.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| rel.display().to_string());
            }
        }
    }
    g
}

/// A cycle through `start`, as module names, when there is one (depth-first search).
fn cycle_from(g: &Graph, start: &str) -> Option<Vec<String>> {
    fn walk(
        g: &Graph,
        at: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in g.get(at).into_iter().flat_map(|m| m.keys()) {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(g, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    walk(g, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn no_cycle_between_top_level_modules() {
    let g = import_graph();
    let mut cycles = Vec::new();
    for m in g.keys() {
        if let Some(c) = cycle_from(&g, m) {
            let edges: Vec<String> = c
                .iter()
                .zip(c.iter().skip(1).chain([&c[0]]))
                .map(|(a, b)| format!("{a} -> {b} ({})", g[a][b]))
                .collect();
            cycles.push(edges.join(", "));
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between top-level modules:\n{}",
        cycles.join("\n")
    );
}

/// The cycle search finds a planted cycle and names it (the gate can fail).
#[test]
fn a_planted_cycle_is_found() {
    let mut g = Graph::new();
    g.entry("a".into())
        .or_default()
        .insert("b".into(), "a/x.rs".into());
    g.entry("b".into())
        .or_default()
        .insert("c".into(), "b/y.rs".into());
    g.entry("c".into())
        .or_default()
        .insert("a".into(), "c.rs".into());
    g.entry("c".into())
        .or_default()
        .insert("d".into(), "c.rs".into());
    assert_eq!(
        cycle_from(&g, "a"),
        Some(vec!["a".into(), "b".into(), "c".into()])
    );
    assert_eq!(cycle_from(&g, "d"), None);
    assert_eq!(
        crate_paths("use crate::stream::x;\nlet y = crate::parser::Syntax::Hermes; $crate::no;"),
        ["parser", "stream"].iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(
        code_of(
            "use crate::a;\n// crate::b\n#[cfg(test)]\npub(crate) mod t {\n    use crate::c;\n}\nuse crate::d;"
        ),
        "use crate::a;\nuse crate::d;"
    );
}

/// The top-level modules in the order `lib.rs` declares them.
fn lib_order() -> Vec<String> {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))
        })
        .map(|l| l.trim_end_matches(';').trim().to_owned())
        .collect()
}

/// `lib.rs` declares the modules bottom-up: each after every module it imports.
#[test]
fn lib_rs_lists_modules_bottom_up() {
    let g = import_graph();
    let order = lib_order();
    let mut wrong = Vec::new();
    for (i, m) in order.iter().enumerate() {
        for dep in g.get(m).into_iter().flat_map(|d| d.keys()) {
            if let Some(j) = order.iter().position(|o| o == dep)
                && j > i
            {
                wrong.push(format!(
                    "{m} (line {}) imports {dep}, declared after it ({})",
                    i + 1,
                    g[m][dep]
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "lib.rs is not bottom-up:\n{}",
        wrong.join("\n")
    );
}

/// The README's pipeline map lists the modules in `lib.rs`'s (bottom-up) order, every one.
#[test]
fn readme_map_follows_lib_rs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let map = readme
        .split("## The pipeline, as the source is laid out")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .expect("README: a code block under 'The pipeline, as the source is laid out'");
    let listed: Vec<String> = map
        .lines()
        .filter_map(|l| l.strip_prefix("src/"))
        .map(|l| {
            let name = l.split_whitespace().next().unwrap_or_default();
            name.trim_end_matches(".rs").to_owned()
        })
        .collect();
    assert_eq!(
        listed,
        lib_order(),
        "README's pipeline map vs lib.rs's module order"
    );
}
