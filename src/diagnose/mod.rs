//! Diagnostics: findings over one exchange (request, response, stream, raw text, render,
//! tokens). Pure: takes data, returns [`crate::Finding`]s.
