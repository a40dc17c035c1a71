//! `schema.type_lost`, `schema.alternative_dropped`, `schema.ref_unresolved` over what the
//! server really printed: the request's tools against the server's own render of the exchange
//! (`/apply-template`, or `__verbose.prompt`), via [`crate::schema::loss::schema_loss`].
//!
//! A bare request with a template and no server render is judged by the pre-flight lint in
//! `toolscope check` ([`crate::schema::preflight`]) instead.

use crate::diagnose::ExchangeContext;
use crate::finding::Finding;

/// Schema facts of the request's tools that never reached the server's prompt. Empty without
/// a request, without tools, or without a recorded server prompt.
///
/// A tool whose name the prompt never prints is left to `input.tool_dropped`
/// ([`super::input::dropped_tools`]): one finding per dropped tool, not a second one here.
pub fn loss(cx: &ExchangeContext) -> Vec<Finding> {
    match (&cx.request, &cx.server_prompt) {
        (Some(req), Some(prompt)) => {
            let dropped = super::input::tools_not_printed(req, cx.api, prompt);
            crate::schema::loss::schema_loss(req, prompt)
                .into_iter()
                .filter(|f| {
                    f.evidence
                        .tool
                        .as_ref()
                        .is_none_or(|t| !dropped.contains(t))
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Rule;
    use serde_json::json;

    #[test]
    fn anyof_parameter_printed_as_an_empty_type_is_lost() {
        // The Gemma 4 template's print of an anyOf parameter (sessions/c-gemma4-template-anyof:
        // `type:<|"|><|"|>`), hand-reduced.
        let req = json!({"messages": [], "tools": [{"type": "function", "function": {"name": "set", "parameters": {
            "type": "object", "properties": {"target": {"anyOf": [{"type": "number"}, {"type": "string"}], "description": "Degrees"}}}}}]});
        let cx = crate::analysis::facts::from_pair(crate::session::Api::Openai, Some(req), None);
        assert!(loss(&cx).is_empty(), "no server prompt: nothing to judge");
        let cx = ExchangeContext {
            server_prompt: Some(
                r#"<|tool>declaration:set{description:<|"|><|"|>,parameters:{properties:{target:{description:<|"|>Degrees<|"|>,type:<|"|><|"|>}},type:<|"|>OBJECT<|"|>}}<tool|>"#.into(),
            ),
            ..cx
        };
        let f = loss(&cx);
        assert!(
            f.iter().any(|f| f.rule == Rule::SchemaTypeLost
                && f.evidence.pointer.as_deref() == Some("/properties/target")),
            "{f:#?}"
        );
    }
}
