//! A small pure reader for GGUF metadata (the key/value header of a `.gguf` model file).
//!
//! Format: ggml `docs/gguf.md` (llama.cpp build 11434, `ggml/src/gguf.cpp`): magic `GGUF`,
//! `u32` version (2 or 3; little-endian), `u64` tensor count, `u64` key/value count, then each
//! key (`u64` length + UTF-8 bytes), a `u32` value type and the value. Only the header is read:
//! the reader stops after the last key/value and never touches tensor infos or tensor data, so
//! reading a 100 MB model's metadata costs a few MB of I/O at most.

use std::collections::BTreeMap;
use std::io::Read;

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    U64(u64),
    I64(i64),
    F64(f64),
    Array(Vec<GgufValue>),
}

impl GgufValue {
    /// The value as a string, when it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// Any integer type as `i64` (u64 above i64::MAX yields `None`).
    pub fn as_i64(&self) -> Option<i64> {
        Some(match *self {
            GgufValue::U8(v) => v as i64,
            GgufValue::I8(v) => v as i64,
            GgufValue::U16(v) => v as i64,
            GgufValue::I16(v) => v as i64,
            GgufValue::U32(v) => v as i64,
            GgufValue::I32(v) => v as i64,
            GgufValue::U64(v) => i64::try_from(v).ok()?,
            GgufValue::I64(v) => v,
            _ => return None,
        })
    }

    /// Any number as `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v as f64),
            GgufValue::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The value as a bool, when it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            GgufValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The value as an array, when it is one.
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// The metadata of a GGUF file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GgufMetadata {
    /// Format version (2 or 3).
    pub version: u32,
    /// Number of tensors the file declares (their data is not read).
    pub tensor_count: u64,
    /// Every key/value, by key.
    pub kv: BTreeMap<String, GgufValue>,
    /// Bytes of header consumed (offset of the first tensor info).
    pub header_len: u64,
}

impl GgufMetadata {
    /// Looks a key up.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.kv.get(key)
    }

    /// A string value.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(GgufValue::as_str)
    }

    /// An array of strings (e.g. `tokenizer.ggml.tokens`); `None` if absent or not strings.
    pub fn get_str_array(&self, key: &str) -> Option<Vec<&str>> {
        self.get(key)?
            .as_array()?
            .iter()
            .map(GgufValue::as_str)
            .collect()
    }
}

/// A GGUF header that cannot be read, with the byte offset where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GGUF metadata, byte {offset}: {message}")]
pub struct GgufError {
    pub offset: u64,
    pub message: String,
}

/// True when `bytes` starts with the GGUF magic.
pub fn is_gguf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"GGUF")
}

struct Reader<R> {
    r: R,
    off: u64,
}

/// Refuse absurd lengths from a damaged header rather than allocating them.
const MAX_STRING: u64 = 64 << 20;
const MAX_ARRAY: u64 = 16 << 20;
const MAX_KV: u64 = 1 << 20;

impl<R: Read> Reader<R> {
    fn err<T>(&self, m: impl Into<String>) -> Result<T, GgufError> {
        Err(GgufError {
            offset: self.off,
            message: m.into(),
        })
    }
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], GgufError> {
        let mut b = [0u8; N];
        if let Err(e) = self.r.read_exact(&mut b) {
            return self.err(format!("truncated ({e})"));
        }
        self.off += N as u64;
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.bytes::<4>()?))
    }
    fn u64(&mut self) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.bytes::<8>()?))
    }
    fn string(&mut self) -> Result<String, GgufError> {
        let len = self.u64()?;
        if len > MAX_STRING {
            return self.err(format!("string length {len} is implausible"));
        }
        let mut buf = vec![0u8; len as usize];
        if let Err(e) = self.r.read_exact(&mut buf) {
            return self.err(format!("truncated string ({e})"));
        }
        let start = self.off;
        self.off += len;
        match String::from_utf8(buf) {
            Ok(s) => Ok(s),
            // Token texts may hold invalid UTF-8 in old files; keep them lossily.
            Err(e) => {
                let _ = start;
                Ok(String::from_utf8_lossy(e.as_bytes()).into_owned())
            }
        }
    }
    fn value(&mut self, ty: u32, depth: u8) -> Result<GgufValue, GgufError> {
        Ok(match ty {
            0 => GgufValue::U8(self.bytes::<1>()?[0]),
            1 => GgufValue::I8(self.bytes::<1>()?[0] as i8),
            2 => GgufValue::U16(u16::from_le_bytes(self.bytes::<2>()?)),
            3 => GgufValue::I16(i16::from_le_bytes(self.bytes::<2>()?)),
            4 => GgufValue::U32(self.u32()?),
            5 => GgufValue::I32(i32::from_le_bytes(self.bytes::<4>()?)),
            6 => GgufValue::F32(f32::from_le_bytes(self.bytes::<4>()?)),
            7 => GgufValue::Bool(self.bytes::<1>()?[0] != 0),
            8 => GgufValue::String(self.string()?),
            9 => {
                if depth > 4 {
                    return self.err("arrays nested too deeply");
                }
                let ety = self.u32()?;
                let n = self.u64()?;
                if n > MAX_ARRAY {
                    return self.err(format!("array length {n} is implausible"));
                }
                let mut v = Vec::with_capacity(n.min(1 << 16) as usize);
                for _ in 0..n {
                    v.push(self.value(ety, depth + 1)?);
                }
                GgufValue::Array(v)
            }
            10 => GgufValue::U64(self.u64()?),
            11 => GgufValue::I64(i64::from_le_bytes(self.bytes::<8>()?)),
            12 => GgufValue::F64(f64::from_le_bytes(self.bytes::<8>()?)),
            t => return self.err(format!("unknown value type {t}")),
        })
    }
}

/// Reads the metadata from the start of a GGUF stream (a file or its first bytes). Reads only
/// the header. Errors: not GGUF, unsupported version, truncated or implausible header — with
/// the byte offset.
pub fn read_metadata<R: Read>(r: R) -> Result<GgufMetadata, GgufError> {
    let mut rd = Reader { r, off: 0 };
    let magic = rd.bytes::<4>()?;
    if &magic != b"GGUF" {
        return Err(GgufError {
            offset: 0,
            message: "not a GGUF file (magic is not \"GGUF\")".into(),
        });
    }
    let version = rd.u32()?;
    if !(2..=3).contains(&version) {
        return rd.err(format!(
            "unsupported GGUF version {version} (2 and 3 are supported)"
        ));
    }
    let tensor_count = rd.u64()?;
    let kv_count = rd.u64()?;
    if kv_count > MAX_KV {
        return rd.err(format!("key/value count {kv_count} is implausible"));
    }
    let mut kv = BTreeMap::new();
    for _ in 0..kv_count {
        let key = rd.string()?;
        let ty = rd.u32()?;
        let v = rd.value(ty, 0)?;
        kv.insert(key, v);
    }
    Ok(GgufMetadata {
        version,
        tensor_count,
        kv,
        header_len: rd.off,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(out: &mut Vec<u8>, t: &str) {
        out.extend((t.len() as u64).to_le_bytes());
        out.extend(t.as_bytes());
    }

    #[test]
    fn reads_handmade_header() {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(3u64.to_le_bytes());
        s(&mut b, "tokenizer.chat_template");
        b.extend(8u32.to_le_bytes());
        s(&mut b, "{{ x }}");
        s(&mut b, "tokenizer.ggml.bos_token_id");
        b.extend(4u32.to_le_bytes());
        b.extend(7u32.to_le_bytes());
        s(&mut b, "tokenizer.ggml.tokens");
        b.extend(9u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        s(&mut b, "<s>");
        s(&mut b, "a");
        let m = read_metadata(&b[..]).unwrap();
        assert_eq!(m.get_str("tokenizer.chat_template"), Some("{{ x }}"));
        assert_eq!(
            m.get("tokenizer.ggml.bos_token_id")
                .and_then(GgufValue::as_i64),
            Some(7)
        );
        assert_eq!(
            m.get_str_array("tokenizer.ggml.tokens"),
            Some(vec!["<s>", "a"])
        );
        assert_eq!(m.header_len, b.len() as u64);
        let e = read_metadata(&b[..b.len() - 1]).unwrap_err();
        assert!(e.message.contains("truncated"), "{e}");
    }
}
