//! Built-in scenarios.
