//! The one sanitiser for text toolscope prints to a terminal outside the inspector.
//!
//! Recorded content (model replies, a client's `model` field, paths, template text, error
//! messages quoting them) may carry terminal control and escape sequences: `ESC ] 52 ; c ; … BEL`
//! sets the clipboard, `ESC ] 0 ; … BEL` the window title, `ESC [ 2 J` clears the screen. The
//! inspector never lets them through (ratatui's `Buffer::set_stringn` drops every grapheme that
//! contains a control character, ratatui-core 0.1 `buffer/buffer.rs`); everything else toolscope
//! prints (`check` and `parse` text output, the proxy's per-exchange lines, `render` notes, error
//! messages) goes through [`visible`] or [`visible_line`], which show such characters instead of
//! sending them: `ESC` becomes the four characters `\x1b`.
//!
//! Only what is printed changes: recorded bytes stay untouched. JSON output escapes C0 controls
//! itself (RFC 8259 §7); [`json_visible`] writes the rest of the set above as JSON `\uXXXX`
//! escapes, the same JSON value in a form a terminal cannot obey.
//!
//! Escaped (as `\xNN` for code points below U+0100, `\u{NNNN}` above):
//! * C0 controls U+0000–U+001F except `\n` and `\t` in [`visible`] (all of them in
//!   [`visible_line`]), and DEL U+007F;
//! * C1 controls U+0080–U+009F (U+009B is a one-character CSI for terminals that honour 8-bit
//!   controls);
//! * bidirectional overrides and isolates U+202A–U+202E, U+2066–U+2069 (they reorder what
//!   follows on the line, CVE-2021-42574 "Trojan Source").

use std::borrow::Cow;
use std::fmt::Write;

fn must_escape(c: char, keep_newlines: bool) -> bool {
    match c {
        '\n' | '\t' => !keep_newlines,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    let Some(first) = s.find(|c| must_escape(c, keep_newlines)) else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        if !must_escape(c, keep_newlines) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// `s` with control and escape characters shown visibly (see the module docs); newlines and
/// tabs are kept, so multi-line reports keep their shape. Borrowed when nothing changes.
///
/// ```
/// assert_eq!(toolscope::text::visible("a\x1b]0;pwned\x07\nb"), "a\\x1b]0;pwned\\x07\nb");
/// ```
pub fn visible(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// [`visible`] for one-line output (list rows, the proxy's per-exchange line): newlines and
/// tabs are escaped too (`\n`, `\t`), so a field can never start a new line or shift columns.
///
/// ```
/// assert_eq!(toolscope::text::visible_line("m\n\u{9b}2J"), "m\\n\\x9b2J");
/// ```
pub fn visible_line(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Serialised JSON `s` (serde_json's output) with DEL, the C1 controls and the bidirectional
/// overrides and isolates written as `\uXXXX` escapes (RFC 8259 §7): the same JSON value, but
/// nothing in it a terminal obeys (serde_json leaves these characters raw). Valid only on
/// serialised JSON, where such characters can stand only inside strings. Borrowed when nothing
/// changes.
///
/// ```
/// assert_eq!(toolscope::text::json_visible("{\"a\":\"x\u{9b}2J\u{202e}\"}"), "{\"a\":\"x\\u009b2J\\u202e\"}");
/// ```
pub fn json_visible(s: &str) -> Cow<'_, str> {
    let hostile = |c: char| c > '\u{7e}' && must_escape(c, true);
    let Some(first) = s.find(hostile) else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        if hostile(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Writes serialised JSON `s` to stdout through [`json_visible`]; see [`print_out_raw`] for a
/// closed stdout.
pub fn print_json(s: &str) -> bool {
    print_out_raw(&json_visible(s))
}

/// A writer of serialised JSON that passes everything through [`json_visible`] on its way to
/// `W` (`export` to stdout). UTF-8 sequences split between two writes are held until whole;
/// bytes that are not UTF-8 pass unchanged.
pub struct JsonVisibleWriter<W: std::io::Write> {
    inner: W,
    carry: Vec<u8>,
}

impl<W: std::io::Write> JsonVisibleWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        JsonVisibleWriter {
            inner,
            carry: Vec::new(),
        }
    }
}

impl<W: std::io::Write> std::io::Write for JsonVisibleWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.carry.extend_from_slice(buf);
        let mut at = 0;
        while at < self.carry.len() {
            match std::str::from_utf8(&self.carry[at..]) {
                Ok(s) => {
                    self.inner.write_all(json_visible(s).as_bytes())?;
                    at = self.carry.len();
                }
                Err(e) => {
                    let ok = at + e.valid_up_to();
                    // valid up to `ok`, so the conversion cannot fail
                    let s = std::str::from_utf8(&self.carry[at..ok]).unwrap_or_default();
                    self.inner.write_all(json_visible(s).as_bytes())?;
                    match e.error_len() {
                        // an incomplete sequence at the end: wait for the next write
                        None => {
                            at = ok;
                            break;
                        }
                        Some(n) => {
                            self.inner.write_all(&self.carry[ok..ok + n])?;
                            at = ok + n;
                        }
                    }
                }
            }
        }
        self.carry.drain(..at);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let rest = std::mem::take(&mut self.carry);
        self.inner.write_all(&rest)?;
        self.inner.flush()
    }
}

/// Set once stdout is found closed ([`print_out`]).
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes `s` to stdout unchanged (JSON, a rendered prompt): the raw form of [`print_out`].
/// Once stdout is closed (its reader went away: `toolscope proxy --headless | head -n 1`)
/// nothing more is written and `false` is returned; printing never panics and never ends the
/// command, so a recorder keeps recording.
pub fn print_out_raw(s: &str) -> bool {
    use std::io::Write as _;
    use std::sync::atomic::Ordering;
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return false;
    }
    let mut out = std::io::stdout().lock();
    if out
        .write_all(s.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        return false;
    }
    true
}

/// Writes `s` to stdout through [`visible`] (the one sanitiser); see [`print_out_raw`] for a
/// closed stdout.
pub fn print_out(s: &str) -> bool {
    print_out_raw(&visible(s))
}

/// Writes `s` to stderr through [`visible`]; a closed stderr is ignored.
pub fn print_err(s: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(visible(s).as_bytes());
}

/// `println!` through the one sanitiser ([`print_out`]): never panics on a closed stdout.
#[macro_export]
macro_rules! outln {
    () => {{
        let _ = $crate::text::print_out("\n");
    }};
    ($($t:tt)*) => {{
        let _ = $crate::text::print_out(&format!("{}\n", format_args!($($t)*)));
    }};
}

/// `eprintln!` through the one sanitiser ([`print_err`]).
#[macro_export]
macro_rules! errln {
    ($($t:tt)*) => {
        $crate::text::print_err(&format!("{}\n", format_args!($($t)*)))
    };
}

/// The one shape of an invalid-UTF-8 error: `FILE:LINE:COLUMN: invalid UTF-8 (byte N)`, the
/// position of the first byte that is not UTF-8 (1-based line and column, the column counted in
/// characters of the valid text before it; `N` is the 0-based byte offset).
///
/// ```
/// let e = std::str::from_utf8(b"ab\ncd\xff").unwrap_err();
/// assert_eq!(toolscope::text::utf8_error("t.jinja", b"ab\ncd\xff", &e), "t.jinja:2:3: invalid UTF-8 (byte 5)");
/// ```
pub fn utf8_error(file: &str, bytes: &[u8], e: &std::str::Utf8Error) -> String {
    let (line, col, at) = utf8_position(bytes, e);
    format!("{file}:{line}:{col}: invalid UTF-8 (byte {at})")
}

/// Where [`utf8_error`] points: (1-based line, 1-based column in characters, 0-based byte).
pub fn utf8_position(bytes: &[u8], e: &std::str::Utf8Error) -> (usize, usize, usize) {
    let at = e.valid_up_to();
    let valid = std::str::from_utf8(&bytes[..at.min(bytes.len())]).unwrap_or_default();
    let line = valid.matches('\n').count() + 1;
    let col = valid.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col, at)
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_visible_writer_escapes_across_split_writes() {
        use std::io::Write as _;
        let text = "{\"a\":\"\u{85}x\u{202e}\u{e9}\"}";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut w = super::JsonVisibleWriter::new(Vec::new());
            w.write_all(&bytes[..cut]).unwrap();
            w.write_all(&bytes[cut..]).unwrap();
            w.flush().unwrap();
            let out = String::from_utf8(w.inner).unwrap();
            assert_eq!(out, "{\"a\":\"\\u0085x\\u202e\u{e9}\"}", "cut at {cut}");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(v["a"], "\u{85}x\u{202e}\u{e9}");
        }
    }

    use super::*;

    #[test]
    fn escapes_osc_csi_c1_bidi_keeps_text() {
        // OSC 52 (clipboard) and OSC 0 (title), as a hostile model reply carries them.
        let s = "ok \x1b]52;c;aGk=\x07 \x1b]0;title\x1b\\ \u{9b}2J \u{202e}abc é\t\n";
        let v = visible(s);
        assert!(!v.contains('\x1b') && !v.contains('\x07') && !v.contains('\u{9b}'));
        assert_eq!(
            v,
            "ok \\x1b]52;c;aGk=\\x07 \\x1b]0;title\\x1b\\ \\x9b2J \\u{202e}abc é\t\n"
        );
        assert_eq!(visible_line("a\tb\r\n"), "a\\tb\\r\\n");
        assert!(matches!(visible("plain ünïcode\n"), Cow::Borrowed(_)));
    }
}
