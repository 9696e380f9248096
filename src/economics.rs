//! Money: what a deployment costs per hour and per million tokens.
//!
//! Why a module of its own: every dollar figure rooftop prints comes from here, from the
//! system description's unit-bearing price fields and the power model's watts, so a buyer
//! reads one rule, not several:
//!
//! ```text
//! $/hour  = GPUs × rent per GPU-hour                                        (rented)
//!         = GPUs × (capital / amortisation + watts per GPU × electricity)   (owned)
//! $/Mtok  = $/hour / (tokens/s × 3600) × 1e6
//! ```
//!
//! A rented GPU's price includes its power; an owned one pays capital written off evenly
//! over its amortisation period and the electricity its GPUs draw (host, cooling and
//! networking are outside this model: a system's `description` says what a price covers).

use crate::spec::SystemSpec;
use serde::Serialize;

/// How a system's GPUs are paid for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Pricing {
    /// Rented: US dollars per GPU-hour, power included.
    Rent { usd_per_gpu_hour: f64 },
    /// Owned: capital per GPU written off over `hours`, electricity in USD/kWh.
    Owned {
        capital_usd: f64,
        hours: f64,
        usd_per_kwh: f64,
    },
}

impl Pricing {
    /// The pricing a system describes (`None`: no price given), or the field that is wrong
    /// and what it should be.
    pub fn of(s: &SystemSpec) -> Result<Option<Pricing>, (String, String)> {
        let err = |f: &str, e: &str| Err((f.to_string(), e.to_string()));
        match (
            s.price_per_gpu_hour,
            s.capital_per_gpu,
            s.amortisation,
            s.electricity,
        ) {
            (None, None, None, None) => Ok(None),
            (Some(_), Some(_), _, _) => err(
                "price_per_gpu_hour",
                "either a rent (price_per_gpu_hour) or a purchase (capital_per_gpu), not both",
            ),
            (Some(_), None, Some(_), _) => err(
                "amortisation",
                "no amortisation beside a rent: it writes off capital_per_gpu",
            ),
            (Some(_), None, None, Some(_)) => err(
                "electricity",
                "no electricity price beside a rent (a rented GPU-hour includes its power); \
                 give capital_per_gpu and amortisation for an owned GPU",
            ),
            (Some(r), None, None, None) => {
                if r.0 > 0.0 && r.0 < 1e4 {
                    Ok(Some(Pricing::Rent {
                        usd_per_gpu_hour: r.0,
                    }))
                } else {
                    err(
                        "price_per_gpu_hour",
                        "a rent above 0 and below 10000 USD/h, such as \"2.50 USD/h\"",
                    )
                }
            }
            (None, Some(c), a, e) => {
                let Some(a) = a else {
                    return err(
                        "amortisation",
                        "the period capital_per_gpu is written off over, such as \"3 years\"",
                    );
                };
                let Some(e) = e else {
                    return err(
                        "electricity",
                        "the price of the power an owned GPU draws, such as \"0.12 USD/kWh\"",
                    );
                };
                if !(c.0 > 0.0 && c.0 < 1e8) {
                    return err(
                        "capital_per_gpu",
                        "a purchase price above 0 and below 100 million USD",
                    );
                }
                if !(a.hours() >= 24.0 && a.hours() <= 50.0 * 8766.0) {
                    return err("amortisation", "a period between 1 day and 50 years");
                }
                if e.0 > 10.0 {
                    return err("electricity", "at most 10 USD/kWh");
                }
                Ok(Some(Pricing::Owned {
                    capital_usd: c.0,
                    hours: a.hours(),
                    usd_per_kwh: e.0,
                }))
            }
            (None, None, _, _) => err(
                "capital_per_gpu",
                "a purchase price beside amortisation / electricity, such as \"8500 USD\"",
            ),
        }
    }

    /// US dollars per GPU-hour at `watts` per GPU.
    pub fn usd_per_gpu_hour(&self, watts: f64) -> f64 {
        match *self {
            Pricing::Rent { usd_per_gpu_hour } => usd_per_gpu_hour,
            Pricing::Owned {
                capital_usd,
                hours,
                usd_per_kwh,
            } => capital_usd / hours + watts / 1e3 * usd_per_kwh,
        }
    }

    /// US dollars per hour of `gpus` GPUs drawing `watts` each.
    pub fn usd_per_hour(&self, gpus: u32, watts: f64) -> f64 {
        gpus as f64 * self.usd_per_gpu_hour(watts)
    }

    /// One serving point of `gpus` GPUs drawing `watts` each (`None`: the GPU has no power
    /// model) at `output_tok_s` output tokens/s, with `tokens_per_output` tokens in and out
    /// per output token ([`tokens_per_output`]). An owned system whose watts are unknown
    /// has no cost: its electricity would be a made-up number.
    pub fn point_cost(
        &self,
        gpus: u32,
        watts: Option<f64>,
        output_tok_s: f64,
        tokens_per_output: f64,
    ) -> Option<PointCost> {
        let watts = match (self, watts) {
            (Pricing::Rent { .. }, w) => w.unwrap_or(0.0),
            (Pricing::Owned { .. }, Some(w)) => w,
            (Pricing::Owned { .. }, None) => return None,
        };
        let h = self.usd_per_hour(gpus, watts);
        Some(PointCost {
            usd_per_hour: h,
            usd_per_million_output_tokens: usd_per_million(h, output_tok_s),
            usd_per_million_total_tokens: usd_per_million(h, output_tok_s * tokens_per_output),
        })
    }
}

/// What one serving point costs: the deployment's dollars per hour and per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointCost {
    /// The deployment's US dollars per hour.
    pub usd_per_hour: f64,
    /// Per million output tokens (`None` without throughput).
    pub usd_per_million_output_tokens: Option<f64>,
    /// Per million tokens in and out: a request's input counted with its output.
    pub usd_per_million_total_tokens: Option<f64>,
}

/// Tokens in and out per output token of requests of `input_len` prompt and `output_len`
/// output tokens: `(input + output) / output`.
pub fn tokens_per_output(input_len: u32, output_len: u32) -> f64 {
    (input_len as f64 + output_len as f64) / output_len.max(1) as f64
}

/// US dollars per million tokens at `tokens_per_s` for a deployment costing `usd_per_hour`;
/// `None` without throughput.
pub fn usd_per_million(usd_per_hour: f64, tokens_per_s: f64) -> Option<f64> {
    (tokens_per_s > 0.0 && tokens_per_s.is_finite())
        .then(|| usd_per_hour / (tokens_per_s * 3600.0) * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rent_per_million_is_gpus_times_price_over_throughput() {
        let p = Pricing::Rent {
            usd_per_gpu_hour: 2.5,
        };
        let h = p.usd_per_hour(8, 400.0);
        assert_eq!(h, 20.0);
        let m = usd_per_million(h, 1000.0).unwrap();
        assert!((m - 20.0 / 3.6).abs() < 1e-9);
    }

    #[test]
    fn owned_pays_capital_and_power() {
        let p = Pricing::Owned {
            capital_usd: 8766.0,
            hours: 8766.0,
            usd_per_kwh: 0.1,
        };
        assert!((p.usd_per_gpu_hour(500.0) - 1.05).abs() < 1e-12);
    }
}
