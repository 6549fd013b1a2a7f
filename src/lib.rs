//! memscope: offline forensics of PyTorch GPU memory.
//!
//! Data flows one way: [`load`] turns bytes into raw records, [`model`] holds segments,
//! blocks, events and interned stacks, [`analysis`] replays and diagnoses, [`wording`] says
//! its conclusions, and the views render. Nothing downstream reaches back upstream, so each
//! layer can be tested on its own and the binary stays a thin shell around the library.
//!
//! The layers, lowest first; a module uses its own layer and those below, never one above,
//! and no two modules use each other, directly or through others (`tools/layers.py` checks
//! both in CI):
//!
//! 1. base: [`units`], [`escape`], [`signals`], [`rank_name`], [`threads`] (formatting,
//!    escaping, signal flags, rank naming, the thread count: leaves every layer may use);
//! 2. [`model`] (the types [`load`] builds);
//! 3. [`load`];
//! 4. [`analysis`];
//! 5. [`wording`] (every sentence, from the analysis' typed evidence and the views' typed
//!    figures given as plain values);
//! 6. the views: [`check`] (the gate), [`job`], [`inputs`] (the files `check`, `baseline` and
//!    `diff` read), [`report`], [`query`], [`tui`], [`mcp`]. They may use each other without
//!    a circle, except that the TUI never uses `report`.

pub mod analysis;
pub mod arenas;
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
pub mod summarize;
pub mod threads;
pub mod tui;
pub mod units;
pub mod wording;
