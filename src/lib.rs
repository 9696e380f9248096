//! rooftop: an analytical performance simulator and roofline model for LLM inference.
//!
//! Data flows one way: descriptions (TOML, [`spec`]) → a scenario → the per-layer operator
//! list and its costs ([`cost`]) → aggregates (TPOT, throughput, breakdown) → exporters
//! (text, JSON, CSV, plots). Calibration changes only the parameters the costs read.

pub mod calibrate;
pub mod calibration;
pub mod cli;
pub mod commands;
pub mod cost;
pub mod deploy;
pub mod e2e;
pub mod e2e_disagg;
pub mod economics;
pub mod error;
pub mod explore;
pub mod files;
pub mod harness;
pub mod holdout;
pub mod spec;
pub mod units;
pub mod whatif;

pub use error::{Error, Result};
pub mod export;
pub mod import_hf;
pub mod kernel_check;
pub mod layouts;
pub mod measured;
pub mod ops;
pub mod options;
pub mod plan;
pub mod plot;
pub mod predict;
pub mod progress;
pub mod serve;
pub mod specdec;
pub mod specdec_runs;
