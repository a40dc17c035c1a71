//! Ollama's use of Go templates, reproduced: template/template.go (`Parse`, `Vars`,
//! `Identifiers`, `Execute`, `collate`, `deleteNode`, `convertMessagesForTemplate`,
//! `convertToolsForTemplate`), api/types.go (how a request's messages, tool calls and tools
//! decode: `Message`, `ToolCallFunctionArguments`, `ToolProperty`, `ThinkValue`), and the
//! request handling of server/routes.go (`ChatHandler`, `GenerateHandler`) and
//! server/prompt.go (`chatPrompt`, `renderPrompt`, `imageTaggedMessages`) that decides what
//! reaches `Execute`. Followed at ollama/ollama commit fb3076099.
//!
//! Not reproduced: context-window truncation in `chatPrompt` (needs the model's tokenizer and
//! `num_ctx`: toolscope renders the whole conversation), `filterThinkTags` (model-family
//! specific), models with a built-in Go `Renderer` (`model/renderers`, chosen by the model's
//! config, not its template), and `[img-N]` media beyond the tag text.

use std::rc::Rc;

use serde_json::Value as J;

use crate::gotmpl::exec::{Exec, ExecOptions};
use crate::gotmpl::parse::{self, Arg, Node, Pipe, Tree};
use crate::gotmpl::value::{Field, List, Map, Stringer, Struct, Value};
use crate::gotmpl::{ErrorKind, GoTemplateError};

/// A template parsed as Ollama's `template.Parse` does: `missingkey=zero`, Ollama's FuncMap,
/// and `{{ .Response }}` appended when the template mentions neither `.Messages` nor
/// `.Response`.
#[derive(Debug, Clone)]
pub struct OllamaTemplate {
    src: String,
    tree: Tree,
    vars: Vec<String>,
}

/// What Ollama's `/api/show` says about the model that changes the render: the Modelfile's
/// `SYSTEM` (prepended when the request has no system message), its `MESSAGE`s (prepended to
/// the conversation) and whether it can think (then an absent `think` means `true`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OllamaModel {
    /// `/api/show` `system`.
    pub system: Option<String>,
    /// `/api/show` `messages` (Modelfile `MESSAGE` lines), as request messages.
    pub messages: Vec<J>,
    /// `/api/show` `capabilities` contains `"thinking"`.
    pub thinking: bool,
    /// `{{ .Function }}` and `{{ .Function.Parameters }}` of a tool print as JSON. True for
    /// Ollama before v0.14.0, which passed `api.Tools` (whose `ToolFunction` had a JSON
    /// `String()`); false from v0.14.0 (e51dead63, #13525) to at least fb3076099, where
    /// `templateToolFunction` and `templateToolFunctionParameters` have no `String()` and
    /// print as Go structs (`{get_weather Get … {object <nil> <nil> [city] {…}}}`: ollama
    /// issue #14601, PR #18391). See [`OllamaModel::set_version`].
    pub function_json: bool,
}

impl OllamaModel {
    /// Follows the Ollama `version` (`/api/version`, e.g. `0.13.5`, `0.14.0-rc1`): sets
    /// [`Self::function_json`] for versions before 0.14.0. An unparsable version changes
    /// nothing (the current behaviour).
    pub fn set_version(&mut self, version: &str) {
        if let Some(v) = super::profile::OllamaVersion::parse(version) {
            self.follow_version(v);
        }
    }

    /// [`Self::set_version`] with the version read ([`super::Profile::Ollama`]'s).
    pub fn follow_version(&mut self, v: super::profile::OllamaVersion) {
        self.function_json = (v.major, v.minor) < (0, 14);
    }

    /// From an `/api/show` answer (`system`, `messages`, `capabilities`).
    pub fn from_show(show: &J) -> OllamaModel {
        OllamaModel {
            system: show
                .get("system")
                .and_then(J::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            messages: show
                .get("messages")
                .and_then(J::as_array)
                .cloned()
                .unwrap_or_default(),
            thinking: show
                .get("capabilities")
                .and_then(J::as_array)
                .is_some_and(|c| c.iter().any(|x| x == "thinking")),
            function_json: false,
        }
    }
}

fn is_ollama_func(n: &str) -> bool {
    crate::gotmpl::exec::BUILTINS.contains(&n) || crate::gotmpl::exec::OLLAMA_FUNCS.contains(&n)
}

/// Most templates a [`ParsedTemplates`] keeps.
const PARSED_TEMPLATES: usize = 8;

/// Ollama templates kept parsed by their owner across the exchanges it renders (`check` and the
/// inspector render every exchange of an Ollama session through the same `/api/show`
/// template): at most [`PARSED_TEMPLATES`], keyed by their text, emptied when full; a template
/// that does not parse is parsed again each time (its error is the answer). Not `Sync`: one
/// per worker thread (the owner is [`crate::analysis::Caches`]).
#[derive(Default)]
pub struct ParsedTemplates {
    kept: std::cell::RefCell<Vec<std::rc::Rc<OllamaTemplate>>>,
}

impl std::fmt::Debug for ParsedTemplates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ParsedTemplates({} kept)", self.kept.borrow().len())
    }
}

impl ParsedTemplates {
    /// `text` parsed ([`OllamaTemplate::parse`]), from the kept ones when parsed before.
    pub fn get(&self, text: &str) -> Result<std::rc::Rc<OllamaTemplate>, GoTemplateError> {
        if let Some(t) = self.kept.borrow().iter().find(|t| t.src == text) {
            return Ok(t.clone());
        }
        let t = std::rc::Rc::new(OllamaTemplate::parse(text)?);
        let mut kept = self.kept.borrow_mut();
        if kept.len() >= PARSED_TEMPLATES {
            kept.clear();
        }
        kept.push(t.clone());
        Ok(t)
    }
}

impl OllamaTemplate {
    /// template.go `Parse`. Errors: Go's parse errors; `undefined template specified` for a
    /// `{{template "x"}}` without a pipeline (Ollama's `Identifiers` refuses it).
    pub fn parse(text: &str) -> Result<OllamaTemplate, GoTemplateError> {
        let mut tree = parse::parse("", text, &is_ollama_func)?;
        let vars = vars(text, &tree)?;
        if !vars.iter().any(|v| v == "messages" || v == "response") {
            tree.root.push(Node::Action(response_action()));
        }
        let vars = self::vars(text, &tree)?;
        Ok(OllamaTemplate {
            src: text.to_owned(),
            tree,
            vars,
        })
    }

    /// template.go `Vars`: the lower-cased field and variable identifiers of every template
    /// (sorted, unique).
    pub fn vars(&self) -> &[String] {
        &self.vars
    }

    /// template.go `Execute`, with `today` for `currentDate`. `values` come from
    /// [`values_from_request`].
    pub fn execute(&self, v: &Values, opts: &ExecOptions) -> Result<String, GoTemplateError> {
        self.execute_with(v, opts, false)
    }

    /// [`Self::execute`]; `function_json`: see [`OllamaModel::function_json`].
    pub fn execute_with(
        &self,
        v: &Values,
        opts: &ExecOptions,
        function_json: bool,
    ) -> Result<String, GoTemplateError> {
        let (system, messages) = collate(&v.messages);
        let think = |m: &mut Vec<(String, Value)>| {
            m.push(("Think".into(), Value::Bool(v.think)));
            m.push(("ThinkLevel".into(), Value::str(v.think_level.as_str())));
            m.push(("IsThinkSet".into(), Value::Bool(v.is_think_set)));
        };
        let run = |tree_root: &[Node],
                   data: Vec<(String, Value)>,
                   opts: ExecOptions,
                   out: &mut String| {
            let data = Value::Map(Rc::new(Map::go_map(
                "map[string]interface {}",
                data,
                Stringer::None,
            )));
            let mut ex = Exec::new(&self.src, "", &self.tree, opts);
            ex.run(tree_root, data)?;
            out.push_str(&ex.out);
            Ok::<(), GoTemplateError>(())
        };
        let mut out = String::new();
        if !v.prompt.is_empty() && !v.suffix.is_empty() {
            let mut d = vec![
                ("Prompt".into(), Value::str(v.prompt.as_str())),
                ("Suffix".into(), Value::str(v.suffix.as_str())),
                ("Response".into(), Value::str("")),
            ];
            think(&mut d);
            run(&self.tree.root, d, *opts, &mut out)?;
            return Ok(out);
        }
        if self.vars.iter().any(|x| x == "messages") {
            let mut d = vec![
                ("System".into(), Value::str(system.as_str())),
                ("Messages".into(), messages_value(&messages)),
                (
                    "Tools".into(),
                    tools_value(v.tools.as_deref(), function_json),
                ),
                ("Response".into(), Value::str("")),
            ];
            think(&mut d);
            run(&self.tree.root, d, *opts, &mut out)?;
            return Ok(out);
        }
        // the legacy path: one execution per system/prompt/response turn
        let (mut system, mut prompt, mut response) = (String::new(), String::new(), String::new());
        let legacy = |s: &str, p: &str, r: &str| {
            let mut d = vec![
                ("System".into(), Value::str(s)),
                ("Prompt".into(), Value::str(p)),
                ("Response".into(), Value::str(r)),
            ];
            think(&mut d);
            d
        };
        for m in &messages {
            let flush = match m.role.as_str() {
                "system" => !prompt.is_empty() || !response.is_empty(),
                "user" => !response.is_empty(),
                _ => false,
            };
            if flush {
                run(
                    &self.tree.root,
                    legacy(&system, &prompt, &response),
                    *opts,
                    &mut out,
                )?;
                system.clear();
                prompt.clear();
                response.clear();
            }
            match m.role.as_str() {
                "system" => system = m.content.clone(),
                "user" => prompt = m.content.clone(),
                "assistant" => response = m.content.clone(),
                _ => {}
            }
        }
        // the last turn, cut after `.Response`, in a template built without Funcs,
        // missingkey option or defined templates
        let cut_root = delete_after_response(&self.tree.root)?;
        let last_opts = ExecOptions {
            ollama_funcs: false,
            missingkey_zero: false,
            defines: false,
            ..*opts
        };
        run(
            &cut_root,
            legacy(&system, &prompt, &response),
            last_opts,
            &mut out,
        )?;
        Ok(out)
    }
}

fn response_action() -> Pipe {
    Pipe {
        pos: 0,
        is_assign: false,
        decl: Vec::new(),
        cmds: vec![parse::Cmd {
            pos: 0,
            args: vec![Arg::Field(0, vec!["Response".into()])],
            text: ".Response".into(),
        }],
    }
}

/// template.go `Identifiers` over every template of the tree, lower-cased, sorted, unique.
/// `src` gives `undefined template specified` the line of its `{{template}}` (Ollama's error
/// has none).
fn vars(src: &str, tree: &Tree) -> Result<Vec<String>, GoTemplateError> {
    let mut out = Vec::new();
    fn list(src: &str, nodes: &[Node], out: &mut Vec<String>) -> Result<(), GoTemplateError> {
        for n in nodes {
            match n {
                Node::Action(p) => pipe(p, out),
                Node::Branch(b) => {
                    pipe(&b.pipe, out);
                    list(src, &b.list, out)?;
                    if let Some(e) = &b.else_list {
                        list(src, e, out)?;
                    }
                }
                Node::Template {
                    pipe: None, pos, ..
                } => {
                    return Err(GoTemplateError {
                        kind: ErrorKind::Parse,
                        name: String::new(),
                        line: parse::line_of(src, *pos),
                        col: None,
                        context: None,
                        message: "undefined template specified".into(),
                    });
                }
                Node::Template { pipe: Some(p), .. } => pipe(p, out),
                _ => {}
            }
        }
        Ok(())
    }
    fn pipe(p: &Pipe, out: &mut Vec<String>) {
        for c in &p.cmds {
            for a in &c.args {
                match a {
                    Arg::Field(_, ids) | Arg::Variable(_, ids) => out.extend(ids.iter().cloned()),
                    Arg::Pipe(_, p) => pipe(p, out),
                    _ => {}
                }
            }
        }
    }
    list(src, &tree.root, &mut out)?;
    let mut names: Vec<&String> = tree.defines.keys().collect();
    names.sort();
    for n in names {
        list(src, &tree.defines[n], &mut out)?;
    }
    let mut v: Vec<String> = out.into_iter().map(|s| s.to_lowercase()).collect();
    v.sort();
    v.dedup();
    Ok(v)
}

/// template.go `deleteNode` with the predicate of `Execute`: everything after the first
/// `.Response` field is dropped (control-structure pipelines are not visited, as in Ollama).
fn delete_after_response(root: &[Node]) -> Result<Vec<Node>, GoTemplateError> {
    struct W {
        cut: bool,
    }
    impl W {
        fn list(&mut self, nodes: &[Node]) -> Result<Option<Vec<Node>>, GoTemplateError> {
            if self.cut {
                return Ok(None);
            }
            let mut out = Vec::new();
            for n in nodes {
                if let Some(n) = self.node(n)? {
                    out.push(n);
                }
            }
            Ok(Some(out))
        }
        fn node(&mut self, n: &Node) -> Result<Option<Node>, GoTemplateError> {
            if self.cut {
                return Ok(None);
            }
            match n {
                Node::Action(p) => Ok(self.pipe(p).map(Node::Action)),
                Node::Branch(b) => {
                    let mut b = (**b).clone();
                    b.list = self.list(&b.list)?.unwrap_or_default();
                    if let Some(e) = &b.else_list {
                        match self.list(e)? {
                            Some(e) => b.else_list = Some(e),
                            None => {
                                return Err(GoTemplateError::request(
                                    "Ollama's template.go deleteNode panics on this legacy template ({{ .Response }} inside an {{if}}/{{with}}/{{range}} that has an {{else}}): Ollama answers HTTP 500",
                                ));
                            }
                        }
                    }
                    Ok(Some(Node::Branch(Box::new(b))))
                }
                other => Ok(Some(other.clone())),
            }
        }
        fn pipe(&mut self, p: &Pipe) -> Option<Pipe> {
            if self.cut {
                return None;
            }
            let mut cmds = Vec::new();
            for c in &p.cmds {
                let mut args = Vec::new();
                for a in &c.args {
                    if let Some(a) = self.arg(a) {
                        args.push(a);
                    }
                }
                if args.is_empty() {
                    return None;
                }
                let mut c = c.clone();
                c.args = args;
                cmds.push(c);
            }
            if cmds.is_empty() {
                return None;
            }
            let mut p = p.clone();
            p.cmds = cmds;
            Some(p)
        }
        fn arg(&mut self, a: &Arg) -> Option<Arg> {
            if let Arg::Field(_, ids) = a
                && ids.iter().any(|i| i == "Response")
            {
                self.cut = true;
                return Some(a.clone());
            }
            if self.cut {
                return None;
            }
            match a {
                Arg::Pipe(p, inner) => self.pipe(inner).map(|i| Arg::Pipe(*p, Box::new(i))),
                other => Some(other.clone()),
            }
        }
    }
    Ok(W { cut: false }.list(root)?.unwrap_or_default())
}

// ------------------------------------------------------------------ request → Values

/// One `api.Message` as Ollama decodes it from a request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    /// Lower-cased, as `Message.UnmarshalJSON` does.
    pub role: String,
    pub content: String,
    pub thinking: String,
    /// Base64 image data.
    pub images: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_name: String,
    pub tool_call_id: String,
}

/// One `api.ToolCall`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub index: i64,
    pub name: String,
    /// `None`: no `arguments` (Ollama's nil ordered map).
    pub arguments: Option<serde_json::Map<String, J>>,
}

/// template.go `Values`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Values {
    pub messages: Vec<Message>,
    /// `tools` as sent (`None`: absent).
    pub tools: Option<Vec<J>>,
    pub prompt: String,
    pub suffix: String,
    pub think: bool,
    pub think_level: String,
    pub is_think_set: bool,
}

fn str_field(v: &J, k: &str, at: &str) -> Result<String, GoTemplateError> {
    match v.get(k) {
        None | Some(J::Null) => Ok(String::new()),
        Some(J::String(s)) => Ok(s.clone()),
        Some(o) => Err(GoTemplateError::request(format!(
            "json: cannot unmarshal {} into Go struct field {at}.{k} of type string",
            json_kind(o)
        ))),
    }
}

fn json_kind(v: &J) -> &'static str {
    match v {
        J::Null => "null",
        J::Bool(_) => "bool",
        J::Number(_) => "number",
        J::String(_) => "string",
        J::Array(_) => "array",
        J::Object(_) => "object",
    }
}

/// `api.Message` from a request message (`role`, `content`, `thinking`, `images`,
/// `tool_calls[].function.{index,name,arguments}`, `tool_name`, `tool_call_id`). Errors
/// (Ollama answers 400): a non-string field, `arguments` that are not a JSON object.
pub fn message_from_json(m: &J) -> Result<Message, GoTemplateError> {
    let mut out = Message {
        role: str_field(m, "role", "ChatRequest.messages")?.to_lowercase(),
        content: str_field(m, "content", "ChatRequest.messages")?,
        thinking: str_field(m, "thinking", "ChatRequest.messages")?,
        tool_name: str_field(m, "tool_name", "ChatRequest.messages")?,
        tool_call_id: str_field(m, "tool_call_id", "ChatRequest.messages")?,
        ..Default::default()
    };
    if let Some(imgs) = m.get("images").and_then(J::as_array) {
        out.images = imgs
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_owned())
            .collect();
    }
    if let Some(calls) = m.get("tool_calls").and_then(J::as_array) {
        for c in calls {
            let f = c.get("function").cloned().unwrap_or(J::Null);
            let arguments = match f.get("arguments") {
                None => None,
                Some(J::Null) => Some(serde_json::Map::new()),
                Some(J::Object(o)) => Some(o.clone()),
                Some(o) => {
                    return Err(GoTemplateError::request(format!(
                        "json: cannot unmarshal {} into Go value of type orderedmap (tool call arguments must be a JSON object on Ollama's native API)",
                        json_kind(o)
                    )));
                }
            };
            out.tool_calls.push(ToolCall {
                id: str_field(c, "id", "ToolCall")?,
                index: f.get("index").and_then(J::as_i64).unwrap_or(0),
                name: str_field(&f, "name", "ToolCallFunction")?,
                arguments,
            });
        }
    }
    Ok(out)
}

/// `ThinkValue` of a request's `think` → (`Think`, `ThinkLevel`, `IsThinkSet`), with the
/// handlers' default: a thinking-capable model with no `think` thinks (`true`).
fn think_values(req: &J, model: &OllamaModel) -> Result<(bool, String, bool), GoTemplateError> {
    let think = match req.get("think") {
        None | Some(J::Null) => {
            if model.thinking {
                Some(J::Bool(true))
            } else {
                None
            }
        }
        Some(J::Bool(b)) => Some(J::Bool(*b)),
        Some(J::String(s)) if ["high", "medium", "low", "max"].contains(&s.as_str()) => {
            Some(J::String(s.clone()))
        }
        Some(o) => {
            return Err(GoTemplateError::request(format!(
                "invalid think value: {o} (must be \"high\", \"medium\", \"low\", \"max\", true, or false)"
            )));
        }
    };
    Ok(match think {
        None => (false, String::new(), false),
        Some(J::Bool(b)) => (b, if b { "medium".into() } else { String::new() }, true),
        Some(J::String(s)) => (true, s, true),
        Some(_) => (false, String::new(), true),
    })
}

/// The `Values` Ollama's handlers pass to `Execute` for a request body: `/api/chat`
/// (`messages`, `tools`, `think`) — the model's `SYSTEM` prepended unless the first message
/// is a system message, its `MESSAGE`s before the request's, `[img-N]` tags for images
/// (server/prompt.go `imageTaggedMessages`) — or `/api/generate` (`prompt`, `system`,
/// `suffix`, `images`, `think`). Errors: what Ollama answers with 400 (see
/// [`message_from_json`]), a `raw: true` generate (no template is applied).
pub fn values_from_request(req: &J, model: &OllamaModel) -> Result<Values, GoTemplateError> {
    if !req.is_object() {
        return Err(GoTemplateError::request(
            "request body is not a JSON object",
        ));
    }
    let mut v = Values::default();
    if let Some(msgs) = req.get("messages") {
        let msgs = msgs.as_array().ok_or_else(|| {
            GoTemplateError::request("json: cannot unmarshal messages: not an array")
        })?;
        let mut all = Vec::new();
        let first_system = msgs
            .first()
            .and_then(|m| m.get("role"))
            .and_then(J::as_str)
            .is_some_and(|r| r.eq_ignore_ascii_case("system"));
        if !first_system && let Some(s) = &model.system {
            all.push(Message {
                role: "system".into(),
                content: s.clone(),
                ..Default::default()
            });
        }
        for m in &model.messages {
            all.push(message_from_json(m)?);
        }
        for m in msgs {
            all.push(message_from_json(m)?);
        }
        tag_images(&mut all);
        v.messages = all;
        v.tools = req.get("tools").and_then(J::as_array).cloned();
        (v.think, v.think_level, v.is_think_set) = think_values(req, model)?;
        return Ok(v);
    }
    if req.get("prompt").is_some() {
        if req.get("raw").and_then(J::as_bool) == Some(true) {
            return Err(GoTemplateError::request(
                "a raw: true generate is sent as it is: no template is applied",
            ));
        }
        let prompt = str_field(req, "prompt", "GenerateRequest")?;
        let suffix = str_field(req, "suffix", "GenerateRequest")?;
        if !suffix.is_empty() {
            v.prompt = prompt;
            v.suffix = suffix;
        } else {
            let system = str_field(req, "system", "GenerateRequest")?;
            if !system.is_empty() {
                v.messages.push(Message {
                    role: "system".into(),
                    content: system,
                    ..Default::default()
                });
            } else if let Some(s) = &model.system {
                v.messages.push(Message {
                    role: "system".into(),
                    content: s.clone(),
                    ..Default::default()
                });
            }
            if req.get("context").is_none() {
                for m in &model.messages {
                    v.messages.push(message_from_json(m)?);
                }
            }
            let mut user = Message {
                role: "user".into(),
                content: prompt,
                ..Default::default()
            };
            if let Some(imgs) = req.get("images").and_then(J::as_array) {
                user.images = imgs
                    .iter()
                    .map(|i| i.as_str().unwrap_or_default().to_owned())
                    .collect();
            }
            v.messages.push(user);
            // GenerateHandler: without a request `template`, the chat-like flow (chatPrompt)
            if req
                .get("template")
                .and_then(J::as_str)
                .unwrap_or_default()
                .is_empty()
            {
                tag_images(&mut v.messages);
            }
        }
        (v.think, v.think_level, v.is_think_set) = think_values(req, model)?;
        return Ok(v);
    }
    Err(GoTemplateError::request(
        "neither \"messages\" (/api/chat) nor \"prompt\" (/api/generate) in the request",
    ))
}

/// server/prompt.go `imageTaggedMessages` (models without a built-in renderer): each image
/// becomes `[img-N]` (numbered across the conversation), replacing the first `[img]` of the
/// content or else prefixed to it.
fn tag_images(msgs: &mut [Message]) {
    let mut n = 0;
    for m in msgs {
        let mut prefix = String::new();
        for _ in &m.images {
            let tag = format!("[img-{n}]");
            n += 1;
            if m.content.contains("[img]") {
                m.content = m.content.replacen("[img]", &tag, 1);
            } else {
                prefix.push_str(&tag);
            }
        }
        if !prefix.is_empty() {
            m.content = format!("{prefix}{}", m.content);
        }
    }
}

/// template.go `collate`: all system contents joined by a blank line; consecutive messages of
/// the same role (tool messages aside) merged with `"\n\n"`.
pub fn collate(msgs: &[Message]) -> (String, Vec<Message>) {
    let mut system = Vec::new();
    let mut out: Vec<Message> = Vec::new();
    for m in msgs {
        if m.role == "system" {
            system.push(m.content.clone());
        }
        match out.last_mut() {
            Some(last) if last.role == m.role && m.role != "tool" => {
                last.content.push_str("\n\n");
                last.content.push_str(&m.content);
            }
            _ => out.push(m.clone()),
        }
    }
    (system.join("\n\n"), out)
}

fn field(name: &'static str, value: Value) -> Field {
    Field {
        name,
        json: None,
        omitempty: false,
        value,
    }
}

fn jfield(name: &'static str, json: &'static str, omitempty: bool, value: Value) -> Field {
    Field {
        name,
        json: Some(json),
        omitempty,
        value,
    }
}

fn list(type_name: &'static str, items: Vec<Value>, nil: bool, stringer: Stringer) -> Value {
    Value::List(Rc::new(List {
        type_name,
        items,
        nil,
        stringer,
    }))
}

fn strings(type_name: &'static str, v: Option<&J>) -> Value {
    match v.and_then(J::as_array) {
        Some(a) => list(
            type_name,
            a.iter()
                .map(|s| Value::str(s.as_str().unwrap_or_default()))
                .collect(),
            false,
            Stringer::None,
        ),
        None => list(type_name, Vec::new(), true, Stringer::None),
    }
}

fn any(v: Option<&J>) -> Value {
    match v {
        None => Value::Nil,
        Some(j) => Value::from_json(j),
    }
}

/// template.go `convertMessagesForTemplate`: `[]*templateMessage`.
fn messages_value(msgs: &[Message]) -> Value {
    let items = msgs
        .iter()
        .map(|m| {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    let args = match &c.arguments {
                        None => Map {
                            type_name: "template.templateArgs",
                            entries: Vec::new(),
                            nil: true,
                            stringer: Stringer::Json,
                            ordered: false,
                        },
                        Some(o) => Map::go_map(
                            "template.templateArgs",
                            o.iter()
                                .map(|(k, v)| (k.clone(), Value::from_json(v)))
                                .collect(),
                            Stringer::Json,
                        ),
                    };
                    Value::Struct(Rc::new(Struct {
                        type_name: "template.templateToolCall",
                        stringer: Stringer::None,
                        methods: &[],
                        fields: vec![
                            field("ID", Value::str(c.id.as_str())),
                            field(
                                "Function",
                                Value::Struct(Rc::new(Struct {
                                    type_name: "template.templateToolCallFunction",
                                    stringer: Stringer::None,
                                    methods: &[],
                                    fields: vec![
                                        field("Index", Value::Int(c.index)),
                                        field("Name", Value::str(c.name.as_str())),
                                        field("Arguments", Value::Map(Rc::new(args))),
                                    ],
                                })),
                            ),
                        ],
                    }))
                })
                .collect();
            let images: Vec<Value> = m.images.iter().map(|i| Value::str(i.as_str())).collect();
            let no_images = images.is_empty();
            let no_calls = calls.is_empty();
            Value::Struct(Rc::new(Struct {
                type_name: "*template.templateMessage",
                stringer: Stringer::None,
                methods: &[],
                fields: vec![
                    field("Role", Value::str(m.role.as_str())),
                    field("Content", Value::str(m.content.as_str())),
                    field("Thinking", Value::str(m.thinking.as_str())),
                    field(
                        "Images",
                        list("[]api.ImageData", images, no_images, Stringer::None),
                    ),
                    field(
                        "ToolCalls",
                        list(
                            "[]template.templateToolCall",
                            calls,
                            no_calls,
                            Stringer::None,
                        ),
                    ),
                    field("ToolName", Value::str(m.tool_name.as_str())),
                    field("ToolCallID", Value::str(m.tool_call_id.as_str())),
                ],
            }))
        })
        .collect();
    list("[]*template.templateMessage", items, false, Stringer::None)
}

/// api/types.go `ToolProperty` as decoded from JSON (unknown keys dropped).
fn tool_property(v: &J) -> Value {
    let ty = match v.get("type") {
        Some(J::String(s)) => list(
            "api.PropertyType",
            vec![Value::str(s.as_str())],
            false,
            Stringer::PropertyType,
        ),
        Some(J::Array(a)) => list(
            "api.PropertyType",
            a.iter()
                .map(|s| Value::str(s.as_str().unwrap_or_default()))
                .collect(),
            false,
            Stringer::PropertyType,
        ),
        _ => list("api.PropertyType", Vec::new(), true, Stringer::PropertyType),
    };
    let any_of = match v.get("anyOf").and_then(J::as_array) {
        Some(a) => list(
            "[]api.ToolProperty",
            a.iter().map(tool_property).collect(),
            false,
            Stringer::None,
        ),
        None => list("[]api.ToolProperty", Vec::new(), true, Stringer::None),
    };
    let enum_ = match v.get("enum").and_then(J::as_array) {
        Some(a) => list(
            "[]interface {}",
            a.iter().map(Value::from_json).collect(),
            false,
            Stringer::None,
        ),
        None => list("[]interface {}", Vec::new(), true, Stringer::None),
    };
    Value::Struct(Rc::new(Struct {
        type_name: "api.ToolProperty",
        stringer: Stringer::None,
        methods: &[("ToTypeScriptType", |s| {
            Value::str(crate::gotmpl::exec::ts_type_of(s))
        })],
        fields: vec![
            jfield("AnyOf", "anyOf", true, any_of),
            jfield("Type", "type", true, ty),
            jfield("Items", "items", true, any(v.get("items"))),
            jfield(
                "Description",
                "description",
                true,
                Value::str(v.get("description").and_then(J::as_str).unwrap_or_default()),
            ),
            jfield("Enum", "enum", true, enum_),
            jfield(
                "Properties",
                "properties",
                true,
                ordered_props(v.get("properties")),
            ),
            jfield(
                "Required",
                "required",
                true,
                strings("[]string", v.get("required")),
            ),
        ],
    }))
}

/// A nested `*ToolPropertiesMap` (insertion order; a struct to templates).
fn ordered_props(v: Option<&J>) -> Value {
    let (entries, nil) = match v.and_then(J::as_object) {
        Some(o) => (
            o.iter()
                .map(|(k, v)| (k.clone(), tool_property(v)))
                .collect(),
            false,
        ),
        None => (Vec::new(), true),
    };
    Value::Map(Rc::new(Map {
        type_name: "*api.ToolPropertiesMap",
        entries,
        nil,
        stringer: Stringer::None,
        ordered: true,
    }))
}

/// template.go `convertToolsForTemplate`: `templateTools` (prints as JSON).
fn tools_value(tools: Option<&[J]>, function_json: bool) -> Value {
    let fs = if function_json {
        Stringer::Json
    } else {
        Stringer::None
    };
    let Some(tools) = tools else {
        return list("template.templateTools", Vec::new(), true, Stringer::Json);
    };
    let items = tools
        .iter()
        .map(|t| {
            let f = t.get("function").cloned().unwrap_or(J::Null);
            let p = f.get("parameters").cloned().unwrap_or(J::Null);
            let props = match p.get("properties").and_then(J::as_object) {
                Some(o) => Map::go_map(
                    "template.templateProperties",
                    o.iter()
                        .map(|(k, v)| (k.clone(), tool_property(v)))
                        .collect(),
                    Stringer::Json,
                ),
                None => Map {
                    type_name: "template.templateProperties",
                    entries: Vec::new(),
                    nil: true,
                    stringer: Stringer::Json,
                    ordered: false,
                },
            };
            let params = Struct {
                type_name: "template.templateToolFunctionParameters",
                stringer: fs,
                methods: &[],
                fields: vec![
                    jfield(
                        "Type",
                        "type",
                        false,
                        Value::str(p.get("type").and_then(J::as_str).unwrap_or_default()),
                    ),
                    jfield("Defs", "$defs", true, any(p.get("$defs"))),
                    jfield("Items", "items", true, any(p.get("items"))),
                    jfield(
                        "Required",
                        "required",
                        true,
                        strings("[]string", p.get("required")),
                    ),
                    jfield(
                        "Properties",
                        "properties",
                        false,
                        Value::Map(Rc::new(props)),
                    ),
                ],
            };
            let func = Struct {
                type_name: "template.templateToolFunction",
                stringer: fs,
                methods: &[],
                fields: vec![
                    jfield(
                        "Name",
                        "name",
                        false,
                        Value::str(f.get("name").and_then(J::as_str).unwrap_or_default()),
                    ),
                    jfield(
                        "Description",
                        "description",
                        false,
                        Value::str(f.get("description").and_then(J::as_str).unwrap_or_default()),
                    ),
                    jfield(
                        "Parameters",
                        "parameters",
                        false,
                        Value::Struct(Rc::new(params)),
                    ),
                ],
            };
            Value::Struct(Rc::new(Struct {
                type_name: "template.templateTool",
                stringer: Stringer::Json,
                methods: &[],
                fields: vec![
                    jfield(
                        "Type",
                        "type",
                        false,
                        Value::str(t.get("type").and_then(J::as_str).unwrap_or_default()),
                    ),
                    jfield("Items", "items", true, any(t.get("items"))),
                    jfield("Function", "function", false, Value::Struct(Rc::new(func))),
                ],
            }))
        })
        .collect();
    list("template.templateTools", items, false, Stringer::Json)
}

/// **Seam 1.** Renders an Ollama request body (`/api/chat`: `model`, `messages`, `tools`,
/// `think`; or a non-raw `/api/generate`: `prompt`, `system`, `suffix`) through an Ollama Go
/// template exactly as Ollama's server builds the prompt it tokenizes (the text a
/// `/api/generate` with `raw: true` reproduces), for a model with no `SYSTEM`, no `MESSAGE`s
/// and no thinking capability; see [`render_ollama_with`] for those.
///
/// `currentDate`/`yesterdayDate` in the template are an error here (pass a date through
/// [`render_ollama_with`]). Errors: [`GoTemplateError`] — parse (`template: :LINE: …`),
/// execution (`template: :LINE:COL: executing "" at <…>: …`), budget, or a body Ollama
/// would refuse with 400.
pub fn render_ollama(template: &str, chat_request: &J) -> Result<String, GoTemplateError> {
    render_ollama_with(
        template,
        chat_request,
        &OllamaModel::default(),
        &ExecOptions::default(),
    )
}

/// [`render_ollama`] with the model's `/api/show` facts ([`OllamaModel::from_show`]) and
/// execution options (the date for `currentDate`, the budget).
pub fn render_ollama_with(
    template: &str,
    chat_request: &J,
    model: &OllamaModel,
    opts: &ExecOptions,
) -> Result<String, GoTemplateError> {
    render_ollama_in(
        &ParsedTemplates::default(),
        template,
        chat_request,
        model,
        opts,
    )
}

/// [`render_ollama_with`], the template taken from (and kept in) `parsed`.
pub fn render_ollama_in(
    parsed: &ParsedTemplates,
    template: &str,
    chat_request: &J,
    model: &OllamaModel,
    opts: &ExecOptions,
) -> Result<String, GoTemplateError> {
    // GenerateHandler: a request `template` replaces the model's
    let t = match chat_request.get("template").and_then(J::as_str) {
        Some(t) if !t.is_empty() && chat_request.get("messages").is_none() => t,
        _ => template,
    };
    let tmpl = parsed.get(t)?;
    let values = values_from_request(chat_request, model)?;
    tmpl.execute_with(&values, opts, model.function_json)
}
