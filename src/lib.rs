//! tabletop: a terminal console for Azure Table Storage.
//!
//! `azure` speaks the Table REST protocol and knows nothing of the UI.
//! `emulator` installs and runs the pinned Azurite for tests, the demo and benchmarks.
pub mod azure;
pub mod emulator;
