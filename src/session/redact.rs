//! Secret redaction for recorded headers.

/// Header names whose values are secrets (compared case-insensitively): `authorization`,
/// `proxy-authorization`, `x-api-key`, `api-key`, `cookie`, `set-cookie`.
pub const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "cookie",
    "set-cookie",
];

/// What a redacted value becomes (after the auth scheme, if any).
pub const REDACTED: &str = "[redacted]";

/// True when `name` is one of [`SECRET_HEADERS`].
pub fn is_secret(name: &str) -> bool {
    SECRET_HEADERS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// The value to store for header `name`: unchanged for ordinary headers; for secret headers
/// [`REDACTED`], keeping an `Authorization` scheme word (`Bearer [redacted]`) so the kind of
/// credential stays visible.
pub fn redact_value(name: &str, value: &str) -> String {
    if !is_secret(name) {
        return value.to_owned();
    }
    let lower = name.to_ascii_lowercase();
    if lower.ends_with("authorization")
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
        ];
        redact_headers(&mut h);
        assert_eq!(h[0].1, "Bearer [redacted]");
        assert_eq!(h[1].1, "[redacted]");
        assert_eq!(h[2].1, "[redacted]");
        assert_eq!(h[3].1, "[redacted]");
        assert_eq!(h[4].1, "[redacted]");
        assert_eq!(h[5].1, "application/json");
        assert_eq!(h[6].1, "[redacted]");
        assert!(!format!("{h:?}").contains("sk-"));
    }
}
