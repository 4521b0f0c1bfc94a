//! Integration tests against a real Azurite, all in one binary so they share one emulator.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod client_ops;
mod common;
mod console_pty;
mod demo_data;
mod editor_flow;
mod faults;
mod harness_smoke;
mod journal;
mod proxy;
