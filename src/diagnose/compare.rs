//! Server vs toolscope: the tool calls the server delivered (its own parser's result, in
//! [`AssistantMessage::tool_calls`]) against toolscope's parse of the raw model text
//! ([`ParseOutput`] from [`crate::parser`]). Pure.
//!
//! Each toolscope call is matched to a server call:
//! 1. same name and equal arguments (as JSON values) → agreed;
//! 2. one server call whose arguments are two or more consecutive toolscope calls' arguments
//!    concatenated (`{"a":1}{"b":2}`) or merged into one object → **merged**;
//! 3. a server call with the same name but other arguments, or (in order, when nothing else
//!    fits) another name → **mangled**;
//! 4. no server call left → **missed** (the call stayed in `content`/`reasoning` as text,
//!    which the leaked-markup rule reports as `tool_call.leaked_as_text`; or was dropped:
//!    `server.call_mismatch`).
//!
//! Merged and mangled calls are `server.call_mismatch` (severity error). The findings are built
//! from these facts in diagnose/rules/server.rs (`comparison_findings`), not here.
//!
//! Server calls that match no toolscope call are listed as `extra` (a syntax toolscope's parser
//! does not know, or a call the server invented); they get no finding.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::parser::{ParseOutput, ParsedCall};
use crate::stream::AssistantMessage;

/// One difference between the server's calls and toolscope's parse. Indices are positions in
/// `AssistantMessage::tool_calls` (`server`) and `ParseOutput::tool_calls` (`parsed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Discrepancy {
    /// toolscope found a call the server did not return as a tool call. `in_text` says where
    /// the call's text ended up in the server's answer: `content`, `reasoning`, or `dropped`.
    Missed { parsed: usize, in_text: String },
    /// Several toolscope calls came back as one server call.
    Merged { server: usize, parsed: Vec<usize> },
    /// A server call whose name and/or arguments differ from toolscope's call.
    Mangled {
        server: usize,
        parsed: usize,
        name_differs: bool,
        args_differs: bool,
    },
    /// A server call toolscope did not find in the raw text.
    Extra { server: usize },
}

/// The outcome of [`compare_calls`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CallComparison {
    /// `(server, parsed)` index pairs that agree.
    pub agreed: Vec<(usize, usize)>,
    pub discrepancies: Vec<Discrepancy>,
}

impl CallComparison {
    /// True when every call agrees.
    pub fn is_clean(&self) -> bool {
        self.discrepancies.is_empty()
    }
}

fn server_args(a: &str) -> Option<Value> {
    if a.trim().is_empty() {
        return Some(Value::Object(Default::default()));
    }
    serde_json::from_str(a).ok()
}

fn squash(s: &str) -> String {
    // Whitespace outside strings is insignificant; compare the canonical serialization of each
    // piece instead of raw text.
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Whether server arguments `s` are the parsed calls' arguments concatenated or merged.
fn is_merge(s: &str, parts: &[&ParsedCall]) -> bool {
    let cat: String = parts.iter().map(|p| p.arguments.to_string()).collect();
    if squash(&cat) == squash(s) {
        return true;
    }
    let Some(Value::Object(so)) = server_args(s) else {
        return false;
    };
    let mut union = serde_json::Map::new();
    for p in parts {
        let Value::Object(o) = &p.arguments else {
            return false;
        };
        for (k, v) in o {
            if union.insert(k.clone(), v.clone()).is_some() {
                return false;
            }
        }
    }
    union.len() == so.len() && union.iter().all(|(k, v)| so.get(k) == Some(v))
}

fn call_text<'a>(raw: &'a str, p: &ParsedCall) -> Option<&'a str> {
    let (a, b) = p.span?;
    raw.get(a..b)
}

/// Compares the server's calls in `server` with `parsed`, toolscope's parse of `raw` (the raw
/// model text the parse was run on: `__verbose.content`, a regenerated completion, or the
/// concatenated content). See the module doc for the matching.
pub fn compare_calls(server: &AssistantMessage, raw: &str, parsed: &ParseOutput) -> CallComparison {
    let sc = &server.tool_calls;
    let pc = &parsed.tool_calls;
    let mut s_used = vec![false; sc.len()];
    let mut p_used = vec![false; pc.len()];
    let mut out = CallComparison::default();
    let sargs: Vec<Option<Value>> = sc.iter().map(|c| server_args(&c.arguments)).collect();

    // 1. exact
    for (pi, p) in pc.iter().enumerate() {
        if let Some(si) = (0..sc.len()).find(|&si| {
            !s_used[si] && sc[si].name == p.name && sargs[si].as_ref() == Some(&p.arguments)
        }) {
            s_used[si] = true;
            p_used[pi] = true;
            out.agreed.push((si, pi));
        }
    }
    // 2. merged: a server call equal to a run of ≥ 2 consecutive unmatched parsed calls
    for si in 0..sc.len() {
        if s_used[si] {
            continue;
        }
        'start: for start in 0..pc.len() {
            for end in (start + 2..=pc.len()).rev() {
                if (start..end).any(|i| p_used[i]) {
                    continue;
                }
                let parts: Vec<&ParsedCall> = pc[start..end].iter().collect();
                if is_merge(&sc[si].arguments, &parts) {
                    s_used[si] = true;
                    let idx: Vec<usize> = (start..end).collect();
                    for &i in &idx {
                        p_used[i] = true;
                    }
                    out.discrepancies.push(Discrepancy::Merged {
                        server: si,
                        parsed: idx,
                    });
                    break 'start;
                }
            }
        }
    }
    // 3. mangled: same name first, then in order
    let pair = |si: usize, pi: usize, out: &mut CallComparison| {
        let s = &sc[si];
        let p = &pc[pi];
        let name_differs = s.name != p.name;
        let args_differs = sargs[si].as_ref() != Some(&p.arguments);
        out.discrepancies.push(Discrepancy::Mangled {
            server: si,
            parsed: pi,
            name_differs,
            args_differs,
        });
    };
    for pi in 0..pc.len() {
        if p_used[pi] {
            continue;
        }
        if let Some(si) = (0..sc.len()).find(|&si| !s_used[si] && sc[si].name == pc[pi].name) {
            s_used[si] = true;
            p_used[pi] = true;
            pair(si, pi, &mut out);
        }
    }
    let rest_p: Vec<usize> = (0..pc.len()).filter(|&i| !p_used[i]).collect();
    let rest_s: Vec<usize> = (0..sc.len()).filter(|&i| !s_used[i]).collect();
    for (&pi, &si) in rest_p.iter().zip(rest_s.iter()) {
        s_used[si] = true;
        p_used[pi] = true;
        pair(si, pi, &mut out);
    }
    // 4. missed
    for pi in 0..pc.len() {
        if p_used[pi] {
            continue;
        }
        let p = &pc[pi];
        let text = call_text(raw, p);
        let found_in = |hay: &str| match text {
            Some(t) => !t.trim().is_empty() && hay.contains(t.trim()),
            None => !p.name.is_empty() && hay.contains(&p.name),
        };
        let in_text = if found_in(&server.content) {
            "content"
        } else if found_in(&server.reasoning) {
            "reasoning"
        } else {
            "dropped"
        };
        out.discrepancies.push(Discrepancy::Missed {
            parsed: pi,
            in_text: in_text.to_owned(),
        });
    }
    for (si, used) in s_used.iter().enumerate() {
        if !used {
            out.discrepancies.push(Discrepancy::Extra { server: si });
        }
    }
    out
}
