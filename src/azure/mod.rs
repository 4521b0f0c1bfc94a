//! The Table REST protocol client. It knows nothing of the UI and could be its own crate.

pub mod auth;
pub mod batch;
pub mod client;
pub mod connection;
pub mod edm;
pub mod error;
pub mod filter;
pub mod retry;
pub mod telemetry;
pub mod validate;

pub use batch::BatchOp;
pub use client::{
    ClientOptions, Condition, Continuation, EntityPage, EntityStream, QuerySpec, TableClient,
    TablePage, UpdateMode, WriteOutcome,
};
pub use connection::{Account, ConnectionError, SigningScheme};
pub use edm::{DateTime, EdmType, EdmValue, Entity, Property};
pub use error::{ServiceError, TableError, ValidationError};
pub use retry::RetryPolicy;
pub use telemetry::{AttemptRecord, Operation, PartitionRef, Telemetry};
