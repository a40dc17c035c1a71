//! What the engine-comparison tests compare (engines_llama, engines_dynamo, engines_real): a
//! verdict as (calls as (name, arguments as JSON), content trimmed) or an error, from
//! toolscope's prediction and from an engine's real driver, and how a driver is run (JSON on
//! stdin, JSON on stdout).

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;
use toolscope::parser::engines::Outcome;

/// One verdict. `Error` carries the message where the comparison checks it (llama.cpp's HTTP
/// 500 text); the other engines' comparisons check only that both failed
/// ([`Verdict::any_error`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Message {
        calls: Vec<(String, Value)>,
        content: String,
    },
    Error(String),
}

impl Verdict {
    /// The verdict with an error's message dropped, for engines whose error text is not
    /// predicted.
    pub fn any_error(self) -> Verdict {
        match self {
            Verdict::Error(_) => Verdict::Error(String::new()),
            m => m,
        }
    }

    /// A message verdict from a driver's `calls` array (`name`, `arguments`) and `content`;
    /// `args` turns one call's `arguments` into the JSON compared.
    pub fn from_driver(calls: &Value, content: &Value, args: impl Fn(&Value) -> Value) -> Verdict {
        Verdict::Message {
            calls: calls
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or("").to_string(),
                        args(&c["arguments"]),
                    )
                })
                .collect(),
            content: content.as_str().unwrap_or("").trim().to_string(),
        }
    }
}

/// Argument text as the JSON it holds, or that text when it is not JSON.
pub fn json_or_text(a: &Value) -> Value {
    let a = a.as_str().unwrap_or("");
    serde_json::from_str(a).unwrap_or_else(|_| Value::String(a.into()))
}

/// toolscope's verdict for one engine's outcome.
pub fn predicted(o: &Outcome) -> Verdict {
    match o {
        Outcome::Calls {
            content,
            tool_calls,
            ..
        } => Verdict::Message {
            calls: tool_calls
                .iter()
                .map(|c| (c.name.clone(), c.arguments.clone()))
                .collect(),
            content: content.trim().to_string(),
        },
        Outcome::Content { content } => Verdict::Message {
            calls: Vec::new(),
            content: content.trim().to_string(),
        },
        Outcome::Error { message, .. } => Verdict::Error(message.clone()),
    }
}

/// Runs `cmd` with `req` as JSON on its stdin; its stdout as JSON. Panics (naming `what` and
/// the driver's stderr) when it fails.
pub fn pipe_json(cmd: &mut Command, req: &Value, what: &str) -> Value {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(req.to_string().as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}
