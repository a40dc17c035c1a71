//! A pure Go `text/template` interpreter, for Ollama's chat templates (the `template` field of
//! Ollama's `POST /api/show`, the `TEMPLATE` of a Modelfile; Ollama's own handling of them is
//! [`crate::template::ollama`]).
//!
//! * [`parse`] — Go 1.24 `text/template/parse`: lexer (trim markers, comments), pipelines,
//!   control structures, `define`/`template`/`block`.
//! * [`exec`] — Go's exec.go/funcs.go: variables, field chains, builtins, Ollama's FuncMap,
//!   `missingkey=zero`, under [`crate::budget::Budget`].
//! * [`value`] — what reflect shows the template: Go maps, slices, structs with JSON tags,
//!   Stringers; `fmt` printing and `encoding/json` marshalling.
//!
//! Pure: no clock (`currentDate` takes the exchange's date), files or network.

pub mod exec;
pub mod parse;
pub mod value;

pub use exec::{Date, ExecOptions};

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The template does not parse (Go's `template: NAME:LINE: …`), or Ollama's `Parse`
    /// refuses it (`undefined template specified`).
    Parse,
    /// Execution failed (Go's `template: NAME:LINE:COL: executing "NAME" at <…>: …`).
    Exec,
    /// toolscope's budget stopped it (steps, bytes, `template` depth): message starts with
    /// [`crate::budget::MARK`].
    Limit,
    /// The request body cannot be what Ollama would decode (Ollama answers HTTP 400).
    Request,
}

/// A Go template error, displayed as Go prints it: `template: NAME:LINE: msg` (parse),
/// `template: NAME:LINE:COL: executing "NAME" at <CTX>: msg` (exec; COL is Go's 0-based
/// byte column). Ollama names its templates `""`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct GoTemplateError {
    pub kind: ErrorKind,
    /// The template's name (Ollama: empty).
    pub name: String,
    /// 1-based line (0 for request errors).
    pub line: usize,
    /// 0-based byte column, for execution errors.
    pub col: Option<usize>,
    /// The node being evaluated (`.Messages`, `eq`), at most 20 characters and `...`.
    pub context: Option<String>,
    pub message: String,
}

impl GoTemplateError {
    pub(crate) fn parse(name: &str, line: usize, msg: impl Into<String>) -> Self {
        GoTemplateError {
            kind: ErrorKind::Parse,
            name: name.to_owned(),
            line,
            col: None,
            context: None,
            message: msg.into(),
        }
    }

    pub(crate) fn request(msg: impl Into<String>) -> Self {
        GoTemplateError {
            kind: ErrorKind::Request,
            name: String::new(),
            line: 0,
            col: None,
            context: None,
            message: msg.into(),
        }
    }
}

impl std::fmt::Display for GoTemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.kind, self.col) {
            (ErrorKind::Request, _) => write!(f, "{}", self.message),
            (_, Some(col)) => write!(
                f,
                "template: {}:{}:{}: executing {:?} at <{}>: {}",
                self.name,
                self.line,
                col,
                self.name,
                self.context.as_deref().unwrap_or(""),
                self.message
            ),
            (_, None) if self.line > 0 => {
                write!(f, "template: {}:{}: {}", self.name, self.line, self.message)
            }
            _ => write!(f, "template: {}: {}", self.name, self.message),
        }
    }
}

/// Parses and executes `text` as Go's `template.New(name).Parse(text).Execute(w, data)` with
/// `data` decoded as Go's `encoding/json` decodes into `any` (objects → `map[string]any`,
/// numbers → float64), builtins only unless `opts.ollama_funcs`. For tests and for templates
/// outside Ollama's data model; Ollama's chat path is
/// [`crate::template::ollama::render_ollama`].
pub fn render_go(
    name: &str,
    text: &str,
    data: &serde_json::Value,
    opts: &ExecOptions,
) -> Result<String, GoTemplateError> {
    let funcs = opts.ollama_funcs;
    let is_func =
        |n: &str| exec::BUILTINS.contains(&n) || (funcs && exec::OLLAMA_FUNCS.contains(&n));
    let tree = parse::parse(name, text, &is_func)?;
    let mut ex = exec::Exec::new(text, name, &tree, *opts);
    ex.run(&tree.root, value::Value::from_json(data))?;
    Ok(ex.out)
}

#[cfg(test)]
mod tests {
    //! Go text/template semantics, each expectation hand-checked against Go 1.24's
    //! text/template documentation and source (exec.go, funcs.go, lex.go).
    use super::*;
    use serde_json::json;

    fn go(t: &str, data: serde_json::Value) -> Result<String, GoTemplateError> {
        let opts = ExecOptions {
            ollama_funcs: false,
            missingkey_zero: false,
            ..Default::default()
        };
        render_go("t", t, &data, &opts)
    }

    #[test]
    fn trim_markers_and_comments() {
        assert_eq!(go("a  {{- 1 -}}  b", json!({})).unwrap(), "a1b");
        assert_eq!(go("a {{- /* c */ -}} b", json!({})).unwrap(), "ab");
        assert_eq!(go("{{-3}}", json!({})).unwrap(), "-3");
        assert_eq!(go("x\n{{- \"y\" }}\nz", json!({})).unwrap(), "xy\nz");
    }

    #[test]
    fn variables_ranges_and_control() {
        let d = json!({"xs": ["a", "b", "c"], "m": {"b": 2, "a": 1}});
        assert_eq!(
            go("{{range $i, $x := .xs}}{{$i}}={{$x}};{{end}}", d.clone()).unwrap(),
            "0=a;1=b;2=c;"
        );
        assert_eq!(
            go("{{range $k, $v := .m}}{{$k}}{{$v}}{{end}}", d.clone()).unwrap(),
            "a1b2"
        );
        assert_eq!(
            go("{{range .xs}}{{if eq . \"b\"}}{{continue}}{{end}}{{if eq . \"c\"}}{{break}}{{end}}{{.}}{{end}}", d.clone()).unwrap(),
            "a"
        );
        assert_eq!(
            go("{{range .none}}x{{else}}empty{{end}}", d.clone()).unwrap(),
            "empty"
        );
        assert_eq!(
            go("{{$x := 1}}{{if true}}{{$x = 2}}{{end}}{{$x}}", d.clone()).unwrap(),
            "2"
        );
        assert_eq!(
            go("{{with .m.a}}{{.}}{{else}}no{{end}}", d.clone()).unwrap(),
            "1"
        );
        assert_eq!(
            go("{{if .no}}1{{else if .m}}2{{else}}3{{end}}", d.clone()).unwrap(),
            "2"
        );
        assert_eq!(go("{{range 3}}{{.}}{{end}}", d.clone()).unwrap(), "012");
        assert_eq!(
            go(
                "{{len (slice .xs 1)}} {{index .xs 2}} {{index .m \"b\"}}",
                d
            )
            .unwrap(),
            "2 c 2"
        );
    }

    #[test]
    fn define_template_block() {
        let t = r#"{{define "T"}}<{{.}}>{{end}}{{template "T" "x"}}{{block "B" 1}}[{{.}}]{{end}}"#;
        assert_eq!(go(t, json!({})).unwrap(), "<x>[1]");
    }

    #[test]
    fn printing_like_go() {
        let d = json!({"f": 1000000, "h": 0.5, "l": [1, "a", null], "m": {"k": true}, "n": null});
        // float64 from JSON prints with %v: 1e+06
        assert_eq!(
            go("{{.f}} {{.h}} {{.l}} {{.m}}", d.clone()).unwrap(),
            "1e+06 0.5 [1 a <nil>] map[k:true]"
        );
        assert_eq!(
            go("{{.missing}}|{{.n}}", d.clone()).unwrap(),
            "<no value>|<no value>"
        );
        assert_eq!(go(r#"{{print 1 2 "a" 3}}"#, d.clone()).unwrap(), "1 2a3");
        assert_eq!(
            go(r#"{{printf "%05.1f|%-3d|%q|%v" .h 7 "x" .l}}"#, d.clone()).unwrap(),
            "000.5|7  |\"x\"|[1 a <nil>]"
        );
        assert_eq!(
            go(
                r#"{{html "<a href='x'>"}} {{js "a'b"}} {{urlquery "a b&c"}}"#,
                d
            )
            .unwrap(),
            "&lt;a href=&#39;x&#39;&gt; a\\'b a+b%26c"
        );
    }

    #[test]
    fn printf_integer_bases_quotes_and_types_like_go() {
        // fmt's documented verbs (Go 1.24 fmt/doc.go), hand-checked: %o %O %b %U on ints,
        // precision truncating %q's string before quoting, %q of an int a quoted rune, %T
        let d = json!({"m": {"a": 1}, "l": [1]});
        assert_eq!(
            go(
                r#"{{printf "%o|%#o|%O|%b|%08b|%U" 8 8 8 5 5 65}}"#,
                d.clone()
            )
            .unwrap(),
            "10|010|0o10|101|00000101|U+0041"
        );
        assert_eq!(
            go(r#"{{printf "%.1q|%5.1q|%q" "abc" "abc" 97}}"#, d.clone()).unwrap(),
            r#""a"|  "a"|'a'"#
        );
        assert_eq!(
            go(r#"{{printf "%T %T %T %T %T %T" 1 1.5 "s" true .m .l}}"#, d).unwrap(),
            "int float64 string bool map[string]interface {} []interface {}"
        );
    }

    #[test]
    fn nil_constant_passed_to_any_parameters() {
        // exec.go evalArg: nil is the zero value of a parameter that can be nil (`any`: print,
        // printf's operands, html, js, urlquery, Ollama's json), and an error for
        // reflect.Value parameters (eq, len, index, …); fmt prints a nil operand as <nil>,
        // %!d(<nil>) for a verb that takes none
        let opts = ExecOptions::default();
        let r = |t: &str| render_go("", t, &json!({}), &opts);
        assert_eq!(
            r("{{print nil}}|{{println nil 1}}").unwrap(),
            "<nil>|<nil> 1\n"
        );
        assert_eq!(
            r(r#"{{printf "%v|%d|%T" nil nil nil}}"#).unwrap(),
            "<nil>|%!d(<nil>)|<nil>"
        );
        assert_eq!(r("{{html nil}}|{{json nil}}").unwrap(), "&lt;nil&gt;|null");
        let e = r("{{len nil}}").unwrap_err();
        assert!(
            e.message.contains("cannot assign nil to reflect.Value"),
            "{e}"
        );
    }

    #[test]
    fn comparisons_like_go() {
        let d = json!({"f": 1, "s": "a"});
        assert_eq!(
            go(
                r#"{{eq .s "b" "a"}} {{ne .s "a"}} {{lt 1 2}} {{ge "b" "a"}}"#,
                d.clone()
            )
            .unwrap(),
            "true false true true"
        );
        // JSON numbers are float64: comparing one with an int constant is an error in Go
        let e = go("{{eq .f 1}}", d.clone()).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"template: t:1:2: executing "t" at <eq>: error calling eq: incompatible types for comparison"#
        );
        assert_eq!(
            go("{{and 1 0 2}} {{or 0 \"\" 3}} {{not 0}}", d).unwrap(),
            "0 3 true"
        );
    }

    #[test]
    fn float_literals_are_float64() {
        // exec.go idealConstant: a constant written with '.', 'e' or 'p' (not a hex int) is a
        // float64 even when integral; eq between int and float64 is an error (funcs.go eq)
        let e = go("{{eq 1 1.0}}", json!({})).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"template: t:1:2: executing "t" at <eq>: error calling eq: incompatible types for comparison"#
        );
        assert!(go("{{lt 2 1e3}}", json!({})).is_err());
        assert_eq!(
            go("{{eq 1.0 1e0}} {{eq 0x10 16}}", json!({})).unwrap(),
            "true true"
        );
        // %d of a float64 is a bad verb; %v prints the shortest form
        assert_eq!(
            go(r#"{{printf "%d|%v|%v" 1.0 1e3 2.5}}"#, json!({})).unwrap(),
            "%!d(float64=1)|1000|2.5"
        );
        // a JSON number (float64) compares with a float constant
        assert_eq!(go("{{eq .f 1.0}}", json!({"f": 1})).unwrap(), "true");
    }

    #[test]
    fn errors_name_the_position() {
        // the position of a chain is its first chained field's (Go parse.go `operand`)
        let e = go("a\n{{ .x.y.z }}", json!({"x": 1})).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"template: t:2:5: executing "t" at <.x.y.z>: can't evaluate field y in type float64"#
        );
        let e = go("{{ if }}", json!({})).unwrap_err();
        assert_eq!(e.to_string(), "template: t:1: missing value for if");
        let e = go("{{ nope }}", json!({})).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"template: t:1: function "nope" not defined"#
        );
        let e = go("{{ $x }}", json!({})).unwrap_err();
        assert_eq!(e.to_string(), r#"template: t:1: undefined variable "$x""#);
        let e = go("{{ end }}", json!({})).unwrap_err();
        assert_eq!(e.to_string(), "template: t:1: unexpected {{end}}");
        let e = go("{{ break }}", json!({})).unwrap_err();
        assert_eq!(e.to_string(), "template: t:1: {{break}} outside {{range}}");
    }

    #[test]
    fn missingkey_zero_nil_interface() {
        // Ollama's missingkey=zero: a missing key of map[string]any is a nil interface;
        // printing it gives <no value>, a field of it is an error
        let opts = ExecOptions::default();
        assert_eq!(
            render_go("", "{{.a}}", &json!({}), &opts).unwrap(),
            "<no value>"
        );
        let e = render_go("", "{{.a.b}}", &json!({}), &opts).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"template: :1:4: executing "" at <.a.b>: nil pointer evaluating interface {}.b"#
        );
    }

    #[test]
    fn hostile_templates_are_bounded() {
        let t = r#"{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}"#;
        let e = go(t, json!({})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit, "{e}");
        assert!(e.message.contains("exceeded maximum template depth"), "{e}");
        let opts = ExecOptions {
            budget: crate::budget::Budget {
                fuel: 10_000,
                recursion_limit: 50,
            },
            ..Default::default()
        };
        let e = render_go(
            "",
            "{{range 100000}}{{range 100000}}x{{end}}{{end}}",
            &json!({}),
            &opts,
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit, "{e}");
        // Go 1.24 fmt `parsenum`: a width past 10^6 is "crazy long" and ends the verb; the
        // operand is then extra (go1.24: fmt.Sprintf("%999999999999d", 1))
        assert_eq!(
            render_go("", r#"{{printf "%999999999999d" 1}}"#, &json!({}), &opts).unwrap(),
            "%!(NOVERB)%!(EXTRA int=1)"
        );
        // widths are summed over the verbs: each fits, together they do not (10,000 fuel =
        // 640,000 bytes)
        let e = render_go(
            "",
            r#"{{printf "%400000d%400000d" 1 2}}"#,
            &json!({}),
            &opts,
        )
        .unwrap_err();
        assert!(e.message.contains("template budget"), "{e}");
        // `range` over an int steps lazily: 10^12 costs steps, not a 10^12-item list
        let e = render_go("", "{{range 1000000000000}}{{end}}", &json!({}), &opts).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit, "{e}");
        assert!(e.message.contains("more than 10000 steps"), "{e}");
        // a precision past Rust's formatter limit (65,535) is Go's: zeros after the exact digits
        let big = ExecOptions::default();
        let out = render_go("", r#"{{printf "%.70000f" 1.5}}"#, &json!({}), &big).unwrap();
        assert_eq!(out.len(), 70_002);
        assert!(
            out.starts_with("1.50000") && out.ends_with("000"),
            "{}",
            &out[..10]
        );
        let out = render_go("", r#"{{printf "%.1200e" 1.5}}"#, &json!({}), &big).unwrap();
        assert!(
            out.starts_with("1.5000") && out.ends_with("0e+00"),
            "{}",
            &out[out.len() - 10..]
        );
        assert_eq!(out.len(), 1 + 1 + 1200 + 4);
        // nesting cannot exhaust the stack: parse and execution are bounded
        let deep_if = "{{if 1}}".repeat(100_000);
        let e = go(&deep_if, json!({})).unwrap_err();
        assert!(e.message.contains("max expression depth exceeded"), "{e}");
        let deep_paren = format!("{{{{{}1{}}}}}", "(".repeat(100_000), ")".repeat(100_000));
        let e = go(&deep_paren, json!({})).unwrap_err();
        assert!(e.message.contains("max expression depth exceeded"), "{e}");
        let ok_if = format!("{}x{}", "{{if 1}}".repeat(90), "{{end}}".repeat(90));
        assert_eq!(go(&ok_if, json!({})).unwrap(), "x");
        let t = r#"{{define "r"}}{{if 1}}{{if 1}}{{template "r" .}}{{end}}{{end}}{{end}}{{template "r" .}}"#;
        let e = go(t, json!({})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit, "{e}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        // Go's parser stops parenthesized pipelines at maxStackDepth ("max expression depth
        // exceeded", text/template/parse/parse.go); toolscope bounds control nesting and
        // `{{else if}}` chains the same way, so hostile depth never overflows the stack
        let n = 5000;
        let parens = format!("a\n{{{{ {}1{} }}}}", "(".repeat(n), ")".repeat(n));
        let e = go(&parens, json!({})).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("template: t:2: max expression depth exceeded"),
            "{e}"
        );
        let ifs = format!("{}x{}", "{{if 1}}".repeat(n), "{{end}}".repeat(n));
        let e = go(&ifs, json!({})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Parse, "{e}");
        assert!(e.to_string().starts_with("template: t:1: "), "{e}");
        assert!(e.message.contains("max expression depth exceeded"), "{e}");
        let chain = format!("{{{{if 0}}}}{}{{{{end}}}}", "{{else if 0}}".repeat(n));
        let e = go(&chain, json!({})).unwrap_err();
        assert!(e.message.contains("max expression depth exceeded"), "{e}");
        let calls = format!("{{{{ {}1{} }}}}", "print (".repeat(n), ")".repeat(n));
        let e = go(&calls, json!({})).unwrap_err();
        assert!(e.message.contains("max expression depth"), "{e}");
        // nesting inside a recursive define is bounded at run time too
        let body = format!(
            "{}{{{{template \"r\" .}}}}{}",
            "{{if 1}}".repeat(90),
            "{{end}}".repeat(90)
        );
        let t = format!("{{{{define \"r\"}}}}{body}{{{{end}}}}{{{{template \"r\" .}}}}");
        let e = go(&t, json!({})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit, "{e}");
        for t in [
            r#"{{define "r"}}{{if 1}}{{template "r" .}}{{end}}{{end}}{{template "r" .}}"#,
            r#"{{define "r"}}{{range 1}}{{with 1}}{{template "r" .}}{{end}}{{end}}{{end}}{{template "r" .}}"#,
        ] {
            let e = go(t, json!({})).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Limit, "{e}");
        }
        // well inside the bound, nesting renders
        let ok = format!("{}x{}", "{{if 1}}".repeat(50), "{{end}}".repeat(50));
        assert_eq!(go(&ok, json!({})).unwrap(), "x");
    }

    #[test]
    fn ollama_funcs() {
        let opts = ExecOptions {
            today: Some((2024, 3, 1)),
            ..Default::default()
        };
        assert_eq!(
            render_go(
                "",
                "{{currentDate}} {{yesterdayDate}} {{json .}}",
                &json!({"a": "<&>"}),
                &opts
            )
            .unwrap(),
            r#"2024-03-01 2024-02-29 {"a":"\u003c\u0026\u003e"}"#
        );
        let e = render_go("", "{{currentDate}}", &json!({}), &ExecOptions::default()).unwrap_err();
        assert!(e.message.contains("no date"), "{e}");
    }
}
