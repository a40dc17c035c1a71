//! The Replay pane on a live-recorded streamed tool call (issue #12): the shipped
//! sessions/a-two-tools-stream.jsonl was recorded through `toolscope proxy` from llama-server
//! build 11434 started without `-v` and with `LLAMA_SERVER_SLOTS_DEBUG=1`, so the model's raw text
//! comes from `GET /slots` (a `raw_text` annotation), not from the stream's argument deltas.
//! Replay steps through `<tool_call>` to the `get_weather` call and names its source.

use crate::support;

async fn screen_after(spec: &str) -> String {
    support::tui::screen_after("sessions/a-two-tools-stream.jsonl", (110, 34), spec).await
}

/// Per character: the parser holds `<tool_call>` as a partial marker, enters the Hermes call,
/// and the last step delivers `get_weather({"city":"Lisbon"})` — the call the server streamed.
/// The text is the slot's, named as such; nothing is replayed from argument deltas.
#[tokio::test]
async fn replay_steps_through_the_slot_text_to_the_call() {
    let first = screen_after("5 c c").await;
    assert!(first.contains("per character · step 1/82"), "{first}");
    assert!(first.contains("state   partial_marker"), "{first}");
    let inside = screen_after("5 c c l l l l l l l l l l l l l").await;
    assert!(inside.contains("state   in_call hermes"), "{inside}");
    assert!(inside.contains("raw output: slots debug (slot"), "{inside}");
    insta::assert_snapshot!("raw_replay_inside_tool_call", inside);
    let last = screen_after("5 c c end").await;
    assert!(
        last.contains(r#"→ call get_weather({"city":"Lisbon"})"#),
        "{last}"
    );
    assert!(
        last.contains(r#"call[0] get_weather {"city": "Lisbon"}"#),
        "{last}"
    );
    insta::assert_snapshot!("raw_replay_call_delivered", last);
}
