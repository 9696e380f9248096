//! Whether a fused-MoE table row's experts are gated, which its shape columns do not say.
//!
//! A gated expert (gate and up fused, SiLU, down) is three matrices; an ungated one (up,
//! ReLU², down: Nemotron-H) is two, so reading one as the other moves its bytes and FLOPs by
//! half. A table may say it per row in an `activation` column; a table without one (the dev
//! tables) is read through `configs/kernel-tables/moe-experts.toml`, the list of expert shapes
//! known to be ungated, each with its source. Data, not code: a new ungated model is a new
//! entry there.

use crate::error::Result;
use crate::spec::model::UNGATED_ACTIVATIONS;
use crate::spec::registry;
use serde::Deserialize;
use std::sync::OnceLock;

/// The list embedded in the binary.
const EXPERTS_TOML: &str = include_str!("../../configs/kernel-tables/moe-experts.toml");
const EXPERTS_LABEL: &str = "configs/kernel-tables/moe-experts.toml";

/// `configs/kernel-tables/moe-experts.toml`, read 1:1.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertShapes {
    pub ungated: Vec<ExpertShape>,
    /// Shapes whose model's router is group-limited, so that the tables' harness routes
    /// their `balanced` rows through it (`ops::routing::Routing::RoundRobinGroupLimited`).
    #[serde(default)]
    pub group_limited: Vec<GroupLimitedShape>,
}

/// An expert shape whose model confines each token to `topk_groups` of `groups` expert
/// groups (a config's `n_group`, `topk_group`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupLimitedShape {
    pub hidden: u64,
    /// Per-expert intermediate size before the TP split.
    pub inter: u64,
    pub topk: u32,
    pub experts: u32,
    pub groups: u32,
    pub topk_groups: u32,
    pub model: String,
    pub source: String,
}

/// One routed-expert shape as a MoE table writes it, and the model it belongs to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertShape {
    pub hidden: u64,
    /// Per-expert intermediate size before the TP split.
    pub inter: u64,
    pub topk: u32,
    pub experts: u32,
    pub model: String,
    pub source: String,
}

impl ExpertShapes {
    /// The built-in list (parsed once).
    pub fn builtin() -> Result<&'static ExpertShapes> {
        static LIST: OnceLock<std::result::Result<ExpertShapes, String>> = OnceLock::new();
        LIST.get_or_init(|| {
            registry::parse_toml::<ExpertShapes>(EXPERTS_TOML, EXPERTS_LABEL)
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|m| crate::error::Error::Parse {
            file: EXPERTS_LABEL.to_string(),
            message: m.clone(),
        })
    }

    /// The listed group-limited shape a row of this shape is, if any.
    pub fn group_limited(
        &self,
        hidden: u64,
        inter: u64,
        topk: u32,
        experts: u32,
    ) -> Option<&GroupLimitedShape> {
        let key = (hidden, inter, topk, experts);
        self.group_limited
            .iter()
            .find(|s| (s.hidden, s.inter, s.topk, s.experts) == key)
    }

    /// The listed ungated shape a row of this shape is, if any.
    pub fn ungated(
        &self,
        hidden: u64,
        inter: u64,
        topk: u32,
        experts: u32,
    ) -> Option<&ExpertShape> {
        let key = (hidden, inter, topk, experts);
        self.ungated
            .iter()
            .find(|s| (s.hidden, s.inter, s.topk, s.experts) == key)
    }
}

/// Activations a table may name for gated experts (gate, up, down); the ungated ones are
/// the model's own [`UNGATED_ACTIVATIONS`].
pub const GATED_ACTIVATIONS: &[&str] = &["silu", "swiglu", "swigluoai", "gelu", "geglu"];

/// What an `activation` value says of the experts: `Some(true)` gated, `Some(false)`
/// ungated, `None` a value this reader does not know.
pub fn gated_by_activation(value: &str) -> Option<bool> {
    let v = value.to_ascii_lowercase();
    if UNGATED_ACTIVATIONS.contains(&v.as_str()) {
        Some(false)
    } else if GATED_ACTIVATIONS.contains(&v.as_str()) {
        Some(true)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_list_parses_and_names_a_source_for_every_shape() {
        let list = ExpertShapes::builtin().unwrap();
        assert!(!list.ungated.is_empty());
        for s in &list.ungated {
            assert!(s.source.contains('['), "{}: no [V]/[D]/[U] tag", s.model);
            assert!(s.topk <= s.experts && s.hidden > 0 && s.inter > 0);
        }
        // Nemotron-3-Nano, from its published config (relu2).
        assert!(list.ungated(2688, 1856, 6, 128).is_some());
        // A gated shape (DeepSeek-V3's experts) is not listed.
        assert!(list.ungated(7168, 2048, 8, 256).is_none());
        // DeepSeek-V3's router keeps 4 of 8 groups; Kimi-K2.5's (one group) is not listed.
        for s in &list.group_limited {
            assert!(s.source.contains('['), "{}: no [V]/[D]/[U] tag", s.model);
            assert!(s.topk_groups >= 1 && s.topk_groups < s.groups && s.experts % s.groups == 0);
        }
        let ds = list.group_limited(7168, 2048, 8, 256).unwrap();
        assert_eq!((ds.groups, ds.topk_groups), (8, 4));
        assert!(list.group_limited(7168, 2048, 8, 384).is_none());
    }

    #[test]
    fn activation_values() {
        assert_eq!(gated_by_activation("SiLU"), Some(true));
        assert_eq!(gated_by_activation("relu2"), Some(false));
        assert_eq!(gated_by_activation("tanh"), None);
    }
}
