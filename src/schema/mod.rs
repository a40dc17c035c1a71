//! Tool schema flattening and schema-loss detection. Pure.
