//! The Replay pane's engines view (`e`, issue #13 item 3) on the shipped
//! sessions/e-http500-peg-native.jsonl: llama-server build 11434 answered HTTP 500 "The model
//! produced output that does not match the expected peg-native format" to a prefilled
//! `<tool_call>\n{"name": "` that SmolLM2 continued with `Vienna", "arguments": {…` (the slot's
//! raw text). The view's llama.cpp row must predict what that real server answered, and vLLM
//! and SGLang (whose parsers give the text back as content) must say so.
//!
//! The rows' verdicts (`toolscope::tui::screen::engines::verdicts`) are checked against the
//! engines' own code on every shipped session's exchange with raw text and a call family
//! (tests/e2e/shipped_views.rs; docs/parser.md "Checked against the engines' own code"):
//! llama.cpp by its `llama-parse` drivers with the session's template and the request's messages
//! and tools (38 verdicts on 19 texts, all agree: the view gives llama.cpp each exchange's own
//! generation prompt), vLLM and SGLang by their wheels (38 on 19, all agree), Dynamo by
//! `dynamo-parse` (19 on 19, all agree). This session's llama.cpp row is one of them.

use crate::support;

use serde_json::Value;

const SESSION: &str = "sessions/e-http500-peg-native.jsonl";

async fn screen_after(spec: &str) -> String {
    support::tui::screen_after(SESSION, (150, 48), spec).await
}

/// Each screen row's right column: after the Replay pane's middle border, before the pane's
/// own, trimmed (the view wraps long lines, so callers join the rows to compare text).
fn right_column(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .map(|l| {
            let l = l.trim_end().trim_end_matches('│');
            l.rsplit('│').next().unwrap_or(l).trim()
        })
        .collect()
}

/// The error message the real server answered, read from the session file.
fn recorded_error() -> String {
    let text = std::fs::read_to_string(SESSION).unwrap();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["type"] == "exchange" {
            let body: Value =
                serde_json::from_str(v["response"]["body"]["text"].as_str().unwrap()).unwrap();
            return body["error"]["message"].as_str().unwrap().to_owned();
        }
    }
    panic!("no exchange in {SESSION}");
}

#[tokio::test]
async fn e_shows_what_each_engine_would_return_for_the_raw_text() {
    let before = screen_after("5").await;
    assert!(
        before.contains("server stream at the same point"),
        "{before}"
    );
    assert!(
        !before.contains("what each engine would return"),
        "{before}"
    );
    // the key is in the Replay pane's footer, from the keymap
    assert!(before.contains("e engines"), "{before}");

    let screen = screen_after("5 e").await;
    assert!(screen.contains("what each engine would return"), "{screen}");
    assert!(
        !screen.contains("server stream at the same point"),
        "{screen}"
    );
    let recorded = recorded_error();
    assert_eq!(
        recorded,
        "The model produced output that does not match the expected peg-native format"
    );
    // llama.cpp's row predicts what the real server answered (the view wraps long lines, so
    // compare without the line breaks and borders)
    let flat = right_column(&screen).join(" ");
    assert!(flat.contains(&format!("HTTP 500: {recorded}")), "{screen}");
    assert!(flat.contains("recorded"), "{screen}");
    for engine in ["llama.cpp", "vLLM", "SGLang", "Dynamo"] {
        assert!(screen.contains(engine), "{engine}: {screen}");
    }
    // Ollama's row (not modelled) is last, below the fold of this screen
    let bottom = screen_after(&format!("5 e{}", " J".repeat(40))).await;
    assert!(bottom.contains("Ollama"), "{bottom}");
    assert!(flat.contains("content only"), "{screen}");
    insta::assert_snapshot!("replay_engines_http500", screen);

    // `e` again: back to the server stream
    let back = screen_after("5 e e").await;
    assert!(back.contains("server stream at the same point"), "{back}");
}

/// Without the engines view the right column is the server's reply: this exchange got one (an
/// HTTP 500 with the parser's error), so the column says so instead of "No server reply."
#[tokio::test]
async fn server_column_names_an_error_reply() {
    let screen = screen_after("5").await;
    let flat = right_column(&screen).join(" ");
    assert!(!flat.contains("No server reply"), "{screen}");
    assert!(flat.contains("no assistant message: HTTP 500"), "{screen}");
    assert!(flat.contains(&recorded_error()[..40]), "{screen}");
}

/// On a small terminal the engines view does not fit: its title says where it stands and that
/// `J`/`K` scroll it, `J` brings rows below the fold into view (and takes the first out), `K`
/// scrolls back, and `e` (another view) starts again at its top.
#[tokio::test]
async fn a_view_that_does_not_fit_scrolls_with_j_and_k() {
    let small = |spec: &str| {
        let spec = spec.to_owned();
        async move { support::tui::screen_after(SESSION, (100, 24), &spec).await }
    };
    // the right half's rows, below its title
    let right = |screen: &str| -> Vec<String> {
        let below: String = screen
            .lines()
            .skip_while(|l| !l.contains("what each engine would return"))
            .skip(1)
            .map(|l| format!("{l}\n"))
            .collect();
        right_column(&below)
            .into_iter()
            .filter(|l| !l.is_empty() && !l.starts_with('└'))
            .map(str::to_owned)
            .collect()
    };
    let top = small("5 e").await;
    assert!(top.contains("line 1/") && top.contains("J/K"), "{top}");
    assert!(right(&top)[0].starts_with("family"), "{top}");
    let down = small(&format!("5 e{}", " J".repeat(40))).await;
    assert!(!down.contains("line 1/"), "{down}");
    assert!(
        !right(&down).iter().any(|l| l.starts_with("family")),
        "{down}"
    );
    let (top_rows, down_rows) = (right(&top), right(&down));
    assert!(
        down_rows
            .iter()
            .any(|l| l.contains("Dynamo") && !top_rows.contains(l)),
        "{down}"
    );
    // J scrolls by wrapped rows and stops with the last one at the bottom: the view's last
    // row (Ollama's) is reachable, and more J's change nothing
    let bottom = small(&format!("5 e{}", " J".repeat(120))).await;
    let rows = right(&bottom);
    assert!(
        rows.iter().any(|l| l.contains("Ollama's parsers")),
        "{bottom}"
    );
    let further = small(&format!("5 e{}", " J".repeat(160))).await;
    assert_eq!(right(&further), rows, "{further}");
    let up = small(&format!("5 e{}", " J K".repeat(40))).await;
    assert!(up.contains("line 1/"), "{up}");
    let again = small(&format!("5 e{} e e", " J".repeat(5))).await;
    assert!(again.contains("line 1/"), "{again}");
}
