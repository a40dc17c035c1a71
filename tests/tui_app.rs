//! App-level tests: keys go in through the input stream, the screen is asserted.

use std::path::PathBuf;

use crossterm::event::{
    Event, KeyEvent, KeyEventKind, KeyEventState, KeyModifiers, MouseButton, MouseEvent,
    MouseEventKind,
};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use toolscope::tui::keymap::{Key, Keymap};
use toolscope::tui::theme::Theme;
use toolscope::tui::{State, Tui};

fn fixture() -> PathBuf {
    PathBuf::from("tests/data/session-smollm2.jsonl")
}

fn app() -> Tui<TestBackend> {
    let theme = Theme::resolve(Some("dark"), None, true).unwrap();
    let mut state = State::new(Keymap::default(), theme, (110, 34));
    let fx = state.open_files(vec![fixture()], None);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(110, 34)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    tui
}

fn key(k: &str) -> std::io::Result<Event> {
    let key = Key::parse(k).unwrap();
    Ok(Event::Key(KeyEvent {
        code: key.code,
        modifiers: key.mods,
        kind: KeyEventKind::Press,
        state: KeyEventState::NONE,
    }))
}

fn typed(spec: &str) -> Vec<std::io::Result<Event>> {
    spec.split_whitespace().map(key).collect()
}

fn text(s: &str) -> Vec<std::io::Result<Event>> {
    s.chars()
        .map(|c| {
            Ok(Event::Key(KeyEvent::new(
                crossterm::event::KeyCode::Char(c),
                KeyModifiers::NONE,
            )))
        })
        .collect()
}

fn screen(tui: &Tui<TestBackend>) -> String {
    let buf = tui.terminal.backend().buffer();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                + "\n"
        })
        .collect()
}

async fn drive(tui: &mut Tui<TestBackend>, events: Vec<std::io::Result<Event>>) -> String {
    tui.run(futures::stream::iter(events)).await.unwrap();
    screen(tui)
}

#[tokio::test]
async fn list_shows_every_exchange_with_columns() {
    let mut tui = app();
    let s = drive(&mut tui, vec![]).await;
    // 4 whole exchanges; the 5th line is truncated.
    assert!(s.contains("4 exchanges"), "{s}");
    assert!(s.contains("/v1/messages"), "{s}");
    assert!(s.contains("500"), "{s}");
    // Exchange 1 took 412951 µs.
    assert!(s.contains("413ms"), "{s}");
}

#[tokio::test]
async fn filter_by_status_then_clear() {
    let mut tui = app();
    let mut ev = typed("f");
    ev.extend(text("status:5"));
    ev.extend(typed("enter"));
    let s = drive(&mut tui, ev).await;
    assert!(s.contains("1/4 exchanges"), "{s}");
    assert!(s.contains("filter: status:5"), "{s}");
    let s = drive(&mut app(), {
        let mut e = typed("f");
        e.extend(text("path:messages"));
        e.extend(typed("enter esc"));
        e
    })
    .await;
    assert!(s.contains(" 4 exchanges"), "{s}");
}

#[tokio::test]
async fn search_moves_to_match_and_n_cycles() {
    let mut tui = app();
    let mut ev = typed("/");
    ev.extend(text("messages"));
    ev.extend(typed("enter"));
    let s = drive(&mut tui, ev).await;
    assert!(s.contains("match 1/1"), "{s}");
    let sel = tui.state.session.as_ref().unwrap();
    assert_eq!(
        sel.visible[sel.list.cursor], 2,
        "the /v1/messages exchange is row 3"
    );
}

#[tokio::test]
async fn tab_and_number_keys_switch_panes() {
    let mut tui = app();
    let s = drive(&mut tui, typed("tab tab tab")).await;
    assert_eq!(tui.state.session.as_ref().unwrap().pane, 2);
    assert!(s.contains("Template ·"), "{s}");
    let s = drive(&mut tui, typed("backtab 6")).await;
    assert_eq!(tui.state.session.as_ref().unwrap().pane, 5);
    assert!(s.contains("Findings ·"), "{s}");
}

#[tokio::test]
async fn findings_enter_jumps_to_evidence() {
    // Exchange 3 of a copy with a partial outcome: its finding points at the Stream pane.
    let src = std::fs::read_to_string(fixture()).unwrap();
    let patched = src.replacen(
        "\"outcome\":\"complete\"}",
        "\"outcome\":\"client_disconnected\",\"error\":\"client closed the connection\"}",
        1,
    );
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.jsonl");
    std::fs::write(&p, patched).unwrap();
    let theme = Theme::resolve(Some("dark"), None, true).unwrap();
    let mut state = State::new(Keymap::default(), theme, (110, 34));
    let fx = state.open_files(vec![p], None);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(110, 34)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    let s = drive(&mut tui, typed("6 enter")).await;
    assert_eq!(tui.state.session.as_ref().unwrap().pane, 3, "{s}");
}

#[tokio::test]
async fn mouse_click_on_tab_and_row() {
    let mut tui = app();
    let _ = drive(&mut tui, vec![]).await;
    let areas = toolscope::tui::view::areas(ratatui::layout::Rect::new(0, 0, 110, 34), &tui.state);
    let tab5 = toolscope::tui::view::tab_ranges()[4];
    let click = |x, y| {
        Ok(Event::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        }))
    };
    // Row 2 of the list: border + header + 2nd row.
    let s = drive(
        &mut tui,
        vec![
            click(areas.tabs.x + tab5.0 + 1, areas.tabs.y),
            click(5, areas.list.y + 3),
        ],
    )
    .await;
    let sess = tui.state.session.as_ref().unwrap();
    assert_eq!(sess.pane, 4, "{s}");
    assert_eq!(sess.list.cursor, 1, "{s}");
}

#[tokio::test]
async fn copy_uses_clipboard_hook() {
    let copied = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let c2 = copied.clone();
    let mut tui = app().with_clipboard(move |t| *c2.lock().unwrap() = t.to_owned());
    let s = drive(&mut tui, typed("j 4 j y")).await;
    assert!(s.contains("copied"), "{s}");
    let got = copied.lock().unwrap().clone();
    // Event 1 of exchange 2 carries the call id and name.
    assert!(
        got.contains("call_Kx82bN0aQ") && got.contains("stock_shelf"),
        "{got}"
    );
}

#[tokio::test]
async fn quit_keys() {
    let mut tui = app();
    drive(&mut tui, typed("ctrl-c")).await;
    assert!(tui.state.quit);
    let mut tui = app();
    drive(&mut tui, typed("q")).await;
    assert!(tui.state.quit, "q on the list of a single file quits");
}

#[tokio::test]
async fn live_proxy_events_grow_a_stream_in_place() {
    use toolscope::record::recorder::RecordEvent;
    use toolscope::session::{Body, Request};
    let theme = Theme::resolve(Some("dark"), None, true).unwrap();
    let mut state = State::new(Keymap::default(), theme, (110, 34));
    let session = toolscope::session::read::Session {
        path: "live.jsonl".into(),
        ..Default::default()
    };
    let fx = state.show_source(
        std::sync::Arc::new(toolscope::tui::source::SessionSource::from_session(session)),
        true,
    );
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(110, 34)).unwrap(),
        state,
        true,
    );
    tui.run_effects(fx);
    let tx = tui.sender();
    let send = |ev| tx.send(toolscope::tui::Message::Record(ev)).unwrap();
    let body = r#"{"model":"smollm2","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    send(RecordEvent::Started {
        id: 1,
        started: "2026-11-29T18:00:00Z".into(),
        request: Request {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            headers: vec![],
            body: Body::Text { text: body.into() },
        },
    });
    send(RecordEvent::Head {
        id: 1,
        status: 200,
        headers: vec![("content-type".into(), "text/event-stream".into())],
        ttfb_us: 1000,
    });
    for (i, word) in ["Hel", "lo", " there"].iter().enumerate() {
        let data = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{word}\"}}}}]}}\n\n"
        );
        send(RecordEvent::Chunk {
            id: 1,
            t_us: 2000 + i as u64 * 1000,
            bytes: bytes::Bytes::from(data),
        });
    }
    let s = drive(&mut tui, typed("4")).await;
    assert!(s.contains("● live") && s.contains("1 exchanges"), "{s}");
    assert!(s.contains("Stream · 3 events"), "{s}");
    // Two more chunks arrive: the same row grows.
    send(RecordEvent::Chunk {
        id: 1,
        t_us: 9000,
        bytes: bytes::Bytes::from(
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        ),
    });
    let s = drive(&mut tui, vec![]).await;
    assert!(
        s.contains("Stream · 5 events") && s.contains("1 exchanges"),
        "{s}"
    );
}

#[tokio::test]
async fn findings_of_the_server_parse_error_exchange() {
    // Exchange 4 is llama-server's HTTP 500 "does not match the expected peg-native format"
    // (tests/data fixture, from shared/notes/real-server.md): diagnose reports server.parse_error.
    let mut tui = app();
    let s = drive(&mut tui, typed("G 6")).await;
    assert!(s.contains("server.parse_error"), "{s}");
    // Filtering by rule keeps exactly that exchange.
    let mut ev = typed("esc f");
    ev.extend(text("rule:server"));
    ev.extend(typed("enter"));
    let s = drive(&mut tui, ev).await;
    assert!(s.contains("1/4 exchanges"), "{s}");
}
