//! Figures (placeholder).
