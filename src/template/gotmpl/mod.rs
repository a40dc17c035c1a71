//! A pure Go `text/template` renderer for Ollama's chat templates (the `template` field of
//! Ollama's `POST /api/show`, the `TEMPLATE` of a Modelfile).
//!
//! * [`parse`] — Go 1.24 `text/template/parse`: lexer (trim markers, comments), pipelines,
//!   control structures, `define`/`template`/`block`.
//! * [`exec`] — Go's exec.go/funcs.go: variables, field chains, builtins, Ollama's FuncMap,
//!   `missingkey=zero`, under [`crate::template::budget::Budget`].
//! * [`value`] — what reflect shows the template: Go maps, slices, structs with JSON tags,
//!   Stringers; `fmt` printing and `encoding/json` marshalling.
//! * [`ollama`] — Ollama's template/template.go (`Parse`, `Vars`, `Execute`, `collate`, the
//!   `templateMessage`/`templateTool` conversion) and server/routes.go + server/prompt.go
//!   request handling ([`render_ollama`]).
//!
//! Pure: no clock (`currentDate` takes the exchange's date), files or network.

pub mod exec;
pub mod ollama;
pub mod parse;
pub mod value;

pub use exec::{Date, ExecOptions};
pub use ollama::{
    OllamaModel, OllamaTemplate, render_ollama, render_ollama_with, values_from_request,
};

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The template does not parse (Go's `template: NAME:LINE: …`), or Ollama's `Parse`
    /// refuses it (`undefined template specified`).
    Parse,
    /// Execution failed (Go's `template: NAME:LINE:COL: executing "NAME" at <…>: …`).
    Exec,
    /// toolscope's budget stopped it (steps, bytes, `template` depth): message starts with
    /// [`crate::template::budget::MARK`].
    Limit,
    /// The request body cannot be what Ollama would decode (Ollama answers HTTP 400).
    Request,
}

/// A Go template error, displayed as Go prints it: `template: NAME:LINE: msg` (parse),
/// `template: NAME:LINE:COL: executing "NAME" at <CTX>: msg` (exec; COL is Go's 0-based
/// byte column). Ollama names its templates `""`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct GoTemplateError {
    pub kind: ErrorKind,
    /// The template's name (Ollama: empty).
    pub name: String,
    /// 1-based line (0 for request errors).
    pub line: usize,
    /// 0-based byte column, for execution errors.
    pub col: Option<usize>,
    /// The node being evaluated (`.Messages`, `eq`), at most 20 characters and `...`.
    pub context: Option<String>,
    pub message: String,
}

impl GoTemplateError {
    pub(crate) fn parse(name: &str, line: usize, msg: impl Into<String>) -> Self {
        GoTemplateError {
            kind: ErrorKind::Parse,
            name: name.to_owned(),
            line,
            col: None,
            context: None,
            message: msg.into(),
        }
    }

    pub(crate) fn request(msg: impl Into<String>) -> Self {
        GoTemplateError {
            kind: ErrorKind::Request,
            name: String::new(),
            line: 0,
            col: None,
            context: None,
            message: msg.into(),
        }
    }
}

impl std::fmt::Display for GoTemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.kind, self.col) {
            (ErrorKind::Request, _) => write!(f, "{}", self.message),
            (_, Some(col)) => write!(
                f,
                "template: {}:{}:{}: executing {:?} at <{}>: {}",
                self.name,
                self.line,
                col,
                self.name,
                self.context.as_deref().unwrap_or(""),
                self.message
            ),
            (_, None) if self.line > 0 => {
                write!(f, "template: {}:{}: {}", self.name, self.line, self.message)
            }
            _ => write!(f, "template: {}: {}", self.name, self.message),
        }
    }
}
