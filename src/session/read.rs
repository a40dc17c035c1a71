//! Reading session files, tolerant of damage.

use std::collections::BTreeMap;
use std::path::Path;

use super::model::*;

/// A session as read from disk.
#[derive(Debug, Clone, Default)]
pub struct Session {
    /// Where it was read from (display only).
    pub path: String,
    pub header: Header,
    /// Exchanges in file order (the order they ended); sort by `id` for start order.
    pub exchanges: Vec<Exchange>,
    /// Annotations by exchange id, in file order.
    pub annotations: BTreeMap<u64, Vec<Annotation>>,
    /// Lines that could not be read; every other line is kept.
    pub warnings: Vec<ReadWarning>,
}

/// A line that was skipped while reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadWarning {
    /// 1-based line number.
    pub line: usize,
    /// 1-based byte column of the JSON error within the line, when known.
    pub column: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for ReadWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.column {
            Some(c) => write!(f, "line {} column {}: {}", self.line, c, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

/// Why a file is not a readable session at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path}: line {line}: not a toolscope session (expected a header line with \"format\": \"{}\"): {detail}",
        super::FORMAT
    )]
    NotASession {
        path: String,
        /// 1-based line the reader stopped at.
        line: usize,
        detail: String,
    },
    /// Not a regular file, too large, or unreadable ([`crate::input`]).
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    #[error(
        "{path}: line {line}: unsupported session format {found:?} (this toolscope reads {})",
        super::FORMAT
    )]
    UnsupportedFormat {
        path: String,
        /// 1-based line of the header.
        line: usize,
        found: String,
    },
}

impl Session {
    /// Exchange by id.
    pub fn exchange(&self, id: u64) -> Option<&Exchange> {
        self.exchanges.iter().find(|e| e.id == id)
    }

    /// llama-server's own render of exchange `id`, if fetched: `(prompt, tokens)`.
    pub fn server_render(&self, id: u64) -> Option<(Option<&str>, Option<&[TokenPiece]>)> {
        Annotation::latest_server_render(self.annotations.get(&id)?)
    }

    /// The chat template the server reported in `/props`, if recorded.
    pub fn server_chat_template(&self) -> Option<&str> {
        self.header.props.as_ref()?.get("chat_template")?.as_str()
    }
}

/// Reads a session file. Damaged lines become [`ReadWarning`]s; the rest is kept.
///
/// Errors: the file cannot be read, or its first non-empty line is not a header of
/// format `toolscope-session/1`.
pub fn read_session(path: &Path) -> Result<Session, ReadError> {
    let bytes = crate::input::read_file(path)?;
    read_session_bytes(&path.display().to_string(), &bytes)
}

/// Reads a session from bytes; `path` is used in messages only.
pub fn read_session_bytes(path: &str, bytes: &[u8]) -> Result<Session, ReadError> {
    let mut session = Session {
        path: path.to_owned(),
        ..Default::default()
    };
    let mut judge = LineJudge::new(path);
    let mut annotation_lines: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        match judge.judge(i + 1, raw)? {
            Judged::Skip => {}
            Judged::Line(line) => match *line {
                Line::Header(h) => session.header = h,
                Line::Exchange(e) => session.exchanges.push(*e),
                Line::Annotation(a) => {
                    annotation_lines.entry(a.exchange()).or_insert(i + 1);
                    session.annotations.entry(a.exchange()).or_default().push(a)
                }
            },
            Judged::Warning(w) => session.warnings.push(w),
        }
    }
    judge.finish()?;
    let ids: std::collections::HashSet<u64> = session.exchanges.iter().map(|e| e.id).collect();
    session
        .warnings
        .extend(orphan_annotations(&annotation_lines, &ids));
    session.warnings.sort_by_key(|w| w.line);
    apply_learnt_engine(&mut session.header, &session.annotations);
    Ok(session)
}

/// What one line of a session file is, as every session reader judges it
/// ([`read_session_bytes`], the session index `session::index::SessionSource`).
#[derive(Debug)]
pub enum Judged {
    /// A blank line.
    Skip,
    /// A decoded line: the header (the first one) or an exchange or annotation after it.
    Line(Box<Line>),
    /// A damaged line (or a second header), reported and skipped.
    Warning(ReadWarning),
}

/// The one session-line reader's rules, line by line: a UTF-8 byte order mark before the
/// first line and a `\r` before the newline are not part of the JSON; blank lines are skipped;
/// the first non-blank line must be a header of format [`super::FORMAT`]; a second header and
/// an undecodable line after the header are warnings (`truncated line (the writer stopped
/// mid-line); skipped`, `unreadable line skipped: …`), the rest is kept.
#[derive(Debug)]
pub struct LineJudge {
    path: String,
    have_header: bool,
}

impl LineJudge {
    /// A reader of the file `path` (named in errors).
    pub fn new(path: &str) -> LineJudge {
        LineJudge {
            path: path.to_owned(),
            have_header: false,
        }
    }

    /// True once the header has been read.
    pub fn have_header(&self) -> bool {
        self.have_header
    }

    /// `raw` without its line's `\r` (and, on line 1, a byte order mark), or `None` when it is
    /// blank.
    pub fn content(line_no: usize, raw: &[u8]) -> Option<&[u8]> {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let raw = match line_no {
            1 => raw.strip_prefix(b"\xef\xbb\xbf").unwrap_or(raw),
            _ => raw,
        };
        (!raw.iter().all(|b| b.is_ascii_whitespace())).then_some(raw)
    }

    /// Judges line `line_no` (1-based; `raw` without its newline).
    ///
    /// Errors: before the header, a line that is not a header of format [`super::FORMAT`].
    pub fn judge(&mut self, line_no: usize, raw: &[u8]) -> Result<Judged, ReadError> {
        let Some(raw) = Self::content(line_no, raw) else {
            return Ok(Judged::Skip);
        };
        let path = || self.path.clone();
        match serde_json::from_slice::<Line>(raw) {
            Ok(Line::Header(h)) if !self.have_header => {
                if !h.format.starts_with("toolscope-session/") {
                    return Err(ReadError::NotASession {
                        path: path(),
                        line: line_no,
                        detail: format!("format is {:?}", h.format),
                    });
                }
                if h.format != super::FORMAT {
                    return Err(ReadError::UnsupportedFormat {
                        path: path(),
                        line: line_no,
                        found: h.format,
                    });
                }
                self.have_header = true;
                Ok(Judged::Line(Box::new(Line::Header(h))))
            }
            Ok(Line::Header(_)) => Ok(Judged::Warning(ReadWarning {
                line: line_no,
                column: None,
                message: "second header line ignored".into(),
            })),
            Ok(_) if !self.have_header => Err(ReadError::NotASession {
                path: path(),
                line: line_no,
                detail: "a line comes before any header".into(),
            }),
            Ok(line) => Ok(Judged::Line(Box::new(line))),
            Err(e) if !self.have_header => Err(ReadError::NotASession {
                path: path(),
                line: line_no,
                detail: format!("column {}: {}", e.column(), crate::json_reason(&e)),
            }),
            Err(e) => Ok(Judged::Warning(undecodable_line(line_no, &e))),
        }
    }

    /// Ends the file. Errors: no header at all (the file is empty or blank).
    pub fn finish(&self) -> Result<(), ReadError> {
        if self.have_header {
            return Ok(());
        }
        Err(ReadError::NotASession {
            path: self.path.clone(),
            line: 1,
            detail: "the file is empty".into(),
        })
    }
}

/// One warning per exchange id that annotations name but no exchange line has (a recorder
/// stopped before writing the exchange, a hand edit), at the first such annotation's line:
/// `annotation_lines` maps an annotated exchange id to that line. The annotations are kept but
/// nothing shows them. Both session readers (this one, the inspector's index) call it.
pub fn orphan_annotations(
    annotation_lines: &BTreeMap<u64, usize>,
    exchange_ids: &std::collections::HashSet<u64>,
) -> Vec<ReadWarning> {
    annotation_lines
        .iter()
        .filter(|(id, _)| !exchange_ids.contains(id))
        .map(|(id, line)| ReadWarning {
            line: *line,
            column: None,
            message: format!(
                "annotation for exchange {id}, which this session does not have; ignored"
            ),
        })
        .collect()
}

/// An engine learnt after the header was written ([`Annotation::Engine`], the first one) stands
/// in for the header's `engine` and `props` when the header has none or says `unknown`, so that
/// every reader sees what the recorder learnt. Every session reader calls this once the file
/// is read (`read_session_bytes`, the inspector's indexed `SessionSource`).
pub fn apply_learnt_engine(header: &mut Header, annotations: &BTreeMap<u64, Vec<Annotation>>) {
    let unknown = header.engine.as_ref().is_none_or(|e| e.kind.is_unknown());
    if !unknown {
        return;
    }
    let learnt = annotations.values().flatten().find_map(|a| match a {
        Annotation::Engine { engine, props, .. } => Some((engine.clone(), props.clone())),
        _ => None,
    });
    if let Some((engine, props)) = learnt {
        header.engine = Some(engine);
        if header.props.is_none() {
            header.props = props;
        }
    }
}

/// The warning for session line `line` that serde_json could not decode (`e`): a cut-off line
/// (the writer stopped mid-line; also when a reopened file went on after it) or an unreadable
/// one, at the column where reading stopped. Every reader of session lines words it so:
/// [`LineJudge`] and the inspector's index, when it decodes a line it had only glanced at.
pub fn undecodable_line(line: usize, e: &serde_json::Error) -> ReadWarning {
    ReadWarning {
        line,
        column: Some(e.column()),
        message: if e.is_eof() {
            "truncated line (the writer stopped mid-line); skipped".to_owned()
        } else {
            format!("unreadable line skipped: {}", crate::json_reason(e))
        },
    }
}

/// A quick look at one raw line without parsing it whole: `Some(id)` when it is an exchange
/// line whose `id` is among its leading scalar members (`{"type":"exchange","id":N,…` as the
/// session writer writes it, or with whitespace after colons and commas as other JSON writers
/// and editors leave it), `Some(None)` when it is an exchange line with the id further on, and
/// `None` when it is not recognisably an exchange line. Works on a line cut by a crash
/// (everything after the id may be missing).
pub fn peek_exchange(raw: &[u8]) -> Option<Option<u64>> {
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < raw.len() && matches!(raw[*i], b' ' | b'\t' | b'\r' | b'\n') {
            *i += 1;
        }
    };
    let string = |i: &mut usize| -> Option<&[u8]> {
        if raw.get(*i) != Some(&b'"') {
            return None;
        }
        let start = *i + 1;
        let mut j = start;
        while j < raw.len() && raw[j] != b'"' {
            if raw[j] == b'\\' {
                j += 1;
            }
            j += 1;
        }
        if j >= raw.len() {
            return None;
        }
        *i = j + 1;
        Some(&raw[start..j])
    };
    ws(&mut i);
    if raw.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let (mut kind, mut id) = (None, None);
    // the leading members with scalar values: enough for `type` and `id`
    for _ in 0..4 {
        ws(&mut i);
        let Some(key) = string(&mut i) else { break };
        ws(&mut i);
        if raw.get(i) != Some(&b':') {
            break;
        }
        i += 1;
        ws(&mut i);
        match raw.get(i) {
            Some(b'"') => {
                let Some(v) = string(&mut i) else { break };
                if key == b"type" {
                    kind = Some(v);
                }
            }
            Some(c) if c.is_ascii_digit() => {
                let start = i;
                while i < raw.len() && raw[i].is_ascii_digit() {
                    i += 1;
                }
                if key == b"id" {
                    id = std::str::from_utf8(&raw[start..i])
                        .ok()
                        .and_then(|s| s.parse().ok());
                }
            }
            _ => break,
        }
        if kind.is_some() && id.is_some() {
            break;
        }
        ws(&mut i);
        if raw.get(i) != Some(&b',') {
            break;
        }
        i += 1;
    }
    (kind == Some(b"exchange".as_slice())).then_some(id)
}

#[cfg(test)]
mod peek_tests {
    use super::peek_exchange;

    #[test]
    fn peek_reads_the_id_with_or_without_spaces_and_on_a_cut_line() {
        assert_eq!(
            peek_exchange(br#"{"type":"exchange","id":12,"started":"x"}"#),
            Some(Some(12))
        );
        assert_eq!(
            peek_exchange(b"{ \"type\" : \"exchange\",  \"id\" : 7 , \"request\": {"),
            Some(Some(7))
        );
        assert_eq!(
            peek_exchange(br#"{"type":"exchange","id":4"#),
            Some(Some(4))
        );
        assert_eq!(
            peek_exchange(br#"{"type":"exchange","request":{},"id":3}"#),
            Some(None)
        );
        assert_eq!(
            peek_exchange(br#"{"type":"annotation","exchange":2}"#),
            None
        );
        assert_eq!(peek_exchange(b"garbage"), None);
    }
}
