//! `proxy --otlp` (issue #25 item 5) against loopback fakes: an upstream that answers chat
//! completions and records the `traceparent` it was sent, and collectors that take the
//! OTLP/HTTP JSON, hang, or are down.
//!
//! Expected values are computed here from what the fakes received, never from toolscope's own
//! id functions: the traceparent is checked against the W3C format by hand, the links by
//! matching ids between what the upstream and the collector got.

use crate::support;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use toolscope::record::proxy::{Proxy, ProxyConfig, ProxyHandle};

/// One request the fake upstream got: the user's first text, message count, `traceparent`.
#[derive(Debug, Clone)]
struct UpstreamSaw {
    user: String,
    messages: usize,
    traceparent: Option<String>,
    tracestate: Option<String>,
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_owned())
    })
}

async fn write_json(s: &mut TcpStream, body: &str) -> std::io::Result<()> {
    let resp = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(resp.as_bytes()).await
}

/// The fake upstream: a request whose last message is the user's gets a tool call
/// (`get_weather` for Paris, else `launch_rocket`, a tool the request does not declare), one
/// whose last message is a tool result gets a text answer.
async fn fake_upstream(listener: TcpListener, saw: Arc<Mutex<Vec<UpstreamSaw>>>) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        let saw = saw.clone();
        tokio::spawn(async move {
            while let Some((head, body)) = support::read_http_request(&mut s).await {
                let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let msgs = req["messages"].as_array().cloned().unwrap_or_default();
                let user = msgs
                    .iter()
                    .find(|m| m["role"] == "user")
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or("")
                    .to_owned();
                saw.lock().unwrap().push(UpstreamSaw {
                    user: user.clone(),
                    messages: msgs.len(),
                    traceparent: header(&head, "traceparent"),
                    tracestate: header(&head, "tracestate"),
                });
                let last_is_tool = msgs.last().is_some_and(|m| m["role"] == "tool");
                let message = if last_is_tool {
                    json!({"role": "assistant", "content": "Done."})
                } else {
                    let (id, name, args) = if user.contains("Paris") {
                        ("call_a1", "get_weather", "{\"city\":\"Paris\"}")
                    } else {
                        ("call_b1", "launch_rocket", "{\"when\":\"now\"}")
                    };
                    json!({"role": "assistant", "content": null, "tool_calls": [
                        {"id": id, "type": "function", "function": {"name": name, "arguments": args}}]})
                };
                let finish = if last_is_tool { "stop" } else { "tool_calls" };
                let resp = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                    "model": "fake", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}});
                if write_json(&mut s, &resp.to_string()).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// What a collector got: (path, content-type, body).
type Posts = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

/// A collector that answers `200 {}` to every POST and keeps what it got.
async fn collector(listener: TcpListener, posts: Posts) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        let posts = posts.clone();
        tokio::spawn(async move {
            while let Some((head, body)) = support::read_http_request(&mut s).await {
                let path = head.split_whitespace().nth(1).unwrap_or("").to_owned();
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                posts
                    .lock()
                    .unwrap()
                    .push((path, header(&head, "content-type"), v));
                if write_json(&mut s, "{}").await.is_err() {
                    return;
                }
            }
        });
    }
}

/// A collector that reads each POST, reports it on `got`, and never answers: it holds the
/// connection until `release` turns true, then closes it (and closes later ones at once).
async fn hanging_collector(
    listener: TcpListener,
    got: mpsc::UnboundedSender<()>,
    release: watch::Receiver<bool>,
) {
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        let got = got.clone();
        let mut release = release.clone();
        tokio::spawn(async move {
            if support::read_http_request(&mut s).await.is_some() {
                let _ = got.send(());
                let _ = release.wait_for(|r| *r).await;
            }
            drop(s);
        });
    }
}

async fn loopback() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    (l, url)
}

/// A proxy in front of `upstream` sending spans to `otlp`.
async fn proxy(upstream: &str, otlp: &str, timeout: Duration) -> (tempfile::TempDir, ProxyHandle) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ProxyConfig::new(upstream, dir.path().join("s.jsonl"));
    cfg.detect_engine = false;
    cfg.otlp = Some(otlp.to_owned());
    cfg.otlp_timeout = timeout;
    (dir, Proxy::spawn(cfg, None).await.unwrap())
}

const TOOLS: &str = r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]"#;

/// Sends a chat request with `messages` (and a `traceparent` when given); the reply JSON.
async fn chat(proxy: &ProxyHandle, messages: &Value, traceparent: Option<&str>) -> Value {
    let headers: Vec<(&str, &str)> = traceparent
        .map(|t| ("traceparent", t))
        .into_iter()
        .collect();
    chat_with(proxy, messages, &headers).await
}

/// [`chat`] with any request headers.
async fn chat_with(proxy: &ProxyHandle, messages: &Value, headers: &[(&str, &str)]) -> Value {
    let body = json!({"model": "fake", "messages": messages,
        "tools": serde_json::from_str::<Value>(TOOLS).unwrap()});
    let mut req = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proxy.url()))
        .json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// The two turns of a tool loop: the user's question, then the question, the reply and the
/// tool's result.
fn turns(user: &str, result: &str, reply: &Value) -> (Value, Value) {
    let sys = json!({"role": "system", "content": "You are a helpful agent."});
    let u = json!({"role": "user", "content": user});
    let msg = &reply["choices"][0]["message"];
    let call_id = msg["tool_calls"][0]["id"].clone();
    let first = json!([sys, u]);
    let second = json!([sys, u, msg, {"role": "tool", "tool_call_id": call_id, "content": result}]);
    (first, second)
}

/// `00-` + 32 lowercase hex + `-` + 16 lowercase hex + `-` + 2 hex, ids not all zero: the
/// W3C Trace Context version-00 format, checked by hand. Returns (trace id, parent id).
fn well_formed(tp: &str) -> (String, String) {
    let parts: Vec<&str> = tp.split('-').collect();
    assert_eq!(parts.len(), 4, "{tp}");
    let lower_hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    assert_eq!(parts[0], "00", "{tp}");
    assert!(
        lower_hex(parts[1], 32) && parts[1] != "0".repeat(32),
        "{tp}"
    );
    assert!(
        lower_hex(parts[2], 16) && parts[2] != "0".repeat(16),
        "{tp}"
    );
    assert!(lower_hex(parts[3], 2), "{tp}");
    (parts[1].to_owned(), parts[2].to_owned())
}

fn attr<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

fn int_attr(span: &Value, key: &str) -> Option<u64> {
    attr(span, key)?["intValue"].as_str()?.parse().ok()
}

fn all_spans(posts: &Posts) -> Vec<Value> {
    posts
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, _, v)| {
            v["resourceSpans"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|r| r["scopeSpans"].as_array().into_iter().flatten())
                .flat_map(|s| s["spans"].as_array().into_iter().flatten())
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Two conversations through the proxy: A carries an incoming traceparent on each turn (an
/// instrumented agent: a span per call), B none. The upstream gets a well-formed traceparent
/// whose trace is the client's (A) or the conversation's (B) and whose parent is the exchange
/// span the collector got; exchange spans hang under the incoming spans; each answered call is
/// an `execute_tool` span under the exchange that made the call, spanning the time between
/// the turns; a finding is a span event. All before the proxy stops (live).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_arrive_live_with_traceparent_links() {
    let (ul, upstream) = loopback().await;
    let saw = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn(fake_upstream(ul, saw.clone()));
    let (cl, collector_url) = loopback().await;
    let posts: Posts = Arc::default();
    tokio::spawn(collector(cl, posts.clone()));
    let (_dir, proxy) = proxy(&upstream, &collector_url, Duration::from_secs(10)).await;

    let t_a = "4bf92f3577b34da6a3ce929d0e0e4736";
    let (p1, p2) = ("00f067aa0ba902b7", "b7ad6b7169203331");
    let r1 = chat(
        &proxy,
        &turns("Weather in Paris?", "", &Value::Null).0,
        Some(&format!("00-{t_a}-{p1}-01")),
    )
    .await;
    let (_, a2) = turns("Weather in Paris?", "18 C", &r1);
    let r2 = chat(&proxy, &a2, Some(&format!("00-{t_a}-{p2}-01"))).await;
    assert_eq!(r2["choices"][0]["message"]["content"], "Done.");
    let rb = chat(&proxy, &turns("Launch now", "", &Value::Null).0, None).await;
    let (_, b2) = turns("Launch now", "launched", &rb);
    chat(&proxy, &b2, None).await;

    // live: every span reaches the collector while the proxy still runs: four exchange
    // spans and two tool spans
    let want = 4 + 2;
    let mut spans = Vec::new();
    for _ in 0..400 {
        spans = all_spans(&posts);
        if spans.len() >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(spans.len(), want, "{spans:#?}");
    for (path, ct, body) in posts.lock().unwrap().iter() {
        assert_eq!(path, "/v1/traces");
        assert_eq!(ct.as_deref(), Some("application/json"));
        assert!(body["resourceSpans"][0]["scopeSpans"][0]["spans"].is_array());
    }
    let is_op = |s: &Value, op: &str| {
        attr(s, "gen_ai.operation.name").and_then(|v| v["stringValue"].as_str()) == Some(op)
    };
    let by_ex = |id: u64| {
        spans
            .iter()
            .find(|s| int_attr(s, "toolscope.exchange.id") == Some(id) && is_op(s, "chat"))
            .unwrap_or_else(|| panic!("no span for exchange {id}: {spans:#?}"))
            .clone()
    };
    let tools: Vec<&Value> = spans.iter().filter(|s| is_op(s, "execute_tool")).collect();
    assert_eq!(tools.len(), 2, "{spans:#?}");

    let saw = saw.lock().unwrap().clone();
    assert_eq!(saw.len(), 4);
    for (i, s) in saw.iter().enumerate() {
        let id = i as u64 + 1;
        let span = by_ex(id);
        let (trace, parent) = well_formed(s.traceparent.as_deref().expect("a traceparent"));
        // the engine's span would nest under the exchange span, in the exchange span's trace
        assert_eq!(parent, span["spanId"].as_str().unwrap(), "exchange {id}");
        assert_eq!(trace, span["traceId"].as_str().unwrap(), "exchange {id}");
        assert_eq!(span["kind"], 3);
        assert!(span["startTimeUnixNano"].is_string() && span["endTimeUnixNano"].is_string());
    }
    assert_eq!(
        saw.iter()
            .map(|s| (s.user.as_str(), s.messages))
            .collect::<Vec<_>>(),
        [
            ("Weather in Paris?", 2),
            ("Weather in Paris?", 4),
            ("Launch now", 2),
            ("Launch now", 4)
        ]
    );
    // A: the client's trace, each exchange under the incoming span it carried
    let (e1, e2) = (by_ex(1), by_ex(2));
    assert_eq!(e1["traceId"], t_a);
    assert_eq!(e1["parentSpanId"], p1);
    assert_eq!(e2["traceId"], t_a);
    assert_eq!(e2["parentSpanId"], p2);
    // B: no traceparent: the proxy's trace, one for the conversation, exchange spans as roots
    let (e3, e4) = (by_ex(3), by_ex(4));
    assert_eq!(e3["traceId"], e4["traceId"]);
    assert_ne!(e3["traceId"], t_a);
    assert!(e3.get("parentSpanId").is_none() && e4.get("parentSpanId").is_none());
    // tool spans: in the calling exchange's trace, under its span, from its end to the start
    // of the request that carried the result
    let tool_of = |name: &str| {
        *tools
            .iter()
            .find(|t| {
                attr(t, "gen_ai.tool.name").and_then(|v| v["stringValue"].as_str()) == Some(name)
            })
            .unwrap_or_else(|| panic!("no tool span {name}: {tools:#?}"))
    };
    let wa = tool_of("get_weather");
    assert_eq!(wa["traceId"], t_a);
    assert_eq!(wa["parentSpanId"], e1["spanId"]);
    assert_eq!(wa["startTimeUnixNano"], e1["endTimeUnixNano"]);
    assert_eq!(wa["endTimeUnixNano"], e2["startTimeUnixNano"]);
    assert_eq!(
        attr(wa, "gen_ai.tool.call.result").unwrap()["stringValue"],
        "18 C"
    );
    assert_eq!(int_attr(wa, "toolscope.result.exchange.id"), Some(2));
    let lr = tool_of("launch_rocket");
    assert_eq!(lr["traceId"], e3["traceId"]);
    assert_eq!(lr["parentSpanId"], e3["spanId"]);
    assert_eq!(lr["startTimeUnixNano"], e3["endTimeUnixNano"]);
    assert_eq!(lr["endTimeUnixNano"], e4["startTimeUnixNano"]);
    assert_eq!(lr["kind"], 1);
    // a finding as a span event: launch_rocket is no tool of the request
    let rules: Vec<&str> = e3["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "toolscope.finding")
        .filter_map(|e| attr(e, "toolscope.rule")?["stringValue"].as_str())
        .collect();
    assert!(rules.contains(&"tool_call.unknown_tool"), "{e3:#}");
    let report = proxy
        .shutdown_with(Duration::from_secs(5), std::future::pending())
        .await;
    let stats = report.otlp.unwrap();
    assert_eq!((stats.sent, stats.dropped), (want as u64, 0));
}

/// A collector that accepts and never answers: the client still gets every answer while the
/// exporter's first POST is hanging (the collector has read it and not answered, the stats
/// show it neither sent nor dropped), and once the collector gives up every span is counted
/// as dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_collector_does_not_hold_the_client() {
    let (ul, upstream) = loopback().await;
    tokio::spawn(fake_upstream(ul, Arc::default()));
    let (cl, collector_url) = loopback().await;
    let (got_tx, mut got) = mpsc::unbounded_channel();
    let (release, release_rx) = watch::channel(false);
    tokio::spawn(hanging_collector(cl, got_tx, release_rx));
    // a POST timeout far longer than the test: the POST is still waiting below
    let (_dir, proxy) = proxy(&upstream, &collector_url, Duration::from_secs(300)).await;
    let r1 = chat(
        &proxy,
        &turns("Weather in Paris?", "", &Value::Null).0,
        None,
    )
    .await;
    // the first span's POST reached the collector, which now holds it unanswered
    tokio::time::timeout(Duration::from_secs(60), got.recv())
        .await
        .expect("a POST")
        .unwrap();
    let (_, second) = turns("Weather in Paris?", "18 C", &r1);
    let r2 = chat(&proxy, &second, None).await;
    assert_eq!(r2["choices"][0]["message"]["content"], "Done.");
    // the answer came while the collector still hangs: nothing sent, nothing failed yet
    let now = proxy.otlp().unwrap().stats();
    assert_eq!((now.sent, now.dropped, now.failed_posts), (0, 0, 0));
    release.send(true).unwrap();
    let report = proxy
        .shutdown_with(Duration::from_secs(5), std::future::pending())
        .await;
    let stats = report.otlp.unwrap();
    // two exchange spans and the get_weather tool span, none delivered
    assert_eq!((stats.sent, stats.dropped), (0, 3), "{stats:?}");
    assert!(stats.failed_posts >= 1);
}

/// A collector that is down (a closed port): clients get their answers and every span is a
/// counted drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_is_down_costs_counted_drops() {
    let (ul, upstream) = loopback().await;
    tokio::spawn(fake_upstream(ul, Arc::default()));
    let (cl, collector_url) = loopback().await;
    drop(cl);
    let (_dir, proxy) = proxy(&upstream, &collector_url, Duration::from_secs(5)).await;
    let r1 = chat(
        &proxy,
        &turns("Weather in Paris?", "", &Value::Null).0,
        None,
    )
    .await;
    assert_eq!(
        r1["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
    let (_, second) = turns("Weather in Paris?", "18 C", &r1);
    let r2 = chat(&proxy, &second, None).await;
    assert_eq!(r2["choices"][0]["message"]["content"], "Done.");
    let report = proxy
        .shutdown_with(Duration::from_secs(5), std::future::pending())
        .await;
    let stats = report.otlp.unwrap();
    assert_eq!((stats.sent, stats.dropped), (0, 3), "{stats:?}");
    assert!(stats.failed_posts >= 1);
}

/// A second Ctrl-C (the `hurry` future) also cuts the trace export's drain: with a collector
/// that holds its POST and a 300 s POST timeout, the drain would wait 601 s; the hurry ends it
/// at once and the unsent span is a counted drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hurry_cuts_the_trace_export_drain() {
    let (ul, upstream) = loopback().await;
    tokio::spawn(fake_upstream(ul, Arc::default()));
    let (cl, collector_url) = loopback().await;
    let (got_tx, mut got) = mpsc::unbounded_channel();
    let (_release, release_rx) = watch::channel(false);
    tokio::spawn(hanging_collector(cl, got_tx, release_rx));
    let (_dir, proxy) = proxy(&upstream, &collector_url, Duration::from_secs(300)).await;
    chat(
        &proxy,
        &turns("Weather in Paris?", "", &Value::Null).0,
        None,
    )
    .await;
    tokio::time::timeout(Duration::from_secs(60), got.recv())
        .await
        .expect("a POST")
        .unwrap();
    let hurry = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let report = tokio::time::timeout(
        Duration::from_secs(60),
        proxy.shutdown_with(Duration::from_secs(5), hurry),
    )
    .await
    .expect("the hurry cut the drain");
    let stats = report.otlp.unwrap();
    assert_eq!((stats.sent, stats.dropped), (0, 1), "{stats:?}");
}

/// The client's `tracestate` goes upstream with its valid `traceparent`, and is left out when
/// its `traceparent` is not valid (the exchange then starts a trace of its own; W3C Trace
/// Context: a `tracestate` without a valid `traceparent` is discarded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracestate_goes_upstream_only_with_a_valid_traceparent() {
    let (ul, upstream) = loopback().await;
    let saw: Arc<Mutex<Vec<UpstreamSaw>>> = Arc::default();
    tokio::spawn(fake_upstream(ul, saw.clone()));
    let (cl, collector_url) = loopback().await;
    tokio::spawn(collector(cl, Posts::default()));
    let (_dir, proxy) = proxy(&upstream, &collector_url, Duration::from_secs(5)).await;
    let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let msgs = turns("Weather in Paris?", "", &Value::Null).0;
    chat_with(
        &proxy,
        &msgs,
        &[("traceparent", valid), ("tracestate", "vendor=a1")],
    )
    .await;
    chat_with(
        &proxy,
        &msgs,
        &[
            ("traceparent", "00-not-a-trace-01"),
            ("tracestate", "vendor=b2"),
        ],
    )
    .await;
    chat_with(&proxy, &msgs, &[("tracestate", "vendor=c3")]).await;
    let got: Vec<(Option<String>, Option<String>)> = saw
        .lock()
        .unwrap()
        .iter()
        .map(|s| (s.traceparent.clone(), s.tracestate.clone()))
        .collect();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].1.as_deref(), Some("vendor=a1"));
    assert!(
        got[0]
            .0
            .as_deref()
            .unwrap()
            .starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-")
    );
    assert_eq!(got[1].1, None, "{got:?}");
    assert_eq!(got[2].1, None, "{got:?}");
    // both restarted a trace: a well-formed traceparent of toolscope's own still goes up
    for (tp, _) in &got[1..] {
        let (trace, _) = well_formed(tp.as_deref().unwrap());
        assert_ne!(trace, "4bf92f3577b34da6a3ce929d0e0e4736");
    }
    proxy.shutdown(Duration::from_secs(5)).await;
}
