//! Progress on long runs: a bar with a rate and an ETA on stderr, drawn only when stderr is a
//! terminal, so that logs and pipes get the result and nothing else.

use std::io::IsTerminal;

/// A bar over `total` steps drawn with `template` (indicatif's), or `None` where stderr is
/// not a terminal.
pub fn terminal_bar(total: u64, template: &str) -> Option<indicatif::ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::with_draw_target(
            Some(total),
            indicatif::ProgressDrawTarget::stderr(),
        );
        b.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    })
}

/// Progress told as (done, total) from any thread: the bar is made at the first report (when
/// the total is known), moved on each, and cleared at the last; nothing is drawn where stderr
/// is not a terminal.
pub struct Counter {
    template: &'static str,
    bar: std::sync::OnceLock<Option<indicatif::ProgressBar>>,
}

impl Counter {
    pub fn new(template: &'static str) -> Counter {
        Counter {
            template,
            bar: std::sync::OnceLock::new(),
        }
    }

    /// `done` of `total` steps are finished.
    pub fn tell(&self, done: u64, total: u64) {
        let bar = self.bar.get_or_init(|| terminal_bar(total, self.template));
        if let Some(b) = bar {
            b.set_position(done);
            if done == total {
                b.finish_and_clear();
            }
        }
    }
}
