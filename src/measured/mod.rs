//! Measured benchmark data, read from the files users already have, as one list of
//! observations the calibration and validation can set against predictions.
//!
//! Each reader tolerates its format's quirks (a cut-off last line, comment lines, extra
//! columns) and fails with the file and line when a required field is missing or malformed.
//! Every observation remembers where it came from, so residuals can be reported per point.

pub mod e2e_csv;
pub mod e2e_disagg_csv;
pub mod gemm_csv;
pub mod kernel_table;
pub mod macro_log;
pub mod moe_experts;
pub mod nccl;
pub mod specdec_csv;
pub mod toml_file;
pub mod trace;
pub mod vllm_json;

pub use gemm_csv::parse_gemm_csv;
pub use macro_log::parse_macro_log;
pub use nccl::parse_nccl;
pub use toml_file::parse_toml;
pub use trace::{categorize, parse_trace};
pub use vllm_json::parse_vllm_json;

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How a benchmark harness defines TPOT: what a measurement used, and what a sweep reports
/// (`--tpot-def`). Predictions are compared under the measurement's own definition. The one
/// enum for the concept; its names (`itl`, `e2e`) come from serde and clap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TpotDef {
    /// Inter-token latency: (E2E − TTFT) / (tokens − 1), as vLLM's benchmark reports it.
    #[default]
    Itl,
    /// End-to-end: E2E / tokens, prefill and time to first token included.
    E2e,
}

impl TpotDef {
    /// The name in files and flags (`itl`, `e2e`).
    pub fn name(self) -> &'static str {
        match self {
            TpotDef::Itl => "itl",
            TpotDef::E2e => "e2e",
        }
    }

    /// What the definition measures, for reports.
    pub fn meaning(self) -> &'static str {
        match self {
            TpotDef::Itl => "inter-token latency, decode only",
            TpotDef::E2e => "end-to-end time / tokens, prefill included",
        }
    }
}

impl std::fmt::Display for TpotDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Kernel-time categories a profiler trace is split into (and the breakdown predicts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceCategory {
    Allreduce,
    Moe,
    Attention,
    Gemm,
    Dequant,
    Other,
}

/// Where an observation came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Origin {
    pub file: String,
    /// 1-based line, where the format has lines.
    pub line: Option<usize>,
    /// The record's words the point is read from where it is not a measured output (a
    /// figure a person stated, or a reading of a sentence): quoted, so that a report can say
    /// which points are prose and not measurements. `None`: a measurement.
    pub prose: Option<String>,
}

impl Origin {
    /// `file:line` (whether the point is prose is `prose`'s to say).
    pub fn label(&self) -> String {
        format!(
            "{}{}",
            self.file,
            self.line.map(|l| format!(":{l}")).unwrap_or_default()
        )
    }
}

/// What was measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Quantity {
    /// Time per output token of a serving run, seconds.
    Tpot {
        concurrency: u32,
        input_len: Option<u32>,
        output_len: u32,
        definition: TpotDef,
        seconds: f64,
    },
    /// Time to first token, seconds. The output length matters too: it sets how many of
    /// the closed loop's requests decode while a prompt waits.
    Ttft {
        concurrency: u32,
        input_len: Option<u32>,
        output_len: Option<u32>,
        seconds: f64,
    },
    /// Output tokens per second of the whole server.
    Throughput {
        concurrency: u32,
        input_len: Option<u32>,
        output_len: Option<u32>,
        tokens_per_second: f64,
    },
    /// Share of decode kernel time in one category (0..1).
    CategoryShare {
        concurrency: u32,
        category: TraceCategory,
        share: f64,
    },
    /// One all-reduce of `bytes` over `gpus` GPUs took `seconds`.
    AllReduce { bytes: f64, gpus: u32, seconds: f64 },
    /// One GEMM (m × k by k × n) in `dtype` took `seconds`, through `kernel` where the file
    /// names it (a kernel-table row's `kernel` column: the family it runs at; empty when
    /// unnamed).
    Gemm {
        m: u64,
        n: u64,
        k: u64,
        dtype: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        kernel: String,
        seconds: f64,
    },
}

impl Quantity {
    /// The request lengths a serving row states, `(input, output)`, each `None` where the
    /// file is silent and its prediction takes the assumed one; `None` for kernel rows, which
    /// need none.
    pub fn stated_lengths(&self) -> Option<(Option<u32>, Option<u32>)> {
        match *self {
            Quantity::Tpot {
                input_len,
                output_len,
                ..
            } => Some((input_len, Some(output_len))),
            Quantity::Ttft {
                input_len,
                output_len,
                ..
            } => Some((input_len, output_len)),
            Quantity::Throughput {
                input_len,
                output_len,
                ..
            } => Some((input_len, output_len)),
            Quantity::CategoryShare { .. } => Some((None, None)),
            Quantity::AllReduce { .. } | Quantity::Gemm { .. } => None,
        }
    }

    /// The kind's name, as files and reports write it (`tpot`, `ttft`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Quantity::Tpot { .. } => "tpot",
            Quantity::Ttft { .. } => "ttft",
            Quantity::Throughput { .. } => "throughput",
            Quantity::CategoryShare { .. } => "category_share",
            Quantity::AllReduce { .. } => "all_reduce",
            Quantity::Gemm { .. } => "gemm",
        }
    }
}

/// One measured value and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    pub quantity: Quantity,
    pub origin: Origin,
}

/// Everything read from one or more files.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MeasuredSet {
    /// System and model named by the file, where it names them.
    pub system: Option<String>,
    pub model: Option<String>,
    pub observations: Vec<Observation>,
    /// The GPU device names the files report (nccl-tests' `#  Rank … device …` lines), each
    /// with where it was read: held against the system's GPU before any fit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceSeen>,
}

/// A GPU device name as a measured file reports it (`NVIDIA H100 80GB HBM3`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSeen {
    pub name: String,
    pub file: String,
    pub line: usize,
}

impl TraceCategory {
    /// Every category, in the order reports list them.
    pub const ALL: [TraceCategory; 6] = [
        TraceCategory::Allreduce,
        TraceCategory::Moe,
        TraceCategory::Attention,
        TraceCategory::Gemm,
        TraceCategory::Dequant,
        TraceCategory::Other,
    ];

    /// The lowercase name used in files and reports (`allreduce`, `moe`, …).
    pub fn name(self) -> &'static str {
        match self {
            TraceCategory::Allreduce => "allreduce",
            TraceCategory::Moe => "moe",
            TraceCategory::Attention => "attention",
            TraceCategory::Gemm => "gemm",
            TraceCategory::Dequant => "dequant",
            TraceCategory::Other => "other",
        }
    }
}

impl Observation {
    /// What is physically impossible about this observation as read (a time, rate or size
    /// that is not a positive finite number, a share outside [0, 1], a zero concurrency or
    /// GPU count), or `None`. Every reader's output passes this; the fuzz tests hold each
    /// reader to it.
    pub fn problem(&self) -> Option<String> {
        let positive = |name: &str, v: f64| {
            (!(v.is_finite() && v > 0.0))
                .then(|| format!("{name} {v} is not a positive finite number"))
        };
        let count = |name: &str, v: u32| (v == 0).then(|| format!("{name} is 0"));
        match &self.quantity {
            Quantity::Tpot {
                concurrency,
                output_len,
                seconds,
                ..
            } => count("concurrency", *concurrency)
                .or_else(|| count("output length", *output_len))
                .or_else(|| positive("TPOT (s)", *seconds)),
            Quantity::Ttft {
                concurrency,
                seconds,
                ..
            } => count("concurrency", *concurrency).or_else(|| positive("TTFT (s)", *seconds)),
            Quantity::Throughput {
                concurrency,
                tokens_per_second,
                ..
            } => count("concurrency", *concurrency)
                .or_else(|| positive("throughput (tok/s)", *tokens_per_second)),
            Quantity::CategoryShare {
                concurrency, share, ..
            } => count("concurrency", *concurrency).or_else(|| {
                (!(share.is_finite() && (0.0..=1.0).contains(share)))
                    .then(|| format!("share {share} is outside [0, 1]"))
            }),
            Quantity::AllReduce {
                bytes,
                gpus,
                seconds,
            } => count("GPU count", *gpus)
                .or_else(|| positive("bytes", *bytes))
                .or_else(|| positive("time (s)", *seconds)),
            Quantity::Gemm {
                m, n, k, seconds, ..
            } => (*m == 0 || *n == 0 || *k == 0)
                .then(|| format!("GEMM shape {m} x {n} x {k} has a zero dimension"))
                .or_else(|| positive("time (s)", *seconds)),
        }
    }
}

/// What a reader's answer must look like, for the tests that feed readers odd input: `Ok`
/// with every observation physically possible and from `file`, or an `Err` whose message
/// names `file`. The problem otherwise, in words.
pub fn answer_problem(answer: &Result<MeasuredSet>, file: &str) -> Option<String> {
    match answer {
        Ok(set) => set.observations.iter().find_map(|o| {
            if o.origin.file != file {
                return Some(format!(
                    "observation from {:?}, read from {file:?}",
                    o.origin.file
                ));
            }
            o.problem()
                .map(|p| format!("{}: {p} in {:?}", o.origin.label(), o.quantity))
        }),
        Err(e) => {
            let msg = e.to_string();
            (!msg.contains(file)).then(|| format!("error does not name {file:?}: {msg}"))
        }
    }
}

impl MeasuredSet {
    /// Every measured throughput as (concurrency, tok/s), in file order.
    pub fn throughputs(&self) -> Vec<(u32, f64)> {
        self.observations
            .iter()
            .filter_map(|o| match o.quantity {
                Quantity::Throughput {
                    concurrency,
                    tokens_per_second,
                    ..
                } => Some((concurrency, tokens_per_second)),
                _ => None,
            })
            .collect()
    }

    /// Append `other`'s observations. The first file that names a system (model) keeps it:
    /// names from different tools (a served model path, a Hugging Face id, a rooftop name)
    /// are not comparable, so they are not checked against each other.
    pub fn merge(&mut self, other: MeasuredSet) {
        if self.system.is_none() {
            self.system = other.system;
        }
        if self.model.is_none() {
            self.model = other.model;
        }
        self.observations.extend(other.observations);
        self.devices.extend(other.devices);
    }
}

/// The measured-file formats rooftop reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// The team's HTTP macro-benchmark log (`Trial N: 0.407s, 32 tokens, …`).
    MacroLog,
    /// `vllm bench serve --save-result` JSON, one object or JSON lines.
    VllmJson,
    /// nccl-tests `all_reduce_perf` output.
    Nccl,
    /// GEMM micro-benchmark CSV (`m,n,k,dtype,latency_ms|time_us`).
    GemmCsv,
    /// PyTorch profiler Chrome trace JSON.
    Trace,
    /// rooftop's own measurement TOML.
    Toml,
}

impl FileFormat {
    pub fn name(self) -> &'static str {
        match self {
            FileFormat::MacroLog => "macro-benchmark log",
            FileFormat::VllmJson => "vLLM benchmark JSON",
            FileFormat::Nccl => "nccl-tests all_reduce_perf output",
            FileFormat::GemmCsv => "GEMM CSV",
            FileFormat::Trace => "PyTorch profiler trace",
            FileFormat::Toml => "rooftop measurement TOML",
        }
    }

    /// The format of a file, from its extension where that is unambiguous (`.toml`, `.csv`)
    /// and from its content otherwise (`.json` may be a vLLM result or a trace; `.log` and
    /// `.txt` may be a macro log or nccl-tests output). `None` when nothing matches.
    pub fn detect(path: &Path, text: &str) -> Option<FileFormat> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("toml") => return Some(FileFormat::Toml),
            Some("csv") => return Some(FileFormat::GemmCsv),
            _ => {}
        }
        let sniffed = FileFormat::sniff(text);
        let json_ext = matches!(ext.as_deref(), Some("json" | "jsonl" | "ndjson"));
        match sniffed {
            Some(f) => Some(f),
            None if json_ext => Some(FileFormat::VllmJson),
            None => None,
        }
    }

    /// Guess the format from the text alone.
    pub fn sniff(text: &str) -> Option<FileFormat> {
        let t = text.trim_start_matches('\u{feff}').trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            // Both JSON formats; a trace names its event list, or is a bare array of events
            // (each with a phase `ph`); an array of vLLM results has neither.
            if t.contains("\"traceEvents\"") || (t.starts_with('[') && t.contains("\"ph\"")) {
                return Some(FileFormat::Trace);
            }
            return Some(FileFormat::VllmJson);
        }
        let mut csv_header = None;
        for line in t.lines().map(str::trim) {
            if line.contains("all_reduce_perf")
                || line.contains("Avg bus bandwidth")
                || (line.starts_with('#') && line.contains("out-of-place"))
            {
                return Some(FileFormat::Nccl);
            }
            if line.starts_with("Testing max_tokens") || macro_log::is_trial_line(line) {
                return Some(FileFormat::MacroLog);
            }
            if line == "[[points]]" || line.starts_with("tpot_definition") {
                return Some(FileFormat::Toml);
            }
            if csv_header.is_none() && !line.is_empty() && !line.starts_with('#') {
                csv_header = Some(line);
            }
        }
        let header = csv_header?;
        let cols: Vec<String> = header
            .split(',')
            .map(|c| c.trim().trim_matches('"').to_ascii_lowercase())
            .collect();
        ["m", "n", "k"]
            .iter()
            .all(|c| cols.iter().any(|h| h == c))
            .then_some(FileFormat::GemmCsv)
    }
}

/// What a file cannot say for itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadOptions {
    /// Read the files as this format instead of detecting it.
    pub format: Option<FileFormat>,
    /// GPU count for nccl-tests output that has neither `# Rank` lines nor a `-g N` command.
    pub gpus: Option<u32>,
    /// Concurrency at which a profiler trace was taken (default 1).
    pub concurrency: Option<u32>,
}

/// Read one measured file, detecting its format (see [`FileFormat::detect`]).
pub fn read_file(path: &Path) -> Result<MeasuredSet> {
    read_file_with(path, &ReadOptions::default())
}

/// Read one measured file with options for what the file does not say.
pub fn read_file_with(path: &Path, options: &ReadOptions) -> Result<MeasuredSet> {
    let text = crate::files::read_text(path)?;
    let file = path.display().to_string();
    let format = match options.format.or_else(|| FileFormat::detect(path, &text)) {
        Some(f) => f,
        None => {
            return Err(measured_error(
                &file,
                None,
                "cannot tell the format: expected a macro-benchmark log, vLLM benchmark JSON, \
                 nccl-tests all_reduce_perf output, a GEMM CSV (m,n,k,dtype,latency_ms), a \
                 profiler trace ({\"traceEvents\": …}) or a rooftop measurement TOML",
            ))
        }
    };
    parse_text(&text, &file, format, options)
}

/// Parse text already read, as `format`. `file` labels errors and origins.
pub fn parse_text(
    text: &str,
    file: &str,
    format: FileFormat,
    options: &ReadOptions,
) -> Result<MeasuredSet> {
    // Spreadsheet exports often start with a byte-order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let set = match format {
        FileFormat::MacroLog => parse_macro_log(text, file),
        FileFormat::VllmJson => parse_vllm_json(text, file),
        FileFormat::Nccl => parse_nccl(text, file, options.gpus),
        FileFormat::GemmCsv => parse_gemm_csv(text, file),
        FileFormat::Trace => parse_trace(text, file, options.concurrency),
        FileFormat::Toml => parse_toml(text, file),
    }?;
    if set.observations.is_empty() {
        return Err(measured_error(file, None, "no measurements in the file"));
    }
    for o in &set.observations {
        check_observation(o)?;
    }
    Ok(set)
}

/// Shortest time a measurement may report: nothing a GPU or a server does is timed below a
/// nanosecond, and a smaller value (a typo, an underflow) would make the calibration's
/// relative residuals overflow.
pub const MIN_MEASURED_SECONDS: f64 = 1e-9;

/// Longest time per token, or to the first token, a serving measurement can plausibly
/// report: ten minutes. Beyond it the file holds a typo or a unit slip, not a run.
pub const MAX_SERVING_SECONDS: f64 = 600.0;

/// Longest one kernel or collective call a micro-benchmark table can plausibly report: a
/// minute. The largest GEMM a table holds runs for seconds on the slowest GPU (a 64k cube in
/// BF16 on an L4 is ~5 s); a minute is a unit slip (seconds or microseconds written as ms).
pub const MAX_KERNEL_SECONDS: f64 = 60.0;

/// What every reader guarantees of an observation, whatever its format: finite values, times
/// of at least [`MIN_MEASURED_SECONDS`], rates above zero, shares in 0..1, at least one
/// request, GPU and token where those are counted. The readers check their own fields; this
/// is the last line, so no format can hand the calibration a value it cannot use.
fn check_observation(o: &Observation) -> Result<()> {
    let fail = |why: String| {
        Err(measured_error(
            &o.origin.file,
            o.origin.line,
            format!("{why}: not a measurement rooftop can compare"),
        ))
    };
    let time_ok = |s: f64| s.is_finite() && s >= MIN_MEASURED_SECONDS;
    let count_ok = |c: Option<u32>| c.is_none_or(|c| c >= 1);
    match &o.quantity {
        Quantity::Tpot {
            concurrency,
            input_len,
            output_len,
            seconds,
            ..
        } => {
            if !time_ok(*seconds) {
                return fail(format!("TPOT of {seconds} s"));
            }
            if !(count_ok(Some(*concurrency))
                && count_ok(*input_len)
                && count_ok(Some(*output_len)))
            {
                return fail("TPOT at concurrency or length 0".into());
            }
        }
        Quantity::Ttft {
            concurrency,
            input_len,
            output_len,
            seconds,
        } => {
            if !time_ok(*seconds) {
                return fail(format!("TTFT of {seconds} s"));
            }
            if !(count_ok(Some(*concurrency)) && count_ok(*input_len) && count_ok(*output_len)) {
                return fail("TTFT at concurrency or length 0".into());
            }
        }
        Quantity::Throughput {
            concurrency,
            input_len,
            output_len,
            tokens_per_second,
        } => {
            if !(tokens_per_second.is_finite() && *tokens_per_second > 0.0) {
                return fail(format!("throughput of {tokens_per_second} tok/s"));
            }
            if !(count_ok(Some(*concurrency)) && count_ok(*input_len) && count_ok(*output_len)) {
                return fail("throughput at concurrency or length 0".into());
            }
        }
        Quantity::CategoryShare {
            concurrency, share, ..
        } => {
            if !(0.0..=1.0).contains(share) || *concurrency == 0 {
                return fail(format!("share {share} at concurrency {concurrency}"));
            }
        }
        Quantity::AllReduce {
            bytes,
            gpus,
            seconds,
        } => {
            if !(time_ok(*seconds) && bytes.is_finite() && *bytes >= 0.0) || *gpus == 0 {
                return fail(format!(
                    "all-reduce of {bytes} bytes over {gpus} GPUs in {seconds} s"
                ));
            }
        }
        Quantity::Gemm {
            m, n, k, seconds, ..
        } => {
            if !time_ok(*seconds) || *m == 0 || *n == 0 || *k == 0 {
                return fail(format!("GEMM {m}x{n}x{k} in {seconds} s"));
            }
        }
    }
    Ok(())
}

/// Read several files into one set (see [`MeasuredSet::merge`]); the first error stops.
pub fn read_files(paths: &[PathBuf]) -> Result<MeasuredSet> {
    read_files_with(paths, &ReadOptions::default())
}

/// [`read_files`] with options applied to every file.
pub fn read_files_with(paths: &[PathBuf], options: &ReadOptions) -> Result<MeasuredSet> {
    let mut set = MeasuredSet::default();
    for p in paths {
        set.merge(read_file_with(p, options)?);
    }
    Ok(set)
}

/// The first column title a header holds twice: which of the two holds the values is not
/// known, so a reader refuses the file rather than take the first.
pub(crate) fn duplicate_title<'a>(titles: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = std::collections::HashSet::new();
    titles
        .into_iter()
        .map(str::trim)
        .find(|t| !t.is_empty() && !seen.insert(*t))
}

/// The refusal of a header that holds `title` twice, naming its line.
pub(crate) fn duplicate_title_error(file: &str, line: usize, title: &str) -> Error {
    measured_error(
        file,
        Some(line),
        format!(
            "column `{title}` appears twice in the header: which holds the values is not known"
        ),
    )
}

/// A CSV reader over `text` (a byte-order mark dropped, `#` lines skipped, rows of any
/// width) and its header row, or the error naming `file`'s line 1.
pub(crate) fn open_csv<'t>(
    text: &'t str,
    file: &str,
) -> Result<(&'t str, csv::Reader<&'t [u8]>, csv::StringRecord)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut rdr = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .flexible(true)
        .from_reader(text.as_bytes());
    let headers = rdr
        .headers()
        .map_err(|e| measured_error(file, Some(1), format!("unreadable header: {e}")))?
        .clone();
    if let Some(t) = duplicate_title(headers.iter()) {
        return Err(duplicate_title_error(file, 1, t));
    }
    Ok((text, rdr, headers))
}

/// The 1-based lines of `text` that CSV records and errors start on, counted from their
/// byte offsets (records come in order, so each count goes on from the last), so a file with
/// CRLF line ends numbers its rows as an editor does: the csv crate's own line count ran one
/// short on such files.
pub(crate) struct CsvLines<'t> {
    text: &'t [u8],
    byte: usize,
    line: usize,
}

impl<'t> CsvLines<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        CsvLines {
            text: text.as_bytes(),
            byte: 0,
            line: 1,
        }
    }

    /// The line `pos` starts on.
    pub(crate) fn at(&mut self, pos: Option<&csv::Position>) -> Option<usize> {
        let mut byte = usize::try_from(pos?.byte()).ok()?.min(self.text.len());
        // After a CR the csv crate starts the next record at the LF that ends the line.
        while self
            .text
            .get(byte)
            .is_some_and(|b| matches!(b, b'\r' | b'\n'))
        {
            byte += 1;
        }
        if byte < self.byte {
            (self.byte, self.line) = (0, 1);
        }
        self.line += self.text[self.byte..byte]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.byte = byte;
        Some(self.line)
    }
}

/// Every row of the CSV `text` (a byte-order mark dropped, `#` lines skipped) as `read`
/// gives it. Its header must name every column of `names` (the error names the first one
/// missing and what a `kind` file has); `optional` are the columns it may have. A row that
/// cannot be read, or a file of no rows, is the error naming `file` (and the row's line).
pub(crate) fn read_rows<T>(
    text: &str,
    file: &str,
    kind: &str,
    names: &[&str],
    optional: &[&str],
    mut read: impl FnMut(&CsvRow) -> Result<T>,
) -> Result<Vec<T>> {
    let (text, rdr, headers) = open_csv(text, file)?;
    let position = |name: &str| headers.iter().position(|h| h.trim() == name);
    let idx = names
        .iter()
        .map(|name| {
            position(name).ok_or_else(|| {
                measured_error(
                    file,
                    Some(1),
                    format!("missing column `{name}` ({kind} has: {})", names.join(",")),
                )
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    let optional: Vec<Option<usize>> = optional.iter().map(|name| position(name)).collect();
    let mut lines = CsvLines::new(text);
    let mut rows = Vec::new();
    for rec in rdr.into_records() {
        let rec = rec.map_err(|e| {
            let line = lines.at(e.position());
            measured_error(file, line, format!("unreadable row: {e}"))
        })?;
        let line = lines.at(rec.position()).unwrap_or(0);
        rows.push(read(&CsvRow {
            file,
            line,
            rec: &rec,
            idx: &idx,
            names,
            optional: &optional,
        })?);
    }
    if rows.is_empty() {
        return Err(measured_error(file, None, "no runs in the file"));
    }
    Ok(rows)
}

/// One row of a CSV read by [`read_rows`]: its fields read by their index in the required
/// columns, an unreadable one the error naming the file, the row's line and the column.
pub(crate) struct CsvRow<'a> {
    pub(crate) file: &'a str,
    pub(crate) line: usize,
    rec: &'a csv::StringRecord,
    idx: &'a [usize],
    names: &'a [&'a str],
    optional: &'a [Option<usize>],
}

impl CsvRow<'_> {
    /// Column `c`'s text, trimmed (empty where the row is short).
    pub(crate) fn get(&self, c: usize) -> &str {
        self.rec.get(self.idx[c]).unwrap_or("").trim()
    }

    /// Optional column `i`'s text, trimmed (empty where the file or the row does not have it).
    pub(crate) fn extra(&self, i: usize) -> &str {
        self.optional[i]
            .and_then(|c| self.rec.get(c))
            .unwrap_or("")
            .trim()
    }

    /// Column `c`'s text as an owned string.
    pub(crate) fn text(&self, c: usize) -> String {
        self.get(c).to_string()
    }

    /// The error that column `c` is not `what`.
    pub(crate) fn err(&self, c: usize, what: &str) -> Error {
        measured_error(
            self.file,
            Some(self.line),
            format!("`{}` = \"{}\": expected {what}", self.names[c], self.get(c)),
        )
    }

    /// Column `c` as a whole number of at least `min` (written as an integer or a float).
    pub(crate) fn count(&self, c: usize, min: f64) -> Result<u32> {
        let v: f64 = self
            .get(c)
            .parse()
            .map_err(|_| self.err(c, "a whole number"))?;
        if !(v.is_finite() && v.fract() == 0.0 && v >= min && v <= u32::MAX as f64) {
            return Err(self.err(c, &format!("a whole number of at least {min}")));
        }
        Ok(v as u32)
    }

    /// Column `c` as a whole number of at least 1, or `None` where it is empty.
    pub(crate) fn maybe_count(&self, c: usize) -> Result<Option<u32>> {
        if self.get(c).is_empty() {
            Ok(None)
        } else {
            self.count(c, 1.0).map(Some)
        }
    }

    /// Column `c`, a serving time (TTFT, TPOT) in milliseconds, in seconds: finite, at
    /// least [`MIN_MEASURED_SECONDS`] and at most [`MAX_SERVING_SECONDS`].
    pub(crate) fn ms(&self, c: usize) -> Result<f64> {
        let v: f64 = self
            .get(c)
            .parse()
            .map_err(|_| self.err(c, "a time in milliseconds"))?;
        if !(v.is_finite() && v * 1e-3 >= MIN_MEASURED_SECONDS) {
            return Err(self.err(c, "a positive time in milliseconds"));
        }
        if v * 1e-3 > MAX_SERVING_SECONDS {
            return Err(self.err(
                c,
                &format!(
                    "a serving time of at most {MAX_SERVING_SECONDS} s ({} ms): longer is a \
                     typo or a unit slip, not a run",
                    MAX_SERVING_SECONDS * 1e3
                ),
            ));
        }
        Ok(v * 1e-3)
    }
}

/// A `silicon_concurrency` field: `None` where it is empty, else a whole number of at least
/// 1, or the error naming `file` and `line`.
pub(crate) fn concurrency_field(v: &str, file: &str, line: usize) -> Result<Option<u32>> {
    match v {
        "" => Ok(None),
        v => match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x.fract() == 0.0 && x >= 1.0 && x <= u32::MAX as f64 => {
                Ok(Some(x as u32))
            }
            _ => Err(measured_error(
                file,
                Some(line),
                format!("`silicon_concurrency` = \"{v}\": expected a whole number of at least 1"),
            )),
        },
    }
}

pub(crate) fn csv_header_has(text: &str, cols: &[&str]) -> bool {
    let header = text
        .trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'));
    header.is_some_and(|h| {
        let have: Vec<&str> = h.split(',').map(|c| c.trim().trim_matches('"')).collect();
        cols.iter().all(|c| have.contains(c))
    })
}

pub(crate) fn measured_error(file: &str, line: Option<usize>, message: impl Into<String>) -> Error {
    Error::Measured {
        file: file.to_string(),
        line,
        message: message.into(),
    }
}

/// 1-based line of byte offset `at` in `text` (clamped to the text).
pub(crate) fn line_at(text: &str, at: usize) -> usize {
    let end = at.min(text.len());
    text.as_bytes()
        .get(..end)
        .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
        + 1
}

/// An observation from `file` at `line`.
pub(crate) fn observation(quantity: Quantity, file: &str, line: Option<usize>) -> Observation {
    Observation {
        quantity,
        origin: Origin {
            file: file.to_string(),
            line,
            prose: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_each_format() {
        let cases = [
            (
                "  Trial 1: 0.407s, 32 tokens, TPOT=12.7ms",
                FileFormat::MacroLog,
            ),
            ("{\"max_concurrency\": 8}", FileFormat::VllmJson),
            ("{\"traceEvents\": []}", FileFormat::Trace),
            (
                "# nThread 1 nGpus 8\n# Avg bus bandwidth    : 1.0",
                FileFormat::Nccl,
            ),
            (
                "# bench\nm,n,k,dtype,time_us\n1,2,3,bf16,4",
                FileFormat::GemmCsv,
            ),
            (
                "system = \"x\"\n[[points]]\nconcurrency = 1",
                FileFormat::Toml,
            ),
        ];
        for (text, f) in cases {
            assert_eq!(FileFormat::sniff(text), Some(f), "{text}");
        }
        assert_eq!(FileFormat::sniff("hello\nworld"), None);
        assert_eq!(FileFormat::sniff(""), None);
    }

    #[test]
    fn extension_decides_toml_and_csv() {
        assert_eq!(
            FileFormat::detect(Path::new("a.toml"), "anything"),
            Some(FileFormat::Toml)
        );
        assert_eq!(
            FileFormat::detect(Path::new("a.csv"), "x,y"),
            Some(FileFormat::GemmCsv)
        );
        assert_eq!(
            FileFormat::detect(Path::new("a.json"), "  "),
            Some(FileFormat::VllmJson)
        );
        assert_eq!(FileFormat::detect(Path::new("a.log"), "nothing here"), None);
    }

    #[test]
    fn line_at_counts_from_one() {
        assert_eq!(line_at("a\nb\nc", 0), 1);
        assert_eq!(line_at("a\nb\nc", 2), 2);
        assert_eq!(line_at("a\nb\nc", 99), 3);
    }

    #[test]
    fn merge_keeps_first_names() {
        let mut a = MeasuredSet {
            system: None,
            model: Some("m1".into()),
            observations: vec![],
            devices: vec![],
        };
        let b = MeasuredSet {
            system: Some("s".into()),
            model: Some("m2".into()),
            observations: vec![observation(
                Quantity::AllReduce {
                    bytes: 8.0,
                    gpus: 8,
                    seconds: 1e-5,
                },
                "f",
                Some(3),
            )],
            devices: vec![],
        };
        a.merge(b);
        assert_eq!(a.system.as_deref(), Some("s"));
        assert_eq!(a.model.as_deref(), Some("m1"));
        assert_eq!(a.observations.len(), 1);
    }

    /// Rows are numbered as an editor numbers them, with LF or CRLF line ends and a quoted
    /// field across lines (the csv crate's count ran one short on CRLF files).
    #[test]
    fn csv_rows_are_numbered_by_the_lines_they_start_on() {
        for nl in ["\n", "\r\n"] {
            let text = format!("a,b{nl}1,2{nl}\"x{nl}y\",3{nl}4,5{nl}");
            let mut rdr = csv::Reader::from_reader(text.as_bytes());
            let mut lines = CsvLines::new(&text);
            let got: Vec<usize> = rdr
                .records()
                .map(|r| lines.at(r.unwrap().position()).unwrap())
                .collect();
            assert_eq!(got, vec![2, 3, 5], "line ends {nl:?}");
        }
    }
}
