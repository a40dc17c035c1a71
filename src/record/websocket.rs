//! WebSocket pass-through for the proxy: the Responses API's WebSocket mode (a client sends
//! `response.create` messages on `GET /v1/responses` upgraded to a WebSocket and receives the
//! same JSON events a streamed `POST /v1/responses` sends as SSE; OpenAI API reference,
//! "WebSocket mode" / "WebSocket events").
//!
//! The proxy forwards the upgrade request and, on the upstream's `101 Switching Protocols`,
//! joins the two upgraded connections byte for byte ([`pump`]): every read is written to the
//! other side unchanged, and a copy is parsed here into frames (RFC 6455 §5.2: FIN, RSV1,
//! opcode, mask, 7/16/64-bit payload length) and messages (fragments joined, `permessage-deflate`
//! undone, RFC 7692). Recording ([`WsRecorder`]): each client `response.create` text message
//! starts an exchange (`request.body` = the message; `response` = the `101` head with one chunk
//! per server message), ended `complete` by the server's terminal event
//! (`response.completed` / `response.incomplete` / `response.failed`, or `error`); every frame
//! of both directions in between goes into [`crate::session::WebSocket`] with its offset.
//! A connection closed with a response in progress ends it `client_disconnected` (the client
//! closed) or `upstream_error` (the upstream did).
//!
//! Bounds: a message is recorded up to [`MAX_MESSAGE`] bytes (decompressed); a longer one is
//! forwarded whole and recorded cut, with the exchange's `error` saying so.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::Value;

use crate::record::recorder::{ActiveExchange, Recorder};
use crate::session::{Body, Outcome, WebSocket, WsFrame};

/// The most of one message (decompressed) the recorder keeps: 32 MiB.
pub const MAX_MESSAGE: usize = 32 << 20;

/// One parsed frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub fin: bool,
    /// RSV1 (`permessage-deflate`: the message is compressed).
    pub rsv1: bool,
    pub opcode: u8,
    /// Payload length on the wire.
    pub len: u64,
    /// The payload, unmasked (at most [`MAX_MESSAGE`] bytes kept).
    pub payload: Vec<u8>,
}

/// The name of an opcode (RFC 6455 §11.8).
pub fn opcode_name(op: u8) -> String {
    match op {
        0x0 => "continuation".into(),
        0x1 => "text".into(),
        0x2 => "binary".into(),
        0x8 => "close".into(),
        0x9 => "ping".into(),
        0xA => "pong".into(),
        n => format!("0x{n:x}"),
    }
}

/// An incremental frame parser for one direction of a connection: feed it the bytes as they
/// are forwarded, take the frames it completes. Holds at most one frame header plus the kept
/// part of the current payload.
#[derive(Debug, Default)]
pub struct FrameReader {
    head: Vec<u8>,
    /// The frame whose payload is being read: (frame so far, bytes of payload left, mask,
    /// payload offset for unmasking).
    cur: Option<(Frame, u64, Option<[u8; 4]>, u64)>,
}

impl FrameReader {
    /// Parses `data`, appending every frame it completes to `out`.
    pub fn feed(&mut self, mut data: &[u8], out: &mut Vec<Frame>) {
        while !data.is_empty() {
            if let Some((frame, left, mask, pos)) = self.cur.as_mut() {
                let n = (*left).min(data.len() as u64) as usize;
                let room = MAX_MESSAGE.saturating_sub(frame.payload.len()).min(n);
                let start = frame.payload.len();
                frame.payload.extend_from_slice(&data[..room]);
                if let Some(m) = mask {
                    for (i, b) in frame.payload[start..].iter_mut().enumerate() {
                        *b ^= m[((*pos as usize) + i) % 4];
                    }
                }
                *pos += n as u64;
                *left -= n as u64;
                data = &data[n..];
                if *left == 0 {
                    let (f, ..) = self.cur.take().expect("current frame");
                    out.push(f);
                }
                continue;
            }
            // the header: 2 bytes, then the extended length and the mask key
            let need = |h: &[u8]| -> usize {
                if h.len() < 2 {
                    return 2;
                }
                let ext = match h[1] & 0x7f {
                    126 => 2,
                    127 => 8,
                    _ => 0,
                };
                2 + ext + if h[1] & 0x80 != 0 { 4 } else { 0 }
            };
            while self.head.len() < need(&self.head) && !data.is_empty() {
                self.head.push(data[0]);
                data = &data[1..];
            }
            let h = &self.head;
            if h.len() < need(h) {
                return;
            }
            let (len, at) = match h[1] & 0x7f {
                126 => (u16::from_be_bytes([h[2], h[3]]) as u64, 4),
                127 => (
                    u64::from_be_bytes(h[2..10].try_into().expect("8 bytes")),
                    10,
                ),
                n => (n as u64, 2),
            };
            let mask = (h[1] & 0x80 != 0).then(|| [h[at], h[at + 1], h[at + 2], h[at + 3]]);
            let frame = Frame {
                fin: h[0] & 0x80 != 0,
                rsv1: h[0] & 0x40 != 0,
                opcode: h[0] & 0x0f,
                len,
                payload: Vec::new(),
            };
            self.head.clear();
            if len == 0 {
                out.push(frame);
            } else {
                self.cur = Some((frame, len, mask, 0));
            }
        }
    }
}

/// `permessage-deflate` as negotiated (RFC 7692 §7): whether each direction resets its
/// compression context per message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deflate {
    pub client_no_context_takeover: bool,
    pub server_no_context_takeover: bool,
}

impl Deflate {
    /// From the server's `sec-websocket-extensions` answer; `None` without `permessage-deflate`.
    pub fn negotiated(extensions: &str) -> Option<Deflate> {
        let ext = extensions
            .split(',')
            .find(|e| e.trim().starts_with("permessage-deflate"))?;
        let has = |p: &str| ext.split(';').any(|x| x.trim().eq_ignore_ascii_case(p));
        Some(Deflate {
            client_no_context_takeover: has("client_no_context_takeover"),
            server_no_context_takeover: has("server_no_context_takeover"),
        })
    }
}

/// Joins one direction's frames into messages and undoes `permessage-deflate`.
struct Messages {
    /// The message being assembled: (opcode, compressed, payload).
    cur: Option<(u8, bool, Vec<u8>)>,
    inflate: Option<flate2::Decompress>,
    reset_each: bool,
}

impl Messages {
    fn new(deflate: Option<Deflate>, client: bool) -> Messages {
        Messages {
            cur: None,
            inflate: deflate.map(|_| flate2::Decompress::new(false)),
            reset_each: deflate.is_some_and(|d| {
                if client {
                    d.client_no_context_takeover
                } else {
                    d.server_no_context_takeover
                }
            }),
        }
    }

    /// Takes a data frame; returns the whole message (opcode, payload) when `f` ends one, or
    /// an error text when it cannot be decompressed.
    fn push(&mut self, f: &Frame) -> Option<(u8, Result<Vec<u8>, String>)> {
        match (f.opcode, self.cur.as_mut()) {
            (0x0, Some((_, _, p))) => {
                let room = MAX_MESSAGE.saturating_sub(p.len()).min(f.payload.len());
                p.extend_from_slice(&f.payload[..room]);
            }
            (0x0, None) => return None, // a continuation without a start: ignored
            (op, _) => self.cur = Some((op, f.rsv1, f.payload.clone())),
        }
        if !f.fin {
            return None;
        }
        let (op, compressed, payload) = self.cur.take()?;
        if !compressed {
            return Some((op, Ok(payload)));
        }
        let Some(z) = self.inflate.as_mut() else {
            return Some((
                op,
                Err("RSV1 set without permessage-deflate negotiated".into()),
            ));
        };
        if self.reset_each {
            z.reset(false);
        }
        let mut input = payload;
        input.extend_from_slice(&[0x00, 0x00, 0xff, 0xff]);
        let mut out: Vec<u8> = Vec::with_capacity(input.len() * 4);
        let mut consumed = 0usize;
        loop {
            let before_in = z.total_in();
            let before_out = z.total_out();
            if out.capacity() == out.len() {
                if out.len() >= MAX_MESSAGE {
                    return Some((op, Err(format!("decompresses past {MAX_MESSAGE} bytes"))));
                }
                out.reserve((out.len()).clamp(4096, MAX_MESSAGE - out.len()));
            }
            match z.decompress_vec(&input[consumed..], &mut out, flate2::FlushDecompress::Sync) {
                Ok(_) => {}
                Err(e) => return Some((op, Err(format!("permessage-deflate: {e}")))),
            }
            consumed += (z.total_in() - before_in) as usize;
            let progressed = z.total_in() != before_in || z.total_out() != before_out;
            if consumed >= input.len() && out.len() < out.capacity() {
                break;
            }
            if !progressed && out.len() < out.capacity() {
                break;
            }
        }
        Some((op, Ok(out)))
    }
}

/// Which side sent a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

/// The exchange in progress on a connection.
struct Open {
    active: ActiveExchange,
    frames: Vec<WsFrame>,
}

struct State {
    open: Option<Open>,
    /// Frames seen while no exchange was open, given to the next one (offset 0).
    waiting: Vec<WsFrame>,
    connection: u64,
    client: (FrameReader, Messages),
    server: (FrameReader, Messages),
}

/// Records one upgraded connection: splits it into exchanges (see the module docs).
#[derive(Clone)]
pub struct WsRecorder {
    rec: Recorder,
    path: String,
    req_headers: Vec<(String, String)>,
    status: u16,
    resp_headers: Vec<(String, String)>,
    extensions: Option<String>,
    state: Arc<Mutex<State>>,
}

/// True for a server event that ends a response: the Responses terminal events, or `error`.
fn is_terminal(payload: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct T {
        #[serde(rename = "type")]
        ty: Option<String>,
    }
    serde_json::from_slice::<T>(payload)
        .ok()
        .and_then(|t| t.ty)
        .is_some_and(|t| {
            t == "error" || crate::stream::sse::RESPONSES_TERMINAL_EVENTS.contains(&t.as_str())
        })
}

impl WsRecorder {
    /// A recorder for a connection upgraded on `path` with the client's request headers and
    /// the upstream's `101` head (`status`, headers as forwarded).
    pub fn new(
        rec: Recorder,
        path: String,
        req_headers: Vec<(String, String)>,
        status: u16,
        resp_headers: Vec<(String, String)>,
    ) -> WsRecorder {
        let extensions = resp_headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("sec-websocket-extensions"))
            .map(|(_, v)| v.clone());
        let deflate = extensions.as_deref().and_then(Deflate::negotiated);
        WsRecorder {
            rec,
            path,
            req_headers,
            status,
            resp_headers,
            extensions,
            state: Arc::new(Mutex::new(State {
                open: None,
                waiting: Vec::new(),
                connection: 0,
                client: (FrameReader::default(), Messages::new(deflate, true)),
                server: (FrameReader::default(), Messages::new(deflate, false)),
            })),
        }
    }

    /// No response in progress.
    pub fn is_idle(&self) -> bool {
        self.state.lock().map(|s| s.open.is_none()).unwrap_or(true)
    }

    /// Bytes `from` one side, exactly as forwarded to the other.
    pub fn bytes(&self, from: Side, data: &[u8]) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let mut frames = Vec::new();
        match from {
            Side::Client => st.client.0.feed(data, &mut frames),
            Side::Server => st.server.0.feed(data, &mut frames),
        }
        for f in frames {
            self.frame(&mut st, from, f);
        }
    }

    fn frame(&self, st: &mut State, from: Side, f: Frame) {
        let t_us = st.open.as_ref().map_or(0, |o| o.active.elapsed_us());
        let meta = WsFrame {
            t_us,
            from: from.name().into(),
            opcode: opcode_name(f.opcode),
            fin: f.fin,
            compressed: f.rsv1,
            len: f.len,
            data: None,
        };
        let control = f.opcode >= 0x8;
        if control {
            let mut meta = meta;
            meta.data = Some(Body::from_bytes(&f.payload));
            self.push_meta(st, meta);
            return;
        }
        let msgs = match from {
            Side::Client => &mut st.client.1,
            Side::Server => &mut st.server.1,
        };
        let done = msgs.push(&f);
        let Some((op, payload)) = done else {
            self.push_meta(st, meta);
            return;
        };
        let payload = match payload {
            Ok(p) => p,
            Err(e) => {
                let mut meta = meta;
                meta.data = Some(Body::Text {
                    text: format!("[not decoded: {e}]"),
                });
                self.push_meta(st, meta);
                return;
            }
        };
        match from {
            Side::Client if op == 0x1 && is_create(&payload) => {
                if let Some(prev) = st.open.take() {
                    self.end(
                        st.connection,
                        prev,
                        Outcome::ClientDisconnected,
                        Some("the client sent another response.create before this response's terminal event".into()),
                    );
                }
                let mut active =
                    self.rec
                        .begin("GET", &self.path, self.req_headers.clone(), &payload);
                if st.connection == 0 {
                    st.connection = active.id();
                }
                active.head_stream(self.status, self.resp_headers.clone());
                let mut frames = std::mem::take(&mut st.waiting);
                frames.push(meta);
                st.open = Some(Open { active, frames });
            }
            Side::Client => {
                let mut meta = meta;
                meta.data = Some(Body::from_bytes(&payload));
                self.push_meta(st, meta);
            }
            Side::Server => match st.open.as_mut() {
                Some(o) => {
                    o.active.chunk(&Bytes::from(payload.clone()));
                    o.frames.push(meta);
                    if op == 0x1 && is_terminal(&payload) {
                        let o = st.open.take().expect("open");
                        self.end(st.connection, o, Outcome::Complete, None);
                    }
                }
                None => {
                    let mut meta = meta;
                    meta.data = Some(Body::from_bytes(&payload));
                    st.waiting.push(meta);
                }
            },
        }
    }

    fn push_meta(&self, st: &mut State, meta: WsFrame) {
        match st.open.as_mut() {
            Some(o) => o.frames.push(meta),
            None => {
                // bounded: control frames between responses (pings) keep the last 64
                if st.waiting.len() >= 64 {
                    st.waiting.remove(0);
                }
                st.waiting.push(meta);
            }
        }
    }

    fn end(&self, connection: u64, o: Open, outcome: Outcome, error: Option<String>) {
        let Open { mut active, frames } = o;
        active.set_websocket(WebSocket {
            connection,
            extensions: self.extensions.clone(),
            frames,
        });
        active.finish(outcome, error);
    }

    /// The connection ended (`by`: the side that closed or failed first, `why`: how). A
    /// response in progress is recorded partial.
    pub fn closed(&self, by: Side, why: String) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let connection = st.connection;
        if let Some(mut o) = st.open.take() {
            let outcome = match by {
                Side::Client => Outcome::ClientDisconnected,
                Side::Server => Outcome::UpstreamError,
            };
            let who = match by {
                Side::Client => "the client",
                Side::Server => "the upstream",
            };
            o.active.set_websocket(WebSocket {
                connection,
                extensions: self.extensions.clone(),
                frames: std::mem::take(&mut o.frames),
            });
            o.active.finish(
                outcome,
                Some(format!(
                    "{who} closed the WebSocket before the response's terminal event ({why})"
                )),
            );
        }
    }
}

/// True for a client `response.create` message.
fn is_create(payload: &[u8]) -> bool {
    serde_json::from_slice::<Value>(payload)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
        .is_some_and(|t| t == "response.create")
}

/// Copies one direction until its end, recording what passes; notes which side ended first.
async fn copy_side<R, W>(
    from: Side,
    r: &mut R,
    w: &mut W,
    rec: &WsRecorder,
    first_end: &Mutex<Option<(Side, String)>>,
) where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 64 << 10];
    let why = loop {
        match r.read(&mut buf).await {
            Ok(0) => break "connection closed".to_owned(),
            Ok(n) => {
                rec.bytes(from, &buf[..n]);
                if let Err(e) = w.write_all(&buf[..n]).await {
                    break format!("writing to the other side failed: {e}");
                }
            }
            Err(e) => break format!("read failed: {e}"),
        }
    };
    let _ = w.shutdown().await;
    if let Ok(mut f) = first_end.lock()
        && f.is_none()
    {
        *f = Some((from, why));
    }
}

/// Forwards bytes both ways between the upgraded client and upstream connections until both
/// directions end (or `cut` fires), recording a copy ([`WsRecorder::bytes`]). A direction that
/// reaches its end shuts the other side's write half, as a TCP proxy does.
pub async fn pump<C, U>(
    client: C,
    upstream: U,
    rec: WsRecorder,
    cut: tokio_util::sync::CancellationToken,
    stop: tokio_util::sync::CancellationToken,
) where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    U: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut ur, mut uw) = tokio::io::split(upstream);
    let first_end: Arc<Mutex<Option<(Side, String)>>> = Arc::default();
    let both = async {
        tokio::join!(
            copy_side(Side::Client, &mut cr, &mut uw, &rec, &first_end),
            copy_side(Side::Server, &mut ur, &mut cw, &rec, &first_end)
        )
    };
    // Shutdown: a connection with no response in progress closes at once; one in progress
    // runs until it ends or the grace period's cut (then its exchange is recorded as cut).
    let idle_after_stop = async {
        stop.cancelled().await;
        while !rec.is_idle() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        _ = both => {}
        _ = cut.cancelled() => return,
        _ = idle_after_stop => return,
    }
    let (by, why) = first_end
        .lock()
        .ok()
        .and_then(|mut f| f.take())
        .unwrap_or((Side::Client, "connection closed".into()));
    rec.closed(by, why);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as a client writes it (masked) or a server (unmasked).
    fn frame(fin: bool, op: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
        let mut out = vec![(u8::from(fin) << 7) | op];
        let m = if mask.is_some() { 0x80 } else { 0 };
        match payload.len() {
            n if n < 126 => out.push(m | n as u8),
            n if n < 65536 => {
                out.push(m | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(m | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        match mask {
            Some(k) => {
                out.extend_from_slice(&k);
                out.extend(payload.iter().enumerate().map(|(i, b)| b ^ k[i % 4]));
            }
            None => out.extend_from_slice(payload),
        }
        out
    }

    #[test]
    fn frames_of_every_length_form_split_anywhere() {
        let long = "x".repeat(70_000);
        let mid = "y".repeat(300);
        let wire: Vec<u8> = [
            frame(
                true,
                0x1,
                b"{\"type\":\"response.create\"}",
                Some([1, 2, 3, 4]),
            ),
            frame(true, 0x1, mid.as_bytes(), None),
            frame(false, 0x1, long.as_bytes(), Some([9, 8, 7, 6])),
            frame(true, 0x9, b"", None),
            frame(true, 0x0, b"end", Some([0, 0, 0, 1])),
        ]
        .concat();
        // RFC 6455 §5.7's examples: an unmasked "Hello" and a masked one.
        let mut f = Vec::new();
        let mut r = FrameReader::default();
        r.feed(&[0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f], &mut f);
        r.feed(
            &[
                0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
            ],
            &mut f,
        );
        assert_eq!(f[0].payload, b"Hello");
        assert_eq!(f[1].payload, b"Hello");
        for step in [1usize, 2, 3, 7, 1000, wire.len()] {
            let mut r = FrameReader::default();
            let mut got = Vec::new();
            for c in wire.chunks(step) {
                r.feed(c, &mut got);
            }
            let payloads: Vec<&[u8]> = got.iter().map(|f| f.payload.as_slice()).collect();
            assert_eq!(
                payloads,
                vec![
                    b"{\"type\":\"response.create\"}".as_slice(),
                    mid.as_bytes(),
                    long.as_bytes(),
                    b"",
                    b"end"
                ],
                "step {step}"
            );
            assert_eq!(got[2].len, 70_000);
            assert!(!got[2].fin && got[4].fin && got[3].opcode == 0x9);
        }
        // fragments join into one message
        let mut m = Messages::new(None, true);
        assert!(m.push(&got_frame(false, 0x1, b"ab")).is_none());
        assert_eq!(
            m.push(&got_frame(true, 0x0, b"cd")),
            Some((0x1, Ok(b"abcd".to_vec())))
        );
    }

    fn got_frame(fin: bool, opcode: u8, p: &[u8]) -> Frame {
        Frame {
            fin,
            rsv1: false,
            opcode,
            len: p.len() as u64,
            payload: p.to_vec(),
        }
    }

    #[test]
    fn permessage_deflate_with_and_without_context_takeover() {
        use std::io::Write;
        // RFC 7692 §7.2.3.1: "Hello" compressed, one message: c2 07 f2 48 cd c9 c9 07 00
        let hello = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
        let mut m = Messages::new(Some(Deflate::default()), false);
        let mut f = got_frame(true, 0x1, &hello);
        f.rsv1 = true;
        assert_eq!(m.push(&f), Some((0x1, Ok(b"Hello".to_vec()))));
        // §7.2.3.2: the second "Hello" with the context kept: f2 00 11 00 00
        let mut f2 = got_frame(true, 0x1, &[0xf2, 0x00, 0x11, 0x00, 0x00]);
        f2.rsv1 = true;
        assert_eq!(m.push(&f2), Some((0x1, Ok(b"Hello".to_vec()))));
        // A long message, compressed by a sync-flushed raw deflate stream, tail removed.
        let text = "{\"type\":\"response.output_text.delta\",\"delta\":\"word\"}".repeat(5000);
        let mut c = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        c.write_all(text.as_bytes()).unwrap();
        c.flush().unwrap();
        let mut z = c.get_ref().clone();
        assert_eq!(&z[z.len() - 4..], &[0, 0, 0xff, 0xff]);
        z.truncate(z.len() - 4);
        let mut m = Messages::new(
            Some(Deflate {
                client_no_context_takeover: false,
                server_no_context_takeover: true,
            }),
            false,
        );
        let mut f3 = got_frame(true, 0x1, &z);
        f3.rsv1 = true;
        assert_eq!(m.push(&f3), Some((0x1, Ok(text.clone().into_bytes()))));
        assert_eq!(
            m.push(&f3),
            Some((0x1, Ok(text.into_bytes()))),
            "reset per message"
        );
        assert_eq!(
            Deflate::negotiated("permessage-deflate; server_no_context_takeover"),
            Some(Deflate {
                client_no_context_takeover: false,
                server_no_context_takeover: true
            })
        );
        assert_eq!(Deflate::negotiated("x-webkit-deflate-frame"), None);
    }
}
