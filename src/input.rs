//! The one reader for files a user names on the command line (sessions, HAR files, requests,
//! templates, GGUF files, raw text, tool lists) and for `-` (stdin).
//!
//! A path that is not a regular file — a FIFO, a socket, a character device such as
//! `/dev/zero` or a terminal — is refused before it is opened (opening a FIFO blocks until a
//! writer appears; reading `/dev/zero` never ends), with [`InputError::NotRegular`] naming what
//! it is. Regular files and stdin are read up to [`MAX_INPUT`] bytes; a longer input (a file
//! still being appended to, an endless pipe on stdin) stops there with
//! [`InputError::TooLarge`]. Every command maps these to exit 2.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most bytes read from one input: 4 GiB.
pub const MAX_INPUT: u64 = 4 << 30;

/// Why an input could not be read. Displays as `FILE: reason`.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The path names something other than a regular file.
    #[error(
        "{}: not a regular file ({kind}); toolscope reads regular files (or `-` for stdin){}",
        path.display(),
        if *kind == "directory" { "" } else { " and does not wait on one" }
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    /// More than `limit` bytes.
    #[error("{}: larger than {limit} bytes (a file still growing or an endless stream?); stopped reading", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    /// The bytes are not UTF-8 where text is expected: `FILE:LINE:COLUMN: invalid UTF-8 (byte N)`.
    #[error("{0}")]
    Utf8(String),
    /// The operating system's error (missing file, permission, …), named once in the message
    /// (not also as a `source`, which an error chain would print a second time).
    #[error("{}: cannot read: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// What `meta` is, in words, when it is not a regular file.
fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
    let ft = meta.file_type();
    if ft.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return Some("FIFO");
        }
        if ft.is_socket() {
            return Some("socket");
        }
        if ft.is_char_device() {
            return Some("character device");
        }
        if ft.is_block_device() {
            return Some("block device");
        }
    }
    if ft.is_dir() {
        return Some("directory");
    }
    Some("special file")
}

/// Opens `path` for reading after checking (without opening it) that it is a regular file.
/// Errors: [`InputError::NotRegular`], [`InputError::Io`].
pub fn open_regular(path: &Path) -> Result<File, InputError> {
    let io = |error| InputError::Io {
        path: path.to_owned(),
        error,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if let Some(kind) = kind_of(&meta) {
        return Err(InputError::NotRegular {
            path: path.to_owned(),
            kind,
        });
    }
    let file = File::open(path).map_err(io)?;
    // The path may have been swapped between the two calls: check what was opened.
    let meta = file.metadata().map_err(io)?;
    if let Some(kind) = kind_of(&meta) {
        return Err(InputError::NotRegular {
            path: path.to_owned(),
            kind,
        });
    }
    Ok(file)
}

fn read_bounded(mut r: impl Read, path: &Path) -> Result<Vec<u8>, InputError> {
    let mut buf = Vec::new();
    (&mut r)
        .take(MAX_INPUT + 1)
        .read_to_end(&mut buf)
        .map_err(|error| InputError::Io {
            path: path.to_owned(),
            error,
        })?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(InputError::TooLarge {
            path: path.to_owned(),
            limit: MAX_INPUT,
        });
    }
    Ok(buf)
}

/// The bytes of the regular file `path` (at most [`MAX_INPUT`]).
/// Errors: see [`InputError`].
pub fn read_file(path: &Path) -> Result<Vec<u8>, InputError> {
    let f = open_regular(path)?;
    read_bounded(f, path)
}

/// [`read_file`], or stdin (at most [`MAX_INPUT`] bytes) when `path` is `-`.
pub fn read_file_or_stdin(path: &Path) -> Result<Vec<u8>, InputError> {
    if path.as_os_str() == "-" {
        return read_bounded(std::io::stdin().lock(), Path::new("<stdin>"));
    }
    read_file(path)
}

/// [`read_file`] as UTF-8 text. Errors: as [`read_file`], and invalid UTF-8 as
/// [`InputError::Utf8`] (`FILE:LINE:COLUMN: invalid UTF-8 (byte N)`).
pub fn read_text(path: &Path) -> Result<String, InputError> {
    let bytes = read_file(path)?;
    utf8(bytes, path)
}

/// `bytes` as a `String`, or [`InputError::Utf8`] naming the first bad byte
/// ([`crate::text::utf8_error`]).
pub fn utf8(bytes: Vec<u8>, path: &Path) -> Result<String, InputError> {
    String::from_utf8(bytes).map_err(|e| {
        InputError::Utf8(crate::text::utf8_error(
            &path.display().to_string(),
            e.as_bytes(),
            &e.utf8_error(),
        ))
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_devices_are_refused_without_opening() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        let ok = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(ok.success());
        // Opening it would block forever (no writer): the check happens before.
        let e = read_file(&fifo).unwrap_err();
        assert!(e.to_string().contains("not a regular file (FIFO)"), "{e}");
        let e = read_file(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = read_file(dir.path()).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let f = dir.path().join("x.json");
        std::fs::write(&f, b"{}").unwrap();
        assert_eq!(read_file(&f).unwrap(), b"{}");
        std::fs::write(&f, b"ab\xffc").unwrap();
        let e = read_text(&f).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}:1:3: invalid UTF-8 (byte 2)", f.display())
        );
    }

    /// A directory named where a file is expected: the message names it in plain English
    /// (no "does not wait on directorys": nothing waits on a directory).
    #[test]
    fn a_directory_is_named_plainly() {
        let dir = std::env::temp_dir();
        let e = read_file(&dir).unwrap_err().to_string();
        assert!(e.contains("not a regular file (directory)"), "{e}");
        assert!(!e.contains("directorys"), "{e}");
    }
}
