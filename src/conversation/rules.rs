//! The loop rules over a session's [`Loop`]: `loop.call_unanswered`, `loop.result_unknown_id`,
//! `loop.repeated_call` and `cache.prefix_changed`. Each finding names the exchange where the
//! loop went wrong and points into that exchange's request.

use crate::finding::{Evidence, Finding, Pane, Rule, Severity};

use super::{Cause, Loop, short};

/// Consecutive turns with the same call (name and arguments) before `loop.repeated_call`.
pub const REPEAT_LIMIT: usize = 3;

/// Every loop finding, in exchange order.
pub fn findings(l: &Loop) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(call_unanswered(l));
    out.extend(result_unknown_id(l));
    out.extend(repeated_call(l));
    out.extend(prefix_changed(l));
    out.sort_by_key(|f| f.exchange);
    out
}

/// `loop.call_unanswered`: a call whose conversation went on to a next turn that carries no
/// result for it (by id; by position for APIs without ids). Reported on the next turn.
pub fn call_unanswered(l: &Loop) -> Vec<Finding> {
    l.calls
        .iter()
        .filter(|c| c.result.is_none() && c.subagents.is_empty())
        .filter_map(|c| {
            let next = c.next_turn?;
            Some(
                Finding::new(
                    Rule::LoopCallUnanswered,
                    format!(
                        "the call {} `{}`({}) from exchange {} has no result in the next turn (exchange {next}): the model continues without the tool's answer",
                        c.call.id.as_deref().map(|i| format!("`{i}`")).unwrap_or_else(|| format!("#{}", c.index)),
                        c.call.name,
                        short(&c.call.arguments, 80),
                        c.exchange
                    ),
                    "send one tool result per call (tool_call_id / tool_use_id / call_id = the call's id) before the next request",
                )
                .in_exchange(Some(next))
                .with_evidence(Evidence {
                    pane: Some(Pane::Tools),
                    tool: Some(c.call.name.clone()),
                    pointer: Some("/messages".into()),
                    excerpt: c.call.id.clone(),
                    ..Default::default()
                }),
            )
        })
        .collect()
}

/// `loop.result_unknown_id`: a tool result (OpenAI `tool_call_id`, Anthropic `tool_use_id`,
/// Responses `function_call_output.call_id`) for an id no earlier call in the request's
/// history (nor the previous reply) had.
pub fn result_unknown_id(l: &Loop) -> Vec<Finding> {
    l.unknown_results
        .iter()
        .map(|(ex, i, id)| {
            Finding::new(
                Rule::LoopResultUnknownId,
                format!("message {i} is a tool result for `{id}`, an id no earlier call had: the template cannot pair it with a call"),
                "answer with the id of the call the result belongs to",
            )
            .in_exchange(Some(*ex))
            .with_evidence(Evidence {
                pane: Some(Pane::Tools),
                pointer: Some(format!("/messages/{i}")),
                excerpt: Some(id.clone()),
                ..Default::default()
            })
        })
        .collect()
}

/// `loop.repeated_call`: the same call (name and canonical arguments) in the replies of
/// [`REPEAT_LIMIT`] or more consecutive turns of one conversation. Reported once per run, on
/// its last turn.
pub fn repeated_call(l: &Loop) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in &l.conversations {
        // (signature, run length, last exchange)
        let mut runs: Vec<(String, String, usize, u64, Vec<u64>)> = Vec::new();
        let mut prev: Vec<(String, String)> = Vec::new();
        let flush = |runs: &mut Vec<(String, String, usize, u64, Vec<u64>)>,
                     keep: &[(String, String)],
                     out: &mut Vec<Finding>| {
            runs.retain(|(n, a, count, last, exs)| {
                let go_on = keep.iter().any(|(kn, ka)| kn == n && ka == a);
                if !go_on && *count >= REPEAT_LIMIT {
                    out.push(repeated(n, a, *count, *last, exs));
                }
                go_on
            });
        };
        for t in &c.turns {
            let sigs: Vec<(String, String)> = t
                .calls
                .iter()
                .map(|&i| {
                    (
                        l.calls[i].call.name.clone(),
                        l.calls[i].call.arguments.clone(),
                    )
                })
                .collect();
            flush(&mut runs, &sigs, &mut out);
            for s in &sigs {
                match runs.iter_mut().find(|r| r.0 == s.0 && r.1 == s.1) {
                    Some(r) if prev.contains(s) => {
                        r.2 += 1;
                        r.3 = t.exchange;
                        r.4.push(t.exchange);
                    }
                    Some(r) => *r = (s.0.clone(), s.1.clone(), 1, t.exchange, vec![t.exchange]),
                    None => runs.push((s.0.clone(), s.1.clone(), 1, t.exchange, vec![t.exchange])),
                }
            }
            prev = sigs;
        }
        flush(&mut runs, &[], &mut out);
    }
    out
}

fn repeated(name: &str, args: &str, count: usize, last: u64, exs: &[u64]) -> Finding {
    Finding::new(
        Rule::LoopRepeatedCall,
        format!(
            "`{name}`({}) was called {count} turns in a row (exchanges {}): the loop is stuck",
            short(args, 80),
            exs.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
        "check that the tool result reaches the model (loop.result_unrendered, input.message_dropped) and says what to do next; cap repeated calls in the agent",
    )
    .in_exchange(Some(last))
    .with_evidence(Evidence {
        pane: Some(Pane::Tools),
        tool: Some(name.to_owned()),
        excerpt: Some(short(args, 160)),
        ..Default::default()
    })
}

/// `cache.prefix_changed`: a turn whose prompt differs from the previous turn's prompt inside
/// that prompt (not in the new messages or the reply), so the engine re-prefills what it had
/// cached; names the cause. A template that drops the previous reply's reasoning by design is
/// an info note.
pub fn prefix_changed(l: &Loop) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in &l.conversations {
        for t in &c.turns {
            let Some(r) = &t.reuse else { continue };
            let (severity, lost) = match (&r.cause, r.in_prompt) {
                (_, true) => (Severity::Warning, r.parent_prompt.saturating_sub(r.shared)),
                (Cause::ReasoningDropped, false) => (Severity::Info, 0),
                _ => continue,
            };
            let engine = match (r.engine.cache_n, r.engine.prompt_n, r.engine.cached_tokens) {
                (Some(c), Some(p), _) => {
                    format!(" (llama-server timings: cache_n {c}, prompt_n {p})")
                }
                (Some(c), None, _) => format!(" (llama-server timings.cache_n {c})"),
                (None, _, Some(c)) => format!(" (usage cached_tokens {c})"),
                _ => String::new(),
            };
            let message = if r.in_prompt {
                format!(
                    "the prompt differs from the previous turn's (exchange {}) at {} {} of {}: {}; {} {} of the previous prompt are prefilled again{engine}",
                    t.parent.unwrap_or(0),
                    if r.unit == "tokens" { "token" } else { "byte" },
                    r.first_diff.unwrap_or(0),
                    r.prompt,
                    r.cause.describe(),
                    lost,
                    r.unit,
                )
            } else {
                format!(
                    "{}: the previous reply is prefilled again{engine}",
                    r.cause.describe()
                )
            };
            let hint = match &r.cause {
                Cause::SystemPrompt {
                    timestamp: true, ..
                } => {
                    "keep the system prompt fixed across turns: move the time into the latest user message"
                }
                Cause::SystemPrompt { .. } => "keep the system prompt fixed across turns",
                Cause::HeaderField { .. } => {
                    "strip the per-request header line from the system prompt (llama-server b11434 does for /v1/messages)"
                }
                Cause::ToolsReordered => "send the tools in a stable order",
                Cause::ToolsChanged => "keep the tool list fixed within a conversation",
                Cause::HistoryRewrittenByAgent { .. } => {
                    "re-send earlier messages exactly as before"
                }
                Cause::HistoryRewrittenByTemplate { .. } => {
                    "use a template whose rendering of earlier turns does not change as the conversation grows"
                }
                _ => "nothing to change: the template drops earlier reasoning by design",
            };
            let mut f = Finding::new(Rule::CachePrefixChanged, message, hint)
                .in_exchange(Some(t.exchange))
                .with_evidence(Evidence {
                    pane: Some(Pane::Template),
                    pointer: r.cause.field(),
                    token: r.first_diff.filter(|_| r.unit == "tokens"),
                    offset: r.offset,
                    excerpt: r.after.clone(),
                    ..Default::default()
                });
            f.severity = severity;
            out.push(f);
        }
    }
    out
}
