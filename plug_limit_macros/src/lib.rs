//! Procedural macros for `plug_limit`.
