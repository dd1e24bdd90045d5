//! B+-trees on buffer-pool pages (in progress).

pub mod keys;
pub mod node;
