//! The purity gate (README, lib.rs): the analysis modules (`schema`, `template`, `gotmpl`,
//! `budget`, `tokens`, `stream`, `parser`, `diagnose`, `diff`, `analysis`) take data and return
//! data. This test
//! reads their sources and fails on any path that reaches the network, the file system, the
//! terminal, the process environment or the clock: `std::{fs,net,process,env}`,
//! `std::io::{stdin,stdout,stderr}`, `std::time::{SystemTime,Instant}`, the `tokio`, `reqwest`,
//! `hyper`, `crossterm`, `ratatui` and `dirs` crates, `print!`-family macros, `now_utc()`.
//! `.ci/run` runs it with the rest of `cargo test`.

use std::path::{Path, PathBuf};

/// The pure modules, under `src/`.
const PURE: &[&str] = &[
    "schema",
    "template",
    "gotmpl",
    "budget",
    "tokens",
    "stream",
    "parser",
    "diagnose",
    "diff",
    "analysis",
    "conversation",
];

/// What a pure module may not name, with why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("std::fs", "file system"),
    ("std::net", "network"),
    ("std::process", "processes"),
    ("std::env", "environment"),
    ("std::io::stdin", "terminal"),
    ("std::io::stdout", "terminal"),
    ("std::io::stderr", "terminal"),
    ("io::stdin", "terminal"),
    ("io::stdout", "terminal"),
    ("io::stderr", "terminal"),
    ("std::time::SystemTime", "clock"),
    ("std::time::Instant", "clock"),
    ("SystemTime::now", "clock"),
    ("Instant::now", "clock"),
    ("now_utc", "clock"),
    ("now_local", "clock"),
    ("tokio::", "async runtime / network"),
    ("reqwest::", "network"),
    ("hyper::", "network"),
    ("hyper_util::", "network"),
    ("crossterm::", "terminal"),
    ("ratatui::", "terminal"),
    ("dirs::", "file system"),
    ("println!", "terminal"),
    ("eprintln!", "terminal"),
    ("print!", "terminal"),
    ("eprint!", "terminal"),
    ("dbg!", "terminal"),
    ("File::open", "file system"),
    ("File::create", "file system"),
];

/// Every `.rs` file under `dir`, recursively (unsorted).
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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

/// `src` with comments and string literals blanked (so a doc comment that names
/// `std::fs` is not a violation), `use a::{b, c}` groups expanded to `a::b a::c`, and
/// whitespace inside paths removed.
pub(crate) fn code_of(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
            continue;
        }
        if b[i] == b'r' && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) {
            // raw string r"…" / r#"…"#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) == Some(&b'"') {
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.push_str("\"\"");
                continue;
            }
        }
        if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        if b[i] == b'\'' {
            // char literal ('x', '\n', '"'); lifetimes ('a) pass through
            if b.get(i + 2) == Some(&b'\'') {
                i += 3;
                out.push_str("' '");
                continue;
            }
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
                continue;
            }
        }
        let ch = src[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    expand_groups(&out)
}

/// Expands `use` groups: `use std::{fs, io::{self, stdout}};` → `std::fs std::io::self
/// std::io::stdout`, recursively.
fn expand_groups(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = find_use(rest) {
        out.push_str(&rest[..at]);
        let stmt_end = rest[at..].find(';').map_or(rest.len(), |e| at + e);
        let stmt: String = rest[at + 4..stmt_end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        for p in expand(&stmt) {
            out.push(' ');
            out.push_str(&p);
        }
        out.push(';');
        rest = &rest[(stmt_end + 1).min(rest.len())..];
    }
    out.push_str(rest);
    out
}

/// The byte offset of the next `use ` keyword in `code`: not the end of an identifier such as
/// `cause ` or `reuse `.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let at = from + at;
        let ident = code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !ident {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

fn expand(path: &str) -> Vec<String> {
    let Some(open) = path.find('{') else {
        return vec![path.to_owned()];
    };
    let prefix = &path[..open];
    let inner = &path[open + 1..path.rfind('}').unwrap_or(path.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(&format!("{prefix}{p}")))
        .collect()
}

/// `(file:line-ish, forbidden path, why)` for every violation in the pure modules under `src`.
fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for m in PURE {
        rust_files(&src.join(m), &mut files);
        let single = src.join(format!("{m}.rs"));
        if single.exists() {
            files.push(single);
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = code_of(&text);
        for (pat, why) in FORBIDDEN {
            let mut from = 0;
            while let Some(p) = code[from..].find(pat) {
                let at = from + p;
                // A path segment boundary before the match (not `my_tokio::`, `reprint!`).
                let before = code[..at].chars().next_back();
                if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
                    out.push(format!("{}: `{pat}` ({why})", f.display()));
                }
                from = at + pat.len();
            }
        }
    }
    out
}

#[test]
fn analysis_modules_do_no_io() {
    assert!(Path::new("src/stream").is_dir(), "run from the crate root");
    let v = violations(Path::new("src"));
    assert!(
        v.is_empty(),
        "pure modules reach IO (move it to record/, cli/ or tui/):\n{}",
        v.join("\n")
    );
}

/// The gate sees through grouped imports, aliases and paths in expressions, and not through
/// comments or strings.
#[test]
fn the_gate_catches_what_it_must_and_only_that() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |rel: &str, body: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    write(
        "stream/ok.rs",
        "//! reads no std::fs, says \"std::net\" only in text\nuse std::{sync::Arc, fmt};\nfn f() -> &'static str { \"tokio::spawn\" }\nconst C: char = '\"';\n",
    );
    assert_eq!(violations(src), Vec::<String>::new());
    write("stream/bad1.rs", "use std::{fs, io::{self, Read}};\n");
    write(
        "parser/bad2.rs",
        "fn f() { let t = std::time::Instant::now(); }\n",
    );
    write(
        "diff/bad3.rs",
        "use tokio::sync::mpsc;\nfn g() { println!(\"x\"); }\n",
    );
    write("schema.rs", "use std::io::{stdout, Write};\n");
    let v = violations(src);
    let has = |file: &str, pat: &str| {
        v.iter()
            .any(|x| x.contains(file) && x.contains(&format!("`{pat}`")))
    };
    assert!(has("bad1.rs", "std::fs"), "{v:#?}");
    assert!(has("bad2.rs", "std::time::Instant"), "{v:#?}");
    assert!(has("bad3.rs", "tokio::"), "{v:#?}");
    assert!(has("bad3.rs", "println!"), "{v:#?}");
    assert!(has("schema.rs", "std::io::stdout"), "{v:#?}");
    assert!(!v.iter().any(|x| x.contains("ok.rs")), "{v:#?}");
}
