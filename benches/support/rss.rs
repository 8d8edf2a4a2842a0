//! Peak resident set of a process, from Linux's `/proc`.

/// The peak resident set (`VmHWM`) of process `pid` (`"self"` for this one), in KiB; 0 when it
/// cannot be read.
pub fn peak_rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
        })
        .unwrap_or(0)
}
