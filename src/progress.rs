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
