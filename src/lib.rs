//! tabletop: a terminal console for Azure Table Storage.
//!
//! `azure` speaks the Table REST protocol and knows nothing of the UI.
pub mod azure;
pub mod cli;
pub mod config;
pub mod console;
pub mod demo;
pub mod emulator;
pub mod journal;
pub mod metrics;
pub mod proxy;
pub mod stress;
