pub mod keys;
pub mod theme;
