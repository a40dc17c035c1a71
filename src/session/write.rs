//! Writing session files: one JSON line per event, flushed as it is written.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::model::*;

/// Appends lines to a session file. Each [`SessionWriter::append`] writes one whole line with a
/// single `write_all` and flushes it, so concurrent exchanges never interleave inside a line
/// (callers share the writer behind a mutex) and a crash loses only what was not yet appended.
#[derive(Debug)]
pub struct SessionWriter {
    path: PathBuf,
    file: File,
    next_id: u64,
}

impl SessionWriter {
    /// Creates `path` (and its parent folders) with `header` as line 1, or, when `path` already
    /// holds a session, opens it for appending and continues its exchange ids (the given header
    /// is then not written). A damaged last line is left in place and terminated, so the reader
    /// reports it and later lines stay readable.
    ///
    /// Errors: I/O, an existing file that is not a session, or a session another writer holds
    /// (exclusive advisory lock, released when the writer is dropped).
    pub fn open(path: &Path, header: &Header) -> anyhow::Result<SessionWriter> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let existing = std::fs::metadata(path)
            .map(|m| m.len() > 0)
            .unwrap_or(false);
        let mut next_id = 1;
        if existing {
            let bytes = std::fs::read(path)?;
            let session = super::read_session_bytes(&path.display().to_string(), &bytes)?;
            // a line cut by a crash still reserved its id: the next exchange must not reuse it
            let cut = bytes
                .split(|&b| b == b'\n')
                .filter_map(|l| super::read::peek_exchange(l).flatten());
            next_id = session
                .exchanges
                .iter()
                .map(|e| e.id)
                .chain(cut)
                .max()
                .unwrap_or(0)
                + 1;
            let mut file = OpenOptions::new().append(true).open(path)?;
            lock(&file, path)?;
            if !bytes.ends_with(b"\n") {
                file.write_all(b"\n")?;
            }
            return Ok(SessionWriter {
                path: path.to_owned(),
                file,
                next_id,
            });
        }
        // O_APPEND: every line lands at the end of the file even if another process appended.
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        lock(&file, path)?;
        file.set_len(0)?;
        let mut w = SessionWriter {
            path: path.to_owned(),
            file,
            next_id,
        };
        w.append(&Line::Header(header.clone()))?;
        Ok(w)
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reserves the next exchange id (1-based, increasing).
    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Appends one line written in pieces by `write` (which must not write a newline; one is
    /// added), through a 64 KiB buffer, then flushes it to the OS. For lines too large to hold
    /// in memory whole (the recorder streams spilled bodies this way).
    pub fn append_with(
        &mut self,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let mut w = std::io::BufWriter::with_capacity(64 << 10, &mut self.file);
        write(&mut w)?;
        w.write_all(b"\n")?;
        w.flush()?;
        drop(w);
        self.file.flush()
    }

    /// Appends one line and flushes it to the OS.
    pub fn append(&mut self, line: &Line) -> std::io::Result<()> {
        let mut buf = serde_json::to_vec(line).map_err(std::io::Error::other)?;
        buf.push(b'\n');
        self.file.write_all(&buf)?;
        self.file.flush()
    }
}

/// Takes an exclusive advisory lock for the writer's lifetime (released when the file closes), so
/// two toolscope processes never write one session and exchange ids stay unique.
fn lock(file: &File, path: &Path) -> anyhow::Result<()> {
    // A lock held by a live writer persists; one that only looks held is a forked child of this
    // process between fork and exec (the descriptor is O_CLOEXEC, but until exec the child
    // shares the open file description and so the flock). Retry for a moment before refusing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(250);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
                "{}: another toolscope process is writing this session; choose another --session path",
                path.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(
                    anyhow::Error::new(e).context(format!("{}: cannot lock", path.display()))
                );
            }
        }
    }
}

/// A new header stamped with `created` (RFC 3339) and this toolscope's version.
pub fn new_header(created: String) -> Header {
    Header {
        format: super::FORMAT.to_owned(),
        created,
        tool: format!("toolscope {}", env!("CARGO_PKG_VERSION")),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_id_skips_an_id_taken_by_a_line_cut_by_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.jsonl");
        let mut w = SessionWriter::open(&p, &new_header("2026-12-01T00:00:00Z".into())).unwrap();
        let id = w.next_id();
        let ex = Exchange {
            id,
            ..Default::default()
        };
        w.append(&Line::Exchange(Box::new(ex))).unwrap();
        drop(w);
        // exchange 2 was being written when the process was killed
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(br#"{"type":"exchange","id":2,"started":"2026-12-01T00:00:01Z","requ"#)
            .unwrap();
        drop(f);
        let mut w = SessionWriter::open(&p, &new_header(String::new())).unwrap();
        assert_eq!(w.next_id(), 3);
    }
}

#[cfg(test)]
mod outcome_tests {
    use super::*;

    #[test]
    fn outcome_displays_as_serialized() {
        for o in [
            Outcome::Complete,
            Outcome::ClientDisconnected,
            Outcome::UpstreamError,
            Outcome::Shutdown,
        ] {
            assert_eq!(
                format!("\"{o}\""),
                serde_json::to_string(&o).unwrap(),
                "{o:?}"
            );
        }
    }
}
