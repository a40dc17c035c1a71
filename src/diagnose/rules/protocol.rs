//! Marker text of the chat template's own protocol in what the model answered: the model wrote
//! the structure the template writes (a tool result's end, a new turn, a stray call closer) as
//! ordinary text, so the server passed it through as content.
//!
//! The markers are the template's own ([`crate::tokens::markers::MarkerInventory`] of the chat
//! template source, classified by role); without a template, every marker-shaped text that
//! [`crate::tokens::markers::classify`] gives a protocol role (turn, end of sequence, tool
//! declaration, tool call, tool result — not reasoning, not BOS: `<think>` in content is a
//! server that does not split reasoning, and `<s>` is also HTML).

use crate::diagnose::{ExchangeContext, markup};
use crate::finding::{Finding, Rule};
use crate::tokens::markers::{MarkerHit, MarkerInventory, Role, classify, is_closing, scan};

/// One protocol marker found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolMarker {
    /// Byte offset in the text.
    pub offset: usize,
    /// The marker as written (`</tool_response>`, `<|im_start|>`).
    pub marker: String,
    /// What the template uses it for.
    pub role: Role,
}

/// The protocol markers written in `text`, in offset order. `own` is the chat template's
/// marker inventory (its markers are the protocol; [`ExchangeContext::template_markers`]);
/// without one, `bos`/`eos` (BOS/EOS texts, when known) help classify marker-shaped text.
pub fn protocol_markers(
    text: &str,
    own: Option<&MarkerInventory>,
    bos: Option<&str>,
    eos: Option<&str>,
) -> Vec<ProtocolMarker> {
    let roles = [
        Role::Turn,
        Role::Eos,
        Role::ToolDeclaration,
        Role::ToolCall,
        Role::ToolResult,
    ];
    scan(text, false)
        .into_iter()
        .filter_map(
            |MarkerHit {
                 text: norm,
                 start,
                 end,
             }| {
                let role = match own {
                    Some(inv) => *roles.iter().find(|r| inv.has(**r, &norm))?,
                    None => Some(classify(&norm, bos, eos)).filter(|r| roles.contains(r))?,
                };
                Some(ProtocolMarker {
                    offset: start,
                    marker: text[start..end].to_owned(),
                    role,
                })
            },
        )
        .collect()
}

/// Protocol markers in the visible content, with the context's template and BOS text.
fn in_content(cx: &ExchangeContext) -> Vec<ProtocolMarker> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    protocol_markers(
        &m.content,
        cx.template_markers.as_deref(),
        cx.bos_token.as_deref(),
        None,
    )
}

/// The first tool-result marker (opener or closer) of the template's protocol in `text`, also
/// the well-known ones of [`markup::find_result_markup`]: `(offset, marker)`. `own`: the
/// template's marker inventory.
pub fn first_result_marker(text: &str, own: Option<&MarkerInventory>) -> Option<(usize, String)> {
    let own = protocol_markers(text, own, None, None)
        .into_iter()
        .find(|p| p.role == Role::ToolResult)
        .map(|p| (p.offset, p.marker));
    let known = markup::find_result_markup(text)
        .first()
        .map(|&(at, m)| (at, m.to_owned()));
    match (own, known) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// `content.protocol_marker`: the content holds a turn marker (`<|im_start|>`,
/// `<start_of_turn>`), an end-of-turn / end-of-sequence marker, a tool-declaration marker, or a
/// tool-call marker outside any call markup that `tool_call.leaked_as_text` reports (a stray
/// `</tool_call>`) of the template's own protocol. The model kept writing the template's
/// structure as text: the marker was not one special token to stop on, or the server's stop
/// handling missed it. Tool-result markers are `tool_call.hallucinated_result`. One finding per
/// distinct marker, at its first offset. Evidence: content pointer, offset, excerpt.
pub fn protocol_marker(cx: &ExchangeContext) -> Vec<Finding> {
    let Some(m) = &cx.message else {
        return Vec::new();
    };
    let leaks: Vec<usize> = markup::find_leaks(&m.content, cx.request_or_null())
        .iter()
        .map(|l| l.offset)
        .collect();
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    // Open call blocks: their closers belong to them.
    let mut open = 0usize;
    for p in in_content(cx) {
        if p.role == Role::ToolResult {
            continue;
        }
        if p.role == Role::ToolCall {
            if !is_closing(&p.marker) {
                open += 1;
                // A call opener that leaked_as_text reports is not reported again.
                if leaks.contains(&p.offset) {
                    continue;
                }
            } else if open > 0 {
                open -= 1;
                continue;
            }
        }
        if seen.contains(&p.marker) {
            continue;
        }
        seen.push(p.marker.clone());
        let what = match p.role {
            Role::Turn => "a turn marker",
            Role::Eos => "the end-of-sequence marker",
            Role::ToolDeclaration => "a tool-declaration marker",
            _ => "a tool-call marker outside any call",
        };
        out.push(
            Finding::new(
                Rule::ContentProtocolMarker,
                format!(
                    "content holds {what} of the chat template's protocol, {} at byte {}",
                    p.marker, p.offset
                ),
                "the model wrote the template's structure as text: check that the marker is one special token in the model's vocabulary (toolscope render --vocab) and that the server stops on it",
            )
            .with_evidence(cx.content_evidence(
                Some(p.offset),
                Some(markup::excerpt(&m.content, p.offset, 80)),
            )),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::rules::testutil::*;
    use serde_json::json;

    fn qwen3ish() -> MarkerInventory {
        MarkerInventory::of(QWEN3ISH, true, None, None)
    }

    const QWEN3ISH: &str = "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' }}{%- if m.role == 'tool' %}{{- '<tool_response>\\n' + m.content + '\\n</tool_response>' }}{%- endif %}{{- '<|im_end|>\\n' }}{%- endfor %}{{- '<tool_call>\\n</tool_call>' }}";

    #[test]
    fn markers_of_the_templates_protocol() {
        let t = "18C cloudy\n</tool_response>";
        let got = protocol_markers(t, Some(&qwen3ish()), None, None);
        assert_eq!(
            got,
            [ProtocolMarker {
                offset: 11,
                marker: "</tool_response>".into(),
                role: Role::ToolResult
            }]
        );
        // Without the template: by role.
        assert_eq!(protocol_markers(t, None, None, None)[0].offset, 11);
        // HTML and reasoning are not protocol markers.
        assert!(
            protocol_markers("<b>x</b> <s>y</s> <think>z</think>", None, None, None).is_empty()
        );
        // A marker the template does not use is not its protocol.
        assert!(protocol_markers("<start_of_turn>user", Some(&qwen3ish()), None, None).is_empty());
        assert_eq!(
            protocol_markers("<start_of_turn>user", None, None, None)[0].role,
            Role::Turn
        );
        assert_eq!(
            first_result_marker(t, None),
            Some((11, "</tool_response>".into()))
        );
    }

    #[test]
    fn turn_marker_and_stray_closer_in_content() {
        let cx = openai(
            json!({"tools": two_tools()}),
            oa_resp(
                Some("Sunny.<|im_end|>\n<|im_start|>user\nthanks</tool_call>"),
                &[],
                "stop",
            ),
        );
        let cx = crate::analysis::facts::with_template(cx, QWEN3ISH);
        let f = protocol_marker(&cx);
        assert_eq!(ids(&f), ["content.protocol_marker"; 3]);
        let offs: Vec<Option<usize>> = f.iter().map(|f| f.evidence.offset).collect();
        assert_eq!(offs, [Some(6), Some(17), Some(40)]);
        assert!(f[1].message.contains("<|im_start|>"), "{}", f[1].message);
        // A leaked call's own markup is tool_call.leaked_as_text, not this.
        let cx = openai(
            json!({"tools": two_tools()}),
            oa_resp(
                Some(
                    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lisbon\"}}\n</tool_call>",
                ),
                &[],
                "stop",
            ),
        );
        assert!(
            protocol_marker(&cx).is_empty(),
            "{:?}",
            protocol_marker(&cx)
        );
        // Plain answers have none.
        let cx = openai(
            json!({}),
            oa_resp(Some("It is **sunny** <b>now</b>."), &[], "stop"),
        );
        assert!(protocol_marker(&cx).is_empty());
    }
}
