//! Disaggregated serving (`src/deploy.rs`): TTFT is the sum of its terms, a faster link
//! between the pools never slows the first token, throughput stays under every pool's
//! capacity, a worker that does not fit one box is refused, a prompt is prefilled on one
//! attention-DP replica, and `validate` reads the disaggregated dev file and reports
//! per-backend errors.

mod common;

use rooftop::cost::Pass;
use rooftop::deploy::{sweep, Deployment, DisaggSweep, KvLink, Pool};
use rooftop::predict::Scenario;
use rooftop::serve::{ClientModel, TpotDef, Workload};
use rooftop::spec::{registry, System};

const CONCURRENCY: [u32; 7] = [1, 4, 16, 64, 256, 1024, 4096];

fn shapes() -> Vec<(u32, u32, ClientModel)> {
    let imax = registry::load_client("inferencemax").unwrap().model();
    vec![
        (1024, 1024, ClientModel::IDEAL),
        (8192, 1024, imax),
        (1024, 8192, imax),
    ]
}

fn run(system: &str, prefill: &str, decode: &str, link: KvLink, w: Workload) -> DisaggSweep {
    let model = registry::load_model("deepseek-v3-fp8").unwrap();
    let sys = System::load(system).unwrap();
    let d = Deployment {
        prefill: prefill.parse::<Pool>().unwrap(),
        decode: decode.parse::<Pool>().unwrap(),
        link,
    };
    let pre = Scenario::new(&model, &sys, d.prefill.parallel).unwrap();
    let dec = Scenario::new(&model, &sys, d.decode.parallel).unwrap();
    sweep(&pre, &dec, &d, &CONCURRENCY, w).unwrap()
}

/// A deployment of the two pools as the flags write them, over the built-in KV link.
fn deployment(prefill: &str, decode: &str) -> Deployment {
    Deployment {
        prefill: prefill.parse::<Pool>().unwrap(),
        decode: decode.parse::<Pool>().unwrap(),
        link: KvLink::builtin().unwrap(),
    }
}

fn workload(i: u32, o: u32, client: ClientModel) -> Workload {
    Workload {
        input_len: i,
        output_len: o,
        tpot_def: TpotDef::Itl,
        client,
    }
}

const DEPLOYMENTS: [(&str, &str, &str); 3] = [
    (
        "8x-b200-nvlink",
        "workers=1,tp=8,ep=8",
        "workers=1,dp=8,ep=8",
    ),
    (
        "8x-h200-nvlink",
        "workers=3,dp=8,ep=8",
        "workers=1,tp=8,batch=64",
    ),
    ("8x-b200-nvlink", "workers=2,tp=8", "workers=5,tp=8,ep=8"),
];

#[test]
fn a_prompt_is_prefilled_on_one_attention_dp_replica() {
    let model = registry::load_model("deepseek-v3-fp8").unwrap();
    let sys = System::load("8x-b200-nvlink").unwrap();
    let dp8 = "workers=1,dp=8,ep=8".parse::<Pool>().unwrap().parallel;
    let ev = Scenario::new(&model, &sys, dp8)
        .unwrap()
        .evaluator()
        .unwrap();
    let t = |prompts: f64, dealt: bool| {
        let p = Pass::prefill(prompts, 8192.0, 0.0);
        ev.evaluate(&if dealt { p.dealt_whole(8) } else { p }).total
    };
    // A prompt is never split over the replicas: alone, it costs more than an eighth of it
    // on each would, and no more than one prompt on every replica.
    assert!(
        t(1.0, true) > 2.0 * t(1.0, false),
        "{} {}",
        t(1.0, true),
        t(1.0, false)
    );
    assert!(t(1.0, true) <= t(8.0, true));
    let mut last = 0.0;
    for m in 1..=24 {
        let now = t(m as f64, true);
        assert!(now >= last, "{m} prompts: {now} after {last}");
        last = now;
    }
    // A whole number of prompts per replica is the even share.
    for m in [8.0, 16.0] {
        assert!((t(m, true) - t(m, false)).abs() <= 1e-12 * t(m, false));
    }
    // The disaggregated pool prices its passes dealt whole: its prefill at one request is
    // that prompt alone on one replica (less the engine's fixed step cost its CPU overlaps).
    let w = workload(8192, 1024, ClientModel::IDEAL);
    let r = run(
        "8x-b200-nvlink",
        "workers=1,dp=8,ep=8",
        "workers=1,tp=8,ep=8",
        KvLink::builtin().unwrap(),
        w,
    );
    assert!(
        r.points[0].prefill_ms >= 0.99 * t(1.0, true) * 1e3,
        "{} {}",
        r.points[0].prefill_ms,
        t(1.0, true) * 1e3
    );
}

#[test]
fn ttft_is_prefill_plus_queue_plus_transfer_plus_first_step() {
    for (sys, p, d) in DEPLOYMENTS {
        for (i, o, c) in shapes() {
            let r = run(sys, p, d, KvLink::builtin().unwrap(), workload(i, o, c));
            for x in &r.points {
                let terms = [x.prefill_ms, x.queue_ms, x.kv_transfer_ms, x.first_step_ms];
                assert!(
                    terms.iter().all(|t| t.is_finite() && *t >= 0.0),
                    "{sys} {p} {d} C={}: {terms:?}",
                    x.concurrency
                );
                let sum: f64 = terms.iter().sum();
                assert!(
                    (sum - x.ttft_ms).abs() <= 1e-9 * x.ttft_ms.max(1.0),
                    "{sys} C={}: {sum} != {}",
                    x.concurrency,
                    x.ttft_ms
                );
                assert_eq!(x.first_step_ms, x.tpot_ms);
                assert!(x.kv_transfer_ms >= r.kv_transfer_alone_ms * (1.0 - 1e-12));
            }
        }
    }
}

#[test]
fn more_link_bandwidth_never_raises_ttft() {
    for (sys, p, d) in DEPLOYMENTS {
        for (i, o, c) in shapes() {
            let w = workload(i, o, c);
            let mut prev: Option<DisaggSweep> = None;
            for rate in ["50 Gb/s", "100 Gb/s", "400 Gb/s", "800 Gb/s", "3200 Gb/s"] {
                let mut link = KvLink::builtin().unwrap();
                link.nic_rate = rooftop::units::BytesPerSec::parse(rate).unwrap();
                let r = run(sys, p, d, link, w);
                if let Some(q) = &prev {
                    for (a, b) in q.points.iter().zip(&r.points) {
                        assert!(
                            b.ttft_ms <= a.ttft_ms * (1.0 + 1e-9),
                            "{sys} {p} {d} {i}/{o} C={} at {rate}: {} ms > {} ms",
                            a.concurrency,
                            b.ttft_ms,
                            a.ttft_ms
                        );
                        assert!(b.kv_transfer_ms <= a.kv_transfer_ms * (1.0 + 1e-12));
                    }
                }
                prev = Some(r);
            }
        }
    }
}

#[test]
fn throughput_never_exceeds_either_pools_capacity() {
    for (sys, p, d) in DEPLOYMENTS {
        for (i, o, c) in shapes() {
            let r = run(sys, p, d, KvLink::builtin().unwrap(), workload(i, o, c));
            let mut last = 0.0;
            for x in &r.points {
                let cap = x
                    .prefill_capacity_req_s
                    .min(x.decode_capacity_req_s)
                    .min(x.kv_link_capacity_req_s);
                assert!(
                    x.request_rate_req_s <= cap * (1.0 + 1e-9),
                    "{sys} C={}",
                    x.concurrency
                );
                let out = o as f64;
                for pool in [x.prefill_capacity_req_s, x.decode_capacity_req_s] {
                    assert!(x.throughput_tok_s <= pool * c.mean_length(out) * (1.0 + 1e-9));
                }
                assert!(x.decode_batch <= x.decode_slots as f64 + 1e-9);
                // A closed loop of more clients never carries fewer requests.
                assert!(
                    x.request_rate_req_s >= last * (1.0 - 1e-6),
                    "{sys} C={}",
                    x.concurrency
                );
                last = x.request_rate_req_s;
                if x.saturated {
                    let named = match x.limiting_pool {
                        "prefill" => x.prefill_capacity_req_s,
                        "decode" => x.decode_capacity_req_s,
                        _ => x.kv_link_capacity_req_s,
                    };
                    assert_eq!(named, cap);
                }
            }
        }
    }
}

/// Requests of the closed loop that are decoding, and those in prefill, its queue, transfer
/// or waiting for a slot (Little's law over the steady state): together, the concurrency.
fn assert_every_request_is_somewhere(r: &DisaggSweep, workers: f64, what: &str) {
    for x in &r.points {
        let elsewhere = x.request_rate_req_s * (x.ttft_steady_ms - x.tpot_ms) / 1e3;
        let c = x.concurrency as f64;
        assert!(
            (workers * x.decode_batch + elsewhere - c).abs() <= 1e-3 * c + 0.5,
            "{what} C={}: {} decoding + {elsewhere} elsewhere",
            x.concurrency,
            workers * x.decode_batch
        );
    }
}

#[test]
fn every_request_of_the_loop_is_somewhere() {
    for (sys, p, d) in DEPLOYMENTS {
        let workers = d.parse::<Pool>().unwrap().workers as f64;
        for (i, o, c) in shapes() {
            let r = run(sys, p, d, KvLink::builtin().unwrap(), workload(i, o, c));
            assert_every_request_is_somewhere(&r, workers, &format!("{sys} {p} / {d} {i}/{o}"));
        }
    }
    // A decode step that jumps with the batch (a wave more of attention CTAs between 64 and
    // 68 sequences here) leaves a range of populations no single batch carries: the pool
    // runs a mixture of the two sides, and no request goes missing. Before, C = 54 to 80
    // printed one and the same point, which held 48 to 50 of them.
    let model = registry::load_model("llama-3.1-70b-fp8").unwrap();
    let sys = System::load("8x-h200-nvlink").unwrap();
    let d = deployment("workers=2,tp=4", "workers=1,tp=4");
    let pre = Scenario::new(&model, &sys, d.prefill.parallel).unwrap();
    let dec = Scenario::new(&model, &sys, d.decode.parallel).unwrap();
    let grid: Vec<u32> = (40..=100).step_by(2).collect();
    let r = sweep(
        &pre,
        &dec,
        &d,
        &grid,
        workload(8192, 1024, ClientModel::IDEAL),
    )
    .unwrap();
    assert_every_request_is_somewhere(&r, 1.0, "llama-3.1-70b-fp8 8x-h200-nvlink");
    for w in r.points.windows(2) {
        assert!(
            w[1].tpot_ms >= w[0].tpot_ms * (1.0 - 1e-9),
            "C={}",
            w[1].concurrency
        );
    }
}

#[test]
fn one_client_never_queues_for_the_prefill_pool() {
    // A closed loop of one client sends its next prompt only when the last one finished:
    // there is no one to wait behind. Before, the prefill pool's M/D/1 wait counted the
    // client's own rate (DeepSeek-V3 on 8 x H200, 32,768 / 256 tokens: 519 ms of queue on a
    // 1,690 ms prefill at C = 1, where the aggregated loop on half the GPUs waited none).
    for (sys, p, d) in DEPLOYMENTS {
        let r = run(
            sys,
            p,
            d,
            KvLink::builtin().unwrap(),
            workload(32768, 256, ClientModel::IDEAL),
        );
        let one = &r.points[0];
        assert_eq!(one.concurrency, 1);
        assert!(
            one.queue_ms.abs() < 1e-9,
            "{sys} {p} / {d}: {} ms queued",
            one.queue_ms
        );
    }
}

#[test]
fn with_free_decode_slots_no_request_waits_for_one() {
    // A decode step bound by a per-token cost (here an API server of 50 us per streamed
    // token, as calibration may give) grows in proportion to its batch, so the decode
    // pool's rate stops rising while slots are still free. The loop's other requests then
    // decode in those slots (TPOT grows); none waits before its first token for a slot.
    let model = registry::load_model("deepseek-v3-fp8").unwrap();
    let sys = System::load("8x-b200-nvlink").unwrap();
    let d = deployment("workers=1,dp=8,ep=8", "workers=1,dp=8,ep=8,batch=512");
    let pre = Scenario::new(&model, &sys, d.prefill.parallel).unwrap();
    let mut dec = Scenario::new(&model, &sys, d.decode.parallel).unwrap();
    dec.params.api_per_token = Some(50e-6);
    let r = sweep(
        &pre,
        &dec,
        &d,
        &[1024, 2048, 3072, 4000],
        workload(1024, 1024, ClientModel::IDEAL),
    )
    .unwrap();
    assert_every_request_is_somewhere(&r, 1.0, "api-bound decode");
    for x in &r.points {
        assert!(
            x.decode_batch < x.decode_slots as f64,
            "C={}",
            x.concurrency
        );
        // What waits is the prefill queue's, far below a request's decode time.
        assert!(
            x.queue_ms < 0.05 * 1024.0 * x.tpot_ms,
            "C={}: {} ms queued at TPOT {} ms",
            x.concurrency,
            x.queue_ms,
            x.tpot_ms
        );
    }
}

#[test]
fn a_worker_larger_than_one_box_is_refused_naming_its_pool() {
    let e = common::failure_of(&[
        "sweep",
        "--model",
        "deepseek-v3-fp8",
        "--system",
        "8x-h100-nvlink",
        "--prefill",
        "workers=1,tp=8,ep=8",
        "--decode",
        "workers=2,tp=16,ep=16",
    ]);
    assert!(
        e.contains("decode pool") && e.contains("needs 16 GPUs") && e.contains("has 8"),
        "{e}"
    );
    // The layout flags of one pool do not apply.
    let e = common::failure_of(&[
        "sweep",
        "--tp",
        "8",
        "--prefill",
        "tp=8",
        "--decode",
        "tp=8",
    ]);
    assert!(e.contains("--tp does not apply"), "{e}");
}

#[test]
fn a_deployment_toml_reads_like_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("d.toml");
    std::fs::write(
        &f,
        "[prefill]\nworkers = 1\ntp = 8\nep = 8\n\n[decode]\nworkers = 2\ndp = 8\nep = 8\n",
    )
    .unwrap();
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a = vec![
            "sweep",
            "--model",
            "deepseek-v3-fp8",
            "--system",
            "8x-b200-nvlink",
            "--concurrency",
            "8,512",
            "--format",
            "json",
        ];
        a.extend_from_slice(args);
        common::json_of(&a)
    };
    let a = json(&["--deployment", f.to_str().unwrap()]);
    let b = json(&[
        "--prefill",
        "workers=1,tp=8,ep=8",
        "--decode",
        "workers=2,dp=8,ep=8",
    ]);
    assert_eq!(a, b);
    assert_eq!(a["gpus"], 24);
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[prefill]\nworkers = 0\n[decode]\n").unwrap();
    let e = common::failure_of(&["sweep", "--deployment", bad.to_str().unwrap()]);
    assert!(e.contains("bad.toml:2: field `prefill.workers`"), "{e}");
    std::fs::write(
        &bad,
        "[prefill]\nworkers = 1\n[decode]\nworkers = 1\nbatch = 0\n",
    )
    .unwrap();
    let e = common::failure_of(&["sweep", "--deployment", bad.to_str().unwrap()]);
    assert!(e.contains("bad.toml:5: field `decode.batch`"), "{e}");
}

#[test]
fn validate_reads_the_disaggregated_file_and_reports_per_backend() {
    let v = common::json_of(&[
        "validate",
        "--measured",
        "tests/data/dev/e2e_disagg.csv",
        "--format",
        "json",
    ]);
    assert_eq!(v["total_runs"], 465);
    let groups = v["groups"].as_array().unwrap();
    for backend in ["sglang", "trtllm"] {
        let g = groups
            .iter()
            .find(|g| g["backend"] == backend && g["system"] == "8x-b200-nvlink")
            .unwrap_or_else(|| panic!("no {backend} B200 group"));
        assert!(g["tpot"]["n"].as_u64().unwrap() > 10);
        assert!(g["tpot"]["median_abs"].as_f64().unwrap().is_finite());
        assert!(g["ttft"]["median_abs"].as_f64().unwrap().is_finite());
    }
    // The H100 TP16 workers span two nodes: they run on the two-node system, never on one
    // box, and no run is skipped for its size.
    let boxed = v["skipped"].as_array().unwrap().iter().any(|s| {
        s["reason"]
            .as_str()
            .unwrap()
            .contains("must fit in one box")
    });
    assert!(!boxed, "{}", v["skipped"]);
    let runs = v["runs"].as_array().unwrap();
    assert!(runs.iter().all(
        |r| r["system"] != "8x-h100-nvlink" || !r["parallel"].as_str().unwrap().contains("16")
    ));
    assert!(
        runs.iter().any(|r| r["system"] == "2x8-h100-ib"),
        "no run took the two-node H100 system"
    );
}

/// A disaggregated sweep reports the decode pool's inter-token time as its TPOT: asked for
/// E2E / output instead, it refuses (exit 2) rather than print the inter-token time under
/// that name.
#[test]
fn a_disaggregated_sweep_refuses_the_e2e_tpot_it_does_not_report() {
    let out = common::output_of(&[
        "sweep",
        "--model",
        "llama-3.1-70b-fp8",
        "--system",
        "8x-h100-nvlink",
        "--prefill",
        "workers=1,tp=4",
        "--decode",
        "workers=1,tp=4",
        "--output-len",
        "4",
        "--tpot-def",
        "e2e",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tpot-def e2e"));
}

/// A deployment file's relative `kv_link` is read from the file's own folder, as a system
/// file's `gpu` is, whatever the working directory; and a deployment, KV-link or kernel
/// file is read under the same size cap as every other file (a 300 MiB file was read whole).
#[test]
fn a_deployment_reads_its_kv_link_beside_it_and_no_file_past_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let link =
        rooftop::deploy::KV_LINK_TOML.replace("name = \"cx7-8x400g\"", "name = \"beside-it\"");
    std::fs::write(sub.join("link.toml"), link).unwrap();
    std::fs::write(
        sub.join("dep.toml"),
        "kv_link = \"link.toml\"\n[prefill]\nworkers = 1\ntp = 8\n[decode]\nworkers = 1\ntp = 8\n",
    )
    .unwrap();
    let out = assert_cmd::Command::cargo_bin("rooftop")
        .unwrap()
        .current_dir(dir.path())
        .args([
            "sweep",
            "--model",
            "llama-3.1-8b",
            "--system",
            "8x-h100-nvlink",
            "--deployment",
            "sub/dep.toml",
            "--concurrency",
            "4",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("KV over beside-it"));

    let big = dir.path().join("big.toml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let big = big.to_str().unwrap();
    for flags in [
        vec!["sweep", "--deployment", big],
        vec![
            "sweep",
            "--prefill",
            "workers=1,tp=8",
            "--decode",
            "workers=1,tp=8",
            "--kv-link",
            big,
        ],
        vec!["--kernels", big, "predict"],
    ] {
        let mut args = flags.clone();
        args.extend(["--system", "8x-h100-nvlink", "--model", "llama-3.1-8b"]);
        let out = assert_cmd::Command::cargo_bin("rooftop")
            .unwrap()
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{flags:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("larger than 256 MiB"), "{flags:?}: {err}");
    }
}
