//! Which recorded exchange answers a request: the matching behind `toolscope serve`, and the
//! "nearest recorded request + first differing JSON Pointer" explanation when none does. Pure.
//!
//! A request is `(method, path with query, body bytes)`. Bodies are compared *normalised*: a
//! JSON body as its value (key order and whitespace ignored, numbers as serde_json reads them,
//! so `1` and `1.0` differ), any other body byte for byte. Two modes ([`MatchMode`]):
//!
//! * `sequence` — the n-th request to `METHOD PATH` is answered by the n-th recorded exchange of
//!   `METHOD PATH` (in `id`, i.e. start, order), and its body must equal that recording's. This
//!   is the agent replaying its own run: the first request whose body differs is where the
//!   agent diverged from the recording.
//! * `request` — the request is looked up by its normalised body among the recordings of
//!   `METHOD PATH`, in any order; identical requests recorded several times are answered by
//!   those recordings in turn, the last one repeating once all were used.
//!
//! A request that matches nothing yields a [`Mismatch`] naming the nearest recording (sequence:
//! the one expected at this position; request: the one with the fewest differing JSON leaves)
//! and the first JSON Pointer (RFC 6901) at which the two bodies differ, keys visited in sorted
//! order. Exchanges toolscope made itself to inspect a server (`label` `probe:…`,
//! `regenerate:…`, `serve:…`) and exchanges without a response are never served.

use std::collections::HashMap;

use serde_json::Value;

use super::model::Exchange;

/// How requests are matched to recordings (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MatchMode {
    /// n-th request of a path → n-th recording of that path, bodies equal.
    #[default]
    Sequence,
    /// Looked up by normalised body among the recordings of the path.
    Request,
}

/// A body as compared: JSON value, or raw bytes when the body is not JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum NormalBody {
    Json(Value),
    Bytes(Vec<u8>),
}

impl NormalBody {
    /// Parses `bytes` as JSON when it is JSON (an empty body is `Bytes([])`).
    pub fn from_bytes(bytes: &[u8]) -> NormalBody {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(v) if !bytes.is_empty() => NormalBody::Json(v),
            _ => NormalBody::Bytes(bytes.to_vec()),
        }
    }

    /// A canonical text (JSON with keys sorted at every level, or the bytes lossily), equal for
    /// equal bodies: the lookup key of `request` mode.
    pub fn canonical(&self) -> String {
        match self {
            NormalBody::Json(v) => sorted(v).to_string(),
            NormalBody::Bytes(b) => format!("\u{0}{}", String::from_utf8_lossy(b)),
        }
    }
}

/// `v` with every object's keys in sorted order.
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Where two bodies first differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// RFC 6901 JSON Pointer (`""` is the whole body; `/messages/1/content`).
    pub pointer: String,
    /// The recorded value there (`None`: absent in the recording; for non-JSON bodies, the body
    /// as a string).
    pub recorded: Option<Value>,
    /// The received value there (`None`: absent in the request).
    pub received: Option<Value>,
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The first place where `recorded` and `received` differ (object keys in sorted order, array
/// items by index), or `None` when they are equal.
pub fn first_difference(recorded: &NormalBody, received: &NormalBody) -> Option<Difference> {
    match (recorded, received) {
        (NormalBody::Json(a), NormalBody::Json(b)) => json_difference(a, b, String::new()),
        (a, b) if a == b => None,
        (a, b) => {
            let as_value = |x: &NormalBody| match x {
                NormalBody::Json(v) => v.clone(),
                NormalBody::Bytes(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
            };
            Some(Difference {
                pointer: String::new(),
                recorded: Some(as_value(a)),
                received: Some(as_value(b)),
            })
        }
    }
}

fn json_difference(a: &Value, b: &Value, at: String) -> Option<Difference> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let here = format!("{at}/{}", escape(k));
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => json_difference(p, q, here),
                    (p, q) => Some(Difference {
                        pointer: here,
                        recorded: p.cloned(),
                        received: q.cloned(),
                    }),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) => (0..x.len().max(y.len())).find_map(|i| {
            let here = format!("{at}/{i}");
            match (x.get(i), y.get(i)) {
                (Some(p), Some(q)) => json_difference(p, q, here),
                (p, q) => Some(Difference {
                    pointer: here,
                    recorded: p.cloned(),
                    received: q.cloned(),
                }),
            }
        }),
        _ if a == b => None,
        _ => Some(Difference {
            pointer: at,
            recorded: Some(a.clone()),
            received: Some(b.clone()),
        }),
    }
}

/// Number of differing leaves between two bodies (the distance `request` mode ranks by).
pub fn distance(a: &NormalBody, b: &NormalBody) -> usize {
    fn leaves(v: &Value) -> usize {
        match v {
            Value::Object(m) => m.values().map(leaves).sum::<usize>().max(1),
            Value::Array(a) => a.iter().map(leaves).sum::<usize>().max(1),
            _ => 1,
        }
    }
    fn json(a: &Value, b: &Value) -> usize {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut n = 0;
                for (k, p) in x {
                    n += match y.get(k) {
                        Some(q) => json(p, q),
                        None => leaves(p),
                    };
                }
                n + y
                    .iter()
                    .filter(|(k, _)| !x.contains_key(*k))
                    .map(|(_, q)| leaves(q))
                    .sum::<usize>()
            }
            (Value::Array(x), Value::Array(y)) => {
                let common: usize = x.iter().zip(y).map(|(p, q)| json(p, q)).sum();
                let rest = if x.len() > y.len() {
                    &x[y.len()..]
                } else {
                    &y[x.len()..]
                };
                common + rest.iter().map(leaves).sum::<usize>()
            }
            _ => usize::from(a != b),
        }
    }
    match (a, b) {
        (NormalBody::Json(x), NormalBody::Json(y)) => json(x, y),
        (x, y) => usize::from(x != y) * 1_000_000,
    }
}

/// A request no recording answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// 1-based position of this request among the requests to its `METHOD PATH` so far.
    pub position: usize,
    /// Recordings of the same `METHOD PATH` in the session.
    pub recorded_for_path: usize,
    /// The recording it came closest to, with where the bodies first differ.
    pub nearest: Option<Nearest>,
}

/// The nearest recording of a [`Mismatch`].
#[derive(Debug, Clone, PartialEq)]
pub struct Nearest {
    /// Exchange id in the session.
    pub exchange: u64,
    pub method: String,
    pub path: String,
    /// `None` when only the method or path differs (the bodies are equal).
    pub difference: Option<Difference>,
}

impl Mismatch {
    /// One sentence for the HTTP error and the log: what was asked, what was nearest, where it
    /// differs (values shortened to 80 characters).
    pub fn message(&self, method: &str, path: &str) -> String {
        let mut s = format!(
            "no recorded response for {method} {path} (request {} to this path; the session has {} recording(s) of it)",
            self.position, self.recorded_for_path
        );
        match &self.nearest {
            None => s.push_str("; the session has no servable exchanges"),
            Some(n) => {
                s.push_str(&format!(
                    "; nearest recorded request: exchange #{} ({} {})",
                    n.exchange, n.method, n.path
                ));
                match &n.difference {
                    Some(d) => s.push_str(&format!(
                        "; first difference at {}: recorded {}, received {}",
                        if d.pointer.is_empty() {
                            "the whole body"
                        } else {
                            &d.pointer
                        },
                        short(d.recorded.as_ref()),
                        short(d.received.as_ref())
                    )),
                    None if self.position > self.recorded_for_path => s.push_str(&format!(
                        "; its body is identical but the recording has only {} such request(s)",
                        self.recorded_for_path
                    )),
                    None => {}
                }
            }
        }
        s
    }
}

fn short(v: Option<&Value>) -> String {
    let Some(v) = v else {
        return "(absent)".into();
    };
    let s = v.to_string();
    if s.chars().count() <= 80 {
        s
    } else {
        format!("{}…", s.chars().take(80).collect::<String>())
    }
}

/// True for exchanges `serve` may answer with: a response was recorded — or none was and the
/// recording says why (the upstream was unreachable: `serve` answers `502` with that error) —
/// and the exchange is the client's own traffic (not a `probe:`, `regenerate:` or `serve:`
/// exchange).
pub fn servable(ex: &Exchange) -> bool {
    (ex.response.is_some() || ex.error.is_some())
        && !ex.label.as_deref().is_some_and(|l| {
            l.starts_with("probe:") || l.starts_with("regenerate:") || l.starts_with("serve:")
        })
}

/// A request's `(METHOD, PATH)`.
type Route = (String, String);

/// One recording of a route: (position in the input, normalised body, canonical key).
type Recording = (usize, NormalBody, String);

/// The recordings of a session indexed for matching. Holds positions into the slice it was
/// built from; stateful (cursors advance as requests are answered).
#[derive(Debug, Clone)]
pub struct ReplayIndex {
    mode: MatchMode,
    /// Per `(METHOD, PATH)`: recordings in id order, as (position in the input, normalised
    /// body, canonical key).
    by_route: HashMap<Route, Vec<Recording>>,
    /// Requests seen per route.
    seen: HashMap<(String, String), usize>,
    /// `request` mode: per route and canonical body, how many recordings were used.
    used: HashMap<(String, String, String), usize>,
    /// All servable recordings (position, method, path, id), for a nearest match on another path.
    all: Vec<(usize, String, String, u64)>,
}

impl ReplayIndex {
    /// Indexes the [`servable`] exchanges of `exchanges` (any order; sorted by id here).
    pub fn new(exchanges: &[Exchange], mode: MatchMode) -> ReplayIndex {
        let mut order: Vec<usize> = (0..exchanges.len())
            .filter(|&i| servable(&exchanges[i]))
            .collect();
        order.sort_by_key(|&i| exchanges[i].id);
        let mut by_route: HashMap<Route, Vec<Recording>> = HashMap::new();
        let mut all = Vec::new();
        for i in order {
            let ex = &exchanges[i];
            let body = NormalBody::from_bytes(&ex.request.body.to_bytes());
            let key = body.canonical();
            by_route
                .entry((ex.request.method.clone(), ex.request.path.clone()))
                .or_default()
                .push((i, body, key));
            all.push((i, ex.request.method.clone(), ex.request.path.clone(), ex.id));
        }
        ReplayIndex {
            mode,
            by_route,
            seen: HashMap::new(),
            used: HashMap::new(),
            all,
        }
    }

    /// Number of servable recordings.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Finds the recording that answers `method path` with `body`: `Ok(position in the slice
    /// given to [`ReplayIndex::new`])`, or the [`Mismatch`] explaining why none does. `exchanges`
    /// must be that same slice. A mismatch does not advance the sequence.
    pub fn lookup(
        &mut self,
        exchanges: &[Exchange],
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<usize, Box<Mismatch>> {
        let route = (method.to_owned(), path.to_owned());
        let got = NormalBody::from_bytes(body);
        let position = self.seen.get(&route).copied().unwrap_or(0) + 1;
        let empty = Vec::new();
        let recs = self.by_route.get(&route).unwrap_or(&empty);
        let nearest_of = |k: usize| {
            let (i, rec_body, _) = &recs[k];
            let ex = &exchanges[*i];
            Nearest {
                exchange: ex.id,
                method: ex.request.method.clone(),
                path: ex.request.path.clone(),
                difference: first_difference(rec_body, &got),
            }
        };
        let found = match self.mode {
            MatchMode::Sequence => match recs.get(position - 1) {
                Some((i, rec_body, _)) if *rec_body == got => Ok(*i),
                Some(_) => Err(Some(nearest_of(position - 1))),
                None if recs.is_empty() => Err(None),
                None => Err(Some(nearest_of(recs.len() - 1))),
            },
            MatchMode::Request => {
                let key = got.canonical();
                let same: Vec<usize> = (0..recs.len()).filter(|&k| recs[k].2 == key).collect();
                if same.is_empty() {
                    let best = (0..recs.len()).min_by_key(|&k| distance(&recs[k].1, &got));
                    Err(best.map(nearest_of))
                } else {
                    let u = self
                        .used
                        .entry((route.0.clone(), route.1.clone(), key))
                        .or_insert(0);
                    let k = same[(*u).min(same.len() - 1)];
                    *u += 1;
                    Ok(recs[k].0)
                }
            }
        };
        match found {
            Ok(i) => {
                self.seen.insert(route, position);
                Ok(i)
            }
            Err(nearest) => {
                let nearest = nearest.or_else(|| {
                    // Nothing recorded on this route: the closest route by method, then path.
                    let (i, _, _, _) = self
                        .all
                        .iter()
                        .min_by_key(|(_, m, p, _)| (m != method, common_prefix(p, path)))?;
                    let ex = &exchanges[*i];
                    Some(Nearest {
                        exchange: ex.id,
                        method: ex.request.method.clone(),
                        path: ex.request.path.clone(),
                        difference: first_difference(
                            &NormalBody::from_bytes(&ex.request.body.to_bytes()),
                            &got,
                        ),
                    })
                });
                Err(Box::new(Mismatch {
                    position,
                    recorded_for_path: recs.len(),
                    nearest,
                }))
            }
        }
    }
}

/// Negated length of the common prefix (smaller is closer).
fn common_prefix(a: &str, b: &str) -> std::cmp::Reverse<usize> {
    std::cmp::Reverse(a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Body, Request, Response};
    use serde_json::json;

    fn ex(id: u64, path: &str, body: &str) -> Exchange {
        Exchange {
            id,
            request: Request {
                method: "POST".into(),
                path: path.into(),
                headers: vec![],
                body: Body::Text { text: body.into() },
            },
            response: Some(Response {
                status: 200,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    const A: &str = r#"{"model":"m","messages":[{"role":"user","content":"Hi"}]}"#;
    const B: &str = r#"{"model":"m","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}]}"#;

    #[test]
    fn sequence_follows_order_and_names_the_divergence() {
        // stored out of id order, as a session lists exchanges by end time
        let exs = vec![
            ex(2, "/v1/chat/completions", B),
            ex(1, "/v1/chat/completions", A),
        ];
        let mut idx = ReplayIndex::new(&exs, MatchMode::Sequence);
        // key order and whitespace do not matter
        let a2 = r#"{ "messages": [{"content": "Hi", "role": "user"}], "model": "m" }"#;
        assert_eq!(
            idx.lookup(&exs, "POST", "/v1/chat/completions", a2.as_bytes()),
            Ok(1)
        );
        let diverged = r#"{"model":"m","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hey"}]}"#;
        let m = idx
            .lookup(&exs, "POST", "/v1/chat/completions", diverged.as_bytes())
            .unwrap_err();
        let n = m.nearest.as_ref().unwrap();
        assert_eq!(n.exchange, 2);
        let d = n.difference.as_ref().unwrap();
        assert_eq!(d.pointer, "/messages/1/content");
        assert_eq!(
            (d.recorded.clone(), d.received.clone()),
            (Some(json!("Hello")), Some(json!("Hey")))
        );
        assert_eq!(
            m.message("POST", "/v1/chat/completions"),
            "no recorded response for POST /v1/chat/completions (request 2 to this path; the session has 2 recording(s) of it); nearest recorded request: exchange #2 (POST /v1/chat/completions); first difference at /messages/1/content: recorded \"Hello\", received \"Hey\""
        );
        // the mismatch did not advance: the right second request still gets exchange 2
        assert_eq!(
            idx.lookup(&exs, "POST", "/v1/chat/completions", B.as_bytes()),
            Ok(0)
        );
        // a third request has no recording; the nearest is the last one, bodies identical
        let m = idx
            .lookup(&exs, "POST", "/v1/chat/completions", B.as_bytes())
            .unwrap_err();
        assert_eq!((m.position, m.recorded_for_path), (3, 2));
        assert!(
            m.message("POST", "/v1/chat/completions")
                .ends_with("its body is identical but the recording has only 2 such request(s)")
        );
    }

    #[test]
    fn request_mode_finds_by_body_and_ranks_the_nearest() {
        let exs = vec![
            ex(1, "/v1/chat/completions", A),
            ex(2, "/v1/chat/completions", B),
        ];
        let mut idx = ReplayIndex::new(&exs, MatchMode::Request);
        assert_eq!(
            idx.lookup(&exs, "POST", "/v1/chat/completions", B.as_bytes()),
            Ok(1)
        );
        assert_eq!(
            idx.lookup(&exs, "POST", "/v1/chat/completions", A.as_bytes()),
            Ok(0)
        );
        assert_eq!(
            idx.lookup(&exs, "POST", "/v1/chat/completions", A.as_bytes()),
            Ok(0)
        );
        // one extra key, "temperature", is nearer to A than to B
        let a_t = r#"{"model":"m","temperature":0,"messages":[{"role":"user","content":"Hi"}]}"#;
        let m = idx
            .lookup(&exs, "POST", "/v1/chat/completions", a_t.as_bytes())
            .unwrap_err();
        let n = m.nearest.unwrap();
        assert_eq!(n.exchange, 1);
        let d = n.difference.unwrap();
        assert_eq!(
            (d.pointer.as_str(), d.recorded, d.received),
            ("/temperature", None, Some(json!(0)))
        );
        // another path: nearest by method and path prefix
        let m = idx
            .lookup(&exs, "POST", "/v1/messages", A.as_bytes())
            .unwrap_err();
        assert_eq!((m.recorded_for_path, m.nearest.unwrap().exchange), (0, 1));
    }

    #[test]
    fn pointers_escape_and_non_json_bodies_compare_whole() {
        let a = NormalBody::from_bytes(br#"{"a/b":{"c~d":1}}"#);
        let b = NormalBody::from_bytes(br#"{"a/b":{"c~d":2}}"#);
        assert_eq!(first_difference(&a, &b).unwrap().pointer, "/a~1b/c~0d");
        let t = NormalBody::from_bytes(b"plain");
        assert_eq!(first_difference(&t, &t), None);
        assert_eq!(
            first_difference(&t, &NormalBody::from_bytes(b"other"))
                .unwrap()
                .pointer,
            ""
        );
        assert_eq!(NormalBody::from_bytes(b""), NormalBody::Bytes(vec![]));
    }

    #[test]
    fn probes_are_not_served() {
        let mut p = ex(1, "/v1/chat/completions", A);
        p.label = Some("probe:tool_choice_none".into());
        let exs = vec![p];
        let idx = ReplayIndex::new(&exs, MatchMode::Sequence);
        assert!(idx.is_empty());
    }
}
