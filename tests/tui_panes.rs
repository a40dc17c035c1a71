//! Snapshot tests of every inspector pane, drawn on ratatui's TestBackend from a recorded
//! llama-server session (tests/data/session-smollm2.jsonl: SmolLM2-135M behind llama-server
//! build 11434 — a non-streamed Hermes-style tool call with the server's render and token
//! pieces, a streamed OpenAI tool call with a chunk boundary inside an event, an Anthropic
//! stream ending `end_turn` with a `stop_sequence`, an HTTP 500 from the server's parser, and a
//! line the writer left truncated).

use std::path::PathBuf;

use crossterm::event::{Event, KeyEvent, KeyEventKind, KeyEventState};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use toolscope::tui::keymap::{Key, Keymap};
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

/// Key events from a space-separated key list (`"j j 4 enter"`).
fn keys(spec: &str) -> Vec<std::io::Result<Event>> {
    spec.split_whitespace()
        .map(|k| {
            let key = Key::parse(k).unwrap();
            Ok(Event::Key(KeyEvent {
                code: key.code,
                modifiers: key.mods,
                kind: KeyEventKind::Press,
                state: KeyEventState::NONE,
            }))
        })
        .collect()
}

fn screen(tui: &Tui<TestBackend>) -> String {
    let buf = tui.terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

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

#[tokio::test]
async fn pane_replay() {
    // Exchange 2 delivers 9 argument deltas: {"  quantity  ":  12  ,"  shelf  ":"  B  "}
    let s = run("j 5 l l").await;
    // 9 argument deltas + the parser's finish() step.
    assert!(s.contains("step 3/10"), "{s}");
    insta::assert_snapshot!(s);
}

#[tokio::test]
async fn pane_replay_per_char() {
    let s = run("j 5 c end").await;
    // {"quantity":12,"shelf":"B"} is 27 characters.
    // + the finish() step.
    assert!(s.contains("step 28/28"), "{s}");
    insta::assert_snapshot!(s);
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
    let files = toolscope::tui::source::list_sessions(dir.path());
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
    let p = PathBuf::from("sessions").join(file);
    if !p.exists() {
        eprintln!("SKIP: {} not present", p.display());
        return None;
    }
    let mut tui = app(vec![p], None);
    tui.run(futures::stream::iter(keys(spec))).await.unwrap();
    Some(screen(&tui))
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
