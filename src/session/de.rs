//! Reading session lines without serde's buffering.
//!
//! serde's derive reads an internally tagged enum (`{"type": "exchange", …}`) and an untagged
//! or flattened field by first copying the whole object into a private `Content` tree, then
//! reading that tree again; a session line's `Line` → `Annotation` tags, every chunk's
//! flattened `Body` and every token's untagged `Piece` were each copied that way. On the
//! `check` bench (a 250 MB session, `cargo bench --bench check`) that copying was a quarter of
//! the run. The impls here read the same JSON in one pass: a tagged object whose tag is its
//! first key (as every writer, serde's `Serialize` included, puts it) is read straight into its
//! variant; any other key order is still accepted, through a buffered [`Value`] read.
//!
//! The wire format is unchanged and written by the derived `Serialize` impls in
//! [`super::model`]; `tests` below round-trips every variant through both.

use super::model::{Annotation, Body, Chunk, Line, Piece};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;
use std::marker::PhantomData;

/// An internally tagged enum: `TAG` names the variant, the object's other keys are its body.
trait Tagged: Sized {
    /// The tag's key (`type`, `kind`).
    const TAG: &'static str;
    /// Every variant's tag value, for `unknown variant` errors.
    const VARIANTS: &'static [&'static str];
    /// What the visitor expects, for `invalid type` errors.
    const EXPECTING: &'static str;
    /// Reads the body of variant `variant` from `d` (the object without its tag).
    fn body<'de, D: Deserializer<'de>>(variant: &str, d: D) -> Result<Self, D::Error>;
}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: Tagged> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Err(de::Error::missing_field(T::TAG));
        };
        if first == T::TAG {
            let variant = map.next_value::<String>()?;
            // a second tag is a duplicate key like any other (the derived bodies refuse their
            // own duplicate fields)
            return T::body(
                &variant,
                de::value::MapAccessDeserializer::new(NoSecondTag { map, tag: T::TAG }),
            );
        }
        // The tag is not first: buffer the object's entries in order, duplicates kept, and read
        // the body from them, so a duplicate key meets the same refusal as above.
        let mut entries: Vec<(String, Value)> = vec![(first, map.next_value::<StrictValue>()?.0)];
        while let Some((k, v)) = map.next_entry::<String, StrictValue>()? {
            entries.push((k, v.0));
        }
        let mut tags = entries.iter().filter(|(k, _)| k == T::TAG);
        let variant = match (tags.next(), tags.next()) {
            (_, Some(_)) => return Err(de::Error::duplicate_field(T::TAG)),
            (Some((_, Value::String(s))), None) => s.clone(),
            (Some((_, other)), None) => {
                return Err(de::Error::invalid_type(unexpected(other), &"a string"));
            }
            (None, _) => return Err(de::Error::missing_field(T::TAG)),
        };
        entries.retain(|(k, _)| k != T::TAG);
        T::body(
            &variant,
            de::value::MapDeserializer::<_, serde_json::Error>::new(entries.into_iter()),
        )
        .map_err(de::Error::custom)
    }
}

/// A tagged object's body after its tag: refuses the tag key given again.
struct NoSecondTag<A> {
    map: A,
    tag: &'static str,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for NoSecondTag<A> {
    type Error = A::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let Some(key) = self.map.next_key::<String>()? else {
            return Ok(None);
        };
        if key == self.tag {
            return Err(de::Error::duplicate_field(self.tag));
        }
        seed.deserialize(de::value::StringDeserializer::<A::Error>::new(key))
            .map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// JSON read into a [`Value`], refusing an object that gives one key twice (serde_json's
/// `Value` keeps the last): the session reader's one rule for duplicate keys, whatever their
/// order (`duplicate field `id``, with serde_json's line and column).
pub(crate) struct StrictValue(pub Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrictValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::Bool(b)))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::from(n)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::from(n)))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<StrictValue, E> {
                Ok(StrictValue(
                    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number),
                ))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::String(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::String(s)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::Null))
            }
            fn visit_none<E: de::Error>(self) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::Null))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<StrictValue, D::Error> {
                StrictValue::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
                let mut v = Vec::new();
                while let Some(StrictValue(x)) = seq.next_element()? {
                    v.push(x);
                }
                Ok(StrictValue(Value::Array(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
                let mut m = serde_json::Map::new();
                while let Some(k) = map.next_key::<String>()? {
                    if m.contains_key(&k) {
                        return Err(de::Error::custom(format_args!("duplicate field `{k}`")));
                    }
                    let StrictValue(v) = map.next_value()?;
                    m.insert(k, v);
                }
                Ok(StrictValue(Value::Object(m)))
            }
        }
        d.deserialize_any(V)
    }
}

/// `deserialize_with` for a verbatim JSON field (`props`, `show`): [`StrictValue`].
pub(crate) fn strict_value<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Option::<StrictValue>::deserialize(d).map(|v| v.map(|v| v.0))
}

fn unexpected(v: &Value) -> de::Unexpected<'_> {
    match v {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(_) => de::Unexpected::Other("a number"),
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

fn tagged<'de, D: Deserializer<'de>, T: Tagged>(d: D) -> Result<T, D::Error> {
    d.deserialize_map(TaggedVisitor(PhantomData))
}

impl Tagged for Line {
    const TAG: &'static str = "type";
    const VARIANTS: &'static [&'static str] = &["header", "exchange", "annotation"];
    const EXPECTING: &'static str = "a session line (an object tagged by \"type\")";

    fn body<'de, D: Deserializer<'de>>(variant: &str, d: D) -> Result<Self, D::Error> {
        match variant {
            "header" => Deserialize::deserialize(d).map(Line::Header),
            "exchange" => Deserialize::deserialize(d).map(|e| Line::Exchange(Box::new(e))),
            "annotation" => Deserialize::deserialize(d).map(Line::Annotation),
            other => Err(de::Error::unknown_variant(other, Self::VARIANTS)),
        }
    }
}

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged(d)
    }
}

/// The bodies of [`Annotation`]'s variants, field for field. Each conversion below names every
/// field of both sides, so a field added to one and not the other does not compile.
mod body {
    use super::super::model::{RawTextSource, Server, TokenPiece};
    use serde::Deserialize;
    use serde_json::Value;

    #[derive(Deserialize)]
    pub(super) struct ServerRender {
        pub exchange: u64,
        #[serde(default)]
        pub prompt: Option<String>,
        #[serde(default)]
        pub tokens: Option<Vec<TokenPiece>>,
        #[serde(default)]
        pub error: Option<String>,
    }

    #[derive(Deserialize)]
    pub(super) struct RawText {
        pub exchange: u64,
        pub source: RawTextSource,
        #[serde(default)]
        pub text: Option<String>,
        #[serde(default)]
        pub slot: Option<u64>,
        #[serde(default)]
        pub generation_prompt: Option<String>,
        #[serde(default)]
        pub by: Option<u64>,
        #[serde(default)]
        pub verified: Option<bool>,
        #[serde(default)]
        pub diverged_at: Option<usize>,
        #[serde(default)]
        pub prompt_from: Option<String>,
        #[serde(default)]
        pub error: Option<String>,
    }

    #[derive(Deserialize)]
    pub(super) struct Engine_ {
        pub exchange: u64,
        pub engine: Server,
        #[serde(default, deserialize_with = "super::strict_value")]
        pub props: Option<Value>,
    }

    #[derive(Deserialize)]
    pub(super) struct OllamaShow {
        pub exchange: u64,
        pub model: String,
        #[serde(default, deserialize_with = "super::strict_value")]
        pub show: Option<Value>,
        #[serde(default)]
        pub error: Option<String>,
    }
}

impl Tagged for Annotation {
    const TAG: &'static str = "kind";
    const VARIANTS: &'static [&'static str] =
        &["server_render", "raw_text", "engine", "ollama_show"];
    const EXPECTING: &'static str = "an annotation (an object tagged by \"kind\")";

    fn body<'de, D: Deserializer<'de>>(variant: &str, d: D) -> Result<Self, D::Error> {
        Ok(match variant {
            "server_render" => {
                let body::ServerRender {
                    exchange,
                    prompt,
                    tokens,
                    error,
                } = Deserialize::deserialize(d)?;
                Annotation::ServerRender {
                    exchange,
                    prompt,
                    tokens,
                    error,
                }
            }
            "raw_text" => {
                let body::RawText {
                    exchange,
                    source,
                    text,
                    slot,
                    generation_prompt,
                    by,
                    verified,
                    diverged_at,
                    prompt_from,
                    error,
                } = Deserialize::deserialize(d)?;
                Annotation::RawText {
                    exchange,
                    source,
                    text,
                    slot,
                    generation_prompt,
                    by,
                    verified,
                    diverged_at,
                    prompt_from,
                    error,
                }
            }
            "engine" => {
                let body::Engine_ {
                    exchange,
                    engine,
                    props,
                } = Deserialize::deserialize(d)?;
                Annotation::Engine {
                    exchange,
                    engine,
                    props,
                }
            }
            "ollama_show" => {
                let body::OllamaShow {
                    exchange,
                    model,
                    show,
                    error,
                } = Deserialize::deserialize(d)?;
                Annotation::OllamaShow {
                    exchange,
                    model,
                    show,
                    error,
                }
            }
            other => return Err(de::Error::unknown_variant(other, Self::VARIANTS)),
        })
    }
}

impl<'de> Deserialize<'de> for Annotation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged(d)
    }
}

/// The error for a body or chunk object with neither form.
const NOT_A_BODY: &str = "a body needs a \"text\" or a \"base64\" field";

/// The error for a body or chunk object whose `text` and `base64` are not strings.
const NOT_A_STRING: &str = "a body's \"text\" or \"base64\" must be a string";

/// Reads the keys of a chunk or body object: `t_us` (chunks only), `text`, `base64`; other keys
/// are skipped. A `text` string wins over a `base64` one (as the untagged derive tried `Text`
/// first); a form whose value is not a string is passed over for the other, as the derive did.
struct BodyFields {
    t_us: Option<u64>,
    text: Option<Form>,
    base64: Option<Form>,
}

/// A `text` or `base64` value: its string, or `None` when it is JSON of another type.
struct Form(Option<String>);

impl<'de> Deserialize<'de> for Form {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Form(match Value::deserialize(d)? {
            Value::String(s) => Some(s),
            _ => None,
        }))
    }
}

impl BodyFields {
    fn read<'de, A: MapAccess<'de>>(mut map: A, chunk: bool) -> Result<Self, A::Error> {
        let mut out = BodyFields {
            t_us: None,
            text: None,
            base64: None,
        };
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::TUs if chunk && out.t_us.is_some() => {
                    return Err(de::Error::duplicate_field("t_us"));
                }
                Key::Text if out.text.is_some() => return Err(de::Error::duplicate_field("text")),
                Key::Base64 if out.base64.is_some() => {
                    return Err(de::Error::duplicate_field("base64"));
                }
                Key::TUs if chunk => out.t_us = Some(map.next_value()?),
                Key::Text => out.text = Some(map.next_value()?),
                Key::Base64 => out.base64 = Some(map.next_value()?),
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }

    fn body(self) -> Result<Body, &'static str> {
        match (self.text, self.base64) {
            (Some(Form(Some(text))), _) => Ok(Body::Text { text }),
            (_, Some(Form(Some(base64)))) => Ok(Body::Base64 { base64 }),
            (None, None) => Err(NOT_A_BODY),
            _ => Err(NOT_A_STRING),
        }
    }
}

/// A chunk or body key, read without allocating.
enum Key {
    TUs,
    Text,
    Base64,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
                Ok(match s {
                    "t_us" => Key::TUs,
                    "text" => Key::Text,
                    "base64" => Key::Base64,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// Reads a body or chunk object's fields ([`BodyFields`]) and makes `T` of them, inside the
/// visitor (so an error carries the object's position).
struct FieldsVisitor<T> {
    chunk: bool,
    expecting: &'static str,
    make: fn(BodyFields) -> Result<T, &'static str>,
}

impl<'de, T> Visitor<'de> for FieldsVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        (self.make)(BodyFields::read(map, self.chunk)?).map_err(de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FieldsVisitor {
            chunk: false,
            expecting: "a body ({\"text\": …} or {\"base64\": …})",
            make: BodyFields::body,
        })
    }
}

impl<'de> Deserialize<'de> for Chunk {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FieldsVisitor {
            chunk: true,
            expecting: "a chunk ({\"t_us\": …, \"text\" or \"base64\": …})",
            make: |f| {
                Ok(Chunk {
                    t_us: f.t_us.ok_or("missing field `t_us`")?,
                    data: f.body()?,
                })
            },
        })
    }
}

impl<'de> Deserialize<'de> for Piece {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Piece;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a token piece (a string or an array of byte values)")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Piece, E> {
                Ok(Piece::Text(s.to_owned()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Piece, E> {
                Ok(Piece::Text(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Piece, A::Error> {
                let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(4));
                while let Some(b) = seq.next_element::<u8>()? {
                    bytes.push(b);
                }
                Ok(Piece::Bytes(bytes))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::*;
    use serde_json::json;

    fn every_line() -> Vec<Line> {
        let tokens = vec![
            TokenPiece {
                id: 1,
                piece: Piece::Text("<|im_start|>".into()),
            },
            TokenPiece {
                id: 2,
                piece: Piece::Bytes(vec![0xe2, 0x96]),
            },
        ];
        vec![
            Line::Header(Header {
                format: "toolscope-session/1".into(),
                created: "2026-12-01T00:00:00Z".into(),
                tool: "toolscope 0.1.0".into(),
                upstream: Some("http://127.0.0.1:8080".into()),
                engine: Some(Server {
                    kind: ServerKind::LlamaServer,
                    version: Some("b11434".into()),
                    model: None,
                }),
                props: Some(json!({"chat_template": "{{ x }}"})),
                source: None,
            }),
            Line::Exchange(Box::new(Exchange {
                id: 3,
                started: "2026-12-01T00:00:00.000001Z".into(),
                label: Some("send".into()),
                request: Request {
                    method: "POST".into(),
                    path: "/v1/chat/completions".into(),
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: Body::Text {
                        text: "{\"model\":\"m\"}".into(),
                    },
                },
                response: Some(Response {
                    status: 200,
                    headers: vec![],
                    body: Some(Body::Base64 {
                        base64: "/w==".into(),
                    }),
                    chunks: Some(vec![
                        Chunk {
                            t_us: 5,
                            data: Body::Text {
                                text: "data: {}\n\n".into(),
                            },
                        },
                        Chunk {
                            t_us: 9,
                            data: Body::Base64 {
                                base64: "4pY=".into(),
                            },
                        },
                    ]),
                }),
                timings: Timings {
                    ttfb_us: Some(4),
                    total_us: Some(10),
                },
                outcome: Outcome::ClientDisconnected,
                error: Some("client closed the connection".into()),
                websocket: Some(crate::session::WebSocket {
                    connection: 3,
                    extensions: Some("permessage-deflate".into()),
                    frames: vec![crate::session::WsFrame {
                        t_us: 5,
                        from: "client".into(),
                        opcode: "ping".into(),
                        fin: true,
                        compressed: false,
                        len: 2,
                        data: Some(Body::Text { text: "hi".into() }),
                    }],
                }),
            })),
            Line::Annotation(Annotation::ServerRender {
                exchange: 3,
                prompt: Some("<|im_start|>".into()),
                tokens: Some(tokens),
                error: None,
            }),
            Line::Annotation(Annotation::ServerRender {
                exchange: 3,
                prompt: None,
                tokens: None,
                error: Some("HTTP 404".into()),
            }),
            Line::Annotation(Annotation::RawText {
                exchange: 3,
                source: RawTextSource::Regenerated,
                text: Some("<tool_call>".into()),
                slot: Some(0),
                generation_prompt: Some("<|im_start|>assistant\n".into()),
                by: Some(4),
                verified: Some(false),
                diverged_at: Some(7),
                prompt_from: Some("llama-server /apply-template".into()),
                error: Some("e".into()),
            }),
            Line::Annotation(Annotation::Engine {
                exchange: 3,
                engine: Server {
                    kind: ServerKind::Vllm,
                    version: None,
                    model: Some("m".into()),
                },
                props: Some(json!({"a": 1})),
            }),
            Line::Annotation(Annotation::OllamaShow {
                exchange: 3,
                model: "llama3".into(),
                show: Some(json!({"template": "{{ .Prompt }}"})),
                error: None,
            }),
        ]
    }

    #[test]
    fn every_line_round_trips_through_the_one_pass_reader() {
        for line in every_line() {
            let text = serde_json::to_string(&line).unwrap();
            let back: Line = serde_json::from_str(&text).unwrap();
            assert_eq!(back, line, "{text}");
        }
    }

    #[test]
    fn tags_in_any_position_read_the_same() {
        // Keys reversed: the tag last (a hand-edited or re-serialised file).
        fn reversed(v: &serde_json::Value) -> serde_json::Value {
            match v {
                serde_json::Value::Object(m) => serde_json::Value::Object(
                    m.iter()
                        .rev()
                        .map(|(k, v)| (k.clone(), reversed(v)))
                        .collect(),
                ),
                serde_json::Value::Array(a) => {
                    serde_json::Value::Array(a.iter().map(reversed).collect())
                }
                other => other.clone(),
            }
        }
        for line in every_line() {
            let v = serde_json::to_value(&line).unwrap();
            let text = serde_json::to_string(&reversed(&v)).unwrap();
            assert!(!text.starts_with("{\"type\""), "{text}");
            let back: Line = serde_json::from_str(&text).unwrap();
            assert_eq!(back, line, "{text}");
        }
    }

    #[test]
    fn a_body_form_that_is_not_a_string_yields_to_the_other_form() {
        // As the untagged derive read them: `text` first, else `base64`; a key of either whose
        // value is not a string (e.g. a writer that puts `"text": null` beside the base64) is
        // passed over, not an unreadable line.
        let cases = [
            (
                r#"{"text":null,"base64":"/w=="}"#,
                Body::Base64 {
                    base64: "/w==".into(),
                },
            ),
            (
                r#"{"text":5,"base64":"/w=="}"#,
                Body::Base64 {
                    base64: "/w==".into(),
                },
            ),
            (
                r#"{"text":"a","base64":null}"#,
                Body::Text { text: "a".into() },
            ),
            (
                r#"{"base64":{"x":[1]},"text":"a"}"#,
                Body::Text { text: "a".into() },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(serde_json::from_str::<Body>(text).unwrap(), want, "{text}");
            let chunk = format!(r#"{{"t_us":4,{}"#, &text[1..]);
            let got = serde_json::from_str::<Chunk>(&chunk).unwrap();
            assert_eq!((got.t_us, got.data), (4, want), "{chunk}");
        }
        // neither form a string: still refused, naming the field
        for text in [r#"{"text":null}"#, r#"{"text":1,"base64":[2]}"#] {
            let err = serde_json::from_str::<Body>(text).unwrap_err().to_string();
            assert!(err.contains("must be a string"), "{text}: {err}");
        }
    }

    #[test]
    fn bad_lines_name_what_is_wrong_and_where() {
        let cases = [
            (
                r#"{"type":"nope","x":1}"#,
                "unknown variant `nope`, expected one of `header`, `exchange`, `annotation`",
            ),
            (r#"{"x":1}"#, "missing field `type`"),
            (
                r#"{"type":"annotation","kind":"raw_text","exchange":1}"#,
                "missing field `source`",
            ),
            (
                r#"{"type":"annotation","exchange":1,"kind":"what"}"#,
                "unknown variant `what`",
            ),
            (
                r#"{"type":"annotation","kind":"server_render","exchange":1,"tokens":[{"id":1,"piece":7}]}"#,
                "a token piece",
            ),
            (
                r#"{"type":"exchange","id":1,"started":"","request":{"method":"GET","path":"/","body":{"x":1}}}"#,
                "a body needs a \"text\" or a \"base64\" field",
            ),
            (
                r#"{"type":"exchange","id":1,"started":"","request":{"method":"GET","path":"/"},"response":{"status":200,"chunks":[{"text":"a"}]}}"#,
                "missing field `t_us`",
            ),
            ("[1]", "a session line"),
        ];
        for (text, want) in cases {
            let err = serde_json::from_str::<Line>(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
        // A position inside the line: the column of the bad token piece.
        let text = r#"{"type":"annotation","kind":"server_render","exchange":1,"tokens":[{"id":1,"piece":7}]}"#;
        let err = serde_json::from_str::<Line>(text).unwrap_err();
        assert_eq!(
            (err.line(), err.column()),
            (1, text.find("7}").unwrap() + 1)
        );
    }

    /// Issue #27 item 12: a key given twice is refused whatever the key order — the tag first
    /// (read in one pass) or not (buffered), the duplicate the tag itself, a body field, a
    /// chunk field, or a key inside a verbatim `props`/`show` object — naming line and column.
    #[test]
    fn a_duplicate_key_is_refused_whatever_the_key_order() {
        let ex = |pre: &str, post: &str| {
            format!(r#"{{{pre}"started":"","request":{{"method":"GET","path":"/"}}{post}}}"#)
        };
        let cases = [
            (ex(r#""type":"exchange","id":1,"id":2,"#, ""), "duplicate field `id`"),
            (ex(r#""id":1,"type":"exchange","id":2,"#, ""), "duplicate field `id`"),
            (ex(r#""id":1,"id":2,"type":"exchange","#, ""), "duplicate field `id`"),
            (ex(r#""type":"exchange","type":"header","id":1,"#, ""), "duplicate field `type`"),
            (ex(r#""id":1,"type":"exchange","type":"header","#, ""), "duplicate field `type`"),
            (ex(r#""type":"exchange","id":1,"#, r#","started":"x""#), "duplicate field `started`"),
            (
                ex(r#""type":"exchange","id":1,"#, r#","response":{"status":200,"chunks":[{"t_us":1,"text":"a","text":"b"}]}"#),
                "duplicate field `text`",
            ),
            (
                ex(r#""id":1,"type":"exchange","#, r#","response":{"status":200,"chunks":[{"t_us":1,"text":"a","text":"b"}]}"#),
                "duplicate field `text`",
            ),
            (
                ex(r#""type":"exchange","id":1,"#, r#","response":{"status":200,"status":500}"#),
                "duplicate field `status`",
            ),
            (
                ex(r#""id":1,"type":"exchange","#, r#","response":{"status":200,"status":500}"#),
                "duplicate field `status`",
            ),
            (
                r#"{"type":"annotation","kind":"ollama_show","kind":"raw_text","exchange":1,"model":"m"}"#.to_owned(),
                "duplicate field `kind`",
            ),
            (
                r#"{"exchange":1,"kind":"ollama_show","model":"m","kind":"raw_text","type":"annotation"}"#.to_owned(),
                "duplicate field `kind`",
            ),
            (
                r#"{"type":"annotation","kind":"ollama_show","exchange":1,"model":"m","show":{"template":"a","template":"b"}}"#.to_owned(),
                "duplicate field `template`",
            ),
            (
                r#"{"kind":"ollama_show","type":"annotation","exchange":1,"model":"m","show":{"template":"a","template":"b"}}"#.to_owned(),
                "duplicate field `template`",
            ),
            (
                r#"{"type":"header","format":"toolscope-session/1","created":"","tool":"t","props":{"a":1,"a":2}}"#.to_owned(),
                "duplicate field `a`",
            ),
        ];
        for (text, want) in &cases {
            let err = serde_json::from_str::<Line>(text).unwrap_err();
            assert!(err.to_string().contains(want), "{text}: {err}");
            // serde_json names the place: line 1, a column inside the line
            assert_eq!(err.line(), 1, "{text}: {err}");
            assert!(
                err.column() > 1 && err.column() <= text.len(),
                "{text}: {err}"
            );
        }
        // the same lines without the duplicate read
        let ok = ex(r#""id":1,"type":"exchange","#, "");
        assert!(serde_json::from_str::<Line>(&ok).is_ok(), "{ok}");
    }
}
