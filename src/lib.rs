//! memscope: offline forensics of PyTorch GPU memory.
//!
//! Data flows one way: [`load`] turns bytes into raw records, [`model`] holds segments,
//! blocks, events and interned stacks, [`analysis`] replays and diagnoses, and [`report`]
//! renders. Nothing downstream reaches back upstream, so each layer can be tested on its own
//! and the binary stays a thin shell around the library.

pub mod analysis;
pub mod check;
pub mod escape;
pub mod inputs;
pub mod job;
pub mod load;
pub mod mcp;
pub mod model;
pub mod query;
pub mod rank_name;
pub mod report;
pub mod signals;
pub mod tui;
pub mod units;
pub mod wording;
