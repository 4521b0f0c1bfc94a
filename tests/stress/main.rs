//! The partition stress test against the throttling proxy, in a test binary of its own: cargo
//! runs test binaries one after another, so nothing else competes for the machine while the
//! knee is measured, and the tests inside take turns (one lock).

#[path = "../support/mod.rs"]
mod support;

mod cases;

/// Held by each test for its whole run so two measurements never overlap.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
