//! Chat templates: sources (jinja file, tokenizer_config.json, GGUF metadata, server props) and
//! rendering faithful to transformers' `apply_chat_template`. Pure (file and URL loading lives
//! in [`crate::cli`] / [`crate::record`]).
