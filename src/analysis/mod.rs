//! Analyses over the model: replaying the allocator, explaining OOMs, grouping by site.

pub mod replay;
