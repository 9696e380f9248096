//! Reading the user's files, bounded. Every file rooftop reads (descriptions, measurements,
//! calibrations, acceptance files) comes through here, so `--measured /dev/zero` is refused
//! after a fixed number of bytes instead of reading until memory runs out, and a pipe
//! (`--model <(cat m.toml)`) reads like a file.

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;

/// Largest file rooftop reads: well above any description, calibration or measurement the
/// tools write (a profiler trace of a few decode steps is tens of MB), far below memory.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Whether `p` names something readable as a file: a regular file, or a pipe or device
/// such as `/dev/fd/63` from `<(...)` (not a folder).
pub fn is_readable(p: &Path) -> bool {
    p.metadata().map(|m| !m.is_dir()).unwrap_or(false)
}

/// The UTF-8 text of `path`, at most [`MAX_FILE_BYTES`]; errors name the path once.
pub fn read_text(path: &Path) -> Result<String> {
    read_text_capped(path, MAX_FILE_BYTES)
}

/// [`read_text`] with another cap.
pub fn read_text_capped(path: &Path, cap: u64) -> Result<String> {
    let io = |error: std::io::Error| Error::Io {
        path: path.to_path_buf(),
        error,
    };
    // Checked before opening: a named pipe with no writer blocks `open` for ever.
    if let Some(message) = not_a_file(path) {
        return Err(Error::Measured {
            file: path.display().to_string(),
            line: None,
            message,
        });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > cap {
        return Err(Error::Measured {
            file: path.display().to_string(),
            line: None,
            message: format!(
                "larger than {} MiB, the most rooftop reads from one file; expected a description, \
                 calibration or measurement file",
                cap >> 20
            ),
        });
    }
    String::from_utf8(bytes).map_err(|e| Error::Measured {
        file: path.display().to_string(),
        line: None,
        message: format!(
            "not UTF-8 text (invalid byte at offset {}); expected a text file",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// Why `path` is no file to read, or `None`: a folder, or a named pipe or socket outside
/// the process's own open descriptors (the pipe a shell hands over for `<(...)`,
/// `/dev/fd/N`, is already open and reads like a file).
fn not_a_file(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_dir() {
        return Some("is a directory (folder); expected a file".into());
    }
    special_kind(path, &meta).map(|kind| {
        format!("is a {kind}, not a regular file; expected a file (a pipe from `<(...)` is read)")
    })
}

/// "named pipe (FIFO)" or "socket" for such a node that is not one of the process's own
/// descriptors.
#[cfg(unix)]
fn special_kind(path: &Path, meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let own_descriptor = ["/dev/fd/", "/proc/self/fd/", "/dev/stdin"]
        .iter()
        .any(|p| path.to_string_lossy().starts_with(p));
    let t = meta.file_type();
    match () {
        _ if own_descriptor => None,
        _ if t.is_fifo() => Some("named pipe (FIFO)"),
        _ if t.is_socket() => Some("socket"),
        _ => None,
    }
}

#[cfg(not(unix))]
fn special_kind(_: &Path, _: &std::fs::Metadata) -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endless_and_missing_files_are_refused_once() {
        let e = read_text_capped(Path::new("/dev/zero"), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero") && e.contains("larger than 1 MiB"),
            "{e}"
        );
        let e = read_text(Path::new("/no/such/file"))
            .unwrap_err()
            .to_string();
        assert_eq!(e.matches("os error").count(), 1, "{e}");
    }

    /// A FIFO nobody writes to is refused at once (opening it would wait for a writer).
    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("rooftop-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("measured.log");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.map(|s| s.success()).unwrap_or(false) {
            panic!("mkfifo is needed for this test");
        }
        let e = read_text(&fifo).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).ok();
        assert!(e.contains("named pipe (FIFO)"), "{e}");
    }
}
