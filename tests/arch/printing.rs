//! The printing gate (issue #27 item 7): every line toolscope prints goes through the one
//! sanitiser in `src/text.rs` (`crate::outln!`, `crate::errln!`, `text::print_out`,
//! `text::print_err`), so no file under `src/` other than `src/text.rs` may call the raw
//! `println!`, `print!`, `eprintln!` or `eprint!` macros (they also panic on a closed stdout).
//! The scan reuses the purity gate's reader (comments and string literals blanked).

use std::path::Path;

use crate::purity::{code_of, rust_files};

/// The raw printing macros, each a bypass of the sanitiser.
const RAW: &[&str] = &["println!", "print!", "eprintln!", "eprint!"];

/// `file: `macro`` for every raw printing macro in the `.rs` files under `src`, `src/text.rs`
/// excepted.
fn raw_prints(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        if f == src.join("text.rs") {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        for pat in RAW {
            let mut from = 0;
            while let Some(p) = code[from..].find(pat) {
                let at = from + p;
                // a macro name boundary before the match (not `eprint!` for `print!`)
                let before = code[..at].chars().next_back();
                if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
                    let line = code[..at].matches('\n').count() + 1;
                    out.push(format!("{}:~{line}: `{pat}`", f.display()));
                }
                from = at + pat.len();
            }
        }
    }
    out
}

#[test]
fn every_printed_line_goes_through_the_sanitiser() {
    assert!(
        Path::new("src/text.rs").is_file(),
        "run from the crate root"
    );
    let v = raw_prints(Path::new("src"));
    assert!(
        v.is_empty(),
        "raw printing macros bypass the sanitiser (use crate::outln!/crate::errln! or \
         crate::text::print_out/print_err):\n{}",
        v.join("\n")
    );
}

/// The gate finds each raw macro, skips `src/text.rs`, comments and strings, and does not take
/// `crate::outln!` or `eprint!` for something else.
#[test]
fn the_printing_gate_catches_what_it_must_and_only_that() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |rel: &str, body: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    write("text.rs", "fn f() { println!(\"x\"); }\n");
    write(
        "cli/ok.rs",
        "//! never println!\nfn f() { crate::outln!(\"println!\"); crate::errln!(\"e\"); }\n",
    );
    assert_eq!(raw_prints(src), Vec::<String>::new());
    write(
        "cli/bad.rs",
        "fn f() {\n    eprintln!(\"a\");\n    print!(\"b\");\n}\n",
    );
    write("main.rs", "fn main() { eprint!(\"c\"); println!(); }\n");
    let v = raw_prints(src);
    let has = |file: &str, pat: &str| {
        v.iter()
            .any(|x| x.contains(file) && x.ends_with(&format!("`{pat}`")))
    };
    assert!(has("bad.rs:~2", "eprintln!"), "{v:#?}");
    assert!(has("bad.rs:~3", "print!"), "{v:#?}");
    assert!(has("main.rs", "eprint!"), "{v:#?}");
    assert!(has("main.rs", "println!"), "{v:#?}");
    assert_eq!(v.len(), 4, "{v:#?}");
}
