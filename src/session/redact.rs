//! The one redactor: credentials in headers, query strings and URL userinfo, applied to
//! everything toolscope writes to a session (the proxy, `send`, `probe`, HAR import) unless
//! `--keep-secrets`, and to every URL it prints.
//!
//! What counts as a credential, with where each comes from:
//!
//! | where | names | source |
//! |---|---|---|
//! | header | `authorization`, `proxy-authorization` | RFC 9110 §11.6.2, §11.7.2 |
//! | header | `cookie`, `set-cookie` | RFC 6265 §4 |
//! | header | `x-api-key` | Anthropic API (docs.anthropic.com, "Authentication") |
//! | header | `api-key` | Azure OpenAI (learn.microsoft.com, "Azure OpenAI REST API reference") |
//! | header | `x-goog-api-key` | Google Gemini API (ai.google.dev, "API keys") |
//! | header | `ocp-apim-subscription-key` | Azure API Management (learn.microsoft.com) |
//! | header | `x-amz-security-token` | AWS Signature Version 4 (docs.aws.amazon.com) |
//! | header | any name ending in `-api-key`, `-apikey`, `-token`, `-secret`, `-password`, `-authorization`, `-subscription-key` | gateways' own key headers (e.g. `x-portkey-api-key`, `cf-aig-authorization`) |
//! | query | `key` | Google APIs (`?key=API_KEY`, cloud.google.com "Using API keys") |
//! | query | `access_token` | OAuth 2.0 bearer tokens in the query, RFC 6750 §2.3 |
//! | query | `api_key`, `apikey`, `api-key`, `token`, `auth`, `secret`, `password`, `sig`, `signature`, `client_secret`, and any name ending in `_key`, `-key`, `_token`, `-token`, `_secret`, `_password` | common API conventions (Azure SAS uses `sig`) |
//! | URL | userinfo `user:password@` | RFC 3986 §3.2.1 (deprecated there for this reason) |
//!
//! Redacted values become [`REDACTED`]; names stay, so the kind of credential stays visible
//! (`Bearer [redacted]`, `?key=[redacted]`, `http://[redacted]@host:8080`).

use std::borrow::Cow;

/// Header names whose values are secrets (compared case-insensitively); see the module table
/// for the suffix rule that extends it.
pub const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "ocp-apim-subscription-key",
    "x-amz-security-token",
    "cookie",
    "set-cookie",
];

/// Header-name suffixes that mark a credential (`x-portkey-api-key`, `cf-aig-authorization`).
const SECRET_HEADER_SUFFIXES: &[&str] = &[
    "-api-key",
    "-apikey",
    "-token",
    "-secret",
    "-password",
    "-authorization",
    "-subscription-key",
];

/// Query parameter names whose values are secrets (compared case-insensitively).
pub const SECRET_PARAMS: &[&str] = &[
    "key",
    "api_key",
    "apikey",
    "api-key",
    "access_token",
    "token",
    "auth",
    "secret",
    "password",
    "sig",
    "signature",
    "client_secret",
];

/// Query-name suffixes that mark a credential (`refresh_token`, `x-goog-api-key`).
const SECRET_PARAM_SUFFIXES: &[&str] = &[
    "_key",
    "-key",
    "_token",
    "-token",
    "_secret",
    "-secret",
    "_password",
];

/// What a redacted value becomes (after the auth scheme, if any).
pub const REDACTED: &str = "[redacted]";

fn ends_with_ci(name: &str, suffix: &str) -> bool {
    name.len() >= suffix.len()
        && name.as_bytes()[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

/// True when header `name` carries a credential (see the module table).
pub fn is_secret(name: &str) -> bool {
    SECRET_HEADERS.iter().any(|s| s.eq_ignore_ascii_case(name))
        || SECRET_HEADER_SUFFIXES.iter().any(|s| ends_with_ci(name, s))
}

/// True when query parameter `name` carries a credential (see the module table).
pub fn is_secret_param(name: &str) -> bool {
    SECRET_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(name))
        || SECRET_PARAM_SUFFIXES.iter().any(|s| ends_with_ci(name, s))
}

/// The value to store for header `name`: unchanged for ordinary headers; for secret headers
/// [`REDACTED`], keeping an `Authorization` scheme word (`Bearer [redacted]`) so the kind of
/// credential stays visible.
pub fn redact_value(name: &str, value: &str) -> String {
    if !is_secret(name) {
        return value.to_owned();
    }
    if ends_with_ci(name, "authorization")
        && let Some((scheme, _)) = value.split_once(' ')
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return format!("{scheme} {REDACTED}");
    }
    REDACTED.to_owned()
}

/// Redacts secret headers in place (names are kept).
pub fn redact_headers(headers: &mut [(String, String)]) {
    for (k, v) in headers.iter_mut() {
        if is_secret(k) {
            *v = redact_value(k, v);
        }
    }
}

/// A request target or URL with the values of secret query parameters replaced by
/// [`REDACTED`] (`/v1/chat?key=abc&x=1` → `/v1/chat?key=[redacted]&x=1`). Names, order,
/// other parameters and the fragment are kept byte for byte. Borrowed when nothing changes.
pub fn redact_query(target: &str) -> Cow<'_, str> {
    let Some(q) = target.find('?') else {
        return Cow::Borrowed(target);
    };
    let (before, rest) = target.split_at(q + 1);
    let (query, fragment) = match rest.find('#') {
        Some(f) => rest.split_at(f),
        None => (rest, ""),
    };
    let mut changed = false;
    let parts: Vec<Cow<'_, str>> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !v.is_empty() && is_secret_param(&percent_decode(k)) => {
                changed = true;
                Cow::Owned(format!("{k}={REDACTED}"))
            }
            _ => Cow::Borrowed(kv),
        })
        .collect();
    if !changed {
        return Cow::Borrowed(target);
    }
    Cow::Owned(format!("{before}{}{fragment}", parts.join("&")))
}

/// A URL with userinfo (`user:password@`) replaced by [`REDACTED`] and secret query values
/// redacted ([`redact_query`]): `http://u:p@h:8080/x?key=k` → `http://[redacted]@h:8080/x?key=[redacted]`.
/// Text that is not an absolute URL is only query-redacted. Borrowed when nothing changes.
pub fn redact_url(url: &str) -> Cow<'_, str> {
    let with_query = redact_query(url);
    let Some(scheme_end) = with_query.find("://") else {
        return with_query;
    };
    let auth_start = scheme_end + 3;
    let auth_end = with_query[auth_start..]
        .find(['/', '?', '#'])
        .map_or(with_query.len(), |i| auth_start + i);
    let Some(at) = with_query[auth_start..auth_end].rfind('@') else {
        return with_query;
    };
    Cow::Owned(format!(
        "{}{REDACTED}{}",
        &with_query[..auth_start],
        &with_query[auth_start + at..]
    ))
}

fn percent_decode(s: &str) -> Cow<'_, str> {
    if !s.contains(['%', '+']) {
        return Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => {
                if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_others_kept() {
        let mut h = vec![
            ("Authorization".to_owned(), "Bearer sk-123".to_owned()),
            ("x-api-key".to_owned(), "abc".to_owned()),
            ("API-Key".to_owned(), "abc".to_owned()),
            ("cookie".to_owned(), "a=1; b=2".to_owned()),
            ("set-cookie".to_owned(), "sid=9; HttpOnly".to_owned()),
            ("content-type".to_owned(), "application/json".to_owned()),
            ("proxy-authorization".to_owned(), "sk-no-scheme".to_owned()),
            ("x-goog-api-key".to_owned(), "AIza-1".to_owned()),
            ("x-portkey-api-key".to_owned(), "pk-1".to_owned()),
            ("cf-aig-authorization".to_owned(), "Bearer cf-1".to_owned()),
            ("x-ratelimit-remaining-tokens".to_owned(), "99".to_owned()),
        ];
        redact_headers(&mut h);
        assert_eq!(h[0].1, "Bearer [redacted]");
        assert_eq!(h[1].1, "[redacted]");
        assert_eq!(h[2].1, "[redacted]");
        assert_eq!(h[3].1, "[redacted]");
        assert_eq!(h[4].1, "[redacted]");
        assert_eq!(h[5].1, "application/json");
        assert_eq!(h[6].1, "[redacted]");
        assert_eq!(h[7].1, "[redacted]");
        assert_eq!(h[8].1, "[redacted]");
        assert_eq!(h[9].1, "Bearer [redacted]");
        assert_eq!(h[10].1, "99");
        let all = format!("{h:?}");
        for secret in ["sk-", "AIza", "pk-1", "cf-1"] {
            assert!(!all.contains(secret), "{secret} in {all}");
        }
    }

    #[test]
    fn query_and_userinfo() {
        assert_eq!(
            redact_query("/v1beta/models/g:generate?alt=sse&key=AIza1&x=&access_token=t#f"),
            "/v1beta/models/g:generate?alt=sse&key=[redacted]&x=&access_token=[redacted]#f"
        );
        assert_eq!(
            redact_query("/p?API_KEY=1&Token=2&refresh_token=3&monkey=4&api%5Fkey=5"),
            "/p?API_KEY=[redacted]&Token=[redacted]&refresh_token=[redacted]&monkey=4&api%5Fkey=[redacted]"
        );
        assert!(matches!(
            redact_query("/v1/chat/completions"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            redact_url("http://user:pa%40ss@127.0.0.1:8080/v1?key=k"),
            "http://[redacted]@127.0.0.1:8080/v1?key=[redacted]"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:8080/a@b"),
            "http://127.0.0.1:8080/a@b"
        );
    }
}
