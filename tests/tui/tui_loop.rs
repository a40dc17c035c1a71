//! The loop view (`L`) on a real agent loop: tests/data/loop/loop-smollm2.jsonl, recorded by
//! `toolscope proxy --headless` in front of llama-server b11434 (SmolLM2-135M, the Qwen3-0.6B
//! corpus template, `-np 1`, `LLAMA_SERVER_SLOTS_DEBUG=1`) while tests/support/loop_agent.py
//! (`loop` mode, official `openai` SDK 3.51.0) ran its 4-turn tool loop: a parallel
//! get_weather + get_time reply, a `task` call that ran a sub-agent conversation, `book`, and
//! the answer.
//!
//! What the view must show is read from the file here, not from toolscope: each call id the
//! model's replies carry, and the first later request whose `messages` hold a `tool` message
//! with that `tool_call_id` (exchange and message index).

use crate::support;

use std::path::PathBuf;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;
use toolscope::tui::keymap::Keymap;
use toolscope::tui::theme::Theme;
use toolscope::tui::{State, Tui};

const SESSION: &str = "tests/data/loop/loop-smollm2.jsonl";

/// `(call id, exchange whose request answered it, index of the result in its messages)` for
/// every call of every recorded reply, in exchange order.
fn calls_and_results() -> Vec<(String, u64, usize)> {
    let text = std::fs::read_to_string(SESSION).unwrap();
    let mut exchanges: Vec<(u64, Value, Value)> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "exchange")
        .map(|v| {
            let body = |p: &str| {
                serde_json::from_str::<Value>(v.pointer(p).and_then(Value::as_str).unwrap())
                    .unwrap()
            };
            (
                v["id"].as_u64().unwrap(),
                body("/request/body/text"),
                body("/response/body/text"),
            )
        })
        .collect();
    exchanges.sort_by_key(|e| e.0);
    let mut out = Vec::new();
    for (i, (_, _, resp)) in exchanges.iter().enumerate() {
        let calls = resp
            .pointer("/choices/0/message/tool_calls")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for c in calls {
            let id = c["id"].as_str().unwrap().to_owned();
            let (ex, m) = exchanges[i + 1..]
                .iter()
                .find_map(|(ex, req, _)| {
                    let msgs = req["messages"].as_array()?;
                    msgs.iter()
                        .position(|m| m["role"] == "tool" && m["tool_call_id"] == id.as_str())
                        .map(|m| (*ex, m))
                })
                .unwrap_or_else(|| panic!("no result for {id} in {SESSION}"));
            out.push((id, ex, m));
        }
    }
    out
}

#[tokio::test]
async fn loop_view_links_every_call_to_its_result() {
    let expected = calls_and_results();
    // the recorded loop: 2 parallel calls, task, book
    assert_eq!(expected.len(), 4, "{expected:?}");
    let s = support::tui::screen_after(SESSION, (180, 24), "L").await;
    for (id, ex, m) in &expected {
        let line = s
            .lines()
            .find(|l| l.contains(id.as_str()))
            .unwrap_or_else(|| panic!("call {id} not shown:\n{s}"));
        assert!(
            line.contains(&format!("→ #{ex} msg {m} ")),
            "call {id} should be answered by exchange {ex} message {m}:\n{line}\n{s}"
        );
    }
    // the parallel calls are siblings of one turn, the sub-agent sits under the task call
    assert!(
        s.contains("├─ get_weather") || s.contains("├─ get_time"),
        "{s}"
    );
    assert!(s.contains("sub-agent of #2 call 0"), "{s}");
    insta::assert_snapshot!(s);
}

/// The inspector after `spec`'s keys, background work inline.
async fn app_after(spec: &str) -> Tui<TestBackend> {
    let theme = Theme::resolve(Some("dark"), None, false).unwrap();
    let mut state = State::new(Keymap::default(), theme, (180, 24));
    let fx = state.open_files(vec![PathBuf::from(SESSION)], None);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(180, 24)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    tui.run(futures::stream::iter(support::tui::keys(spec)))
        .await
        .unwrap();
    tui
}

/// Enter on the `task` call's line opens the exchange whose request carried its result: the
/// view closes and that exchange's panes show.
#[tokio::test]
async fn enter_on_a_call_opens_the_exchange_that_answered_it() {
    let expected = calls_and_results();
    let (id, ex, _) = &expected[2];
    let view = support::tui::screen(&app_after("L").await);
    // the view's first line is the screen's third row (header, border)
    let at = view
        .lines()
        .skip(2)
        .position(|l| l.contains(id.as_str()))
        .unwrap();
    let tui = app_after(&format!("L {}enter", "j ".repeat(at))).await;
    let s = tui.state.session.as_ref().unwrap();
    assert!(s.loop_view.is_none());
    let a = s.analysis.as_ref().expect("an exchange analysed");
    assert_eq!(a.exchange.id, *ex);
    assert_eq!(s.visible[s.list.cursor], a.row);
    assert_eq!(s.focus, toolscope::tui::state::Focus::Detail);
}
