//! The session file format: round trip, damage tolerance, append-continuation.

use toolscope::session::*;

fn exchange(id: u64) -> Exchange {
    Exchange {
        id,
        started: "2026-11-29T18:00:00.000000Z".into(),
        request: Request {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Body::Text {
                text: r#"{"model":"m","messages":[]}"#.into(),
            },
        },
        response: Some(Response {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: None,
            // A chunk that ends inside a UTF-8 character ("é" is C3 A9) must survive byte-exact.
            chunks: Some(vec![
                Chunk {
                    t_us: 1200,
                    data: Body::from_bytes(b"data: {\"x\":\"caf\xc3"),
                },
                Chunk {
                    t_us: 2500,
                    data: Body::from_bytes(b"\xa9\"}\n\n"),
                },
            ]),
        }),
        timings: Timings {
            ttfb_us: Some(1000),
            total_us: Some(2600),
        },
        ..Default::default()
    }
}

#[test]
fn round_trip_keeps_bytes_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut w =
        SessionWriter::open(&path, &write::new_header("2026-11-29T18:00:00Z".into())).unwrap();
    assert_eq!(w.next_id(), 1);
    w.append(&Line::Exchange(Box::new(exchange(1)))).unwrap();
    drop(w);
    let s = read_session(&path).unwrap();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert_eq!(s.header.format, "toolscope-session/1");
    assert_eq!(s.exchanges, vec![exchange(1)]);
    // The split character is stored as base64 in the first chunk, text in neither half.
    let chunks = s.exchanges[0]
        .response
        .as_ref()
        .unwrap()
        .chunks
        .as_ref()
        .unwrap();
    assert!(matches!(chunks[0].data, Body::Base64 { .. }));
    assert_eq!(
        s.exchanges[0].response_bytes(),
        "data: {\"x\":\"café\"}\n\n".as_bytes()
    );
    assert_eq!(s.exchanges[0].api(), Api::Openai);
    assert_eq!(s.exchanges[0].model().as_deref(), Some("m"));
}

#[test]
fn truncated_last_line_is_reported_and_the_rest_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut w = SessionWriter::open(&path, &write::new_header("t".into())).unwrap();
    w.append(&Line::Exchange(Box::new(exchange(1)))).unwrap();
    w.append(&Line::Exchange(Box::new(exchange(2)))).unwrap();
    drop(w);
    // Simulate a crash mid-write of a third exchange: cut the line in half.
    let third = serde_json::to_string(&Line::Exchange(Box::new(exchange(3)))).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&third.as_bytes()[..third.len() / 2]);
    std::fs::write(&path, &bytes).unwrap();

    let s = read_session(&path).unwrap();
    assert_eq!(
        s.exchanges.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(s.warnings.len(), 1);
    assert_eq!(
        s.warnings[0].line, 4,
        "header is line 1, exchanges 2 and 3, the cut line is 4"
    );
    assert!(
        s.warnings[0].message.contains("truncated"),
        "{}",
        s.warnings[0]
    );

    // Appending continues after the damage: the cut line is terminated, ids continue after
    // the cut line's (issue #16: its id 3 is taken, never reused).
    let mut w = SessionWriter::open(&path, &write::new_header("t".into())).unwrap();
    assert_eq!(w.next_id(), 4);
    w.append(&Line::Exchange(Box::new(exchange(4)))).unwrap();
    let s = read_session(&path).unwrap();
    assert_eq!(
        s.exchanges.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![1, 2, 4]
    );
    assert_eq!(s.warnings.len(), 1);
}

#[test]
fn garbage_in_the_middle_names_line_and_column() {
    let header = serde_json::to_string(&Line::Header(write::new_header("t".into()))).unwrap();
    let ex = serde_json::to_string(&Line::Exchange(Box::new(exchange(1)))).unwrap();
    let text = format!("{header}\n{{\"type\":\"exchange\",\"id\":\n{ex}\n");
    let s = read_session_bytes("mem.jsonl", text.as_bytes()).unwrap();
    assert_eq!(s.exchanges.len(), 1);
    assert_eq!(s.warnings[0].line, 2);
    assert!(s.warnings[0].column.is_some());
}

#[test]
fn not_a_session_is_an_error_naming_the_file() {
    let err = read_session_bytes("x.json", b"{\"log\":{\"entries\":[]}}\n").unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("x.json: line 1"), "{msg}");
    let err = read_session_bytes(
        "y.jsonl",
        b"{\"type\":\"header\",\"format\":\"toolscope-session/9\",\"created\":\"t\"}\n",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("unsupported session format"),
        "{err}"
    );
    assert!(read_session_bytes("z.jsonl", b"").is_err());
}

#[test]
fn api_from_path() {
    assert_eq!(Api::from_path("/v1/chat/completions"), Api::Openai);
    assert_eq!(Api::from_path("/v1/messages?beta=true"), Api::Anthropic);
    assert_eq!(Api::from_path("/completion"), Api::Completion);
    assert_eq!(Api::from_path("/v1/completions"), Api::Completion);
    assert_eq!(Api::from_path("/v1/models"), Api::Other);
    // llama-server b11434 tools/server/server.cpp:276-277 and 296-297
    assert_eq!(Api::from_path("/v1/responses"), Api::Responses);
    assert_eq!(Api::from_path("/responses"), Api::Responses);
    assert_eq!(Api::from_path("/v1/responses/"), Api::Responses);
    assert_eq!(Api::from_path("/v1/responses/input_tokens"), Api::Other);
    assert_eq!(Api::from_path("/responses/input_tokens"), Api::Other);
    assert!(Api::Responses.is_generation());
    assert!(!Api::from_path("/v1/responses/input_tokens").is_generation());
    assert_eq!(Api::Responses.as_str(), "responses");
}

#[test]
fn a_second_writer_is_refused_and_appends_never_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut first = SessionWriter::open(&path, &write::new_header("t".into())).unwrap();
    let err = SessionWriter::open(&path, &write::new_header("t".into())).unwrap_err();
    assert!(
        err.to_string()
            .contains("another toolscope process is writing this session"),
        "{err}"
    );
    // Bytes appended behind the writer's back (e.g. by an editor) are not overwritten:
    // the file is opened O_APPEND.
    first
        .append(&Line::Exchange(Box::new(exchange(1))))
        .unwrap();
    let mut other = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut other, b"\n").unwrap();
    first
        .append(&Line::Exchange(Box::new(exchange(2))))
        .unwrap();
    drop(first);
    let s = read_session(&path).unwrap();
    assert_eq!(
        s.exchanges.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    // Once the first writer is gone, a new one continues the ids.
    let mut again = SessionWriter::open(&path, &write::new_header("t".into())).unwrap();
    assert_eq!(again.next_id(), 3);
}

/// llama-server -v streams end with `__verbose.content: ""` (the raw text is not repeated in
/// stream mode, build 11434, seen in sessions/a-two-tools-stream.jsonl): readers must fall back
/// to the deltas rather than replay an empty raw text.
#[test]
fn empty_verbose_content_in_a_stream_is_not_the_raw_text() {
    let mut ex = exchange(1);
    let sse = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"__verbose\":{\"content\":\"\",\"stop\":true}}\n\n",
        "data: [DONE]\n\n"
    );
    ex.response.as_mut().unwrap().chunks = Some(vec![Chunk {
        t_us: 1,
        data: Body::from_bytes(sse.as_bytes()),
    }]);
    let r = toolscope::stream::decode_exchange(&ex).expect("decodes");
    assert_eq!(r.message.content, "Hi");
    assert_eq!(r.message.raw_text, None);
    let body =
        serde_json::json!({"choices":[{"message":{"content":"Hi"}}],"__verbose":{"content":""}});
    assert_eq!(
        toolscope::stream::message::from_response_json("openai", &body)
            .unwrap()
            .raw_text,
        None
    );
}

/// A UTF-8 byte order mark before the header (an editor saved the file) is skipped: the
/// session opens as without it.
#[test]
fn byte_order_mark_before_the_header_is_skipped() {
    let header = serde_json::to_string(&Line::Header(write::new_header("t".into()))).unwrap();
    let ex = serde_json::to_string(&Line::Exchange(Box::new(exchange(1)))).unwrap();
    let text = format!("\u{feff}{header}\n{ex}\n");
    let s = read_session_bytes("bom.jsonl", text.as_bytes()).unwrap();
    assert_eq!(s.exchanges.len(), 1);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bom.jsonl");
    std::fs::write(&path, &text).unwrap();
    let src = toolscope::session::index::SessionSource::index_file(&path, &mut |_, _| {}).unwrap();
    assert_eq!(src.len(), 1);
    let first = toolscope::session::index::first_line(&path, 1024).unwrap();
    assert!(first.starts_with("{\"type\":\"header\""), "{first}");
}
