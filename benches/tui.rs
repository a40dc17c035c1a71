//! Inspector benchmark (prints figures; `cargo bench --bench tui`).
//!
//! Generates a ~200 MB session (2,000 streamed exchanges of ~100 KB each) into a temp file,
//! opens it in the inspector on a 160×50 TestBackend with real background tasks, and scrolls.
//! Reports: time to the first frame showing exchange rows (goal ≤ 1.5 s), per-frame time for
//! list and pane scrolling (goal ≤ 16 ms), and peak memory (VmHWM) against the file size (goal
//! ≤ 3×).

use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyEvent, KeyEventKind, KeyEventState};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use toolscope::session::{Body, Chunk, Exchange, Line, Request, Response, Timings};
use toolscope::tui::keymap::{Key, Keymap};
use toolscope::tui::theme::Theme;
use toolscope::tui::{State, Tui};

const EXCHANGES: u64 = 2_000;
const TARGET_STREAM: usize = 100 * 1024;

fn vm_hwm_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn generate(path: &std::path::Path) -> u64 {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let header = toolscope::session::write::new_header("2026-11-29T12:00:00Z".into());
    serde_json::to_writer(&mut w, &Line::Header(header)).unwrap();
    w.write_all(b"\n").unwrap();
    let tools = r#"[{"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"units":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["city"]}}}]"#;
    for id in 1..=EXCHANGES {
        let body = format!(
            r#"{{"model":"smollm2","stream":true,"messages":[{{"role":"user","content":"question {id}"}}],"tools":{tools}}}"#
        );
        let mut chunks = Vec::new();
        let mut size = 0;
        let mut t = 150_000u64;
        let mut i = 0;
        while size < TARGET_STREAM {
            let text = format!(
                "data: {{\"choices\":[{{\"finish_reason\":null,\"index\":0,\"delta\":{{\"content\":\"token {i} of exchange {id} with some more words\"}}}}],\"created\":1764417600,\"id\":\"chatcmpl-{id}\",\"model\":\"SmolLM2-135M-Instruct.Q4_1.gguf\",\"object\":\"chat.completion.chunk\"}}\n\n"
            );
            size += text.len();
            chunks.push(Chunk {
                t_us: t,
                data: Body::Text { text },
            });
            t += 9_000 + (i % 7) * 300;
            i += 1;
        }
        chunks.push(Chunk {
            t_us: t,
            data: Body::Text {
                text: "data: [DONE]\n\n".into(),
            },
        });
        let ex = Exchange {
            id,
            started: "2026-11-29T12:00:01.000000Z".into(),
            request: Request {
                method: "POST".into(),
                path: "/v1/chat/completions".into(),
                headers: vec![("content-type".into(), "application/json".into())],
                body: Body::Text { text: body },
            },
            response: Some(Response {
                status: 200,
                headers: vec![("content-type".into(), "text/event-stream".into())],
                body: None,
                chunks: Some(chunks),
            }),
            timings: Timings {
                ttfb_us: Some(150_000),
                total_us: Some(t),
            },
            ..Default::default()
        };
        serde_json::to_writer(&mut w, &Line::Exchange(Box::new(ex))).unwrap();
        w.write_all(b"\n").unwrap();
    }
    w.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

fn key(k: &str) -> Event {
    let key = Key::parse(k).unwrap();
    Event::Key(KeyEvent {
        code: key.code,
        modifiers: key.mods,
        kind: KeyEventKind::Press,
        state: KeyEventState::NONE,
    })
}

fn stats(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let n = v.len();
    let mean = v.iter().sum::<Duration>() / n as u32;
    println!(
        "{name:<28} frames {n:>5}  mean {:>7.3} ms  p95 {:>7.3} ms  max {:>7.3} ms",
        mean.as_secs_f64() * 1e3,
        v[n * 95 / 100].as_secs_f64() * 1e3,
        v[n - 1].as_secs_f64() * 1e3
    );
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    let t = Instant::now();
    let size = generate(&path);
    println!(
        "generated {} ({:.1} MB, {EXCHANGES} exchanges) in {:.2?}",
        path.display(),
        size as f64 / 1e6,
        t.elapsed()
    );
    let hwm_before = vm_hwm_kb().unwrap_or(0);
    // Drop the generator's page cache advantage? No: a user's freshly recorded file is cached too.

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let t0 = Instant::now();
    let theme = Theme::resolve(Some("dark"), None, false).unwrap();
    let mut state = State::new(Keymap::default(), theme, (160, 50));
    let fx = state.open_files(vec![path.clone()], None);
    let mut tui = Tui::new(
        Terminal::new(TestBackend::new(160, 50)).unwrap(),
        state,
        false,
    );
    tui.run_effects(fx);
    tui.draw().unwrap();
    let first_any = t0.elapsed();
    // First frame with the visible rows summarized.
    let first_rows = loop {
        tui.pump().unwrap();
        let ready = tui.state.session.as_ref().is_some_and(|s| {
            let h = (s.list.offset + 20).min(s.visible.len());
            h > 0
                && s.visible[s.list.offset..h]
                    .iter()
                    .all(|&r| s.summaries[r].is_some())
        });
        if ready {
            break t0.elapsed();
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    let first_pane = loop {
        tui.pump().unwrap();
        if tui.state.analysis().is_some() {
            break t0.elapsed();
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    println!(
        "first frame (any)            {:>8.1} ms",
        first_any.as_secs_f64() * 1e3
    );
    println!(
        "first frame with rows        {:>8.1} ms   (goal ≤ 1500 ms)",
        first_rows.as_secs_f64() * 1e3
    );
    println!(
        "first frame with panes       {:>8.1} ms",
        first_pane.as_secs_f64() * 1e3
    );

    let mut list = Vec::new();
    for k in std::iter::repeat_n("j", 300)
        .chain(std::iter::repeat_n("pgdn", 60))
        .chain(["G", "g"])
        .chain(std::iter::repeat_n("k", 5))
    {
        let t = Instant::now();
        tui.input(&key(k)).unwrap();
        list.push(t.elapsed());
        tui.pump().unwrap();
    }
    // Let the background summaries finish (all 2,000 rows) and time that.
    let t_all = loop {
        tui.pump().unwrap();
        if tui
            .state
            .session
            .as_ref()
            .is_some_and(|s| s.summarized >= s.source.len())
        {
            break t0.elapsed();
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    println!(
        "all rows summarized          {:>8.1} ms (background)",
        t_all.as_secs_f64() * 1e3
    );
    // Wait for the selected exchange's analysis, then scroll the Stream pane.
    tui.input(&key("4")).unwrap();
    while tui.state.analysis().is_none() || tui.pending() > 0 {
        tui.pump().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    tui.pump().unwrap();
    let mut pane = Vec::new();
    for k in std::iter::repeat_n("j", 300)
        .chain(std::iter::repeat_n("pgdn", 20))
        .chain(["G", "g"])
    {
        let t = Instant::now();
        tui.input(&key(k)).unwrap();
        pane.push(t.elapsed());
    }
    // Replay stepping.
    tui.input(&key("5")).unwrap();
    let mut replay = Vec::new();
    for k in std::iter::repeat_n("l", 200).chain(["end", "home"]) {
        let t = Instant::now();
        tui.input(&key(k)).unwrap();
        replay.push(t.elapsed());
    }
    // A filter over all rows.
    let t = Instant::now();
    tui.input(&key("f")).unwrap();
    for c in "status:200".chars() {
        tui.input(&Event::Key(KeyEvent::new(
            crossterm::event::KeyCode::Char(c),
            crossterm::event::KeyModifiers::NONE,
        )))
        .unwrap();
    }
    tui.input(&key("enter")).unwrap();
    let filter = t.elapsed();
    stats("list scroll (j/PgDn/G/g)", list);
    stats("stream pane scroll", pane);
    stats("replay step", replay);
    println!(
        "filter over 2,000 rows       {:>8.1} ms (12 keys, 12 frames)",
        filter.as_secs_f64() * 1e3
    );
    let hwm = vm_hwm_kb().unwrap_or(0);
    println!(
        "peak memory VmHWM            {:>8.1} MB  (before opening: {:.1} MB; file {:.1} MB; ratio {:.2}×, goal ≤ 3×)",
        hwm as f64 / 1024.0,
        hwm_before as f64 / 1024.0,
        size as f64 / (1024.0 * 1024.0),
        hwm as f64 * 1024.0 / size as f64
    );
    println!("frames drawn                 {:>8}", tui.frames);
}
