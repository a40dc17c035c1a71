//! Issue #27 item 1: every template operation that allocates from template input draws on the
//! one render budget before it allocates, and time is bounded with it. Each hostile template
//! runs in the real binary under an address-space limit (`prlimit --as`): without the budget
//! it would abort (exit 134), panic (101) or run for minutes; with it the command exits 2
//! naming the limit (`template budget`). A template inside a session file (an Ollama
//! `ollama_show` annotation) goes through `check`, `export --format otel` and `render` the
//! same way.
//!
//! `TOOLSCOPE_TEST_BIN` runs the same tests against another build (how the failures before the
//! fix were seen: main's binary aborts, panics or takes minutes on these inputs).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The address space each run may use: 3 GB, far below what the unbounded operations asked
/// for (48 TB, 3.2 GB, 19.5 GB) and well above what a bounded render needs.
const AS_LIMIT: &str = "--as=3000000000";

fn bin() -> PathBuf {
    std::env::var_os("TOOLSCOPE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(support::bin)
}

fn limited(args: &[&str]) -> Output {
    Command::new("prlimit")
        .arg(AS_LIMIT)
        .arg(bin())
        .args(args)
        .output()
        .expect("prlimit runs")
}

/// Exit 2 with the budget named on stderr; stdout holds no partial prompt.
fn assert_limit(out: &Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{what}: {:?}\n{err}",
        out.status
    );
    assert!(err.contains("template budget"), "{what}: {err}");
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

const CHAT: &str = r#"{"messages":[{"role":"user","content":"hi"}]}"#;

/// Go templates (the Ollama interpreter): `range` over an int, printf widths summed over the
/// verbs, a precision past Rust's formatter limit, and steps.
const GO: &[&str] = &[
    "{{range 1000000000000}}{{end}}",
    "{{range $i := 1000000000000}}{{end}}",
    r#"{{printf "%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d%9000000d" 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1}}"#,
    r#"{{range 100}}{{printf "%9000000d" 1}}{{end}}"#,
];

/// Jinja templates, under both profiles: pycompat methods, the llama.cpp profile's own
/// filters and operator chains.
const JINJA: &[&str] = &[
    "{{ '{:>100000000000}'.format('a') }}",
    "{{ '{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}{:>9000000}'.format('a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a','a') }}",
    "{{ range(100000)|join('x' * 100000) }}",
    "{% set s = 'x ' * 50000000 %}{{ s.split()|length }}",
    "{% set s = 'x\n' * 50000000 %}{{ s.splitlines()|length }}",
    "{% set s = 'x' * 20000000 %}{{ s.replace('x', 'yyyyyyyyyyyyyyyyyyyy')|length }}",
    "{{ ('y' * 10000).join(range(100000))|length }}",
    "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s.replace('a', 'aa').replace('b', 'bb') %}{% endfor %}{{ ns.s|length }}",
    "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s|replace('a', 'aa')|replace('b', 'bb') %}{% endfor %}{{ ns.s|length }}",
    "{% set s = 'x' * 60000000 %}{% for i in range(100000) %}{{ s.find('y') }}{% endfor %}",
];

#[test]
fn hostile_go_templates_exit_2_naming_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let req = write(dir.path(), "req.json", CHAT);
    for (i, t) in GO.iter().enumerate() {
        let tpl = write(dir.path(), &format!("t{i}.gotmpl"), t);
        let out = limited(&["render", "--template", &tpl, "--request", &req]);
        assert_limit(&out, t);
    }
}

#[test]
fn go_printf_precision_is_go_s_not_a_panic() {
    // Go 1.24 fmt: a precision up to 10^6 is honoured (1.5 with 70,000 decimals), a number
    // past it is "crazy long" and ends the verb (`%!(NOVERB)`)
    let dir = tempfile::tempdir().unwrap();
    let req = write(dir.path(), "req.json", CHAT);
    let tpl = write(dir.path(), "p.gotmpl", r#"{{printf "%.70000f" 1.5}}"#);
    let out = limited(&["render", "--template", &tpl, "--request", &req]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.len(), 2 + 70_000);
    assert!(text.starts_with("1.5000"), "{}", &text[..10]);
    let tpl = write(dir.path(), "q.gotmpl", r#"{{printf "%.99999999f|" 1.5}}"#);
    let out = limited(&["render", "--template", &tpl, "--request", &req]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "%!(NOVERB)%!(EXTRA float64=1.5)"
    );
}

#[test]
fn hostile_jinja_exits_2_naming_the_budget_under_both_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let req = write(dir.path(), "req.json", CHAT);
    for (i, t) in JINJA.iter().enumerate() {
        let tpl = write(dir.path(), &format!("t{i}.jinja"), t);
        for engine in ["transformers", "llama.cpp"] {
            let out = limited(&[
                "render",
                "--template",
                &tpl,
                "--request",
                &req,
                "--engine",
                engine,
            ]);
            assert_limit(&out, &format!("{engine}: {t}"));
        }
    }
}

#[test]
fn a_long_operator_chain_pays_for_what_it_copies() {
    // 20,000 `~` terms of 1 KB: the chain copies its growing string at every step (~200 MB
    // in all, and more per step the longer the chain): the copies are paid for
    let dir = tempfile::tempdir().unwrap();
    let req = write(dir.path(), "req.json", CHAT);
    let chain = vec!["k"; 20_000].join(" ~ ");
    let t = format!("{{% set k = 'z' * 1000 %}}{{{{ {chain} }}}}");
    let tpl = write(dir.path(), "chain.jinja", &t);
    let out = limited(&[
        "render",
        "--template",
        &tpl,
        "--request",
        &req,
        "--engine",
        "llama.cpp",
    ]);
    assert_limit(&out, "~ chain");
}

#[test]
fn ordinary_method_use_renders() {
    // what real templates do with these methods stays well inside the budget
    let dir = tempfile::tempdir().unwrap();
    let req = write(dir.path(), "req.json", CHAT);
    let t = "{{ '{:>5}|{}'.format('ab', 3) }}|{{ 'a b  c'.split()|join(',') }}|{{ 'a-b'.replace('-', '--') }}|{{ '+'.join(['x', 'y']) }}|{{ range(3)|join('/') }}";
    let tpl = write(dir.path(), "ok.jinja", t);
    for engine in ["transformers", "llama.cpp"] {
        let out = limited(&[
            "render",
            "--template",
            &tpl,
            "--request",
            &req,
            "--engine",
            engine,
        ]);
        assert_eq!(out.status.code(), Some(0), "{engine}: {out:?}");
        // Python: '{:>5}|{}'.format('ab', 3) == '   ab|3'; 'a b  c'.split() == ['a','b','c']
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "   ab|3|a,b,c|a--b|x+y|0/1/2",
            "{engine}"
        );
    }
    let t = r#"{{range $i, $x := .Messages}}{{printf "%3d:%-4s|%.2f" $i $x.Role 1.5}}{{end}}{{range 3}}{{.}}{{end}}"#;
    let tpl = write(dir.path(), "ok.gotmpl", t);
    let out = limited(&["render", "--template", &tpl, "--request", &req]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // Go: fmt.Sprintf("%3d:%-4s|%.2f", 0, "user", 1.5) == "  0:user|1.50"
    assert_eq!(String::from_utf8_lossy(&out.stdout), "  0:user|1.50012");
}

/// tests/data/replay/ollama-docs.jsonl with every `ollama_show` template replaced by `t`.
fn session_with_show_template(dir: &Path, t: &str) -> String {
    let src = support::root().join("tests/data/replay/ollama-docs.jsonl");
    let mut out = String::new();
    for line in std::fs::read_to_string(src).unwrap().lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["kind"] == "ollama_show" {
            v["show"]["template"] = serde_json::Value::from(t);
        }
        out.push_str(&serde_json::to_string(&v).unwrap());
        out.push('\n');
    }
    write(dir, "hostile.jsonl", &out)
}

#[test]
fn a_hostile_template_in_a_session_file_is_a_finding_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    for t in [GO[0], GO[2]] {
        let session = session_with_show_template(dir.path(), t);
        let out = limited(&["check", &session]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            matches!(out.status.code(), Some(0..=2)),
            "check: {:?}\n{text}",
            out.status
        );
        assert!(text.contains("template budget"), "check: {text}");
        let out = limited(&["export", "--format", "otel", &session]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0..=2)),
            "export: {:?}\n{err}",
            out.status
        );
        // the rendered prompt is left out of the export; every exchange is still exported
        let spans: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert!(
            spans.to_string().contains("get_weather"),
            "export: {err}\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
