//! Reader for nccl-tests `all_reduce_perf` output, the usual measurement of a system's
//! all-reduce. It exists to calibrate the all-reduce model against the interconnect as it
//! really behaves (on a PCIe-only box, all-reduce was half of decode time).
//!
//! Data rows are `size count type redop root | time algbw busbw #wrong | time algbw busbw
//! #wrong` (out-of-place, then in-place); each row becomes a [`Quantity::AllReduce`] of
//! `size` bytes taking the out-of-place time (µs). The column layout is read from the
//! `#  size  count  type  redop  root  time …` header when present (older nccl-tests had no
//! `root` column), and defaults to the layout above.
//!
//! The GPU count comes from the file: the number of distinct `#  Rank  N Group … device …`
//! lines, else the command line (`all_reduce_perf … -g 8`, times `-t` threads and
//! `mpirun -np` processes where given). The `# nThread 1 nGpus N` header is not used: under MPI
//! it counts one process's GPUs. When the file says neither, the caller's hint is used;
//! a hint that contradicts the file is an error, and no count at all is an error asking for one.
//!
//! The device names of the rank lines are kept ([`MeasuredSet::devices`]), to be held
//! against the system's GPU. A row whose `#wrong` count is not zero, or a summary
//! `# Out of bounds values : N FAILED`, is an error: a broken run's times measure nothing.
//!
//! Rows of 0 bytes are left out: they move nothing, and the all-reduce model has no term
//! for them. A time of 0 is not a measurement and is an error.
//!
//! Tolerated: `#` comments, blank lines, and other lines that do not start with a number
//! (`NCCL INFO` debug output, shell prompts). A line that starts with a number is a data row:
//! too few columns or a non-numeric size or time is an error with its line number.

use super::{measured_error, observation, DeviceSeen, MeasuredSet, Quantity};
use crate::error::Result;
use std::collections::BTreeSet;

/// The data-row layout: index of the out-of-place time and the number of columns.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Layout {
    time: usize,
    columns: usize,
    /// Index of the `redop` column, if the header has one.
    redop: Option<usize>,
}

/// nccl-tests ≥ 2.10: size count type redop root, then 4 out-of-place and 4 in-place columns.
const DEFAULT_LAYOUT: Layout = Layout {
    time: 5,
    columns: 13,
    redop: Some(3),
};

/// The other nccl-tests binaries, whose output must not be read as all-reduce.
const OTHER_TESTS: [&str; 9] = [
    "all_gather_perf",
    "alltoall_perf",
    "broadcast_perf",
    "gather_perf",
    "hypercube_perf",
    "reduce_perf",
    "reduce_scatter_perf",
    "scatter_perf",
    "sendrecv_perf",
];

/// Parse `all_reduce_perf` output. `gpus_hint` is the GPU count when the file does not say it.
pub fn parse_nccl(text: &str, file: &str, gpus_hint: Option<u32>) -> Result<MeasuredSet> {
    let mut layout = DEFAULT_LAYOUT;
    let mut ranks = BTreeSet::new();
    let mut devices: Vec<DeviceSeen> = Vec::new();
    let mut command_gpus: Option<u32> = None;
    // (line, bytes, seconds)
    let mut rows: Vec<(usize, f64, f64)> = Vec::new();

    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(other) = OTHER_TESTS.iter().find(|t| {
            line.split(|c: char| c.is_whitespace() || c == '/')
                .any(|w| w == **t)
        }) {
            return Err(measured_error(
                file,
                Some(n),
                format!("this is {other} output; only all_reduce_perf output is read"),
            ));
        }
        if line.contains("all_reduce_perf") {
            command_gpus = command_gpus.or_else(|| gpus_from_command(line));
        }
        if let Some(comment) = line.strip_prefix('#') {
            if let Some(rank) = rank_of(comment) {
                ranks.insert(rank);
                if let Some(name) = device_of(comment) {
                    if !devices.iter().any(|d| d.name == name) {
                        devices.push(DeviceSeen {
                            name,
                            file: file.to_string(),
                            line: n,
                        });
                    }
                }
            } else if let Some(bad) = failed_check(comment) {
                return Err(measured_error(
                    file,
                    Some(n),
                    format!(
                        "nccl-tests found {bad} wrong values: the all-reduce gave wrong results, \
                         and the times of a broken run measure nothing"
                    ),
                ));
            } else if let Some(l) = layout_of(comment) {
                layout = l;
            }
            continue;
        }
        let cols: Vec<&str> = line.split_whitespace().collect();
        let Some(size) = cols.first().and_then(|c| c.parse::<u64>().ok()) else {
            continue; // not a data row: debug output, a prompt, a warning
        };
        if cols.len() < layout.columns {
            return Err(measured_error(
                file,
                Some(n),
                format!(
                    "data row has {} columns, expected {} (size count type redop root, then \
                     time algbw busbw #wrong out-of-place and in-place)",
                    cols.len(),
                    layout.columns
                ),
            ));
        }
        if let Some(op) = layout.redop.and_then(|r| cols.get(r)) {
            if *op == "none" {
                return Err(measured_error(
                    file,
                    Some(n),
                    "redop `none`: this is not all_reduce_perf output (all-gather or all-to-all?)",
                ));
            }
        }
        // A 0-byte all-reduce moves nothing: the model has no term for it, so it is not
        // compared (it would pull the fitted latency toward the launch cost alone).
        if size == 0 {
            continue;
        }
        let time_text = cols.get(layout.time).copied().unwrap_or("");
        let time_us = time_text
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && *t > 0.0)
            .ok_or_else(|| {
                measured_error(
                    file,
                    Some(n),
                    format!(
                        "out-of-place time \"{time_text}\" is not a positive number of \
                         microseconds"
                    ),
                )
            })?;
        // `#wrong` after each time (out-of-place, then in-place): values the check found
        // wrong; `N/A` where the run did not check (`-c 0`).
        for wrong in [layout.time + 3, layout.time + 7] {
            let text = cols.get(wrong).copied().unwrap_or("");
            if text.parse::<u64>().is_ok_and(|w| w > 0) {
                return Err(measured_error(
                    file,
                    Some(n),
                    format!(
                        "#wrong = {text}: the all-reduce gave wrong results at {size} bytes, \
                         and the time of a broken run measures nothing"
                    ),
                ));
            }
        }
        rows.push((n, size as f64, time_us * 1e-6));
    }

    if rows.is_empty() {
        return Err(measured_error(
            file,
            None,
            "no data rows (`size count type redop root time algbw busbw …`): not \
             all_reduce_perf output",
        ));
    }
    let gpus = gpu_count(file, &ranks, command_gpus, gpus_hint)?;
    let observations = rows
        .into_iter()
        .map(|(n, bytes, seconds)| {
            observation(
                Quantity::AllReduce {
                    bytes,
                    gpus,
                    seconds,
                },
                file,
                Some(n),
            )
        })
        .collect();
    Ok(MeasuredSet {
        system: None,
        model: None,
        observations,
        devices,
    })
}

fn gpu_count(
    file: &str,
    ranks: &BTreeSet<u32>,
    command: Option<u32>,
    hint: Option<u32>,
) -> Result<u32> {
    let from_file = match u32::try_from(ranks.len()) {
        Ok(r) if r > 0 => Some(r),
        _ => command,
    };
    match (from_file, hint) {
        (Some(f), Some(h)) if f != h => Err(measured_error(
            file,
            None,
            format!("the file shows {f} GPUs but {h} were given"),
        )),
        (Some(f), _) => Ok(f),
        (None, Some(h)) if h > 0 => Ok(h),
        _ => Err(measured_error(
            file,
            None,
            "cannot tell how many GPUs took part: no `#  Rank N … device …` lines and no \
             `all_reduce_perf … -g N` command line; give the GPU count",
        )),
    }
}

/// The rank of a `#  Rank  0 Group  0 Pid 1234 on host device  0 [0x18] NVIDIA …` line
/// (text after the `#`).
fn rank_of(comment: &str) -> Option<u32> {
    let mut words = comment.split_whitespace();
    if words.next()? != "Rank" {
        return None;
    }
    let rank = words.next()?.parse().ok()?;
    comment.contains("device").then_some(rank)
}

/// The device name at the end of a rank line: what follows the PCI bus id
/// (`… device  0 [0x18] NVIDIA H100 80GB HBM3`).
fn device_of(comment: &str) -> Option<String> {
    let after = comment.split_once("device")?.1;
    let name = after.split_once(']')?.1.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// The count of wrong values in nccl-tests' summary line `# Out of bounds values : 3 FAILED`
/// (text after the `#`), where it is not zero.
fn failed_check(comment: &str) -> Option<u64> {
    let rest = comment.trim().strip_prefix("Out of bounds values")?;
    let count = rest
        .trim_start_matches([' ', ':'])
        .split_whitespace()
        .next()?;
    count.parse().ok().filter(|c| *c > 0)
}

/// The layout from the column-title line `#  size  count  type  redop  root  time  algbw …`.
fn layout_of(comment: &str) -> Option<Layout> {
    let titles: Vec<&str> = comment.split_whitespace().collect();
    if titles.first() != Some(&"size") || !titles.contains(&"count") {
        return None;
    }
    let time = titles.iter().position(|t| *t == "time")?;
    Some(Layout {
        time,
        columns: titles.len(),
        redop: titles.iter().position(|t| *t == "redop"),
    })
}

/// GPUs of an `all_reduce_perf` command line: `-g`/`--ngpus` per thread × `-t`/`--nthreads`
/// threads × the launcher's `-np`/`-n` processes (each 1 when absent). `None` without `-g`.
/// Flags after the binary are the test's (its `-n` is iterations); flags before it are the
/// launcher's.
fn gpus_from_command(line: &str) -> Option<u32> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| w.contains("all_reduce_perf"))?;
    let (launcher, test) = words.split_at(at);
    let flag = |words: &[&str], names: &[&str]| -> Option<u32> {
        words.iter().enumerate().find_map(|(i, w)| {
            names.iter().find_map(|name| {
                if w == name {
                    words.get(i + 1)?.parse().ok()
                } else {
                    let rest = w.strip_prefix(name)?;
                    rest.strip_prefix('=').unwrap_or(rest).parse().ok()
                }
            })
        })
    };
    let per_thread = flag(test, &["--ngpus", "-g"])?;
    let threads = flag(test, &["--nthreads", "-t"]).unwrap_or(1);
    let processes = flag(launcher, &["-np", "-n"]).unwrap_or(1);
    per_thread.checked_mul(threads)?.checked_mul(processes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    const OUT: &str = "\
# nThread 1 nGpus 2 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41021 on     node01 device  0 [0x18] NVIDIA RTX PRO 6000 Blackwell Workstation Edition
#  Rank  1 Group  0 Pid  41021 on     node01 device  1 [0x3b] NVIDIA RTX PRO 6000 Blackwell Workstation Edition
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    12.31    0.00    0.00      0    12.02    0.00    0.00      0
          16             4     float     sum      -1    12.45    0.00    0.00      0    12.18    0.00    0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.00123
#
";

    #[test]
    fn reads_rows_and_counts_ranks() {
        let set = parse_nccl(OUT, "ar.log", None).unwrap();
        assert_eq!(set.observations.len(), 2);
        match set.observations[1].quantity {
            Quantity::AllReduce {
                bytes,
                gpus,
                seconds,
            } => {
                assert_eq!((bytes, gpus), (16.0, 2));
                assert_relative_eq!(seconds, 12.45e-6);
            }
            ref q => panic!("{q:?}"),
        }
        assert_eq!(set.observations[1].origin.line, Some(11));
    }

    #[test]
    fn hint_that_contradicts_ranks_is_an_error() {
        let e = parse_nccl(OUT, "ar.log", Some(8)).unwrap_err().to_string();
        assert!(e.contains("2 GPUs") && e.contains("8"), "{e}");
        assert!(parse_nccl(OUT, "ar.log", Some(2)).is_ok());
    }

    #[test]
    fn gpu_count_from_command_line_or_hint() {
        let rows = "           8             2     float     sum      -1    12.31    0.00    0.00      0    12.02    0.00    0.00      0\n";
        let cmd = format!("$ ./build/all_reduce_perf -b 8 -e 256M -f 2 -g 8\n{rows}");
        let set = parse_nccl(&cmd, "f", None).unwrap();
        assert!(matches!(
            set.observations[0].quantity,
            Quantity::AllReduce { gpus: 8, .. }
        ));
        let mpi = format!("mpirun -np 2 ./all_reduce_perf -g 4 -t 2 -n 20\n{rows}");
        let set = parse_nccl(&mpi, "f", None).unwrap();
        assert!(matches!(
            set.observations[0].quantity,
            Quantity::AllReduce { gpus: 16, .. }
        ));
        let e = parse_nccl(rows, "f", None).unwrap_err().to_string();
        assert!(e.contains("give the GPU count"), "{e}");
        let set = parse_nccl(rows, "f", Some(4)).unwrap();
        assert!(matches!(
            set.observations[0].quantity,
            Quantity::AllReduce { gpus: 4, .. }
        ));
    }

    #[test]
    fn short_row_and_bad_time_are_errors_with_line() {
        let short = OUT.replace(
            "12.45    0.00    0.00      0    12.18    0.00    0.00      0",
            "12.45",
        );
        let e = parse_nccl(&short, "ar.log", None).unwrap_err().to_string();
        assert!(e.starts_with("ar.log:11:") && e.contains("columns"), "{e}");
        let bad = OUT.replace("12.45", "1x.45");
        let e = parse_nccl(&bad, "ar.log", None).unwrap_err().to_string();
        assert!(e.starts_with("ar.log:11:") && e.contains("1x.45"), "{e}");
    }

    #[test]
    fn old_layout_without_root_column() {
        let old = "\
#  Rank  0 Group  0 Pid  1 on h device  0 [0x18] Tesla V100
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
           8             2     float     sum     7.50    0.00    0.00  0e+00     7.40    0.00    0.00  0e+00
";
        let set = parse_nccl(old, "f", None).unwrap();
        assert!(matches!(
            set.observations[0].quantity,
            Quantity::AllReduce { gpus: 1, seconds, .. } if (seconds - 7.5e-6).abs() < 1e-12
        ));
    }

    #[test]
    fn other_collectives_are_refused() {
        let ag = "# ./all_gather_perf -g 8\n   8   2  float  none  -1  9.1  0.0  0.0  0  9.0  0.0  0.0  0\n";
        assert!(parse_nccl(ag, "f", None)
            .unwrap_err()
            .to_string()
            .contains("all_gather_perf"));
        let none = "   8   2  float  none  -1  9.1  0.0  0.0  0  9.0  0.0  0.0  0\n";
        assert!(parse_nccl(none, "f", Some(8))
            .unwrap_err()
            .to_string()
            .contains("redop"));
    }

    #[test]
    fn never_panics_on_odd_input() {
        for t in [
            "",
            "#",
            "# size count time",
            "#  Rank",
            "#  Rank x device",
            "8",
            "8 2",
            "-g",
            "all_reduce_perf -g",
            "all_reduce_perf -g 99999999999 -t 99999",
        ] {
            for gpus in [None, Some(0)] {
                let answer = parse_nccl(t, "odd.txt", gpus);
                let problem = crate::measured::answer_problem(&answer, "odd.txt");
                assert!(problem.is_none(), "{t:?} ({gpus:?}): {problem:?}");
            }
        }
    }
}
