//! Hand-checked SSE streams and reassembly: spec examples (WHATWG HTML §9.2.6), OpenAI and
//! Anthropic streams written out by hand with their expected messages, the field cases 06, 07 and
//! 10, and the server-vs-toolscope comparison on hand-built parses.

use crate::support;

use serde_json::{Value, json};
use toolscope::analysis::facts;
use toolscope::diagnose::compare::{Discrepancy, compare_calls};
use toolscope::diagnose::rules::server::comparison_findings;
use toolscope::diagnose::{ExchangeContext, check_exchange};
use toolscope::finding::{Pane, Rule};
use toolscope::parser::{ParseOutput, ParsedCall};
use toolscope::session::Api;
use toolscope::session::{Body, Chunk, Exchange, Request, Response};
use toolscope::stream::reassemble::{reassemble_anthropic, reassemble_openai};
use toolscope::stream::sse::{SseDecoder, decode_bytes, decode_chunks};
use toolscope::stream::{AssistantMessage, CallRecord, decode_exchange};

fn datas(body: &[u8]) -> Vec<String> {
    decode_bytes(body)
        .into_iter()
        .filter(|e| e.complete)
        .map(|e| e.data)
        .collect()
}

// ---------- SSE: spec examples ----------

#[test]
fn spec_multiline_data_joined_with_lf() {
    // WHATWG example: "YHOO", "+2", "10" in one event.
    assert_eq!(
        datas(b"data: YHOO\ndata: +2\ndata: 10\n\n"),
        vec!["YHOO\n+2\n10"]
    );
}

#[test]
fn spec_comment_id_and_space_stripping() {
    let evs = decode_bytes(b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n");
    let got: Vec<(&str, Option<&str>)> = evs
        .iter()
        .map(|e| (e.data.as_str(), e.id.as_deref()))
        .collect();
    // "id" with no colon sets the id to the empty string; only one leading space is stripped.
    assert_eq!(
        got,
        vec![
            ("first event", Some("1")),
            ("second event", Some("")),
            (" third event", None)
        ]
    );
}

#[test]
fn spec_empty_data_lines_and_truncated_tail() {
    let evs = decode_bytes(b"data\n\ndata\ndata\n\ndata:");
    let got: Vec<(&str, bool)> = evs.iter().map(|e| (e.data.as_str(), e.complete)).collect();
    // The browser would discard the last one; an inspector reports it as incomplete.
    assert_eq!(got, vec![("", true), ("\n", true), ("", false)]);
}

#[test]
fn cr_crlf_and_lf_line_ends_mixed() {
    assert_eq!(
        datas(b"data: a\r\rdata: b\r\n\r\ndata: c\n\ndata: d\r\n\n"),
        vec!["a", "b", "c", "d"]
    );
}

#[test]
fn crlf_split_across_chunks_is_one_line_end() {
    let mut d = SseDecoder::new();
    let mut evs = d.feed(b"data: a\r", Some(1));
    assert!(evs.is_empty());
    evs.extend(d.feed(b"\ndata: b\r", Some(2)));
    assert!(
        evs.is_empty(),
        "the LF completes the CRLF of line 1, not an empty line"
    );
    evs.extend(d.feed(b"\n\r\n", Some(3)));
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].data, "a\nb");
    assert_eq!(
        (evs[0].chunk, evs[0].t_us, evs[0].offset, evs[0].end),
        (2, Some(3), 0, 18)
    );
    assert!(d.finish().is_none());
}

#[test]
fn bom_stripped_once_even_when_split() {
    let body = "\u{FEFF}data: x\n\n".as_bytes();
    for cut in 0..body.len() {
        let evs = decode_chunks([(&body[..cut], None), (&body[cut..], None)]);
        assert_eq!(evs.len(), 1, "cut {cut}");
        assert_eq!(
            (evs[0].data.as_str(), evs[0].offset, evs[0].end),
            ("x", 3, 11),
            "cut {cut}"
        );
    }
    // A second BOM is part of the field name, which is then unknown: no event.
    assert!(decode_bytes("\u{FEFF}\u{FEFF}data: x\n\n".as_bytes()).is_empty());
    // A lone EF BB that is not a BOM stays content.
    assert_eq!(datas(b"\xEF\xBBdata: y\n\n"), Vec::<String>::new());
}

#[test]
fn event_retry_and_nul_id() {
    let mut d = SseDecoder::new();
    let evs = d.feed(
        b"event: message_start\nretry: 1500\nid: a\0b\ndata: {}\n\nretry: 15x\nevent:\ndata: 2\n\n",
        None,
    );
    assert_eq!(evs.len(), 2);
    assert_eq!(evs[0].event.as_deref(), Some("message_start"));
    assert_eq!(evs[0].retry, Some(1500));
    assert_eq!(evs[0].id, None, "an id containing NUL is ignored");
    assert_eq!(
        evs[1].event, None,
        "an empty event type is the default type"
    );
    assert_eq!(evs[1].retry, None, "retry with a non-digit is ignored");
    assert_eq!(d.retry(), Some(1500));
}

#[test]
fn offsets_and_indices() {
    // "data: a\n" = 0..8, blank at 8; ": c\n" 9..13; "data: b\n" 13..21; blank at 21.
    let evs = decode_bytes(b"data: a\n\n: c\ndata: b\n\n");
    let got: Vec<(usize, usize, usize)> = evs.iter().map(|e| (e.index, e.offset, e.end)).collect();
    assert_eq!(got, vec![(0, 0, 8), (1, 9, 21)]);
    // An event without data is not dispatched and takes no number.
    let evs = decode_bytes(b"event: ping\n\ndata: x\n\n");
    assert_eq!((evs.len(), evs[0].index, evs[0].data.as_str()), (1, 0, "x"));
}

#[test]
fn utf8_split_at_every_byte() {
    let body = "data: héllo 🦀 ｜tool▁sep｜\n\n".as_bytes();
    for cut in 0..=body.len() {
        let evs = decode_chunks([(&body[..cut], Some(1)), (&body[cut..], Some(2))]);
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].data, "héllo 🦀 ｜tool▁sep｜", "cut {cut}");
    }
    let per_byte: Vec<&[u8]> = body.chunks(1).collect();
    let evs = decode_chunks(
        per_byte
            .iter()
            .enumerate()
            .map(|(i, b)| (*b, Some(i as u64))),
    );
    assert_eq!(evs[0].data, "héllo 🦀 ｜tool▁sep｜");
    assert_eq!(
        evs[0].chunk,
        body.len() - 1,
        "completed by the chunk holding the blank line"
    );
}

#[test]
fn invalid_utf8_is_replaced_and_reported() {
    let mut d = SseDecoder::new();
    let evs = d.feed(b"data: a\xffb\n\n", None);
    assert_eq!(evs[0].data, "a\u{FFFD}b");
    assert_eq!(d.problems().len(), 1);
    assert_eq!(d.problems()[0].offset, 7);
}

#[test]
fn truncated_stream_reports_last_event() {
    let evs = decode_bytes(b"data: {\"a\":1}\n\ndata: {\"b\"");
    assert_eq!(evs.len(), 2);
    assert!(evs[0].complete);
    assert!(!evs[1].complete);
    assert_eq!(
        (evs[1].data.as_str(), evs[1].offset, evs[1].end),
        ("{\"b\"", 15, 25)
    );
    // Field lines ended but no blank line: also reported.
    let evs = decode_bytes(b"data: x\n");
    assert_eq!(
        (evs.len(), evs[0].complete, evs[0].data.as_str()),
        (1, false, "x")
    );
    // Ending on a lone CR: the line is complete, the event is not.
    let evs = decode_bytes(b"data: y\r");
    assert_eq!((evs[0].data.as_str(), evs[0].complete), ("y", false));
}

// ---------- OpenAI reassembly ----------

fn sse(datas: &[Value]) -> Vec<u8> {
    let mut s = String::new();
    for d in datas {
        s.push_str("data: ");
        s.push_str(&d.to_string());
        s.push_str("\n\n");
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

fn chunk(delta: Value, finish: Value) -> Value {
    json!({"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":delta,"finish_reason":finish}]})
}

fn rules(r: &toolscope::stream::Reassembled) -> Vec<(&'static str, Option<usize>)> {
    r.findings
        .iter()
        .map(|f| (f.rule.id(), f.evidence.event))
        .collect()
}

/// The rules diagnose runs on the same stream body (`api` chat), with the event each finding
/// names: argument JSON and the finish reason are judged there, once, not by the decoder.
fn diagnosed(api: Api, body: &[u8]) -> Vec<(&'static str, Option<usize>)> {
    let mut cx = ExchangeContext::new(api);
    facts::set_stream(&mut cx, std::str::from_utf8(body).unwrap());
    check_exchange(&cx)
        .iter()
        .filter(|f| matches!(f.rule, Rule::ToolCallArgsInvalidJson | Rule::FinishMismatch))
        .map(|f| (f.rule.id(), f.evidence.event))
        .collect()
}

#[test]
fn openai_parallel_calls_reasoning_usage() {
    let body = sse(&[
        chunk(json!({"role":"assistant","content":null}), Value::Null),
        chunk(json!({"reasoning_content":"Need "}), Value::Null),
        chunk(json!({"reasoning_content":"two calls."}), Value::Null),
        chunk(json!({"content":"Sure"}), Value::Null),
        chunk(
            json!({"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"city\":"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Li"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"function":{"arguments":"sbon\"}"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls":[{"index":1,"function":{"arguments":" \"Wien\"}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        json!({"id":"c","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}),
    ]);
    let r = reassemble_openai(&decode_bytes(&body));
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let m = &r.message;
    assert_eq!(m.content, "Sure");
    assert_eq!(m.reasoning, "Need two calls.");
    assert_eq!(m.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(
        m.usage,
        Some(json!({"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}))
    );
    assert_eq!(m.model.as_deref(), Some("m"));
    assert_eq!(
        m.tool_calls,
        vec![
            CallRecord {
                index: Some(0),
                id: Some("call_a".into()),
                name: "get_weather".into(),
                arguments: "{\"city\": \"Lisbon\"}".into()
            },
            CallRecord {
                index: Some(1),
                id: Some("call_b".into()),
                name: "get_time".into(),
                arguments: "{\"city\": \"Wien\"}".into()
            },
        ]
    );
    assert_eq!(r.call_events, vec![vec![4, 6, 7], vec![5, 8]]);
    assert_eq!(r.finish_event, Some(9));
}

#[test]
fn openai_contract_faults_reported_with_event_numbers() {
    let body = sse(&[
        chunk(
            json!({"tool_calls":[{"index":0,"id":"call_a","function":{"name":"read_file","arguments":"{\"path\":"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"function":{"name":"read_file","arguments":"\"a\""}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("stop")),
    ]);
    let r = reassemble_openai(&decode_bytes(&body));
    assert_eq!(
        r.message.tool_calls[0].name, "read_file",
        "a repeated equal name is not doubled"
    );
    assert_eq!(rules(&r), vec![("stream.name_repeated", Some(1))]);
    assert_eq!(
        diagnosed(Api::Openai, &body),
        vec![
            ("tool_call.args_invalid_json", Some(1)),
            ("finish.mismatch", Some(2))
        ]
    );
    assert!(
        r.findings
            .iter()
            .all(|f| f.evidence.pane == Some(Pane::Stream))
    );
}

#[test]
fn openai_finish_tool_calls_without_calls_and_cut_off_args() {
    let body = sse(&[chunk(json!({"content":"hi"}), json!("tool_calls"))]);
    assert_eq!(rules(&reassemble_openai(&decode_bytes(&body))), vec![]);
    assert_eq!(
        diagnosed(Api::Openai, &body),
        vec![("finish.mismatch", Some(0))]
    );
    let body = sse(&[
        chunk(
            json!({"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{\"q\": \"abc"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ]);
    assert_eq!(
        diagnosed(Api::Openai, &body),
        vec![
            ("tool_call.args_invalid_json", Some(0)),
            ("finish.mismatch", Some(1))
        ]
    );
    let mut cx = ExchangeContext::new(Api::Openai);
    facts::set_stream(&mut cx, std::str::from_utf8(&body).unwrap());
    let fm = check_exchange(&cx)
        .into_iter()
        .find(|f| f.rule == Rule::FinishMismatch)
        .unwrap();
    assert!(fm.message.contains("length"), "{}", fm.message);
    // The same cut-off call reported as `length` is consistent: only the JSON finding.
    let body = sse(&[
        chunk(
            json!({"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{\"q\": \"abc"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("length")),
    ]);
    assert_eq!(
        diagnosed(Api::Openai, &body),
        vec![("tool_call.args_invalid_json", Some(0))]
    );
}

#[test]
fn openai_index_reused_for_second_call() {
    let r = reassemble_openai(&decode_bytes(&sse(&[
        chunk(
            json!({"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ])));
    let names: Vec<&str> = r
        .message
        .tool_calls
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, vec!["f", "g"]);
    assert_eq!(rules(&r), vec![("stream.missing_index", Some(1))]);
}

#[test]
fn openai_llama_error_event_is_parse_error() {
    let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"<tool_call>\"}}]}\n\ndata: {\"error\":{\"code\":500,\"message\":\"The model produced output that does not match the expected peg-native format\",\"type\":\"server_error\"}}\n\n";
    let r = reassemble_openai(&decode_bytes(body));
    // reassembly reports the error event (a fact); the rule judges it (diagnose)
    assert_eq!(rules(&r), vec![]);
    assert_eq!(r.problems.len(), 1);
    assert_eq!(r.problems[0].kind, "error_event");
    assert_eq!(r.problems[0].event, Some(1));
    assert_eq!(r.message.content, "<tool_call>");
    assert_eq!(
        judged(Api::Openai, body),
        vec![("server.parse_error", Some(1))]
    );
}

/// `server.parse_error` / `stream.error_event` as diagnose judges a stream body.
fn judged(api: Api, body: &[u8]) -> Vec<(&'static str, Option<usize>)> {
    let mut cx = ExchangeContext::new(api);
    facts::set_stream(&mut cx, std::str::from_utf8(body).unwrap());
    check_exchange(&cx)
        .iter()
        .filter(|f| matches!(f.rule, Rule::ServerParseError | Rule::StreamErrorEvent))
        .map(|f| (f.rule.id(), f.evidence.event))
        .collect()
}

#[test]
fn openai_truncated_and_bad_json_are_problems() {
    let r = reassemble_openai(&decode_bytes(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: nonsense\n\ndata: {\"choi"));
    let kinds: Vec<&str> = r.problems.iter().map(|p| p.kind.as_str()).collect();
    assert_eq!(kinds, vec!["bad_json", "truncated", "truncated", "no_end"]);
    assert_eq!(r.message.content, "a");
}

// ---------- Anthropic reassembly ----------

fn asse(evs: &[(&str, Value)]) -> Vec<u8> {
    let mut s = String::new();
    for (name, d) in evs {
        s.push_str(&format!("event: {name}\r\ndata: {d}\r\n\r\n"));
    }
    s.into_bytes()
}

#[test]
fn anthropic_thinking_text_tool_use() {
    let body = asse(&[
        (
            "message_start",
            json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Weather needs "}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a tool."}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":0}),
        ),
        ("ping", json!({"type":"ping"})),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking."}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":1}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Vie"}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"nna\"}"}}),
        ),
        (
            "content_block_stop",
            json!({"type":"content_block_stop","index":2}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ]);
    let r = reassemble_anthropic(&decode_bytes(&body));
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let m = &r.message;
    assert_eq!(m.reasoning, "Weather needs a tool.");
    assert_eq!(m.content, "Checking.");
    assert_eq!(
        m.tool_calls,
        vec![CallRecord {
            index: Some(2),
            id: Some("toolu_1".into()),
            name: "get_weather".into(),
            arguments: "{\"city\": \"Vienna\"}".into()
        }]
    );
    assert_eq!(m.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(m.usage, Some(json!({"input_tokens":25,"output_tokens":42})));
    assert_eq!(m.model.as_deref(), Some("claude-x"));
    assert_eq!(r.finish_event, Some(15));
}

#[test]
fn anthropic_faults() {
    let body = asse(&[
        (
            "message_start",
            json!({"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}),
        ),
        (
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"f","input":{}}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}}"}}),
        ),
        (
            "content_block_delta",
            json!({"type":"content_block_delta","index":5,"delta":{"type":"text_delta","text":"x"}}),
        ),
        (
            "message_delta",
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":"Austria"},"usage":{"output_tokens":3}}),
        ),
        ("message_stop", json!({"type":"message_stop"})),
    ]);
    let r = reassemble_anthropic(&decode_bytes(&body));
    assert_eq!(
        rules(&r),
        vec![
            ("stream.missing_id", Some(1)),
            ("stream.missing_index", Some(3)),
        ]
    );
    assert_eq!(
        diagnosed(Api::Anthropic, &body),
        vec![
            ("tool_call.args_invalid_json", Some(2)),
            ("finish.mismatch", Some(4))
        ]
    );
    assert_eq!(r.message.stop_sequence.as_deref(), Some("Austria"));
    assert_eq!(r.message.content, "x");
}

#[test]
fn anthropic_error_event_llama_and_anthropic_shapes() {
    let body = asse(&[
        (
            "message_start",
            json!({"type":"message_start","message":{"model":"m"}}),
        ),
        (
            "error",
            json!({"code":500,"message":"The model produced output that does not match the expected peg-native format","type":"server_error"}),
        ),
    ]);
    let r = reassemble_anthropic(&decode_bytes(&body));
    assert_eq!(rules(&r), vec![]);
    assert_eq!(r.problems[0].kind, "error_event");
    assert_eq!(
        judged(Api::Anthropic, &body),
        vec![("server.parse_error", Some(1))]
    );
    let body = asse(&[(
        "error",
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
    )]);
    let r = reassemble_anthropic(&decode_bytes(&body));
    assert!(r.findings.is_empty());
    assert_eq!(r.problems[0].message, "error event: Overloaded");
}

// ---------- field cases ----------

fn exchange(path: &str, body: Option<&[u8]>, chunks: Option<Vec<(&[u8], u64)>>) -> Exchange {
    Exchange {
        id: 7,
        request: Request {
            method: "POST".into(),
            path: path.into(),
            ..Default::default()
        },
        response: Some(Response {
            status: 200,
            headers: vec![],
            body: body.map(Body::from_bytes),
            chunks: chunks.map(|cs| {
                cs.into_iter()
                    .map(|(b, t)| Chunk {
                        t_us: t,
                        data: Body::from_bytes(b),
                    })
                    .collect()
            }),
        }),
        ..Default::default()
    }
}

#[test]
fn case_07_delta_missing_index() {
    let p = support::cases_dir().join("07-delta-missing-index/response.sse");
    let bytes = std::fs::read(&p).expect("case 07 response");
    let expect = support::case_json("07-delta-missing-index", "case.json");
    // Recorded as three arbitrary TCP chunks.
    let (a, b) = bytes.split_at(300);
    let (b, c) = b.split_at(333);
    let ex = exchange(
        "/v1/chat/completions",
        None,
        Some(vec![(a, 100), (b, 250), (c, 400)]),
    );
    let r = decode_exchange(&ex).expect("decodes");
    // Event 1: first delta of call 0 has index but no id; event 2: a delta without index.
    assert_eq!(
        rules(&r),
        vec![
            ("stream.missing_id", Some(1)),
            ("stream.missing_index", Some(2))
        ]
    );
    let want: Vec<&str> = expect["expect"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for w in want {
        assert!(r.findings.iter().any(|f| f.rule.id() == w), "missing {w}");
    }
    assert!(r.findings.iter().all(|f| f.exchange == Some(7)));
    let calls: Vec<Value> = r
        .message
        .tool_calls
        .iter()
        .map(|c| json!({"name": c.name, "arguments": c.arguments_json().unwrap()}))
        .collect();
    assert_eq!(Value::Array(calls), expect["expect"]["tool_calls"]);
    assert_eq!(r.message.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.events.len(), 6);
    assert_eq!(r.events[5].data, "[DONE]");
    assert!(r.events.iter().all(|e| e.t_us.is_some()));
}

#[test]
fn case_06_and_10_non_stream_bodies_decode() {
    let body =
        std::fs::read(support::cases_dir().join("06-named-tool-choice-ignored/response.json"))
            .unwrap();
    let r =
        decode_exchange(&exchange("/v1/chat/completions", Some(&body), None)).expect("06 decodes");
    assert_eq!(r.message.tool_calls.len(), 1);
    assert_eq!(r.message.tool_calls[0].name, "get_weather");
    assert_eq!(
        r.message.tool_calls[0].arguments_json().unwrap(),
        json!({"city": "Lisbon"})
    );
    assert_eq!(r.message.tool_calls[0].id.as_deref(), Some("call_1"));
    // case.json: not finish.mismatch, not tool_call.args_invalid_json.
    assert!(r.findings.is_empty(), "{:?}", r.findings);

    let body =
        std::fs::read(support::cases_dir().join("10-call-leaked-with-choice-none/response.json"))
            .unwrap();
    let r =
        decode_exchange(&exchange("/v1/chat/completions", Some(&body), None)).expect("10 decodes");
    assert!(r.message.tool_calls.is_empty());
    assert_eq!(r.message.finish_reason.as_deref(), Some("stop"));
    assert!(
        r.message
            .content
            .starts_with("<tool_call>\n{\"name\": \"get_weather\"")
    );
    assert!(r.findings.is_empty());
    // Server vs toolscope: a parse of the content (as the parser would produce it) finds the
    // Hermes call the server left as text → tool_call.leaked_as_text.
    let raw = r.message.content.clone();
    let parsed = ParseOutput {
        tool_calls: vec![ParsedCall {
            name: "get_weather".into(),
            arguments: json!({"city": "Lisbon"}),
            syntax: Some("hermes".into()),
            span: Some((0, raw.len())),
            id: None,
        }],
        ..Default::default()
    };
    let cmp = compare_calls(&r.message, &raw, &parsed);
    assert_eq!(
        cmp.discrepancies,
        vec![Discrepancy::Missed {
            parsed: 0,
            in_text: "content".into()
        }]
    );
    // a call left as text is the leaked-markup rule's finding, not server.call_mismatch
    assert!(comparison_findings(&r.message, &raw, &parsed, &cmp).is_empty());
}

#[test]
fn non_stream_invalid_args_and_mismatch_have_pointers() {
    let body = json!({"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\": 1"}}]}}]}).to_string();
    let ex = exchange("/v1/chat/completions", Some(body.as_bytes()), None);
    let r = decode_exchange(&ex).unwrap();
    assert!(
        r.findings.is_empty(),
        "the decoder judges no JSON or finish: {:?}",
        r.findings
    );
    let got: Vec<(&str, Option<String>)> = check_exchange(&facts::exchange_context(&ex))
        .into_iter()
        .filter(|f| matches!(f.rule, Rule::ToolCallArgsInvalidJson | Rule::FinishMismatch))
        .map(|f| (f.rule.id(), f.evidence.pointer))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "tool_call.args_invalid_json",
                Some("/choices/0/message/tool_calls/0/function/arguments".to_owned())
            ),
            (
                "finish.mismatch",
                Some("/choices/0/finish_reason".to_owned())
            )
        ]
    );
    // An HTTP error body is not a message.
    let err = br#"{"error":{"code":500,"message":"x","type":"server_error"}}"#;
    assert!(decode_exchange(&exchange("/v1/chat/completions", Some(err), None)).is_none());
    assert!(decode_exchange(&exchange("/props", Some(b"{}"), None)).is_none());
}

#[test]
fn completion_stream_decodes() {
    let body = b"data: {\"content\":\"<tool_call>\\n{\\\"na\",\"stop\":false}\n\ndata: {\"content\":\"me\\\"\",\"stop\":false}\n\ndata: {\"content\":\"\",\"stop\":true,\"stop_type\":\"eos\",\"stopping_word\":\"\"}\n\n";
    let r = decode_exchange(&exchange("/completion", None, Some(vec![(body, 5)]))).unwrap();
    assert_eq!(r.message.content, "<tool_call>\n{\"name\"");
    assert_eq!(r.message.finish_reason.as_deref(), Some("eos"));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

// ---------- server vs toolscope ----------

fn server(calls: &[(&str, &str)], content: &str) -> AssistantMessage {
    AssistantMessage {
        content: content.into(),
        tool_calls: calls
            .iter()
            .enumerate()
            .map(|(i, (n, a))| CallRecord {
                index: Some(i as u64),
                id: None,
                name: (*n).into(),
                arguments: (*a).into(),
            })
            .collect(),
        ..Default::default()
    }
}

fn pc(name: &str, args: Value) -> ParsedCall {
    ParsedCall {
        name: name.into(),
        arguments: args,
        syntax: None,
        span: None,
        id: None,
    }
}

#[test]
fn compare_agree_merge_mangle_miss_extra() {
    // Agreement, whitespace and key order ignored.
    let s = server(&[("f", "{ \"b\": 2, \"a\": 1 }")], "");
    let p = ParseOutput {
        tool_calls: vec![pc("f", json!({"a":1,"b":2}))],
        ..Default::default()
    };
    let c = compare_calls(&s, "", &p);
    assert!(c.is_clean());
    assert_eq!(c.agreed, vec![(0, 0)]);

    // Two parallel calls concatenated into one.
    let s = server(
        &[("get_weather", "{\"city\": \"Lisbon\"}{\"city\": \"Porto\"}")],
        "",
    );
    let p = ParseOutput {
        tool_calls: vec![
            pc("get_weather", json!({"city":"Lisbon"})),
            pc("get_weather", json!({"city":"Porto"})),
        ],
        ..Default::default()
    };
    let c = compare_calls(&s, "", &p);
    assert_eq!(
        c.discrepancies,
        vec![Discrepancy::Merged {
            server: 0,
            parsed: vec![0, 1]
        }]
    );
    assert_eq!(
        comparison_findings(&s, "", &p, &c)[0].rule,
        Rule::ServerCallMismatch
    );

    // Two calls merged into one object.
    let s = server(&[("a", "{\"x\":1,\"y\":2}")], "");
    let p = ParseOutput {
        tool_calls: vec![pc("a", json!({"x":1})), pc("b", json!({"y":2}))],
        ..Default::default()
    };
    assert_eq!(
        compare_calls(&s, "", &p).discrepancies,
        vec![Discrepancy::Merged {
            server: 0,
            parsed: vec![0, 1]
        }]
    );

    // Mangled: integer became a string; and a wrong name.
    let s = server(&[("set", "{\"n\": \"3\"}"), ("get_tim", "{}")], "");
    let p = ParseOutput {
        tool_calls: vec![pc("set", json!({"n":3})), pc("get_time", json!({}))],
        ..Default::default()
    };
    let c = compare_calls(&s, "", &p);
    assert_eq!(
        c.discrepancies,
        vec![
            Discrepancy::Mangled {
                server: 0,
                parsed: 0,
                name_differs: false,
                args_differs: true
            },
            Discrepancy::Mangled {
                server: 1,
                parsed: 1,
                name_differs: true,
                args_differs: false
            },
        ]
    );

    // Missed: one call returned, the second left in content; plus a server call toolscope did
    // not see.
    let raw = "<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call><tool_call>{\"name\":\"g\",\"arguments\":{}}</tool_call>";
    let s = server(
        &[("f", "{}"), ("h", "{}")],
        "<tool_call>{\"name\":\"g\",\"arguments\":{}}</tool_call>",
    );
    let p = ParseOutput {
        tool_calls: vec![
            ParsedCall {
                name: "f".into(),
                arguments: json!({}),
                syntax: Some("hermes".into()),
                span: Some((0, 50)),
                id: None,
            },
            ParsedCall {
                name: "g".into(),
                arguments: json!({}),
                syntax: Some("hermes".into()),
                span: Some((50, 100)),
                id: None,
            },
        ],
        ..Default::default()
    };
    assert_eq!((&raw[50..61], raw.len()), ("<tool_call>", 100));
    let c = compare_calls(&s, raw, &p);
    // g is paired with h by position (mangled name) since a server call is left over.
    assert_eq!(
        c.discrepancies,
        vec![Discrepancy::Mangled {
            server: 1,
            parsed: 1,
            name_differs: true,
            args_differs: false
        }]
    );
    let s = server(
        &[("f", "{}")],
        "<tool_call>{\"name\":\"g\",\"arguments\":{}}</tool_call>",
    );
    let c = compare_calls(&s, raw, &p);
    assert_eq!(
        c.discrepancies,
        vec![Discrepancy::Missed {
            parsed: 1,
            in_text: "content".into()
        }]
    );
    assert!(comparison_findings(&s, raw, &p, &c).is_empty());
    // Dropped entirely.
    let s = server(&[("f", "{}")], "");
    let c = compare_calls(&s, raw, &p);
    assert_eq!(
        c.discrepancies,
        vec![Discrepancy::Missed {
            parsed: 1,
            in_text: "dropped".into()
        }]
    );
    assert_eq!(
        comparison_findings(&s, raw, &p, &c)[0].rule,
        Rule::ServerCallMismatch
    );
    // Extra server call.
    let s = server(&[("f", "{}"), ("g", "{}"), ("z", "{}")], "");
    let c = compare_calls(&s, raw, &p);
    assert_eq!(c.discrepancies, vec![Discrepancy::Extra { server: 2 }]);
    assert!(comparison_findings(&s, raw, &p, &c).is_empty());
}

#[test]
fn case_10_with_the_real_parser_reports_leak() {
    // The same comparison, with toolscope's own parser on the server's content.
    let body =
        std::fs::read(support::cases_dir().join("10-call-leaked-with-choice-none/response.json"))
            .unwrap();
    let r =
        decode_exchange(&exchange("/v1/chat/completions", Some(&body), None)).expect("10 decodes");
    let req = support::case_json("10-call-leaked-with-choice-none", "request.json");
    let raw = r.message.content.clone();
    let parsed = toolscope::parser::parse(&raw, None, Some(&req));
    assert_eq!(parsed.tool_calls.len(), 1, "{parsed:?}");
    let cmp = compare_calls(&r.message, &raw, &parsed);
    assert_eq!(
        cmp.discrepancies,
        vec![Discrepancy::Missed {
            parsed: 0,
            in_text: "content".into()
        }]
    );
    assert!(comparison_findings(&r.message, &raw, &parsed, &cmp).is_empty());
    // …and the exchange's one leaked_as_text finding comes from the leaked-markup rule, at the
    // call's offset in content
    let resp: Value = serde_json::from_slice(&body).unwrap();
    let cx = facts::from_pair(Api::Openai, Some(req.clone()), Some(resp));
    let leaked: Vec<_> = check_exchange(&cx)
        .into_iter()
        .filter(|f| f.rule == Rule::ToolCallLeakedAsText)
        .collect();
    assert_eq!(leaked.len(), 1, "{leaked:?}");
    assert_eq!(
        leaked[0].evidence.offset,
        parsed.tool_calls[0].span.map(|s| s.0)
    );
    // Case 07's reassembled call agrees with a parse of the same call written as Hermes text.
    let bytes =
        std::fs::read(support::cases_dir().join("07-delta-missing-index/response.sse")).unwrap();
    let r7 = reassemble_openai(&decode_bytes(&bytes));
    let raw7 = "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.md\"}}\n</tool_call>";
    let cmp = compare_calls(
        &r7.message,
        raw7,
        &toolscope::parser::parse(raw7, None, None),
    );
    assert!(cmp.is_clean(), "{cmp:?}");
    assert_eq!(cmp.agreed, vec![(0, 0)]);
}
