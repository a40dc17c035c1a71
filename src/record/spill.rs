//! Bounded memory for recorded bodies: a body is kept in memory up to [`SPILL_AT`] bytes, then
//! moved to an unlinked temporary file beside the session and appended there as it arrives;
//! the session writer streams it from there into the exchange's JSON line
//! ([`write_body_json`], [`write_chunks_json`]) in pieces of [`PIECE`] bytes. A 200 MB streamed
//! response or request therefore costs the proxy about `SPILL_AT` per exchange plus the
//! writer's pieces, not the body's size (`benches/proxy.rs` prints the peak).
//!
//! The temporary file is created in the session's folder (same file system as the session,
//! which the user chose to hold the recording), named `.toolscope-spill-PID-N`, and unlinked
//! right after it is opened, so nothing is left behind even after `kill -9`.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;

use crate::session::Body;

/// Bytes of one body kept in memory before it moves to a temporary file: 1 MiB.
pub const SPILL_AT: usize = 1 << 20;

/// Bytes read back from a spilled body at a time while writing the session line: 64 KiB.
pub const PIECE: usize = 64 << 10;

static SPILL_SEQ: AtomicU64 = AtomicU64::new(0);

/// A growing byte sequence held in memory up to [`SPILL_AT`] and in an unlinked temporary
/// file beyond. Tracks whether the bytes are UTF-8 as they arrive.
#[derive(Debug)]
pub struct Spill {
    dir: PathBuf,
    mem: Vec<u8>,
    file: Option<File>,
    len: u64,
    utf8: Utf8Track,
    /// Set when the temporary file could not be written: the bytes then stay in memory.
    pub failed: Option<String>,
}

impl Spill {
    /// An empty spill whose temporary file (if needed) goes into `dir`.
    pub fn new(dir: &Path) -> Spill {
        Spill {
            dir: dir.to_owned(),
            mem: Vec::new(),
            file: None,
            len: 0,
            utf8: Utf8Track::default(),
            failed: None,
        }
    }

    /// Bytes pushed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the bytes moved to the temporary file.
    pub fn spilled(&self) -> bool {
        self.file.is_some()
    }

    /// Whether all bytes so far are UTF-8 (a sequence cut at the end counts as not yet).
    pub fn is_utf8(&self) -> bool {
        self.utf8.ok && self.utf8.carry.is_empty()
    }

    /// The bytes when they are still in memory.
    pub fn in_memory(&self) -> Option<&[u8]> {
        self.file.is_none().then_some(&self.mem[..])
    }

    /// Appends `data`.
    pub fn push(&mut self, data: &[u8]) {
        self.len += data.len() as u64;
        self.utf8.push(data);
        if let Some(f) = self.file.as_mut() {
            if let Err(e) = f.write_all(data) {
                self.failed = Some(e.to_string());
            }
            return;
        }
        self.mem.extend_from_slice(data);
        if self.mem.len() > SPILL_AT && self.failed.is_none() {
            match self.open_file() {
                Ok(mut f) => match f.write_all(&self.mem) {
                    Ok(()) => {
                        self.mem = Vec::new();
                        self.file = Some(f);
                    }
                    Err(e) => self.failed = Some(e.to_string()),
                },
                Err(e) => self.failed = Some(e.to_string()),
            }
        }
    }

    fn open_file(&self) -> io::Result<File> {
        let n = SPILL_SEQ.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir
            .join(format!(".toolscope-spill-{}-{n}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        // unlinked at once: the open descriptor keeps the data; nothing is left after a crash
        let _ = std::fs::remove_file(&path);
        Ok(f)
    }

    /// A reader over every byte pushed, from the start.
    pub fn reader(&mut self) -> io::Result<Box<dyn Read + '_>> {
        match self.file.as_mut() {
            Some(f) => {
                f.flush()?;
                f.seek(SeekFrom::Start(0))?;
                Ok(Box::new(BufReader::with_capacity(PIECE, f)))
            }
            None => Ok(Box::new(&self.mem[..])),
        }
    }

    /// The bytes as a [`Body`] when they are in memory (small bodies, live events).
    pub fn body_in_memory(&self) -> Option<Body> {
        self.in_memory().map(Body::from_bytes)
    }
}

/// Incremental UTF-8 validation across pushes (a character may be split between two).
#[derive(Debug)]
struct Utf8Track {
    ok: bool,
    carry: Vec<u8>,
}

impl Default for Utf8Track {
    fn default() -> Self {
        Utf8Track {
            ok: true,
            carry: Vec::new(),
        }
    }
}

impl Utf8Track {
    fn push(&mut self, data: &[u8]) {
        if !self.ok || data.is_empty() {
            return;
        }
        let mut data = data;
        // finish a character cut at the end of the previous push
        while !self.carry.is_empty() && !data.is_empty() {
            self.carry.push(data[0]);
            data = &data[1..];
            match std::str::from_utf8(&self.carry) {
                Ok(_) => self.carry.clear(),
                Err(e) if e.error_len().is_some() => {
                    self.ok = false;
                    return;
                }
                Err(_) if self.carry.len() >= 4 => {
                    self.ok = false;
                    return;
                }
                Err(_) => {}
            }
        }
        match std::str::from_utf8(data) {
            Ok(_) => {}
            Err(e) if e.error_len().is_none() => {
                self.carry.extend_from_slice(&data[e.valid_up_to()..]);
            }
            Err(_) => self.ok = false,
        }
    }
}

/// Writes `s` as the inside of a JSON string (no quotes), escaped as serde_json does.
fn write_json_str_inner(w: &mut dyn Write, s: &str) -> io::Result<()> {
    let quoted = serde_json::to_string(s).map_err(io::Error::other)?;
    w.write_all(&quoted.as_bytes()[1..quoted.len() - 1])
}

/// Writes the spill as a session [`Body`] object — `{"text":"…"}` when every byte is UTF-8,
/// else `{"base64":"…"}` — reading it back in [`PIECE`]-byte pieces. The output is
/// byte-identical to `serde_json::to_writer(&Body::from_bytes(all))`.
pub fn write_body_json(w: &mut dyn Write, spill: &mut Spill) -> io::Result<()> {
    let text = spill.is_utf8();
    let mut r = spill.reader()?;
    let mut buf = vec![0u8; PIECE];
    let mut carry: Vec<u8> = Vec::new();
    if text {
        w.write_all(br#"{"text":""#)?;
    } else {
        w.write_all(br#"{"base64":""#)?;
    }
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        carry.extend_from_slice(&buf[..n]);
        if text {
            let upto = match std::str::from_utf8(&carry) {
                Ok(_) => carry.len(),
                Err(e) => e.valid_up_to(),
            };
            let s = std::str::from_utf8(&carry[..upto]).map_err(io::Error::other)?;
            write_json_str_inner(w, s)?;
            carry.drain(..upto);
        } else {
            let whole = carry.len() / 3 * 3;
            let enc = base64::engine::general_purpose::STANDARD.encode(&carry[..whole]);
            w.write_all(enc.as_bytes())?;
            carry.drain(..whole);
        }
    }
    if !carry.is_empty() {
        if text {
            // cannot happen for a body tracked as UTF-8; keep the bytes visible anyway
            write_json_str_inner(w, &String::from_utf8_lossy(&carry))?;
        } else {
            let enc = base64::engine::general_purpose::STANDARD.encode(&carry);
            w.write_all(enc.as_bytes())?;
        }
    }
    w.write_all(b"\"}")
}

/// Writes a streamed body as the session's `chunks` array: `marks` holds, per chunk, its end
/// offset in `body` and its receive time (two little-endian u64 each); every chunk is one
/// `{"t_us":N,"text"|"base64":…}` object, as `serde_json` writes a [`crate::session::Chunk`].
pub fn write_chunks_json(w: &mut dyn Write, body: &mut Spill, marks: &mut Spill) -> io::Result<()> {
    let mut data = body.reader()?;
    let mut m = marks.reader()?;
    let mut rec = [0u8; 16];
    let mut start = 0u64;
    let mut first = true;
    let mut chunk = Vec::new();
    w.write_all(b"[")?;
    loop {
        match m.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let end = u64::from_le_bytes(rec[..8].try_into().expect("8 bytes"));
        let t_us = u64::from_le_bytes(rec[8..].try_into().expect("8 bytes"));
        chunk.clear();
        (&mut data)
            .take(end.saturating_sub(start))
            .read_to_end(&mut chunk)?;
        start = end;
        if !first {
            w.write_all(b",")?;
        }
        first = false;
        let c = crate::session::Chunk {
            t_us,
            data: Body::from_bytes(&chunk),
        };
        serde_json::to_writer(&mut *w, &c).map_err(io::Error::other)?;
    }
    w.write_all(b"]")
}

/// One chunk mark as stored in a marks spill: end offset and receive µs, little-endian.
pub fn mark_bytes(end: u64, t_us: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&end.to_le_bytes());
    b[8..].copy_from_slice(&t_us.to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_of(bytes: &[u8], pieces: usize) -> (String, bool) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spill::new(dir.path());
        for part in bytes.chunks(pieces.max(1)) {
            s.push(part);
        }
        let spilled = s.spilled();
        let mut out = Vec::new();
        write_body_json(&mut out, &mut s).unwrap();
        (String::from_utf8(out).unwrap(), spilled)
    }

    #[test]
    fn streamed_body_json_equals_serde_of_the_whole() {
        // Expected values: serde_json of Body::from_bytes over the whole body (the writer
        // before spilling existed), on text with multi-byte characters cut at every push,
        // escapes, and bytes that are not UTF-8 — in memory and spilled.
        let mut big = Vec::new();
        for i in 0..(SPILL_AT / 10 + 7000) {
            big.extend_from_slice(format!("é\"\n\u{1b}{i}€").as_bytes());
        }
        let mut binary = big.clone();
        binary[SPILL_AT + 5] = 0xff;
        for (bytes, pieces) in [
            (&b"hello \xe2\x82\xac"[..], 1),
            (&big[..], 7),
            (&big[..], 4096),
            (&binary[..], 4096),
            (&b"\xff\x00ab"[..], 1),
        ] {
            let (got, _) = json_of(bytes, pieces);
            let want = serde_json::to_string(&Body::from_bytes(bytes)).unwrap();
            assert_eq!(got, want);
        }
        assert!(json_of(&big, 4096).1, "a body over SPILL_AT spills");
    }

    #[test]
    fn chunks_json_equals_serde_of_the_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let mut body = Spill::new(dir.path());
        let mut marks = Spill::new(dir.path());
        let mut want = Vec::new();
        for i in 0..60_000u64 {
            let c = if i == 7 {
                b"\xe2\x82".to_vec() // a chunk cut inside a character stays base64
            } else {
                format!("data: {{\"i\":{i}}}\n\n").into_bytes()
            };
            body.push(&c);
            marks.push(&mark_bytes(body.len(), i * 3));
            want.push(crate::session::Chunk {
                t_us: i * 3,
                data: Body::from_bytes(&c),
            });
        }
        assert!(body.spilled());
        let mut out = Vec::new();
        write_chunks_json(&mut out, &mut body, &mut marks).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            serde_json::to_string(&want).unwrap()
        );
    }
}
