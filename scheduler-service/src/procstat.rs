//! Memory and CPU time of processes from Linux's `/proc`, for the load and memory tools.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

/// Resident memory of a process, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Memory {
    /// VmRSS in MiB: resident now.
    pub rss_mib: f64,
    /// VmHWM in MiB: the most that was ever resident.
    pub hwm_mib: f64,
}

/// Which process's `/proc` entry to read.
#[derive(Debug, Clone, Copy)]
pub enum Proc {
    /// This process.
    Myself,
    /// Another process.
    Pid(u32),
}

impl Proc {
    /// The path of one of its `/proc` files.
    pub fn path(self, file: &str) -> PathBuf {
        match self {
            Proc::Myself => PathBuf::from(format!("/proc/self/{file}")),
            Proc::Pid(pid) => PathBuf::from(format!("/proc/{pid}/{file}")),
        }
    }

    /// VmRSS and VmHWM, if the platform has `/proc`.
    pub fn memory(self) -> Option<Memory> {
        let status = std::fs::read_to_string(self.path("status")).ok()?;
        let kib = |key: &str| -> Option<f64> {
            let line = status.lines().find(|l| l.starts_with(key))?;
            line[key.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        };
        Some(Memory {
            rss_mib: kib("VmRSS:")? / 1024.0,
            hwm_mib: kib("VmHWM:")? / 1024.0,
        })
    }

    /// CPU time used so far (utime + stime), if the platform has `/proc`.
    pub fn cpu(self) -> Option<Duration> {
        let stat = std::fs::read_to_string(self.path("stat")).ok()?;
        // The command name (field 2) may hold spaces; the fields after its closing ')' start at 3.
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        Some(Duration::from_secs_f64((utime + stime) as f64 / clock_ticks()))
    }
}

/// Clock ticks per second of `/proc/<pid>/stat` times.
fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Instant;

    #[test]
    fn this_process_has_memory_and_cpu_time_and_a_missing_one_has_none() {
        let m = Proc::Myself.memory().expect("Linux has /proc/self/status");
        assert!(m.rss_mib > 0.0 && m.hwm_mib >= m.rss_mib, "{m:?}");
        let busy = Instant::now();
        while busy.elapsed() < Duration::from_millis(30) {
            std::hint::black_box(busy.elapsed());
        }
        assert!(Proc::Myself.cpu().expect("Linux has /proc/self/stat") > Duration::ZERO);
        assert!(Proc::Pid(u32::MAX).memory().is_none());
        assert!(Proc::Pid(u32::MAX).cpu().is_none());
    }
}
