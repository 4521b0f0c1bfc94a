//! Integration-test support: one shared Azurite per test binary, unique table names, and the
//! fault-injecting proxy. Included with `#[path = "../support/mod.rs"] mod support;`.
// Each test binary uses a different subset.
#![allow(dead_code, unused_imports)]

pub mod fault_proxy;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub use fault_proxy::{Fault, FaultPlan, FaultProxy, FaultStats};
use tabletop::emulator::Emulator;

/// The binary's Azurite, installed in the repo root (pinned package.json; node_modules is
/// git-ignored). Never dropped: the emulator's parent-death signal kills it when tests exit.
pub fn azurite() -> &'static Emulator {
    static AZURITE: OnceLock<Result<Emulator, String>> = OnceLock::new();
    // The failure is cached so every test reports it at once instead of retrying for 30 s.
    let started = AZURITE.get_or_init(|| {
        Emulator::start(Path::new(env!("CARGO_MANIFEST_DIR"))).map_err(|e| e.to_string())
    });
    match started {
        Ok(emulator) => emulator,
        Err(msg) => panic!("cannot start Azurite for the integration tests: {msg}"),
    }
}

/// A valid table name (letter first, alphanumeric, ≤ 63 chars) unique across tests and runs.
pub fn unique_table(prefix: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let mut name: String = prefix
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(24)
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert(0, 't');
    }
    // ≤ 25 + 8 (pid) + 8 (random) + 20 (seq) = 61 characters.
    format!(
        "{name}{:x}{:08x}{}",
        std::process::id(),
        fastrand::u32(..),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}
