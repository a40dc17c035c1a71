//! Opening sessions lazily: list rows from a light read of each line (no stream decode),
//! findings counts filled in by the background analysis, damaged lines named by line number.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use toolscope::session::index::SessionSource;
use toolscope::tui::analysis;
use toolscope::tui::keymap::Keymap;
use toolscope::tui::live::apply_record;
use toolscope::tui::theme::Theme;
use toolscope::tui::{State, Tui};

fn fixture() -> PathBuf {
    PathBuf::from("tests/data/session-smollm2.jsonl")
}

/// The list row of `row` as the inspector builds it: the index's light read, summarized.
fn quick_summary(src: &SessionSource, row: usize) -> analysis::Summary {
    let id = src.rows.get(row).and_then(|r| r.id);
    toolscope::analysis::index::row_summary(id, src.light_load(row))
}

fn open(path: &Path) -> SessionSource {
    SessionSource::open(path, &mut |_, _| {}).unwrap()
}

/// The quick row agrees with the full analysis on everything but tool calls and findings,
/// which it leaves to the background analysis.
#[test]
fn quick_rows_match_the_analysed_rows_on_their_heads() {
    let src = open(&fixture());
    assert_eq!(src.len(), 4);
    for row in 0..src.len() {
        let quick = quick_summary(&src, row);
        let ex = src.load(row).unwrap();
        let anns = src.annotations_of(ex.id);
        let full = analysis::summarize(ex, toolscope::analysis::index::context(&src, &anns));
        assert!(!quick.analyzed && full.analyzed, "row {row}");
        assert_eq!(
            (quick.tool_calls, quick.rules.len()),
            (0, 0),
            "row {row}: quick rows count nothing"
        );
        let heads = |s: &analysis::Summary| {
            (
                s.id,
                s.method.clone(),
                s.path.clone(),
                s.status,
                s.duration_ms,
                s.stream,
                s.partial,
                s.error.clone(),
            )
        };
        assert_eq!(heads(&quick), heads(&full), "row {row}");
        // Every request in the fixture names its model.
        assert_eq!(quick.model, full.model, "row {row}");
        assert!(quick.model.is_some(), "row {row}");
    }
    // Hand-checked against the fixture: exchange 1 is a non-stream chat call answered 200 with
    // total_us 842311, exchange 2 a stream.
    let r0 = quick_summary(&src, 0);
    assert_eq!(
        (r0.id, r0.path.as_str(), r0.status, r0.stream),
        (1, "/v1/chat/completions", Some(200), false)
    );
    assert!(quick_summary(&src, 1).stream);
}

/// A session whose exchange line 3 holds chunk fields of the wrong type: a whole JSON line, so
/// the index keeps it and the quick read (which skips chunk bodies) lists it, while the full
/// decode fails and names line and column.
fn session_with_bad_chunks(dir: &Path) -> PathBuf {
    let good = std::fs::read_to_string(fixture()).unwrap();
    let mut lines = good.lines();
    let header = lines.next().unwrap();
    let first = lines.next().unwrap();
    let bad = r#"{"type":"exchange","id":2,"started":"2026-11-29T17:40:09.874120Z","request":{"method":"POST","path":"/v1/chat/completions","body":{"text":"{\"model\":\"m2\",\"stream\":true}"}},"response":{"status":200,"chunks":[{"t_us":"not a number","text":"data: {}\n\n"}]},"timings":{"total_us":1500}}"#;
    let path = dir.join("bad.jsonl");
    std::fs::write(&path, format!("{header}\n{first}\n{bad}\n")).unwrap();
    path
}

#[test]
fn quick_read_skips_chunk_bodies_and_the_full_decode_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = open(&session_with_bad_chunks(dir.path()));
    assert_eq!(src.len(), 2);
    let quick = quick_summary(&src, 1);
    assert_eq!(quick.error, None, "{quick:?}");
    assert_eq!(
        (
            quick.id,
            quick.model.as_deref(),
            quick.duration_ms,
            quick.stream
        ),
        (2, Some("m2"), Some(1.5), true)
    );
    let err = src.load(1).unwrap_err();
    assert!(err.starts_with("line 3 column "), "{err}");
}

/// Broken JSON on an exchange line: the quick read already marks the row damaged, naming the
/// line; the other rows read normally.
#[test]
fn damaged_exchange_line_is_a_damaged_row_with_its_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(fixture()).unwrap();
    let mut lines = good.lines();
    let (header, first) = (lines.next().unwrap(), lines.next().unwrap());
    let path = dir.path().join("broken.jsonl");
    std::fs::write(
        &path,
        format!("{header}\n{{\"type\":\"exchange\",\"id\":7,\"request\":{{]]\n{first}\n"),
    )
    .unwrap();
    let src = open(&path);
    assert_eq!(src.len(), 2);
    // Rows are in id order: exchange 1 (line 3) first, the damaged id 7 (line 2) second.
    assert_eq!(quick_summary(&src, 0).error, None);
    let bad = quick_summary(&src, 1);
    assert_eq!(bad.id, 7);
    let e = bad.error.unwrap();
    assert!(e.starts_with("line 2 column 38: "), "{e}");
}

/// With real background tasks: the list shows quick rows first, and the findings counts
/// arrive later by message; once the queue is drained every row is analysed, with the same
/// counts as the synchronous (inline) run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_analysis_fills_in_the_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_with_bad_chunks(dir.path());
    let theme = Theme::resolve(Some("dark"), None, true).unwrap();
    let tui_for = |inline| {
        let mut state = State::new(Keymap::default(), theme.clone(), (110, 34));
        let fx = state.open_files(vec![path.clone()], None);
        let mut tui = Tui::new(
            Terminal::new(TestBackend::new(110, 34)).unwrap(),
            state,
            inline,
        );
        tui.run_effects(fx);
        tui
    };
    let mut bg = tui_for(false);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut saw_quick = false;
    loop {
        bg.pump().unwrap();
        if let Some(s) = &bg.state.session {
            saw_quick |= s.summaries.iter().flatten().any(|x| !x.analyzed);
            if s.analyzed == s.source.len() && bg.pending() == 0 {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "background analysis did not finish"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    bg.pump().unwrap();
    let inline = tui_for(true);
    let rows = |t: &Tui<TestBackend>| t.state.session.as_ref().unwrap().summaries.clone();
    assert_eq!(rows(&bg), rows(&inline));
    // The chunk-damaged row: listed from its quick read, then marked damaged by the analysis.
    let damaged = rows(&bg)[1].clone().unwrap();
    assert!(
        damaged
            .error
            .as_deref()
            .unwrap()
            .starts_with("line 3 column "),
        "{damaged:?}"
    );
    assert!(damaged.analyzed);
    let _ = saw_quick; // timing-dependent: not asserted
}

/// A proxy started before the server learns the engine later (an `engine` annotation, issue
/// #12): the live view's header takes it at once, as a reader of the file does, so the title,
/// the local render (/props chat_template) and the token rules use it.
#[test]
fn live_view_takes_the_engine_learnt_after_the_header() {
    use toolscope::record::RecordEvent;
    use toolscope::session::read::Session;
    use toolscope::session::{Annotation, Exchange, Header, Server};
    let header = Header {
        format: toolscope::session::FORMAT.into(),
        engine: Some(Server {
            kind: "unknown".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut src = SessionSource::from_session(Session {
        header,
        ..Default::default()
    });
    apply_record(
        &mut src,
        &RecordEvent::Ended(Box::new(Exchange {
            id: 1,
            ..Default::default()
        })),
    );
    assert_eq!(src.header.engine.as_ref().unwrap().kind.as_str(), "unknown");
    let props = serde_json::json!({"chat_template": "{{ messages }}", "build_info": "b11434-x"});
    apply_record(
        &mut src,
        &RecordEvent::Annotated(Annotation::Engine {
            exchange: 1,
            engine: Server {
                kind: "llama-server".into(),
                version: Some("b11434-x".into()),
                model: None,
            },
            props: Some(props.clone()),
        }),
    );
    assert_eq!(
        src.header.engine.as_ref().unwrap().kind.as_str(),
        "llama-server"
    );
    assert_eq!(src.header.props.as_ref(), Some(&props));
}

/// One session-line reader (`session::read::LineJudge`): the whole-file reader
/// (`read_session`) and the inspector's index (`SessionSource`, which places most lines by a
/// glance and decodes them later) see the same session in a damaged file — a byte order mark
/// and CRLF line ends, a second header, an unreadable line, a truncated last line: the same
/// warnings (line, column, message), the same exchanges, the same annotations per exchange.
#[test]
fn index_and_whole_file_reader_agree_on_a_damaged_session() {
    let src = std::fs::read_to_string("sessions/h-probe-qwen3.jsonl").unwrap();
    let lines: Vec<&str> = src.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut text = String::from("\u{feff}");
    for (i, l) in lines.iter().enumerate() {
        text.push_str(l);
        text.push_str("\r\n");
        if i == 2 {
            text.push_str(lines[0]); // a second header
            text.push_str("\r\n{\"type\": \"exchange\", oops}\r\n\r\n");
        }
        if i == 4 {
            // a line cut by a crash, then terminated when the file was reopened for append
            // (`SessionWriter::open`): a truncated line that is not the last
            text.push_str(&lines[1][..lines[1].len() / 3]);
            text.push_str("\r\n");
        }
    }
    let cut = lines[1];
    text.push_str(&cut[..cut.len() / 2]); // the writer stopped mid-line
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.jsonl");
    std::fs::write(&path, &text).unwrap();

    let whole = toolscope::session::read::read_session(&path).unwrap();
    let src = open(&path);
    let warn = |w: &[toolscope::session::ReadWarning]| {
        w.iter()
            .map(|w| (w.line, w.column, w.message.clone()))
            .collect::<Vec<_>>()
    };
    // an exchange line the index placed by a glance is found damaged when it is decoded (a
    // damaged row naming its line): with those, the same lines are reported
    let mut damaged_rows: Vec<usize> = (0..src.len())
        .filter(|&r| src.load(r).is_err())
        .map(|r| src.rows[r].line)
        .collect();
    damaged_rows.sort();
    assert_eq!(damaged_rows, [5, 9]);
    let mut lines: Vec<usize> = src.warnings.iter().map(|w| w.line).collect();
    lines.extend(&damaged_rows);
    lines.sort();
    let theirs: Vec<usize> = whole.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, theirs);
    let same: Vec<_> = warn(&whole.warnings)
        .into_iter()
        .filter(|w| !damaged_rows.contains(&w.0))
        .collect();
    assert_eq!(warn(&src.warnings), same);
    // a damaged row's error reads as the whole-file reader's warning for its line (line,
    // column, message: a cut line is "truncated" in both)
    for r in (0..src.len()).filter(|&r| src.load(r).is_err()) {
        let line = src.rows[r].line;
        let err = src.load(r).unwrap_err();
        let w = toolscope::analysis::load_error_warning(line, &err);
        let theirs = whole.warnings.iter().find(|w| w.line == line).unwrap();
        assert_eq!(
            (w.line, w.column, &w.message),
            (theirs.line, theirs.column, &theirs.message),
            "{err}"
        );
    }
    assert_eq!(whole.warnings.len(), 4, "{:?}", whole.warnings);
    let mut ids: Vec<u64> = whole.exchanges.iter().map(|e| e.id).collect();
    ids.sort();
    let loaded: Vec<u64> = (0..src.len())
        .filter_map(|r| src.load(r).ok().map(|e| e.id))
        .collect();
    assert_eq!(loaded, ids);
    assert_eq!(src.header, whole.header);
    for id in ids {
        let mine = src.annotations_of(id);
        let theirs = whole.annotations.get(&id).map_or(&[][..], Vec::as_slice);
        assert_eq!(&*mine, theirs, "exchange {id}");
        assert!(
            !theirs.is_empty(),
            "exchange {id}: the probe session annotates every exchange"
        );
    }
}
