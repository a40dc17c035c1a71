//! A session index: a lazily indexed session file, or a session held in memory (HAR imports,
//! the live proxy). The inspector, `check` and `export` read sessions through it.
//!
//! Opening a session does not decode its exchanges. [`SessionSource::index_file`] reads the file
//! once, line by line, and keeps for each exchange line only its byte range (plus its `id`,
//! peeked from the line's first bytes). An exchange is decoded with
//! [`SessionSource::load`] when it is shown, so a 200 MB session opens in the time it takes to
//! scan it for newlines, and memory stays near the size of one exchange.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::session::read::Session;
use crate::session::{Annotation, Exchange, Header, Line, ReadWarning};

/// One exchange line of a session file: its place in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRef {
    /// 1-based line number in the file.
    pub line: usize,
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// Length of the line in bytes, without the newline.
    pub len: u64,
    /// Exchange id peeked from the line's first bytes (`None` when the line does not start in
    /// the writer's field order; it is then read when decoded).
    pub id: Option<u64>,
}

/// A session the inspector can show: header, exchange references, annotations, read warnings.
#[derive(Debug, Clone)]
pub struct SessionSource {
    /// Display name (the path as given).
    pub name: String,
    /// The header, with an engine learnt after it applied
    /// ([`crate::session::read::apply_learnt_engine`]).
    pub header: Header,
    /// The header line as written (`export` copies it verbatim).
    pub header_as_written: Header,
    /// Exchanges in start order (by id, then file order).
    pub rows: Vec<RowRef>,
    /// Annotations held in memory, by exchange id, in file order: an in-memory session's (HAR
    /// import, live proxy); empty for a file-backed session, whose annotations stay in the
    /// file. Read an exchange's annotations with [`SessionSource::annotations_of`].
    pub annotations: BTreeMap<u64, Vec<Annotation>>,
    /// File-backed sessions: every annotation line's place in the file, by exchange id, in
    /// file order — read back and decoded per exchange, never held (a recorded session's
    /// `server_render` annotations are several times the size of its exchanges).
    annotation_rows: BTreeMap<u64, Vec<RowRef>>,
    /// Damaged lines found while indexing or decoding.
    pub warnings: Vec<ReadWarning>,
    /// File size in bytes (0 for in-memory sessions).
    pub size: u64,
    backing: Backing,
}

#[derive(Debug, Clone)]
enum Backing {
    /// Lines are read back from this file on demand.
    File(Arc<std::fs::File>),
    /// Exchanges held in memory; `RowRef::offset` is the index into the vector.
    Memory(Arc<Vec<Exchange>>),
}

/// Progress of an index scan: bytes read so far out of the file size.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

impl SessionSource {
    /// Indexes a session file (`.jsonl`) or imports a HAR file (`.har`, held in memory).
    ///
    /// `progress(bytes_read, total)` is called every few megabytes.
    ///
    /// Errors (message names the file and line): unreadable file, a first line that is not a
    /// `toolscope-session/1` header, an unparsable HAR.
    pub fn open(path: &Path, progress: Progress<'_>) -> anyhow::Result<SessionSource> {
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("har"))
        {
            return Self::open_har(path);
        }
        Self::index_file(path, progress)
    }

    fn open_har(path: &Path) -> anyhow::Result<SessionSource> {
        let bytes = crate::input::read_file(path)?;
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
            anyhow::anyhow!(
                "{}: line {} column {}: not JSON: {e}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        let session = crate::session::har::har_to_session(&path.display().to_string(), &value)?;
        Ok(Self::from_session(session))
    }

    /// Wraps a session already in memory (HAR import, tests, the live proxy).
    pub fn from_session(session: Session) -> SessionSource {
        let mut exchanges = session.exchanges;
        exchanges.sort_by_key(|e| e.id);
        let rows = (0..exchanges.len())
            .map(|i| RowRef {
                line: 0,
                offset: i as u64,
                len: 0,
                id: Some(exchanges[i].id),
            })
            .collect();
        SessionSource {
            name: session.path,
            header_as_written: session.header.clone(),
            header: session.header,
            rows,
            annotations: session.annotations,
            annotation_rows: BTreeMap::new(),
            warnings: session.warnings,
            size: 0,
            backing: Backing::Memory(Arc::new(exchanges)),
        }
    }

    /// Indexes a session file without decoding its exchanges (see the module docs).
    ///
    /// Errors: I/O, or a first non-empty line that is not a header of format
    /// [`crate::session::FORMAT`] (same rules as [`crate::session::read_session`]).
    pub fn index_file(path: &Path, progress: Progress<'_>) -> anyhow::Result<SessionSource> {
        let name = path.display().to_string();
        let file = crate::input::open_regular(path)?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut reader = BufReader::with_capacity(
            1 << 20,
            file.try_clone()
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?,
        );
        let mut src = SessionSource {
            name: name.clone(),
            header: Header::default(),
            header_as_written: Header::default(),
            rows: Vec::new(),
            annotations: BTreeMap::new(),
            annotation_rows: BTreeMap::new(),
            warnings: Vec::new(),
            size,
            backing: Backing::File(Arc::new(file)),
        };
        let mut judge = crate::session::read::LineJudge::new(&name);
        // `engine` annotations: the header may need them (read::apply_learnt_engine)
        let mut learnt: BTreeMap<u64, Vec<Annotation>> = BTreeMap::new();
        let mut buf = Vec::new();
        let mut offset = 0u64;
        let mut line_no = 0usize;
        let mut next_report = 0u64;
        loop {
            buf.clear();
            let n = reader
                .read_until(b'\n', &mut buf)
                .map_err(|e| anyhow::anyhow!("{name}: line {}: {e}", line_no + 1))?;
            if n == 0 {
                break;
            }
            line_no += 1;
            let start = offset;
            offset += n as u64;
            if offset >= next_report {
                progress(offset, size);
                next_report = offset + (8 << 20);
            }
            let complete = buf.ends_with(b"\n");
            let line: &[u8] = buf.strip_suffix(b"\n").unwrap_or(&buf);
            let Some(raw) = crate::session::read::LineJudge::content(line_no, line) else {
                continue;
            };
            let row = |id| RowRef {
                line: line_no,
                offset: start,
                len: raw.len() as u64,
                id,
            };
            // the fast paths: an exchange or annotation line is placed by a glance at it, and
            // decoded when its exchange is shown or analysed
            if judge.have_header() && complete {
                if let Some(id) = peek_annotation(raw) {
                    src.annotation_rows
                        .entry(id)
                        .or_default()
                        .push(row(Some(id)));
                    continue;
                }
                if let Some(id) = peek_exchange(raw) {
                    src.rows.push(row(id));
                    continue;
                }
            }
            match judge.judge(line_no, line)? {
                crate::session::read::Judged::Skip => {}
                crate::session::read::Judged::Line(l) => match *l {
                    Line::Header(h) => src.header = h,
                    Line::Exchange(e) => src.rows.push(row(Some(e.id))),
                    Line::Annotation(a) => {
                        let id = a.exchange();
                        src.annotation_rows
                            .entry(id)
                            .or_default()
                            .push(row(Some(id)));
                        if matches!(a, Annotation::Engine { .. }) {
                            learnt.entry(id).or_default().push(a);
                        }
                    }
                },
                crate::session::read::Judged::Warning(w) => src.warnings.push(w),
            }
        }
        progress(offset, size);
        judge.finish()?;
        let ids: std::collections::HashSet<u64> = src.rows.iter().filter_map(|r| r.id).collect();
        let first_lines: BTreeMap<u64, usize> = src
            .annotation_rows
            .iter()
            .filter_map(|(id, rows)| Some((*id, rows.iter().map(|r| r.line).min()?)))
            .collect();
        src.warnings
            .extend(crate::session::read::orphan_annotations(&first_lines, &ids));
        src.warnings.sort_by_key(|w| w.line);
        src.rows.sort_by_key(|r| (r.id.unwrap_or(u64::MAX), r.line));
        // an engine the recorder learnt after the header (issue #12)
        src.header_as_written = src.header.clone();
        crate::session::read::apply_learnt_engine(&mut src.header, &learnt);
        Ok(src)
    }

    /// Number of exchanges.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when the session has no exchanges.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Decodes exchange number `row` (0-based, start order).
    ///
    /// Errors: `"line N column C: …"` when the line is damaged or the file changed.
    pub fn load(&self, row: usize) -> Result<Exchange, String> {
        match &self.backing {
            Backing::Memory(v) => v
                .get(self.rows.get(row).map_or(usize::MAX, |r| r.offset as usize))
                .cloned()
                .ok_or_else(|| format!("no exchange #{row}")),
            Backing::File(f) => {
                let (r, bytes) = self.read_line(f, row)?;
                match serde_json::from_slice::<Line>(&bytes) {
                    Ok(Line::Exchange(e)) => Ok(*e),
                    Ok(_) => Err(format!("line {}: not an exchange line", r.line)),
                    Err(e) => Err(unreadable(r.line, &e)),
                }
            }
        }
    }

    /// Exchange `row` as the list needs it, read without decoding its stream: method, path,
    /// request body (the model), status, duration, stream/partial marks, and for a damaged line
    /// its error (`"line N column C: …"`). [`crate::analysis::index::row_summary`] makes the
    /// list row of it.
    ///
    /// For a file-backed session this reads the line and deserializes a light view of it in
    /// which the response chunks and headers are skipped (`serde::de::IgnoredAny`), so it costs
    /// a scan of the line, not a decode of every chunk; a streamed response keeps an empty chunk
    /// list (so it still reads as a stream) and no headers.
    pub fn light_load(&self, row: usize) -> Result<Exchange, String> {
        match &self.backing {
            Backing::Memory(_) => self.load(row),
            Backing::File(f) => self.read_line(f, row).and_then(|(r, bytes)| {
                serde_json::from_slice::<LightExchange>(&bytes)
                    .map(LightExchange::into_exchange)
                    .map_err(|e| unreadable(r.line, &e))
            }),
        }
    }

    fn read_line(&self, f: &std::fs::File, row: usize) -> Result<(RowRef, Vec<u8>), String> {
        let r = *self
            .rows
            .get(row)
            .ok_or_else(|| format!("no exchange #{row}"))?;
        let mut bytes = vec![0u8; r.len as usize];
        read_exact_at(f, &mut bytes, r.offset).map_err(|e| format!("line {}: {e}", r.line))?;
        Ok((r, bytes))
    }

    /// Appends an exchange to an in-memory session (the live proxy view). Returns its row.
    /// File-backed sessions are converted to memory-backed ones first (rare: live sessions
    /// start in memory).
    pub fn push_live(&mut self, exchange: Exchange) -> usize {
        if let Backing::File(_) = self.backing {
            let all: Vec<Exchange> = (0..self.rows.len())
                .filter_map(|i| self.load(i).ok())
                .collect();
            let ids: Vec<u64> = self.annotation_rows.keys().copied().collect();
            for id in ids {
                let anns = self.annotations_of(id).into_owned();
                self.annotations.insert(id, anns);
            }
            self.annotation_rows.clear();
            self.rows = (0..all.len())
                .map(|i| RowRef {
                    line: 0,
                    offset: i as u64,
                    len: 0,
                    id: Some(all[i].id),
                })
                .collect();
            self.backing = Backing::Memory(Arc::new(all));
        }
        let Backing::Memory(v) = &mut self.backing else {
            unreachable!()
        };
        let v = Arc::make_mut(v);
        if let Some(pos) = v.iter().position(|e| e.id == exchange.id) {
            v[pos] = exchange;
            return self
                .rows
                .iter()
                .position(|r| r.offset == pos as u64)
                .unwrap_or(0);
        }
        v.push(exchange);
        let i = v.len() - 1;
        self.rows.push(RowRef {
            line: 0,
            offset: i as u64,
            len: 0,
            id: Some(v[i].id),
        });
        self.rows.len() - 1
    }

    /// The row of exchange `id`, if the session has it.
    pub fn row_of(&self, id: u64) -> Option<usize> {
        self.rows.iter().position(|r| r.id == Some(id))
    }

    /// Exchange `row` of an in-memory session, to change in place (the live proxy view);
    /// `None` for a file-backed session or a row out of range.
    pub fn live_exchange_mut(&mut self, row: usize) -> Option<&mut Exchange> {
        let idx = self.rows.get(row)?.offset as usize;
        match &mut self.backing {
            Backing::Memory(v) => Arc::make_mut(v).get_mut(idx),
            Backing::File(_) => None,
        }
    }

    /// Exchange `id`'s annotations, in file order: borrowed for an in-memory session, read
    /// back from the file (by the offsets the index kept) for a file-backed one. A line that
    /// does not decode is left out ([`SessionSource::read_annotations`] names it).
    pub fn annotations_of(&self, id: u64) -> std::borrow::Cow<'_, [Annotation]> {
        self.read_annotations(id).0
    }

    /// [`SessionSource::annotations_of`], with a warning for each annotation line that does
    /// not decode (`line N column C: unreadable line skipped: …`, as the index reports a
    /// damaged line; the index only glanced at the line's `type`, `kind` and `exchange`).
    pub fn read_annotations(
        &self,
        id: u64,
    ) -> (std::borrow::Cow<'_, [Annotation]>, Vec<ReadWarning>) {
        use std::borrow::Cow;
        let (Backing::File(f), Some(refs)) = (&self.backing, self.annotation_rows.get(&id)) else {
            let held = self.annotations.get(&id).map_or(&[][..], Vec::as_slice);
            return (Cow::Borrowed(held), Vec::new());
        };
        let mut out = Vec::with_capacity(refs.len());
        let mut warnings = Vec::new();
        for r in refs {
            match read_annotation(f, r) {
                Ok(a) => out.push(a),
                Err(w) => warnings.push(w),
            }
        }
        (Cow::Owned(out), warnings)
    }

    /// Every annotation of the session in file order (for an in-memory session: by exchange
    /// id, then order), read back one at a time; a line that does not decode gives its warning
    /// (as [`SessionSource::read_annotations`]).
    pub fn all_annotations(
        &self,
    ) -> Box<dyn Iterator<Item = Result<Annotation, ReadWarning>> + '_> {
        let Backing::File(f) = &self.backing else {
            return Box::new(self.annotations.values().flatten().cloned().map(Ok));
        };
        let mut refs: Vec<RowRef> = self.annotation_rows.values().flatten().copied().collect();
        refs.sort_by_key(|r| r.line);
        Box::new(refs.into_iter().map(move |r| read_annotation(f, &r)))
    }

    /// Rows (0-based, as [`SessionSource::load`] takes them) in file order (`rows` is in
    /// start order).
    pub fn rows_in_file_order(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.rows.len()).collect();
        v.sort_by_key(|&i| (self.rows[i].line, self.rows[i].offset));
        v
    }
}

/// Reads back and decodes the annotation line at `r` (placed by the index).
fn read_annotation(f: &std::fs::File, r: &RowRef) -> Result<Annotation, ReadWarning> {
    let mut bytes = vec![0u8; r.len as usize];
    let warn = |column, message| ReadWarning {
        line: r.line,
        column,
        message,
    };
    read_exact_at(f, &mut bytes, r.offset)
        .map_err(|e| warn(None, format!("unreadable line skipped: {e}")))?;
    match serde_json::from_slice::<Line>(&bytes) {
        Ok(Line::Annotation(a)) => Ok(a),
        Ok(_) => Err(warn(
            None,
            "not an annotation line (the file changed); skipped".into(),
        )),
        Err(e) => Err(crate::session::read::undecodable_line(r.line, &e)),
    }
}

/// A quick look at an annotation line: `Some(exchange)` when it is a `server_render` or
/// `raw_text` annotation (`{"type":"annotation","kind":…,"exchange":N,…}`, members in any
/// order). Reads the line without building its values (the render's prompt and tokens are
/// skipped, [`serde::de::IgnoredAny`]); the line is decoded whole when its exchange is
/// analysed ([`SessionSource::read_annotations`]). `None` for any other line, which the index
/// then decodes whole (an `engine` annotation is needed up front; a damaged line is reported).
fn peek_annotation(raw: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Peek<'a> {
        #[serde(rename = "type", borrow)]
        ty: &'a str,
        #[serde(borrow)]
        kind: &'a str,
        exchange: u64,
    }
    // cheap refusal before the scan: annotation lines start with their type
    if !raw.starts_with(b"{\"type\":\"annotation\"") {
        return None;
    }
    let p: Peek = serde_json::from_slice(raw).ok()?;
    (p.ty == "annotation" && matches!(p.kind, "server_render" | "raw_text")).then_some(p.exchange)
}

/// `"line N column C: …"` for a line serde_json could not decode, worded as the whole-file
/// reader words it ([`crate::session::read::undecodable_line`]: a cut-off line is "truncated").
fn unreadable(line: usize, e: &serde_json::Error) -> String {
    crate::session::read::undecodable_line(line, e).to_string()
}

/// An exchange line as the list needs it: everything but the response chunks' bodies and the
/// headers, which are skipped unparsed ([`serde::de::IgnoredAny`]). Unknown fields (`type`) are
/// ignored, as serde does by default.
#[derive(serde::Deserialize)]
struct LightExchange {
    id: u64,
    #[serde(default)]
    started: String,
    #[serde(default)]
    label: Option<String>,
    request: LightRequest,
    #[serde(default)]
    response: Option<LightResponse>,
    #[serde(default)]
    timings: crate::session::Timings,
    #[serde(default)]
    outcome: crate::session::Outcome,
    #[serde(default)]
    error: Option<String>,
}

#[derive(serde::Deserialize)]
struct LightRequest {
    method: String,
    path: String,
    #[serde(default)]
    body: crate::session::Body,
}

#[derive(serde::Deserialize)]
struct LightResponse {
    status: u16,
    /// Non-stream bodies are kept (the model may be named there); they are small next to
    /// streams, which are skipped.
    #[serde(default)]
    body: Option<crate::session::Body>,
    #[serde(default)]
    chunks: Option<serde::de::IgnoredAny>,
}

impl LightExchange {
    /// An [`Exchange`] with the same list-relevant fields; a streamed response keeps an empty
    /// chunk list (so it still reads as a stream) and no headers.
    fn into_exchange(self) -> Exchange {
        Exchange {
            id: self.id,
            started: self.started,
            label: self.label,
            request: crate::session::Request {
                method: self.request.method,
                path: self.request.path,
                headers: Vec::new(),
                body: self.request.body,
            },
            response: self.response.map(|r| crate::session::Response {
                status: r.status,
                headers: Vec::new(),
                body: r.body,
                chunks: r.chunks.map(|_| Vec::new()),
            }),
            timings: self.timings,
            outcome: self.outcome,
            error: self.error,
            websocket: None,
        }
    }
}

#[cfg(unix)]
fn read_exact_at(f: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    f.read_exact_at(buf, offset)
}

#[cfg(not(unix))]
fn read_exact_at(f: &std::fs::File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut f = f.try_clone()?;
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(buf)
}

use crate::session::read::peek_exchange;

/// Session files (`*.jsonl`, `*.har`) directly inside `dir`, sorted by name. A missing folder
/// is an empty list.
pub fn list_sessions(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "jsonl" || e == "har"))
        .collect();
    v.sort();
    v
}

/// Reads at most `limit` bytes of a file's first line (for the browser's header preview).
pub fn first_line(path: &Path, limit: usize) -> Option<String> {
    let f = crate::input::open_regular(path).ok()?;
    let mut buf = Vec::new();
    BufReader::new(f)
        .take(limit as u64)
        .read_until(b'\n', &mut buf)
        .ok()?;
    let line = buf.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&buf);
    Some(String::from_utf8_lossy(line).into_owned())
}
