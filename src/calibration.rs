//! The calibration record: fitted parameters with their covariance, the assumptions and the
//! residuals of the fit, as `rooftop calibrate` writes it and `--calibration` reads it.
//!
//! It sits below the records (predict, sweep, specdec, compare) so a scenario can carry one:
//! the records apply its parameters and build their 95 % intervals from its covariance when
//! they are made, never patched afterwards. Fitting lives in `calibrate.rs`, above.
//!
//! A file is read strictly: a key the record does not have is refused with its line, as in
//! every description. A misspelt optional key (`loo_rms_eror`, `serving_limt`) would
//! otherwise be dropped without a word, and a hand-edited file would predict with what its
//! author thought was gone or changed.

use crate::cost::{CostParams, Provenance};
use crate::error::{Error, Result};
use crate::spec::FormatKind;
use serde::{Deserialize, Serialize};

/// A parameter the calibration can move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    MemoryEfficiency,
    GemmEfficiency(FormatKind),
    AttentionEfficiency,
    LinkEfficiency,
    CollectiveLatencyScale,
    KernelGap,
    KernelLaunch,
    StepOverhead,
    /// Requests in flight at most (a serving mechanism: client connections or max_num_seqs).
    InflightCap,
    /// API-server time per streamed token, µs (a serving mechanism: API server or client CPU).
    ApiPerToken,
    /// Latency per request outside the engine loop that every TTFT carries, ms; fitted only
    /// where the measurements hold TTFTs.
    RequestLatency,
}

impl ParamKind {
    pub fn name(self) -> String {
        match self {
            ParamKind::MemoryEfficiency => "memory_efficiency".into(),
            ParamKind::GemmEfficiency(f) => format!("gemm_efficiency_{}", f.name()),
            ParamKind::AttentionEfficiency => "attention_efficiency".into(),
            ParamKind::LinkEfficiency => "link_efficiency".into(),
            ParamKind::CollectiveLatencyScale => "collective_latency_scale".into(),
            ParamKind::KernelGap => "kernel_gap_us".into(),
            ParamKind::KernelLaunch => "kernel_launch_us".into(),
            ParamKind::StepOverhead => "step_overhead_us".into(),
            ParamKind::InflightCap => "inflight_cap_requests".into(),
            ParamKind::ApiPerToken => "api_per_token_us".into(),
            ParamKind::RequestLatency => "request_latency_ms".into(),
        }
    }

    /// Value in reporting units (µs for the engine times, ms for the request latency).
    pub fn get(self, p: &CostParams) -> f64 {
        match self {
            ParamKind::MemoryEfficiency => p.memory_efficiency,
            ParamKind::GemmEfficiency(f) => p.gemm(f),
            ParamKind::AttentionEfficiency => p.attention_efficiency,
            ParamKind::LinkEfficiency => p.link_efficiency,
            ParamKind::CollectiveLatencyScale => p.collective_latency_scale,
            ParamKind::KernelGap => p.kernel_gap * 1e6,
            ParamKind::KernelLaunch => p.kernel_launch * 1e6,
            ParamKind::StepOverhead => p.step_overhead * 1e6,
            ParamKind::InflightCap => p.inflight_cap.unwrap_or(f64::INFINITY),
            ParamKind::ApiPerToken => p.api_per_token.map_or(f64::NAN, |t| t * 1e6),
            ParamKind::RequestLatency => p.request_latency * 1e3,
        }
    }

    pub fn set(self, p: &mut CostParams, v: f64) {
        match self {
            ParamKind::MemoryEfficiency => p.memory_efficiency = v,
            ParamKind::GemmEfficiency(f) => p.set_gemm(f, v),
            ParamKind::AttentionEfficiency => p.attention_efficiency = v,
            ParamKind::LinkEfficiency => p.link_efficiency = v,
            ParamKind::CollectiveLatencyScale => p.collective_latency_scale = v,
            ParamKind::KernelGap => p.kernel_gap = v * 1e-6,
            ParamKind::KernelLaunch => p.kernel_launch = v * 1e-6,
            ParamKind::StepOverhead => p.step_overhead = v * 1e-6,
            ParamKind::InflightCap => p.inflight_cap = Some(v),
            ParamKind::ApiPerToken => p.api_per_token = Some(v * 1e-6),
            ParamKind::RequestLatency => p.request_latency = v * 1e-3,
        }
    }

    /// The parameters a `--set` of a description field feeds: the fields the default
    /// parameters are read from ([`CostParams::default_for`]: the system's `efficiency`
    /// table, the engine's `kernel_gap`, `kernel_launch`, `step_overhead` and
    /// `cpu.api_per_token`). A calibration's value of one of them replaces the field.
    pub fn fed_by(o: &crate::spec::overrides::Override) -> Vec<ParamKind> {
        use crate::spec::overrides::Target;
        let path: Vec<&str> = o.path.iter().map(String::as_str).collect();
        let all_gemm = || {
            FormatKind::ALL
                .iter()
                .map(|&f| ParamKind::GemmEfficiency(f))
        };
        match (o.target, path.as_slice()) {
            (Target::System, ["efficiency"]) => [
                ParamKind::MemoryEfficiency,
                ParamKind::AttentionEfficiency,
                ParamKind::LinkEfficiency,
            ]
            .into_iter()
            .chain(all_gemm())
            .collect(),
            (Target::System, ["efficiency", "memory", ..]) => vec![ParamKind::MemoryEfficiency],
            (Target::System, ["efficiency", "attention", ..]) => {
                vec![ParamKind::AttentionEfficiency]
            }
            (Target::System, ["efficiency", "link", ..]) => vec![ParamKind::LinkEfficiency],
            (Target::System, ["efficiency", "gemm"]) => all_gemm().collect(),
            (Target::System, ["efficiency", "gemm", format, ..]) => FormatKind::ALL
                .iter()
                .filter(|f| f.name() == *format)
                .map(|&f| ParamKind::GemmEfficiency(f))
                .collect(),
            (Target::Engine, ["kernel_gap", ..]) => vec![ParamKind::KernelGap],
            (Target::Engine, ["kernel_launch", ..]) => vec![ParamKind::KernelLaunch],
            (Target::Engine, ["step_overhead", ..]) => vec![ParamKind::StepOverhead],
            (Target::Engine, ["cpu"]) | (Target::Engine, ["cpu", "api_per_token", ..]) => {
                vec![ParamKind::ApiPerToken]
            }
            _ => Vec::new(),
        }
    }

    /// Whether a fit of it on one system says something about another: the engine's fixed
    /// costs (GPU idle between graph kernels, CPU launch and step time) carry over; the
    /// fractions of one GPU's memory, tensor or link peak do not describe another GPU.
    pub fn transfers(self) -> bool {
        matches!(
            self,
            ParamKind::KernelGap | ParamKind::KernelLaunch | ParamKind::StepOverhead
        )
    }

    /// Physical range.
    pub fn bounds(self) -> (f64, f64) {
        match self {
            ParamKind::MemoryEfficiency => (0.2, 1.0),
            ParamKind::GemmEfficiency(_) | ParamKind::AttentionEfficiency => (0.05, 1.0),
            // Up to 1 / the ring efficiency of a path's P2P rate (see `bounds_in`): 2 covers
            // every link's (a file's own bounds narrow it).
            ParamKind::LinkEfficiency => (0.1, 2.0),
            ParamKind::CollectiveLatencyScale => (0.1, 50.0),
            ParamKind::KernelGap => (0.0, 50.0),
            ParamKind::KernelLaunch => (0.0, 100.0),
            ParamKind::StepOverhead => (0.0, 50_000.0),
            ParamKind::InflightCap => (1.0, 1e6),
            ParamKind::ApiPerToken => (0.0, 1e5),
            ParamKind::RequestLatency => (0.0, 10_000.0),
        }
    }

    /// Physical range on `system`. The link efficiency scales the collective model's bus
    /// bandwidth; where that is a ring's share (`ring_efficiency`) of a measured P2P copy rate
    /// (`[paths]`), a ring may reach at most the copy rate itself, so the ceiling is
    /// 1 / ring_efficiency (the share is a prior from another platform). Elsewhere the rate
    /// is the link's achievable figure already, and the ceiling is 1.
    pub fn bounds_in(self, system: &crate::spec::System) -> (f64, f64) {
        match self {
            ParamKind::LinkEfficiency => {
                let ring = system
                    .link
                    .collective
                    .as_ref()
                    .and_then(|c| c.ring_efficiency)
                    .filter(|_| system.spec.paths.is_some())
                    .map_or(1.0, |f| f.0);
                (self.bounds().0, (1.0 / ring).min(self.bounds().1))
            }
            _ => self.bounds(),
        }
    }

    /// Width of the prior: how far from the datasheet/engine prior the fit may move before
    /// the prior pushes back as hard as one measurement σ. Deliberately wide: priors only
    /// decide what the data cannot.
    pub fn prior_sigma(self, prior: f64) -> f64 {
        match self {
            ParamKind::MemoryEfficiency | ParamKind::LinkEfficiency => 0.3,
            ParamKind::GemmEfficiency(_) | ParamKind::AttentionEfficiency => 0.3,
            ParamKind::CollectiveLatencyScale => 3.0,
            ParamKind::KernelGap | ParamKind::KernelLaunch => prior.max(1.0) * 2.0,
            ParamKind::StepOverhead => prior.max(100.0) * 3.0,
            // A serving mechanism's value is set by the data alone; how plausible it is
            // against its priors is scored apart (calibrate::serving_limit).
            ParamKind::InflightCap | ParamKind::ApiPerToken => 1e12,
            // No description prices it: its prior of 0 only says so, a second of misfit
            // pushes back as one σ.
            ParamKind::RequestLatency => 1000.0,
        }
    }
}

/// What the measurements do not say, stated so the user sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assumptions {
    /// Prompt tokens where a measurement does not give them.
    pub input_len: u32,
    /// Output tokens where a measurement does not give them.
    pub output_len: u32,
    /// The client that measured (`--client`; an ideal closed loop when not given).
    #[serde(skip)]
    pub client: crate::serve::ClientModel,
}

impl Default for Assumptions {
    fn default() -> Self {
        Assumptions {
            input_len: 32,
            output_len: 32,
            client: crate::serve::ClientModel::IDEAL,
        }
    }
}

/// One fitted parameter.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FitParam {
    pub name: String,
    pub kind: ParamKind,
    pub value: f64,
    pub prior: f64,
    pub stderr: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
    pub lower_bound: f64,
    pub upper_bound: f64,
    /// The data moved it (its column of the Jacobian is not negligible); otherwise it stays
    /// at its prior and its interval is the prior's.
    pub informed_by_data: bool,
    /// At a bound of its physical range.
    pub at_bound: bool,
}

/// One measured point and how the fit does on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Residual {
    pub point: String,
    /// The measured quantity (`tpot`, `ttft`, `throughput`, `category_share`, `all_reduce`,
    /// `gemm`); empty in files written before it was recorded.
    #[serde(default)]
    pub kind: String,
    pub origin: String,
    /// The record's words the point is read from, where it is prose and not a measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prose: Option<String>,
    pub unit: String,
    pub measured: f64,
    pub default: f64,
    pub calibrated: f64,
    /// (calibrated − measured) / measured (for shares: difference in points / 100).
    pub error: f64,
    /// Leave-one-out: the prediction of this point from a fit without it, when run.
    pub loo_prediction: Option<f64>,
}

/// One serving mechanism fitted to hold a flat measured throughput curve.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MechanismFit {
    /// What it is: "in-flight cap" or "time per streamed token".
    pub mechanism: String,
    /// The parameter it sets (a [`ParamKind`] name).
    pub parameter: String,
    /// Its fitted value, in `unit`, with the GPU parameters refitted beside it.
    pub value: f64,
    pub unit: String,
    /// Where that value would come from, the nearest of its readings: e.g. "client
    /// connection cap" (prior 100) or "max_num_seqs" (the engine's default).
    pub reading: String,
    pub prior: f64,
    /// |log10(value / prior)|: how far the data pushes the reading's prior.
    pub prior_distance: f64,
    /// Root-mean-square relative error over the points with it.
    pub rms_error: f64,
    /// χ² of the fit plus (prior_distance / 0.5)²: a factor of √10 from the prior costs as
    /// much as one σ of misfit. The lowest score is chosen.
    pub score: f64,
}

/// What calibration chose to hold a measured curve flat, and what else could have.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServingLimit {
    /// The chosen mechanism's `mechanism`, or "none" when none beats the GPU loop alone by
    /// more than 2 (Akaike's penalty for its added parameter).
    pub chosen: String,
    /// Score of the fit without any serving mechanism.
    pub none_score: f64,
    pub none_rms_error: f64,
    /// Every mechanism tried, best first.
    pub candidates: Vec<MechanismFit>,
    /// The one measurement that tells the best two readings apart.
    pub separating_test: String,
}

/// The calibration record, written as TOML and read back by `--calibration`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    pub model: String,
    pub system: String,
    /// The system's engine (name and version) the fit was made under; empty in files
    /// written before it was recorded.
    #[serde(default)]
    pub engine: String,
    /// The GPU and interconnect the fit was made on (the system's, or what `--set
    /// system.gpu=...` / `system.interconnect=...` swapped in); empty in older files.
    #[serde(default)]
    pub gpu: String,
    #[serde(default)]
    pub interconnect: String,
    pub parallel: String,
    pub sources: Vec<String>,
    pub assumptions: Assumptions,
    pub parameters: Vec<FitParam>,
    /// Covariance of the parameters, in the order of `parameters` (reporting units).
    pub covariance: Vec<Vec<f64>>,
    pub residuals: Vec<Residual>,
    /// Measurements minus informed parameters (negative: fewer points than parameters, the
    /// priors decide the rest).
    pub degrees_of_freedom: i64,
    /// Root-mean-square relative error of the calibrated model over the points.
    pub rms_error: f64,
    /// Root-mean-square leave-one-out relative error, when there are enough points (≥ 3).
    pub loo_rms_error: Option<f64>,
    /// The serving mechanism chosen to hold a flat throughput curve, when the measurement
    /// has throughput at two concurrencies or more.
    #[serde(default)]
    pub serving_limit: Option<ServingLimit>,
    /// Whether some serving point of the fit left the prompt, and the output, length to the
    /// assumptions: `calibrate` says which lengths it assumed only where one was. Known for a
    /// fit made in this run (`None` for a file read back: not recorded in it).
    #[serde(skip)]
    pub assumed_lengths: Option<(bool, bool)>,
}

/// Where the fields `Calibration::from_text` checks sit in the file, for its errors: read
/// from the same text through the TOML reader's spans, so the line is right however a
/// hand-edited file orders, repeats or inlines its tables (a search for the first `name =`
/// pointed every bad parameter at the first one).
#[derive(Debug, Default, Deserialize)]
struct Lines {
    covariance: Option<toml::Spanned<toml::Value>>,
    #[serde(default)]
    parameters: Vec<toml::Spanned<ParamLines>>,
    #[serde(default)]
    residuals: Vec<toml::Spanned<toml::Value>>,
}

#[derive(Debug, Deserialize)]
struct ParamLines {
    value: Option<toml::Spanned<toml::Value>>,
}

impl Calibration {
    /// The fitted parameters applied over `base`.
    pub fn params(&self, base: &CostParams) -> CostParams {
        let mut p = *base;
        for f in &self.parameters {
            f.kind.set(&mut p, f.value);
        }
        p.provenance = Provenance::Calibrated;
        p
    }

    pub fn to_toml(&self) -> String {
        let body = toml::to_string(self).unwrap_or_default();
        format!("# rooftop calibration: fitted parameters with 95 % intervals. Written by `rooftop calibrate`;\n# read by --calibration. Fitted values live here, never in the tool's code.\n{body}")
    }

    pub fn load(path: &str) -> Result<Calibration> {
        let text = crate::files::read_text(std::path::Path::new(path))?;
        Calibration::from_text(&text, path)
    }

    /// [`Calibration::load`] on a file's text; `path` labels the errors. `calibrate` reads
    /// what it is about to write through this, so it never writes a file `--calibration`
    /// would refuse.
    pub fn from_text(text: &str, path: &str) -> Result<Calibration> {
        let c: Calibration = crate::spec::registry::parse_toml(text, path)?;
        // What the fit was made on: every file `calibrate` writes names its model, system and
        // layout, and `for_run` can only hold a run to a calibration that says what it is.
        // (The engine, GPU and interconnect were not recorded by early files; those may be
        // absent.)
        for (field, v) in [
            ("model", &c.model),
            ("system", &c.system),
            ("parallel", &c.parallel),
        ] {
            if v.trim().is_empty() {
                return Err(Error::Invalid {
                    file: path.into(),
                    line: None,
                    field: field.into(),
                    expected: format!(
                        "the {field} the calibration was fitted on (every file `rooftop calibrate` \
                         writes names it); without it the calibration would pass for any run"
                    ),
                });
            }
        }
        // Parsed, so the text is TOML and this second read of its spans cannot fail.
        let lines: Lines = toml::from_str(text).unwrap_or_default();
        let line = |span: Option<std::ops::Range<usize>>| {
            span.map(|s| crate::measured::line_at(text, s.start))
        };
        let covariance_line = line(lines.covariance.as_ref().map(|c| c.span()));
        if c.covariance.len() != c.parameters.len()
            || c.covariance.iter().any(|r| r.len() != c.parameters.len())
            || c.covariance.iter().flatten().any(|x| !x.is_finite())
        {
            return Err(Error::Invalid {
                file: path.into(),
                line: covariance_line,
                field: "covariance".into(),
                expected: "a square matrix of finite numbers with one row per parameter".into(),
            });
        }
        // A covariance a fit can produce: each standard error within its parameter's physical
        // range, each correlation within ±1. Anything larger is no information, and would
        // overflow the prediction intervals.
        // Every variance first: a bad one makes the correlations of every row with it look
        // wrong, and the error must name the parameter whose variance it is.
        let var = |j: usize| c.covariance[j][j];
        let variance_ok = |i: usize| {
            let (lo, hi) = c.parameters[i].kind.bounds();
            var(i) >= 0.0 && var(i).sqrt() <= hi - lo
        };
        let bad_variance = (0..c.parameters.len()).find(|&i| !variance_ok(i));
        for (i, f) in c.parameters.iter().enumerate() {
            let (lo, hi) = f.kind.bounds();
            let ok = match bad_variance {
                Some(b) => i != b,
                None => (0..c.parameters.len()).all(|j| {
                    c.covariance[i][j].abs()
                        <= (var(i) * var(j).max(0.0)).sqrt() * (1.0 + 1e-6) + 1e-300
                }),
            };
            if !ok {
                return Err(Error::Invalid {
                    file: path.into(),
                    line: covariance_line,
                    field: format!("covariance (row {}, {})", i + 1, f.name),
                    expected: format!(
                        "a variance from 0 to ({} − {})² and correlations within ±1",
                        hi, lo
                    ),
                });
            }
        }
        for (i, f) in c.parameters.iter().enumerate() {
            // Within the file's bounds and the parameter's physical range: a hand-edited
            // bound cannot let an efficiency reach 0 (every time infinite).
            let (lo, hi) = f.kind.bounds();
            let (lo, hi) = (f.lower_bound.max(lo), f.upper_bound.min(hi));
            if !(f.value.is_finite() && f.value >= lo && f.value <= hi) {
                // The line of its `value`, else of its table.
                let at = lines
                    .parameters
                    .get(i)
                    .map(|p| p.get_ref().value.as_ref().map_or(p.span(), |v| v.span()));
                return Err(Error::Invalid {
                    file: path.into(),
                    line: line(at),
                    field: format!("parameters.{}", f.name),
                    expected: format!("a value in [{lo}, {hi}]"),
                });
            }
        }
        // The residuals set the prediction intervals (their leave-one-out errors are the
        // model's error): each value finite, a time or rate above zero, a share at least 0.
        for (i, r) in c.residuals.iter().enumerate() {
            let least = if r.kind == "category_share" {
                0.0
            } else {
                f64::MIN_POSITIVE
            };
            let bad = [
                ("measured", Some(r.measured)),
                ("default", Some(r.default)),
                ("calibrated", Some(r.calibrated)),
                ("loo_prediction", r.loo_prediction),
            ]
            .into_iter()
            .find(|(_, v)| v.is_some_and(|v| !(v.is_finite() && v >= least)));
            if let Some((field, _)) = bad {
                return Err(Error::Invalid {
                    file: path.into(),
                    line: line(lines.residuals.get(i).map(|r| r.span())),
                    field: format!("residuals[{}].{field} ({})", i + 1, r.point),
                    expected: if least > 0.0 {
                        "a finite time or rate above zero".into()
                    } else {
                        "a finite share of at least 0".into()
                    },
                });
            }
        }
        for (field, v) in [
            ("rms_error", Some(c.rms_error)),
            ("loo_rms_error", c.loo_rms_error),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                return Err(Error::Invalid {
                    file: path.into(),
                    line: None,
                    field: field.into(),
                    expected: "a finite relative error of at least 0".into(),
                });
            }
        }
        Ok(c)
    }

    /// Refuses a `--set` of a field this calibration's parameters replace
    /// ([`ParamKind::fed_by`]): the run would predict with the fitted value and drop the
    /// user's without a word.
    pub fn refuse_overridden(
        &self,
        sets: &[crate::spec::overrides::Override],
        file: &str,
    ) -> Result<()> {
        for o in sets {
            for k in ParamKind::fed_by(o) {
                if let Some(f) = self.parameters.iter().find(|f| f.kind == k) {
                    return Err(Error::Usage(format!(
                        "--set {}: the calibration {file} sets {} ({} {}), which takes the \
                         place of that field, so the --set would change nothing; drop the \
                         --set, or leave out --calibration to predict from the descriptions",
                        o.raw,
                        f.name,
                        if f.informed_by_data {
                            "fitted at"
                        } else {
                            "held at its prior"
                        },
                        format_significant(f.value)
                    )));
                }
            }
        }
        Ok(())
    }

    /// This calibration for a run of `model` on `system` with layout `parallel`: itself when
    /// it was fitted there; otherwise an error naming both, unless `transfer`, which keeps
    /// only the parameters that carry over to other hardware ([`ParamKind::transfers`]) and
    /// returns a note saying which did and which did not.
    pub fn for_run(
        &self,
        model: &str,
        system: &crate::spec::System,
        parallel: &str,
        transfer: bool,
        file: &str,
    ) -> Result<(Calibration, Option<String>)> {
        let engine = &system.engine.name;
        let mut differs = Vec::new();
        for (what, fitted, here) in [
            ("model", &self.model, model),
            ("system", &self.system, system.spec.name.as_str()),
            ("engine", &self.engine, engine.as_str()),
            ("GPU", &self.gpu, system.gpu.name.as_str()),
            (
                "interconnect",
                &self.interconnect,
                system.link.name.as_str(),
            ),
            ("layout", &self.parallel, parallel),
        ] {
            // Files written before the engine was recorded leave it empty.
            if !fitted.is_empty() && fitted != here {
                differs.push(format!("{what} {fitted} (this run: {here})"));
            }
        }
        if differs.is_empty() {
            return Ok((self.clone(), None));
        }
        let (carried, dropped): (Vec<&FitParam>, Vec<&FitParam>) =
            self.parameters.iter().partition(|p| p.kind.transfers());
        let names = |v: &[&FitParam]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        if !transfer {
            return Err(Error::Invalid {
                file: file.into(),
                line: None,
                field: "model/system/engine/gpu/interconnect/parallel".into(),
                expected: format!(
                    "a calibration fitted on this run's model, system, engine, GPU, interconnect and layout; it was fitted on {}. \
                     Refit with `rooftop calibrate` here, or pass --transfer-calibration to carry over only \
                     the engine's fixed costs ({})",
                    differs.join(", "),
                    names(&carried)
                ),
            });
        }
        let keep: Vec<usize> = (0..self.parameters.len())
            .filter(|&i| self.parameters[i].kind.transfers())
            .collect();
        let mut c = self.clone();
        c.parameters = keep.iter().map(|&i| self.parameters[i].clone()).collect();
        c.covariance = keep
            .iter()
            .map(|&i| keep.iter().map(|&j| self.covariance[i][j]).collect())
            .collect();
        let note = format!(
            "{file}: fitted on {}; --transfer-calibration carries over {} and keeps this system's own {} \
             (efficiencies of another GPU do not describe this one)",
            differs.join(", "),
            names(&carried),
            names(&dropped)
        );
        Ok((c, Some(note)))
    }

    /// This calibration for kernel tables measured on `gpu`: a table measures one GPU, not a
    /// model or layout, so only the GPU the fit was made on must match (its `gpu`, or the
    /// GPU of its `system` in files that record none). Another GPU's efficiencies are
    /// refused, naming both.
    pub fn for_gpu(&self, gpu: &str, table: &str, file: &str) -> Result<()> {
        let fitted = if self.gpu.is_empty() {
            crate::spec::System::load(&self.system)
                .map(|s| s.gpu.name.clone())
                .unwrap_or_default()
        } else {
            self.gpu.clone()
        };
        if fitted == gpu {
            return Ok(());
        }
        let on = if fitted.is_empty() {
            format!("system {:?}, whose GPU rooftop does not know", self.system)
        } else {
            format!("GPU {fitted}")
        };
        Err(Error::Invalid {
            file: file.into(),
            line: None,
            field: "gpu".into(),
            expected: format!(
                "a calibration fitted on the GPU {table} measures ({gpu}); it was fitted on {on}. \
                 Refit with `rooftop calibrate --measured {table}`, or leave out --calibration"
            ),
        })
    }

    /// 95 % interval of a share `f(params)` in [0, 1]: the delta method on its log-odds,
    /// mapped back, so the interval never leaves [0, 1] (a share's interval of −3 % to 9 %
    /// says nothing true about its lower end).
    pub fn share_interval<F: Fn(&CostParams) -> f64>(&self, base: &CostParams, f: F) -> (f64, f64) {
        let eps = 1e-9;
        let logit = |s: f64| {
            let s = s.clamp(eps, 1.0 - eps);
            (s / (1.0 - s)).ln()
        };
        let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
        let (x0, sd) = self.delta(base, |p| logit(f(p)));
        (sigmoid(x0 - 1.96 * sd), sigmoid(x0 + 1.96 * sd))
    }

    /// 95 % interval of a prediction `f(params)`: a time or a rate, positive, so the delta
    /// method runs on its logarithm (a relative spread) and the interval never reaches zero
    /// or below (a TPOT's interval of [-791, 846] ms said nothing true). Where `f` is not
    /// positive at the fit, the plain delta method.
    pub fn interval<F: Fn(&CostParams) -> f64>(&self, base: &CostParams, f: F) -> (f64, f64) {
        self.widened_interval(base, 0.0, f)
    }

    /// [`Calibration::interval`] with `extra_sd` (a relative spread) added in quadrature to
    /// the parameters' spread on the logarithm; where `f` is not positive at the fit, the
    /// plain delta method without it.
    fn widened_interval<F: Fn(&CostParams) -> f64>(
        &self,
        base: &CostParams,
        extra_sd: f64,
        f: F,
    ) -> (f64, f64) {
        if f(&self.params(base)) > 0.0 {
            let (l0, sd) = self.delta(base, |p| f(p).max(f64::MIN_POSITIVE).ln());
            let sd = (sd * sd + extra_sd * extra_sd).sqrt();
            let spread = (1.96 * sd).min(700.0);
            ((l0 - spread).exp(), (l0 + spread).exp())
        } else {
            let (y0, sd) = self.delta(base, f);
            (y0 - 1.96 * sd, y0 + 1.96 * sd)
        }
    }

    /// The relative spread of a new measurement of `kind` (a [`Quantity::kind_name`]) about
    /// the calibrated model that no parameter explains: the model's own error where the fit
    /// could measure it, and the measurement's noise ([`crate::calibrate::SERVING_SIGMA`],
    /// the σ the fit assumes for a serving time or rate), in quadrature. The model's error
    /// is the leave-one-out RMS error of the points of that kind (what a point the fit never
    /// saw is off by), or the fit's `loo_rms_error` over every point where none is of that
    /// kind; without leave-one-out (fewer than 3 points) the fit's own RMS error over the
    /// points it fitted, which a new point is off by at least (two points fitted with an RMS
    /// error of 21 % must not get intervals of the noise's 3 %).
    ///
    /// [`Quantity::kind_name`]: crate::measured::Quantity::kind_name
    pub fn unexplained_sigma(&self, kind: &str) -> f64 {
        let errors: Vec<f64> = self
            .residuals
            .iter()
            .filter(|r| r.kind == kind)
            .filter_map(|r| r.loo_prediction.map(|p| (p - r.measured) / r.measured))
            .filter(|e| e.is_finite())
            .collect();
        let same_kind = (!errors.is_empty())
            .then(|| (errors.iter().map(|e| e * e).sum::<f64>() / errors.len() as f64).sqrt());
        let model = same_kind
            .or(self.loo_rms_error.filter(|e| e.is_finite()))
            .unwrap_or(if self.rms_error.is_finite() {
                self.rms_error
            } else {
                0.0
            });
        (model * model + crate::calibrate::SERVING_SIGMA.powi(2)).sqrt()
    }

    /// 95 % interval of a new measurement of `f(params)`, a time or a rate of `kind`: the
    /// parameters' spread ([`Calibration::interval`]) and
    /// [`Calibration::unexplained_sigma`] added in quadrature on the logarithm. This is the
    /// interval a user checks a new run against; the parameters' interval alone covered 66 %
    /// of held-out dev runs (`calibrate --holdout 3`), because it leaves the model's own
    /// error out.
    pub fn prediction_interval<F: Fn(&CostParams) -> f64>(
        &self,
        base: &CostParams,
        kind: &str,
        f: F,
    ) -> (f64, f64) {
        self.widened_interval(base, self.unexplained_sigma(kind), f)
    }

    /// `f` at the fitted parameters and its standard deviation by the delta method on the
    /// covariance (finite-difference gradient, each step kept inside its parameter's bounds).
    fn delta<F: Fn(&CostParams) -> f64>(&self, base: &CostParams, f: F) -> (f64, f64) {
        let p0 = self.params(base);
        let y0 = f(&p0);
        let n = self.parameters.len();
        let mut g = vec![0.0; n];
        for (j, fp) in self.parameters.iter().enumerate() {
            let h = (fp.value.abs() * 1e-3).max(1e-6);
            let mut p = p0;
            let v = (fp.value + h).min(fp.upper_bound);
            let v = if v == fp.value { fp.value - h } else { v };
            fp.kind.set(&mut p, v);
            g[j] = (f(&p) - y0) / (v - fp.value);
        }
        let mut var = 0.0;
        for i in 0..n {
            for j in 0..n {
                var += g[i] * self.covariance[i][j] * g[j];
            }
        }
        (y0, var.max(0.0).sqrt())
    }
}

/// A fitted value in four significant figures (the calibration table's four decimals would
/// print a step overhead in µs as 900.0000).
fn format_significant(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
    format!("{v:.digits$}")
}
