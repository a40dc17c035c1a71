//! Snapshot tests of every inspector pane, drawn on ratatui's TestBackend from a recorded
//! llama-server session (tests/data/session-smollm2.jsonl: SmolLM2-135M behind llama-server
//! build 11434 — a non-streamed Hermes-style tool call with the server's render and token
//! pieces, a streamed OpenAI tool call with a chunk boundary inside an event, an Anthropic
//! stream ending `end_turn` with a `stop_sequence`, an HTTP 500 from the server's parser, and a
//! line the writer left truncated).

use crate::support;

use std::path::PathBuf;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use toolscope::tui::keymap::Keymap;
use toolscope::tui::theme::Theme;
use toolscope::tui::{State, Tui};

fn fixture() -> PathBuf {
    PathBuf::from("tests/data/session-smollm2.jsonl")
}

/// An inspector over `files` on a 110×34 test terminal, background work inline.
fn app(files: Vec<PathBuf>, dir: Option<PathBuf>) -> Tui<TestBackend> {
    let theme = Theme::resolve(Some("dark"), None, false).unwrap();
    let mut state = State::new(Keymap::default(), theme, (110, 34));
    let fx = state.open_files(files, dir);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(110, 34)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    tui
}

use support::tui::{keys, screen};

async fn run(spec: &str) -> String {
    let mut tui = app(vec![fixture()], None);
    tui.run(futures::stream::iter(keys(spec))).await.unwrap();
    screen(&tui)
}

#[tokio::test]
async fn pane_tools() {
    let s = run("1").await;
    assert!(
        s.contains("Tools · 2") && s.contains("▾ get_weather"),
        "{s}"
    );
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn pane_tools_collapsed() {
    // Cursor on the first tool header (line 1, after tool_choice), collapse it.
    let s = run("1 j space").await;
    assert!(s.contains("▸ get_weather"), "{s}");
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn pane_schema() {
    let s = run("2").await;
    assert!(s.contains("/properties/units"), "{s}");
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn pane_template_server_render() {
    let s = run("3").await;
    // The recorded /tokenize pieces split <tool_call> into 5 ordinary pieces.
    assert!(
        s.contains("pseudo-special") && s.contains("<tool_call>"),
        "{s}"
    );
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn pane_template_tokens() {
    let s = run("3 t").await;
    assert!(s.contains("\"<|im_start|>\""), "{s}");
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn pane_stream() {
    // Exchange 2: 11 chat.completion.chunk events + [DONE] = 12 SSE events.
    let s = run("j 4").await;
    assert!(s.contains("Stream · 12 events"), "{s}");
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn pane_stream_event_json() {
    let s = run("j 4 j enter").await;
    assert!(s.contains("event 1 ·"), "{s}");
    insta::assert_snapshot!(s);
}

/// The fixture's exchange 1 raw output (llama-server `__verbose.content`), read independently
/// of toolscope.
fn raw_output_of_exchange_1() -> String {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("{\"type\":\"exchange\",\"id\":1,"))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let body = v["response"]["body"]["text"].as_str().unwrap();
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    body["__verbose"]["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn pane_replay() {
    // Exchange 1 records the model's raw output (__verbose.content), which arrived whole: one
    // chunk, then the parser's finish() step.
    let s = run("5 l").await;
    assert!(s.contains("step 2/2"), "{s}");
    assert!(
        s.contains("text so far: raw output: __verbose.content"),
        "{s}"
    );
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn pane_replay_per_char() {
    // c: recorded → per token piece (none recorded for this reply, the pane says so) → per
    // character.
    let s = run("5 c").await;
    assert!(s.contains("No token pieces recorded for this reply"), "{s}");
    let s = run("5 c c end").await;
    let n = raw_output_of_exchange_1().chars().count();
    // one step per character + the finish() step
    assert!(s.contains(&format!("step {}/{}", n + 1, n + 1)), "{s}");
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn pane_replay_says_why_a_stream_has_nothing_to_replay() {
    // Exchange 2 streams a tool call and no content; its raw output was not recorded. The
    // pane says so instead of replaying text synthesised from the argument deltas.
    let s = run("j 5").await;
    assert!(
        s.contains("No generated text to replay: the model's raw output") && s.contains("step 0/0"),
        "{s}"
    );
}

#[tokio::test]
async fn pane_findings() {
    // G: the session-level finding is listed after the exchange's own (token.special_split etc.).
    let s = run("6 G").await;
    // Line 7 of the fixture (header, 4 exchanges, 1 annotation, then the cut line) is the truncated exchange line.
    assert!(s.contains("session.damaged") && s.contains("line 7"), "{s}");
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn help_overlay() {
    let s = run("?").await;
    assert!(s.contains("Help") && s.contains("quit"), "{s}");
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn browser_over_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(), dir.path().join("a.jsonl")).unwrap();
    std::fs::copy(fixture(), dir.path().join("b.jsonl")).unwrap();
    let files = toolscope::session::index::list_sessions(dir.path());
    let mut tui = app(files, Some(dir.path().to_owned()));
    tui.run(futures::stream::iter(keys("j"))).await.unwrap();
    let s = screen(&tui);
    assert!(
        s.contains("a.jsonl") && s.contains("b.jsonl") && s.contains("llama-server"),
        "{s}"
    );
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn browser_empty_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut tui = app(Vec::new(), Some(PathBuf::from("sessions")));
    let _ = dir;
    tui.run(futures::stream::iter(keys(""))).await.unwrap();
    let s = screen(&tui);
    assert!(
        s.contains("No sessions in sessions/ yet.") && s.contains("toolscope proxy"),
        "{s}"
    );
    insta::assert_snapshot!(s);
}

/// The shipped recordings in sessions/ (recorded from the real llama-server by the recorder).
async fn run_session(file: &str, spec: &str) -> Option<String> {
    run_session_sized(file, spec, 110, 34).await
}

#[tokio::test]
async fn shipped_gemma4_anyof_findings_and_schema() {
    let Some(s) = run_session("c-gemma4-template-anyof.jsonl", "6").await else {
        return;
    };
    insta::assert_snapshot!("shipped_gemma4_findings", s);
    let Some(s) = run_session("c-gemma4-template-anyof.jsonl", "2").await else {
        return;
    };
    insta::assert_snapshot!("shipped_gemma4_schema", s);
}

#[tokio::test]
async fn shipped_two_tools_stream() {
    let Some(s) = run_session("a-two-tools-stream.jsonl", "j 4").await else {
        return;
    };
    insta::assert_snapshot!("shipped_two_tools_stream", s);
    let Some(s) = run_session("a-two-tools-stream.jsonl", "j 5 end").await else {
        return;
    };
    insta::assert_snapshot!("shipped_two_tools_replay", s);
}

#[tokio::test]
async fn shipped_anthropic_named_tool_choice() {
    let Some(s) = run_session("b-anthropic-named-tool-choice.jsonl", "6").await else {
        return;
    };
    insta::assert_snapshot!("shipped_anthropic_findings", s);
}

/// A shipped session on a `w`×`h` test terminal after `spec`.
async fn run_session_sized(file: &str, spec: &str, w: u16, h: u16) -> Option<String> {
    let p = PathBuf::from("sessions").join(file);
    if !p.exists() {
        eprintln!("SKIP: {} not present", p.display());
        return None;
    }
    let theme = Theme::resolve(Some("dark"), None, false).unwrap();
    let mut state = State::new(Keymap::default(), theme, (w, h));
    let fx = state.open_files(vec![p], None);
    let mut tui = Tui::new(Terminal::new(TestBackend::new(w, h)).unwrap(), state, true);
    tui.run_effects(fx);
    tui.run(futures::stream::iter(keys(spec))).await.unwrap();
    Some(screen(&tui))
}

#[tokio::test]
async fn shipped_template_local_and_server_marked() {
    // Exchange 1 of the Qwen2.5 recording: toolscope's render of the request with the
    // header's /props chat_template, compared line by line with the server's /apply-template.
    let Some(s) = run_session("a-two-tools-stream.jsonl", "3").await else {
        return;
    };
    assert!(s.contains("Template · server"), "{s}");
    insta::assert_snapshot!("shipped_template_server_marked", s);
    let Some(s) = run_session("a-two-tools-stream.jsonl", "3 s").await else {
        return;
    };
    assert!(
        s.contains("Template · local") && s.contains("local render (/props"),
        "{s}"
    );
    insta::assert_snapshot!("shipped_template_local_marked", s);
}

#[tokio::test]
async fn shipped_template_diff_view() {
    let Some(s) = run_session("c-gemma4-template-anyof.jsonl", "3 d").await else {
        return;
    };
    assert!(s.contains("Template · diff: local ⟷ server"), "{s}");
    insta::assert_snapshot!("shipped_template_diff_view", s);
}

#[tokio::test]
async fn shipped_help_scrolled_to_the_end() {
    let Some(s) = run_session("a-two-tools-stream.jsonl", "? G").await else {
        return;
    };
    // The last help line is on screen and the help is still open.
    assert!(
        s.contains("keymap.toml") && s.contains("Help — keys"),
        "{s}"
    );
    insta::assert_snapshot!("shipped_help_end", s);
}

/// The footer (last row) of a screen.
fn footer(s: &str) -> &str {
    s.lines().last().unwrap_or("")
}

#[tokio::test]
async fn shipped_footer_fits_80_and_160_columns() {
    for (w, spec) in [(80u16, "3"), (160, "3"), (80, ""), (160, "5")] {
        let Some(s) = run_session_sized("a-two-tools-stream.jsonl", spec, w, 30).await else {
            return;
        };
        let f = footer(&s);
        // The help hint is always there, whole.
        assert!(f.contains("? this help"), "{w} cols, keys {spec:?}: {f:?}");
        insta::assert_snapshot!(
            format!(
                "shipped_footer_{w}_{}",
                if spec.is_empty() { "list" } else { spec }
            ),
            f
        );
    }
}

#[tokio::test]
async fn shipped_diff_view_colours_changed_tokens_with_the_theme() {
    // sessions/c with its /props template made blind to `enable_thinking` (renamed in the
    // recorded header): the local render (llama.cpp profile) then lacks the `<|think|>` line
    // the server rendered, drawn on the right with the theme's `inserted` background, and has
    // the thinking-off `<channel|>` the server's lacks, on the left with `deleted`. (The
    // unmodified session renders identically under the llama.cpp profile.)
    let src = PathBuf::from("sessions/c-gemma4-template-anyof.jsonl");
    if !src.exists() {
        return;
    }
    let text = std::fs::read_to_string(&src).unwrap();
    let (header, rest) = text.split_once('\n').unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c-gemma4-template-anyof.jsonl");
    std::fs::write(
        &p,
        format!(
            "{}\n{rest}",
            header.replace("enable_thinking", "enable_thinking_off")
        ),
    )
    .unwrap();
    let mut tui = app(vec![p], None);
    tui.run(futures::stream::iter(keys("3 d"))).await.unwrap();
    let theme = Theme::resolve(Some("dark"), None, false).unwrap();
    let buf = tui.terminal.backend().buffer();
    // Background of the first cell of `needle` in the left or right half of the screen.
    let find = |needle: &str, right: bool| {
        for y in 0..buf.area.height {
            let row: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
            if let Some(byte) = row.find(needle) {
                let x = row[..byte].chars().count() as u16;
                if (x > buf.area.width / 2) == right {
                    return Some(buf[(x, y)].bg);
                }
            }
        }
        None
    };
    assert_eq!(find("<|think|>", true), Some(theme.palette.inserted));
    assert_eq!(find("<channel|>", false), Some(theme.palette.deleted));
    // An unchanged token keeps the plain background.
    assert_ne!(find("<|turn>user", false), Some(theme.palette.deleted));
}

/// `w` wraps long lines in the text panes: the Findings pane's messages, cut at the pane's
/// edge without it, continue on the next line; a second `w` unwraps.
#[tokio::test]
async fn pane_findings_wrapped() {
    let plain = run("6").await;
    let wrapped = run("6 w").await;
    // The first finding's message ends "… token-level triggers never fire", past the pane's
    // right edge (110 columns) unless wrapped.
    let tail = "token-level triggers never fire";
    assert!(!plain.contains(tail), "{plain}");
    assert!(wrapped.contains(tail), "{wrapped}");
    assert_eq!(run("6 w w").await, plain);
    insta::assert_snapshot!(wrapped);
}

/// The list takes the rows it needs (4 exchanges: header, 4 rows, 2 borders); `-` switches to
/// two fifths of the screen and back.
#[tokio::test]
async fn list_layout_fits_its_rows_and_switches() {
    let list_rows = |s: &str| {
        s.lines()
            .skip_while(|l| !l.contains("┌ Exchanges"))
            .take_while(|l| !l.contains("1 Tools │"))
            .count()
    };
    let fit = run("").await;
    assert_eq!(list_rows(&fit), 4 + 3, "{fit}");
    let fixed = run("-").await;
    // 34 rows: header and footer leave 32; two fifths is 12.
    assert_eq!(list_rows(&fixed), 32 * 2 / 5, "{fixed}");
    assert_eq!(run("- -").await, fit);
}
