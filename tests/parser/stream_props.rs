//! Property tests: any chunking of a stream decodes to the same events and the same reassembled
//! message (including per-byte splits through multi-byte UTF-8), and a fuzz run over arbitrary
//! and mutated byte streams that must never panic.
//!
//! The fuzz properties run `TOOLSCOPE_FUZZ_CASES` cases each (default 300); a long run:
//! `TOOLSCOPE_FUZZ_CASES=200000 cargo test --release --test parser stream_props::fuzz_`.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use toolscope::stream::reassemble::{
    reassemble_anthropic, reassemble_completion, reassemble_openai,
};
use toolscope::stream::sse::{SseEvent, decode_bytes, decode_chunks};

/// An event's fields: index, event, data, id, retry, offset, end, complete.
type EventKey = (
    usize,
    Option<String>,
    String,
    Option<String>,
    Option<u64>,
    usize,
    usize,
    bool,
);

/// The event fields that must not depend on chunking.
fn key(e: &SseEvent) -> EventKey {
    (
        e.index,
        e.event.clone(),
        e.data.clone(),
        e.id.clone(),
        e.retry,
        e.offset,
        e.end,
        e.complete,
    )
}

fn cuts_of(len: usize, idx: &[Index]) -> Vec<usize> {
    let mut c: Vec<usize> = idx.iter().map(|i| i.index(len + 1)).collect();
    c.sort_unstable();
    c.dedup();
    c
}

fn chunked(body: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
    let mut pieces = Vec::new();
    let mut last = 0;
    for &c in cuts {
        pieces.push(&body[last..c]);
        last = c;
    }
    pieces.push(&body[last..]);
    decode_chunks(
        pieces
            .iter()
            .enumerate()
            .map(|(i, p)| (*p, Some(i as u64 * 10))),
    )
}

fn per_byte(body: &[u8]) -> Vec<SseEvent> {
    decode_chunks(body.chunks(1).map(|b| (b, None)))
}

#[derive(Debug, Clone)]
struct GenEvent {
    comment: Option<String>,
    event: Option<String>,
    id: Option<String>,
    data: Vec<String>,
}

// Text without CR/LF, with multi-byte characters (2, 3 and 4 bytes), colons and spaces.
const TEXT: &str = "[a-z é｜▁🦀:{}\"\\[\\]]{0,12}";

fn gen_event() -> impl Strategy<Value = GenEvent> {
    (
        proptest::option::of(TEXT),
        proptest::option::of("[a-z_]{1,14}"),
        proptest::option::of("[a-z0-9]{0,6}"),
        prop::collection::vec(TEXT, 1..4),
    )
        .prop_map(|(comment, event, id, data)| GenEvent {
            comment,
            event,
            id,
            data,
        })
}

fn serialize(evs: &[GenEvent], eol: &str, bom: bool) -> Vec<u8> {
    let mut s = String::new();
    if bom {
        s.push('\u{FEFF}');
    }
    for e in evs {
        if let Some(c) = &e.comment {
            s.push_str(&format!(":{c}{eol}"));
        }
        if let Some(n) = &e.event {
            s.push_str(&format!("event: {n}{eol}"));
        }
        if let Some(i) = &e.id {
            s.push_str(&format!("id: {i}{eol}"));
        }
        for d in &e.data {
            s.push_str(&format!("data: {d}{eol}"));
        }
        s.push_str(eol);
    }
    s.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Decoding equals the generator's events, and every chunking gives the same events.
    #[test]
    fn sse_any_chunking_same_events(
        evs in prop::collection::vec(gen_event(), 0..8),
        eol in prop::sample::select(vec!["\n", "\r\n", "\r"]),
        bom in any::<bool>(),
        cut_idx in prop::collection::vec(any::<Index>(), 0..24),
    ) {
        let body = serialize(&evs, eol, bom);
        let whole = decode_bytes(&body);
        let expected: Vec<(Option<String>, String, Option<String>)> =
            evs.iter().map(|e| (e.event.clone(), e.data.join("\n"), e.id.clone())).collect();
        let got: Vec<(Option<String>, String, Option<String>)> =
            whole.iter().map(|e| (e.event.clone(), e.data.clone(), e.id.clone())).collect();
        prop_assert_eq!(got, expected);
        prop_assert!(whole.iter().all(|e| e.complete));
        let want: Vec<_> = whole.iter().map(key).collect();
        let cuts = cuts_of(body.len(), &cut_idx);
        let split = chunked(&body, &cuts);
        prop_assert_eq!(split.iter().map(key).collect::<Vec<_>>(), want.clone());
        // Each event is reported in the chunk that holds its dispatching blank line's first byte
        // (or, for a CRLF split as CR | LF, the chunk holding the CR).
        for e in &split {
            let chunk_of = |off: usize| cuts.iter().filter(|&&c| c <= off).count();
            prop_assert_eq!(e.chunk, chunk_of(e.end));
            prop_assert_eq!(e.t_us, Some(e.chunk as u64 * 10));
        }
        prop_assert_eq!(per_byte(&body).iter().map(key).collect::<Vec<_>>(), want);
    }

    /// A truncated stream never loses an event that was complete, and reports the tail.
    #[test]
    fn sse_truncation_keeps_prefix(
        evs in prop::collection::vec(gen_event(), 1..6),
        eol in prop::sample::select(vec!["\n", "\r\n", "\r"]),
        cut in any::<Index>(),
    ) {
        let body = serialize(&evs, eol, false);
        let full = decode_bytes(&body);
        let at = cut.index(body.len() + 1);
        let part = decode_bytes(&body[..at]);
        let done: Vec<_> = part.iter().filter(|e| e.complete).map(|e| (e.index, e.data.clone(), e.offset)).collect();
        let want: Vec<_> = full.iter().take(done.len()).map(|e| (e.index, e.data.clone(), e.offset)).collect();
        prop_assert_eq!(done, want);
        prop_assert!(part.iter().filter(|e| !e.complete).count() <= 1);
        if let Some(last) = part.last().filter(|e| !e.complete) {
            // Its data is a prefix of the full event's data (whole lines decoded so far, plus the
            // partial line, which may end inside a UTF-8 character and then shows U+FFFD).
            let full_data = &full[last.index].data;
            let trimmed = last.data.trim_end_matches('\u{FFFD}');
            prop_assert!(full_data.starts_with(trimmed), "{:?} vs {:?}", last.data, full_data);
        }
    }
}

// ---------- reassembly under rechunking ----------

fn arg_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        TEXT.prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        prop::collection::vec(TEXT, 0..3).prop_map(|v| json!(v)),
    ]
}

fn call() -> impl Strategy<Value = (String, Value, Vec<Index>)> {
    (
        "[a-z_]{1,10}",
        prop::collection::btree_map("[a-z]{1,6}", arg_value(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        prop::collection::vec(any::<Index>(), 0..5),
    )
}

/// Splits `s` at the given places, moved back to char boundaries.
fn pieces(s: &str, idx: &[Index]) -> Vec<String> {
    let mut cuts: Vec<usize> = idx
        .iter()
        .map(|i| {
            let mut c = i.index(s.len() + 1);
            while !s.is_char_boundary(c) {
                c -= 1;
            }
            c
        })
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    let mut last = 0;
    for c in cuts {
        out.push(s[last..c].to_owned());
        last = c;
    }
    out.push(s[last..].to_owned());
    out
}

fn openai_body(content: &[String], calls: &[(String, Value, Vec<Index>)]) -> Vec<u8> {
    let mut s = String::new();
    let mut push = |d: Value| s.push_str(&format!("data: {d}\n\n"));
    let ch = |delta: Value, fin: Value| json!({"object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":delta,"finish_reason":fin}]});
    push(ch(json!({"role":"assistant"}), Value::Null));
    for c in content {
        push(ch(json!({"content": c}), Value::Null));
    }
    for (i, (name, args, idx)) in calls.iter().enumerate() {
        push(ch(
            json!({"tool_calls":[{"index":i,"id":format!("call_{i}"),"type":"function","function":{"name":name,"arguments":""}}]}),
            Value::Null,
        ));
        for p in pieces(&args.to_string(), idx) {
            push(ch(
                json!({"tool_calls":[{"index":i,"function":{"arguments":p}}]}),
                Value::Null,
            ));
        }
    }
    push(ch(
        json!({}),
        json!(if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }),
    ));
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

fn anthropic_body(content: &[String], calls: &[(String, Value, Vec<Index>)]) -> Vec<u8> {
    let mut s = String::new();
    let mut push =
        |name: &str, d: Value| s.push_str(&format!("event: {name}\r\ndata: {d}\r\n\r\n"));
    push(
        "message_start",
        json!({"type":"message_start","message":{"model":"m","usage":{"input_tokens":3}}}),
    );
    push(
        "content_block_start",
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
    );
    for c in content {
        push(
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":c}}),
        );
    }
    push(
        "content_block_stop",
        json!({"type":"content_block_stop","index":0}),
    );
    for (i, (name, args, idx)) in calls.iter().enumerate() {
        let b = i + 1;
        push(
            "content_block_start",
            json!({"type":"content_block_start","index":b,"content_block":{"type":"tool_use","id":format!("toolu_{i}"),"name":name,"input":{}}}),
        );
        for p in pieces(&args.to_string(), idx) {
            push(
                "content_block_delta",
                json!({"type":"content_block_delta","index":b,"delta":{"type":"input_json_delta","partial_json":p}}),
            );
        }
        push(
            "content_block_stop",
            json!({"type":"content_block_stop","index":b}),
        );
    }
    push(
        "message_delta",
        json!({"type":"message_delta","delta":{"stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },"stop_sequence":null},"usage":{"output_tokens":9}}),
    );
    push("message_stop", json!({"type":"message_stop"}));
    s.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn reassembly_any_chunking_same_message(
        content in prop::collection::vec(TEXT, 0..4),
        calls in prop::collection::vec(call(), 0..4),
        anthropic in any::<bool>(),
        cut_idx in prop::collection::vec(any::<Index>(), 0..40),
    ) {
        let body = if anthropic { anthropic_body(&content, &calls) } else { openai_body(&content, &calls) };
        let re = |evs: &[SseEvent]| if anthropic { reassemble_anthropic(evs) } else { reassemble_openai(evs) };
        let whole = re(&decode_bytes(&body));
        prop_assert!(whole.findings.is_empty(), "{:?}", whole.findings);
        prop_assert!(whole.problems.is_empty(), "{:?}", whole.problems);
        prop_assert_eq!(&whole.message.content, &content.concat());
        let got: Vec<(String, Value)> = whole.message.tool_calls.iter().map(|c| (c.name.clone(), c.arguments_json().unwrap())).collect();
        let want: Vec<(String, Value)> = calls.iter().map(|(n, a, _)| (n.clone(), a.clone())).collect();
        prop_assert_eq!(got, want);
        let split = re(&chunked(&body, &cuts_of(body.len(), &cut_idx)));
        prop_assert_eq!(&split.message, &whole.message);
        prop_assert_eq!(&split.findings, &whole.findings);
        prop_assert_eq!(&re(&per_byte(&body)).message, &whole.message);
    }
}

// ---------- fuzz: no panics on arbitrary or mutated input ----------

fn fuzz_cases() -> u32 {
    std::env::var("TOOLSCOPE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn run_all(body: &[u8], cuts: &[usize]) {
    let evs = chunked(body, cuts);
    for (i, e) in evs.iter().enumerate() {
        assert_eq!(e.index, i);
        assert!(e.offset <= e.end && e.end <= body.len());
    }
    let _ = reassemble_openai(&evs);
    let _ = reassemble_anthropic(&evs);
    let _ = reassemble_completion(&evs);
}

/// Bytes that matter to the decoder and the reassemblers.
const TOKENS: &[&str] = &[
    "\n",
    "\r",
    "\r\n",
    ":",
    " ",
    "data:",
    "data: ",
    "event: ",
    "id:",
    "retry: 5",
    "\u{FEFF}",
    "é",
    "🦀",
    "\u{0}",
    "\u{FFFD}",
    "{",
    "}",
    "[",
    "]",
    "\"",
    ",",
    "[DONE]",
    "\"index\":",
    "\"id\":\"x\"",
    "\"tool_calls\":[",
    "\"function\":{",
    "\"arguments\":\"",
    "\"name\":\"f\"",
    "\"choices\":[{",
    "\"delta\":{",
    "\"finish_reason\":\"tool_calls\"",
    "\"type\":\"content_block_delta\"",
    "\"type\":\"content_block_start\"",
    "\"content_block\":{\"type\":\"tool_use\"",
    "\"partial_json\":\"",
    "\"error\":{\"message\":\"",
    "\"type\":\"message_delta\"",
    "\"stop_reason\":\"tool_use\"",
    "1",
    "null",
    "-1",
    "18446744073709551615",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fuzz_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..600), cut_idx in prop::collection::vec(any::<Index>(), 0..16)) {
        run_all(&body, &cuts_of(body.len(), &cut_idx));
    }

    #[test]
    fn fuzz_token_soup(toks in prop::collection::vec(prop::sample::select(TOKENS), 0..120), cut_idx in prop::collection::vec(any::<Index>(), 0..16)) {
        let body = toks.concat().into_bytes();
        run_all(&body, &cuts_of(body.len(), &cut_idx));
    }

    #[test]
    fn fuzz_mutated_streams(
        content in prop::collection::vec(TEXT, 0..3),
        calls in prop::collection::vec(call(), 0..3),
        anthropic in any::<bool>(),
        edits in prop::collection::vec((any::<Index>(), 0u8..3, prop::sample::select(TOKENS)), 1..8),
        cut_idx in prop::collection::vec(any::<Index>(), 0..16),
    ) {
        let mut body = if anthropic { anthropic_body(&content, &calls) } else { openai_body(&content, &calls) };
        for (at, op, tok) in edits {
            let i = at.index(body.len() + 1);
            match op {
                0 => { body.splice(i..i, tok.bytes()); }
                1 => { let j = (i + tok.len()).min(body.len()); body.drain(i..j); }
                _ => { let j = (i + tok.len()).min(body.len()); body.splice(i..j, tok.bytes()); }
            }
        }
        run_all(&body, &cuts_of(body.len(), &cut_idx));
    }
}
