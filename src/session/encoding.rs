//! Compressed request bodies: `Content-Encoding: gzip | deflate | zstd | br` (RFC 9110 §8.4;
//! zstd RFC 8878, brotli RFC 7932), decoded for analysis in bounded memory.
//!
//! A session stores a request body exactly as the client sent it (compressed bytes, base64 in
//! the file when not UTF-8) — the proxy forwards and records the bytes unchanged. Everything
//! that reads the body as JSON (the analysis, `check`, the proxy's llama-server render) goes
//! through [`decode_request_body`], which undoes the codings the request's `content-encoding`
//! header lists, last applied first. Pure: bytes in, bytes out.
//!
//! **Bound.** Decoding streams through a fixed buffer and stops at `cap` decoded bytes
//! ([`DECODED_CAP`], 32 MiB, for the analysis); nothing is allocated past `cap` plus the
//! decoder's own state (a zstd frame declaring a window over [`MAX_ZSTD_WINDOW`] (16 MiB) is refused
//! before decoding; brotli's window is at most 16 MiB by its format; deflate's 32 KiB). A body
//! that decodes past the cap (a decompression bomb) gives [`BodyDecodeError::TooLarge`]; a
//! corrupt one [`BodyDecodeError::Corrupt`]; an unknown coding
//! [`BodyDecodeError::Unsupported`] — never a panic.
//!
//! Decoders (pure Rust): `flate2` (gzip, zlib, raw deflate; its `miniz_oxide` backend was
//! already built for syntect), `ruzstd` (zstd), `brotli-decompressor` (brotli).

use std::borrow::Cow;
use std::io::Read;

/// How many decoded bytes the analysis reads from a compressed request body (32 MiB): ample
/// for a Responses history (Codex's first request is ~30 KB of JSON), and a bound against a
/// decompression bomb.
pub const DECODED_CAP: usize = 32 << 20;

/// The largest zstd window accepted (16 MiB; the decoder reserves the window up front):
/// compression levels 1–19 use at most 8 MiB (the reference decoder accepts up to 128 MiB,
/// `ZSTD_WINDOWLOG_LIMIT_DEFAULT` = 27, for `--long`); a frame asking for more is refused
/// before any memory is taken for it.
pub const MAX_ZSTD_WINDOW: u64 = 16 << 20;

/// One content coding (RFC 9110 §8.4.1; zstd: RFC 8878 §7.2; br: RFC 7932 §13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    /// HTTP's `deflate` is the zlib format (RFC 1950); a raw deflate stream (RFC 1951), which
    /// some clients send under the same name, is read too.
    Deflate,
    Zstd,
    Br,
    /// Anything else, as written in the header (lower-cased).
    Other(String),
}

impl Coding {
    fn parse(token: &str) -> Option<Coding> {
        let t = token.trim().to_ascii_lowercase();
        Some(match t.as_str() {
            "" | "identity" => return None,
            "gzip" | "x-gzip" => Coding::Gzip,
            "deflate" => Coding::Deflate,
            "zstd" => Coding::Zstd,
            "br" => Coding::Br,
            _ => Coding::Other(t),
        })
    }

    /// The header token (`gzip`, `deflate`, `zstd`, `br`, or the unknown one).
    pub fn name(&self) -> &str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Zstd => "zstd",
            Coding::Br => "br",
            Coding::Other(s) => s,
        }
    }
}

/// Why a compressed body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyDecodeError {
    /// A coding toolscope does not decode.
    #[error("content-encoding {0:?} is not one toolscope decodes (gzip, deflate, zstd, br)")]
    Unsupported(String),
    /// The bytes are not valid for the coding.
    #[error(
        "content-encoding {coding}: not a valid {coding} stream after {decoded} decoded bytes: {reason}"
    )]
    Corrupt {
        coding: String,
        /// Decoded bytes produced before the error.
        decoded: usize,
        reason: String,
    },
    /// Decoding would produce more than `cap` bytes (a decompression bomb, or a body larger
    /// than toolscope reads): stopped at the cap.
    #[error(
        "content-encoding {coding}: the body decodes to more than {cap} bytes ({compressed} bytes compressed); decoding stopped there"
    )]
    TooLarge {
        coding: String,
        cap: usize,
        compressed: usize,
    },
}

/// The codings a `content-encoding` header value lists, in the order they were applied
/// (`identity` and empty members skipped). Several headers are joined in order.
pub fn codings<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Coding> {
    headers
        .into_iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("content-encoding"))
        .flat_map(|(_, v)| v.split(','))
        .filter_map(Coding::parse)
        .collect()
}

/// The codings of a recorded request (`[name, value]` header pairs).
pub fn request_codings(headers: &[(String, String)]) -> Vec<Coding> {
    codings(headers.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// The body with every coding in `headers`' `content-encoding` undone, last applied first;
/// borrowed unchanged when there is none. At most `cap` decoded bytes per step (see the module
/// docs for the bound).
///
/// Errors: an unknown coding, a corrupt stream, or more than `cap` decoded bytes.
pub fn decode_request_body<'a>(
    headers: &[(String, String)],
    body: &'a [u8],
    cap: usize,
) -> Result<Cow<'a, [u8]>, BodyDecodeError> {
    let list = request_codings(headers);
    let mut out: Cow<'a, [u8]> = Cow::Borrowed(body);
    for c in list.iter().rev() {
        out = Cow::Owned(decode_one(c, &out, cap)?);
    }
    Ok(out)
}

/// Undoes one coding of `data`, reading at most `cap` decoded bytes.
pub fn decode_one(coding: &Coding, data: &[u8], cap: usize) -> Result<Vec<u8>, BodyDecodeError> {
    match coding {
        Coding::Gzip => bounded(
            coding,
            data.len(),
            flate2::read::MultiGzDecoder::new(data),
            cap,
        ),
        Coding::Deflate => {
            // zlib (RFC 1950) first; a raw deflate stream has no valid zlib header.
            match bounded(
                coding,
                data.len(),
                flate2::read::ZlibDecoder::new(data),
                cap,
            ) {
                Err(BodyDecodeError::Corrupt { decoded: 0, .. }) => bounded(
                    coding,
                    data.len(),
                    flate2::read::DeflateDecoder::new(data),
                    cap,
                ),
                r => r,
            }
        }
        Coding::Zstd => decode_zstd(data, cap),
        Coding::Br => bounded(
            coding,
            data.len(),
            brotli_decompressor::Decompressor::new(data, 64 << 10),
            cap,
        ),
        Coding::Other(name) => Err(BodyDecodeError::Unsupported(name.clone())),
    }
}

/// zstd: one or more frames (RFC 8878 §3.1), skippable frames (magic `0x184D2A5?`) skipped;
/// a frame declaring a window over [`MAX_ZSTD_WINDOW`] is refused before decoding
/// (`FrameDecoder::set_max_window_size`, as libzstd's `ZSTD_d_windowLogMax`).
fn decode_zstd(data: &[u8], cap: usize) -> Result<Vec<u8>, BodyDecodeError> {
    let coding = Coding::Zstd;
    let corrupt = |decoded: usize, reason: String| BodyDecodeError::Corrupt {
        coding: "zstd".into(),
        decoded,
        reason,
    };
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        if rest.len() >= 8 && rest[0] & 0xf0 == 0x50 && rest[1..4] == [0x2a, 0x4d, 0x18] {
            let len = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
            let skip = 8usize.saturating_add(len);
            if skip > rest.len() {
                return Err(corrupt(
                    out.len(),
                    "a skippable frame runs past the body".into(),
                ));
            }
            rest = &rest[skip..];
            continue;
        }
        let mut cursor = std::io::Cursor::new(rest);
        let dec = ruzstd::decoding::StreamingDecoder::new_with_max_window_size(
            &mut cursor,
            MAX_ZSTD_WINDOW,
        )
        .map_err(|e| corrupt(out.len(), e.to_string()))?;
        let part = bounded(&coding, data.len(), dec, cap - out.len()).map_err(|e| match e {
            BodyDecodeError::Corrupt {
                decoded, reason, ..
            } => corrupt(out.len() + decoded, reason),
            BodyDecodeError::TooLarge { .. } => BodyDecodeError::TooLarge {
                coding: "zstd".into(),
                cap,
                compressed: data.len(),
            },
            other => other,
        })?;
        out.extend_from_slice(&part);
        let used = (cursor.position() as usize).min(rest.len());
        if used == 0 {
            break;
        }
        rest = &rest[used..];
    }
    Ok(out)
}

/// Reads `r` to its end into a buffer that never grows past `cap` bytes (doubling, clamped at
/// the cap); one more byte than `cap` is [`BodyDecodeError::TooLarge`].
fn bounded(
    coding: &Coding,
    compressed: usize,
    mut r: impl Read,
    cap: usize,
) -> Result<Vec<u8>, BodyDecodeError> {
    let mut out: Vec<u8> = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(BodyDecodeError::Corrupt {
                    coding: coding.name().to_owned(),
                    decoded: out.len(),
                    reason: e.to_string(),
                });
            }
        };
        if out.len() + n > cap {
            return Err(BodyDecodeError::TooLarge {
                coding: coding.name().to_owned(),
                cap,
                compressed,
            });
        }
        if out.capacity() < out.len() + n {
            let want = (out.capacity() * 2)
                .max(out.len() + n)
                .max(64 << 10)
                .min(cap);
            out.reserve_exact(want - out.len());
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn h(v: &str) -> Vec<(String, String)> {
        vec![
            ("content-type".into(), "application/json".into()),
            ("content-encoding".into(), v.into()),
        ]
    }

    const JSON: &[u8] = br#"{"model":"m","input":[{"role":"user","content":"hi"}],"tools":[]}"#;

    fn gzip(d: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(d).unwrap();
        e.finish().unwrap()
    }

    fn zlib(d: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(d).unwrap();
        e.finish().unwrap()
    }

    fn raw_deflate(d: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(d).unwrap();
        e.finish().unwrap()
    }

    fn zstd(d: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(d, ruzstd::encoding::CompressionLevel::Fastest)
    }

    /// A brotli stream of one uncompressed meta-block (RFC 7932 §9.2: WBITS = 16 as one 0
    /// bit; ISLAST = 0; MNIBBLES = 4 as `00`; MLEN − 1 in 16 bits; ISUNCOMPRESSED = 1; pad to
    /// the byte; the bytes), then an empty last meta-block (ISLAST = 1, ISLASTEMPTY = 1).
    fn brotli_stored(d: &[u8]) -> Vec<u8> {
        assert!(!d.is_empty() && d.len() <= 1 << 16);
        let mut bits: Vec<bool> = Vec::new();
        let put = |v: u64, n: usize, bits: &mut Vec<bool>| {
            for i in 0..n {
                bits.push(v >> i & 1 == 1);
            }
        };
        put(0, 1, &mut bits); // WBITS 16
        put(0, 1, &mut bits); // ISLAST 0
        put(0, 2, &mut bits); // MNIBBLES 4
        put(d.len() as u64 - 1, 16, &mut bits);
        put(1, 1, &mut bits); // ISUNCOMPRESSED
        let mut out = Vec::new();
        let pack = |bits: &[bool], out: &mut Vec<u8>| {
            for byte in bits.chunks(8) {
                out.push(
                    byte.iter()
                        .enumerate()
                        .fold(0u8, |a, (i, &b)| a | (u8::from(b) << i)),
                );
            }
        };
        pack(&bits, &mut out);
        out.extend_from_slice(d);
        out.push(0b11); // ISLAST, ISLASTEMPTY
        out
    }

    #[test]
    fn each_coding_decodes_to_the_body_sent() {
        for (name, enc) in [
            ("gzip", gzip(JSON)),
            ("x-gzip", gzip(JSON)),
            ("deflate", zlib(JSON)),
            ("deflate", raw_deflate(JSON)),
            ("zstd", zstd(JSON)),
            ("br", brotli_stored(JSON)),
            ("ZSTD", zstd(JSON)),
        ] {
            let got = decode_request_body(&h(name), &enc, DECODED_CAP).unwrap();
            assert_eq!(&*got, JSON, "{name}");
            assert_ne!(enc, JSON, "{name}: really encoded");
        }
        // Two codings, applied in header order: undone last first.
        let both = gzip(&zstd(JSON));
        assert_eq!(
            &*decode_request_body(&h("zstd, gzip"), &both, DECODED_CAP).unwrap(),
            JSON
        );
        // No coding, identity: the bytes themselves, not copied.
        let plain = decode_request_body(&h("identity"), JSON, 10).unwrap();
        assert!(matches!(plain, Cow::Borrowed(_)));
        let none = decode_request_body(&[], JSON, 10).unwrap();
        assert!(matches!(none, Cow::Borrowed(_)));
    }

    #[test]
    fn a_bomb_stops_at_the_cap_and_bad_bodies_are_errors() {
        let zeros = vec![0u8; 8 << 20];
        for (name, enc) in [("gzip", gzip(&zeros)), ("zstd", zstd(&zeros))] {
            assert!(enc.len() < 64 << 10, "{name}: {} bytes", enc.len());
            let e = decode_request_body(&h(name), &enc, 1 << 20).unwrap_err();
            assert_eq!(
                e,
                BodyDecodeError::TooLarge {
                    coding: name.into(),
                    cap: 1 << 20,
                    compressed: enc.len()
                },
                "{name}"
            );
            // exactly the cap fits
            assert_eq!(
                decode_request_body(&h(name), &enc, 8 << 20).unwrap().len(),
                8 << 20
            );
        }
        // Corrupt streams name the coding; truncated ones too.
        for (name, bytes) in [
            ("gzip", b"\x1f\x8b\x08\x00garbage".to_vec()),
            ("zstd", b"\x28\xb5\x2f\xfdgarbage".to_vec()),
            ("zstd", zstd(JSON)[..10].to_vec()),
            ("br", b"\xff\xff\xff\xff".to_vec()),
            ("deflate", b"\xff\xfe\xfd".to_vec()),
            ("gzip", JSON.to_vec()),
        ] {
            match decode_request_body(&h(name), &bytes, DECODED_CAP) {
                Err(BodyDecodeError::Corrupt { coding, .. }) => assert_eq!(coding, name),
                other => panic!("{name} {bytes:?}: {other:?}"),
            }
        }
        assert_eq!(
            decode_request_body(&h("compress"), JSON, DECODED_CAP).unwrap_err(),
            BodyDecodeError::Unsupported("compress".into())
        );
        // A zstd frame header asking for a 2 GiB window (Window_Descriptor exponent 21):
        // refused before decoding.
        let mut huge = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 21 << 3];
        huge.extend_from_slice(&[0; 8]);
        match decode_request_body(&h("zstd"), &huge, DECODED_CAP).unwrap_err() {
            BodyDecodeError::Corrupt { reason, .. } => {
                assert!(reason.contains("window_size is too big"), "{reason}")
            }
            e => panic!("{e:?}"),
        }
    }
}
