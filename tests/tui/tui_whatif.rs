//! The what-if view: `x` on a finding with a fix runs it (the code `toolscope try` runs)
//! against the session's recorded upstream — here a fake engine started in the test
//! (tests/support/whatif.rs) whose answers are fixed: the original request (`max_tokens: 12`)
//! is answered without a call, the `max_tokens` fix (12 → 256) with one valid call — so with
//! the default 5 runs the rates are 0/5 and 5/5 by hand.

use crate::support;

use std::time::Duration;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;
use support::tui::{keys, screen};
use support::whatif;
use toolscope::tui::keymap::Keymap;
use toolscope::tui::theme::Theme;
use toolscope::tui::{State, Tui};

fn app(session: &std::path::Path) -> Tui<TestBackend> {
    let theme = Theme::resolve(Some("dark"), None, true).unwrap();
    let mut state = State::new(Keymap::default(), theme, (110, 34));
    let fx = state.open_files(vec![session.to_path_buf()], None);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(110, 34)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    tui
}

/// The screen with the temporary folder and the fake's port replaced (stable snapshots).
fn shown(tui: &Tui<TestBackend>, dir: &std::path::Path, url: &str) -> String {
    screen(tui)
        .replace(&dir.display().to_string(), "TMP")
        .replace(url, "http://127.0.0.1:PORT")
}

fn rate(k: usize, n: usize) -> String {
    let (lo, hi) = whatif::wilson_all_or_none(k, n);
    format!(
        "valid calls {k}/{n} ({:.0} %, 95 % CI {:.0}–{:.0} %)",
        100.0 * k as f64 / n as f64,
        100.0 * lo,
        100.0 * hi
    )
}

/// The screen line that starts (inside the border) with `name`.
fn row<'a>(s: &'a str, name: &str) -> &'a str {
    s.lines()
        .find(|l| l.trim_start_matches('│').starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no line for {name}:\n{s}"))
}

#[tokio::test]
async fn x_runs_the_findings_fix_against_the_upstream_and_shows_the_result() {
    let (url, seen) = whatif::start(Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let session = whatif::write_session(dir.path(), &url);
    let mut tui = app(&session);

    // the finding with its fix
    tui.run(futures::stream::iter(keys("6"))).await.unwrap();
    let s = shown(&tui, dir.path(), &url);
    assert!(s.contains("tool_call.leaked_as_text"), "{s}");
    assert!(
        s.contains("fix (max_tokens): `max_tokens` raised from 12 to 256"),
        "{s}"
    );
    assert!(s.contains("x try the fix"), "the footer names the key: {s}");
    insta::assert_snapshot!("whatif_finding_with_fix", s);

    // x: the runs go in the background; `run` returns once they finished
    tui.run(futures::stream::iter(keys("x"))).await.unwrap();
    let s = shown(&tui, dir.path(), &url);
    // by hand: 0/5 → (0, 1.96²/(5+1.96²)) = (0, 0.4345); 5/5 → (5/(5+1.96²), 1) = (0.5655, 1)
    assert_eq!(rate(0, 5), "valid calls 0/5 (0 %, 95 % CI 0–43 %)");
    assert_eq!(rate(5, 5), "valid calls 5/5 (100 %, 95 % CI 57–100 %)");
    assert!(row(&s, "original").contains(&rate(0, 5)), "{s}");
    assert!(row(&s, "original").contains("5/5 runs"), "{s}");
    assert!(row(&s, "max_tokens").contains(&rate(5, 5)), "{s}");
    assert!(s.contains("finished: 10/10 runs"), "{s}");
    assert!(s.contains("finish:   length ×5"), "{s}");
    assert!(s.contains("findings: tool_call.leaked_as_text ×5"), "{s}");
    assert!(s.contains("finish:   tool_calls ×5"), "{s}");
    assert!(s.contains("findings: none"), "{s}");
    insta::assert_snapshot!("whatif_finished", s);
    let limits: Vec<Option<u64>> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|b| b.get("max_tokens").and_then(Value::as_u64))
        .collect();
    assert_eq!(
        limits,
        [Some(12); 5]
            .into_iter()
            .chain([Some(256); 5])
            .collect::<Vec<_>>()
    );

    // the what-if session holds the runs as `try` records them
    let what_if = dir.path().join("cut.try.jsonl");
    let labels: Vec<String> = std::fs::read_to_string(&what_if)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "exchange")
        .map(|v| v["label"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        labels,
        ["try:1:original"; 5]
            .into_iter()
            .chain(["try:1:max_tokens"; 5])
            .collect::<Vec<_>>()
    );

    // a click on the exchange list behind the view changes nothing (the selection, the focus)
    let before = tui
        .state
        .session
        .as_ref()
        .map(|s| (s.focus, s.whatif.is_some()));
    let click = crossterm::event::Event::Mouse(crossterm::event::MouseEvent {
        kind: crossterm::event::MouseEventKind::Down(crossterm::event::MouseButton::Left),
        column: 5,
        row: 3,
        modifiers: crossterm::event::KeyModifiers::NONE,
    });
    tui.run(futures::stream::iter(vec![Ok(click)]))
        .await
        .unwrap();
    let after = tui
        .state
        .session
        .as_ref()
        .map(|s| (s.focus, s.whatif.is_some()));
    assert_eq!(after, before);
    assert_eq!(before.map(|b| b.1), Some(true));
    assert!(shown(&tui, dir.path(), &url).contains("finished: 10/10 runs"));

    // o: the what-if session beside the original (diff --against)
    tui.run(futures::stream::iter(keys("o"))).await.unwrap();
    let s = shown(&tui, dir.path(), &url);
    assert!(s.contains("diff --against the original"), "{s}");
    assert!(s.contains("= A #1 ↔ B #1: same"), "{s}");
    assert!(s.contains("≠ A #1 ↔ B #6"), "{s}");
    assert!(
        s.contains("finish:   Some(\"length\") → Some(\"tool_calls\")"),
        "{s}"
    );

    // o back, q closes the view
    tui.run(futures::stream::iter(keys("o q"))).await.unwrap();
    let s = shown(&tui, dir.path(), &url);
    assert!(s.contains("Findings · 1"), "{s}");
}

#[tokio::test]
async fn esc_or_ctrl_c_cancels_the_runs_and_keeps_what_finished() {
    for cancel in ["esc", "ctrl-c"] {
        cancelled_by(cancel).await;
    }
}

/// `cancel` pressed while the fixed variant's first run waits (its answers hang).
async fn cancelled_by(cancel: &'static str) {
    let (url, seen) = whatif::start(Duration::from_secs(600));
    let dir = tempfile::tempdir().unwrap();
    let session = whatif::write_session(dir.path(), &url);
    let mut tui = app(&session);
    let seen2 = seen.clone();
    let esc_when_the_fix_is_sent = futures::stream::once(async move {
        // the 5 original runs and the fix's first request
        while seen2.lock().unwrap().len() < 6 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        support::tui::key(cancel)
    });
    let input =
        futures::StreamExt::chain(futures::stream::iter(keys("6 x")), esc_when_the_fix_is_sent);
    tokio::time::timeout(Duration::from_secs(120), tui.run(Box::pin(input)))
        .await
        .expect("the key ends the runs")
        .unwrap();
    let s = shown(&tui, dir.path(), &url);
    assert!(
        !tui.state.quit,
        "{cancel} stops the runs, not the inspector"
    );
    assert!(
        s.contains("cancelled: 5/10 runs finished (kept)"),
        "{cancel}: {s}"
    );
    assert!(row(&s, "original").contains(&rate(0, 5)), "{s}");
    assert!(row(&s, "max_tokens").contains("0/5 runs"), "{s}");
    let what_if = std::fs::read_to_string(dir.path().join("cut.try.jsonl")).unwrap();
    assert_eq!(what_if.matches("\"try:1:original\"").count(), 5);
    assert_eq!(what_if.matches("\"try:1:max_tokens\"").count(), 0);
}

/// Cancelled before any run finished (an upstream that takes the connection and never
/// answers): nothing was recorded, so the footer does not offer `o` (there is nothing to diff).
#[tokio::test]
async fn a_cancel_before_any_run_offers_no_diff() {
    // a listener that never accepts: the connection waits in its backlog, the request hangs
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let session = whatif::write_session(dir.path(), &url);
    let mut tui = app(&session);
    let esc_later = futures::stream::once(async {
        tokio::time::sleep(Duration::from_millis(600)).await;
        support::tui::key("esc")
    });
    let input = futures::StreamExt::chain(futures::stream::iter(keys("6 x")), esc_later);
    tokio::time::timeout(Duration::from_secs(60), tui.run(Box::pin(input)))
        .await
        .expect("esc ends the runs")
        .unwrap();
    let s = shown(&tui, dir.path(), &url);
    assert!(s.contains("cancelled: 0/10 runs finished (kept)"), "{s}");
    assert!(!s.contains("o: diff"), "{s}");
    drop(silent);
}

#[tokio::test]
async fn x_in_the_live_proxy_view_runs_against_the_proxys_upstream() {
    // the live view of `toolscope proxy`: an in-memory session whose header is the proxy's
    // (its upstream the engine the proxy forwards to)
    let (url, seen) = whatif::start(Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let file = whatif::write_session(dir.path(), &url);
    let session = toolscope::session::read_session(&file).unwrap();
    let theme = Theme::resolve(Some("dark"), None, true).unwrap();
    let mut state = State::new(Keymap::default(), theme, (110, 34));
    let fx = state.show_source(
        std::sync::Arc::new(toolscope::session::index::SessionSource::from_session(
            session,
        )),
        true,
    );
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(110, 34)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    tui.run(futures::stream::iter(keys("6 x"))).await.unwrap();
    let s = shown(&tui, dir.path(), &url);
    assert!(s.contains("finished: 10/10 runs"), "{s}");
    assert!(row(&s, "original").contains(&rate(0, 5)), "{s}");
    assert!(row(&s, "max_tokens").contains(&rate(5, 5)), "{s}");
    assert_eq!(seen.lock().unwrap().len(), 10);
    // the runs are not rows of the live session: they are the what-if session's
    assert_eq!(tui.state.session.as_ref().unwrap().source.len(), 1);
    assert!(dir.path().join("cut.try.jsonl").exists());

    // - - x: runs again with K = 3, the new job's rows replace the old ones
    tui.run(futures::stream::iter(keys("- - x"))).await.unwrap();
    let s = shown(&tui, dir.path(), &url);
    assert!(s.contains("runs      3 per variant"), "{s}");
    assert!(s.contains("finished: 6/6 runs"), "{s}");
    assert!(row(&s, "original").contains(&rate(0, 3)), "{s}");
    assert!(row(&s, "max_tokens").contains(&rate(3, 3)), "{s}");
    assert_eq!(seen.lock().unwrap().len(), 16);
}

#[tokio::test]
async fn x_refuses_a_recorded_upstream_whose_credentials_were_redacted() {
    let (url, seen) = whatif::start(Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let redacted = url.replace("http://", "http://[redacted]@");
    let session = whatif::write_session(dir.path(), &redacted);
    let mut tui = app(&session);
    tui.run(futures::stream::iter(keys("6 x"))).await.unwrap();
    let s = screen(&tui).replace(['\n', '│'], " ");
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(s.contains("credentials were redacted when recorded"), "{s}");
    assert!(s.contains("toolscope try"), "{s}");
    assert!(!s.contains("SESSION --exchange"), "{s}");
    assert!(seen.lock().unwrap().is_empty(), "nothing is sent");
}

/// A session file names any upstream: the inspector replays only to loopback (or the live
/// proxy's upstream). Review: one key sent K×2 requests to 10.255.255.1 and a PUT with a
/// query to the recorded path.
#[tokio::test]
async fn x_refuses_a_recorded_upstream_that_is_not_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let session = whatif::write_session(dir.path(), "http://10.255.255.1:9");
    let mut tui = app(&session);
    tui.run(futures::stream::iter(keys("6 x"))).await.unwrap();
    let s = screen(&tui).replace(['\n', '│'], " ");
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(s.contains("is not a loopback address"), "{s}");
    assert!(!dir.path().join("cut.try.jsonl").exists(), "nothing ran");
    // a non-POST exchange against loopback is refused too
    let (url, seen) = whatif::start(Duration::ZERO);
    let text = std::fs::read_to_string(whatif::write_session(dir.path(), &url)).unwrap();
    std::fs::write(
        &session,
        text.replace("\"method\":\"POST\"", "\"method\":\"PUT\""),
    )
    .unwrap();
    let mut tui = app(&session);
    tui.run(futures::stream::iter(keys("6 x"))).await.unwrap();
    let s = screen(&tui).replace(['\n', '│'], " ");
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(s.contains("POST) only"), "{s}");
    assert!(seen.lock().unwrap().is_empty(), "nothing is sent");
}
