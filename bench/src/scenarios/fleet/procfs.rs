//! What the fleet scenario reads about the shim from /proc: its CPU time (utime + stime of
//! `/proc/<pid>/stat`), its resident set (VmRSS) and peak resident set (VmHWM) from
//! `/proc/<pid>/status`, and how many TCP connections are established to its port
//! (`/proc/net/tcp{,6}`, the server side of each). Also raises this process's open-file limit,
//! which the shim child inherits. Linux only, like the rest of the bench.

use std::path::Path;

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::unistd::{SysconfVar, sysconf};

use crate::error::{BenchError, BenchResult, file_error};

/// TCP state `ESTABLISHED` as /proc/net/tcp spells it.
const ESTABLISHED: &str = "01";

/// Raises the soft open-file limit to the hard one; fails when even that is below `needed`.
/// Returns the limit now in force.
pub fn raise_open_file_limit(needed: u64) -> BenchResult<u64> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|errno| BenchError::Failed(format!("getrlimit(RLIMIT_NOFILE): {errno}")))?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
            .map_err(|errno| BenchError::Failed(format!("setrlimit(RLIMIT_NOFILE, {hard}): {errno}")))?;
    }
    if hard < needed {
        return Err(BenchError::Failed(format!(
            "the open-file limit is {hard} (hard); this scenario needs {needed}: raise it with `ulimit -n`"
        )));
    }
    Ok(hard)
}

/// User plus system CPU seconds process `pid` has used so far.
pub fn cpu_seconds(pid: i32) -> BenchResult<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(file_error(Path::new(&path)))?;
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    // Fields 14 and 15 (utime, stime) are then the 12th and 13th.
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |index: usize| fields.get(index).and_then(|field| field.parse::<u64>().ok());
    let (Some(user), Some(system)) = (ticks(11), ticks(12)) else {
        return Err(BenchError::Failed(format!("no utime/stime in {path}: {stat}")));
    };
    let per_second = sysconf(SysconfVar::CLK_TCK).ok().flatten().filter(|ticks| *ticks > 0).unwrap_or(100);
    Ok((user + system) as f64 / per_second as f64)
}

/// A `Vm*` line of `/proc/<pid>/status` (e.g. `VmHWM`), in KiB.
pub fn status_kib(pid: i32, field: &str) -> BenchResult<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(file_error(Path::new(&path)))?;
    status_field_kib(&status, field).ok_or_else(|| BenchError::Failed(format!("no {field} in {path}")))
}

fn status_field_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
}

/// How many TCP connections whose local port is `port` are established (the accepting side's
/// sockets of a server listening on `port`).
pub fn established_connections(port: u16) -> BenchResult<usize> {
    let mut count = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let path = Path::new(table);
        match std::fs::read_to_string(path) {
            Ok(text) => count += count_established(&text, port),
            // No IPv6 on this kernel: nothing to count there.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(file_error(path)(error)),
        }
    }
    Ok(count)
}

fn count_established(table: &str, port: u16) -> usize {
    let local_port = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1).unwrap_or_default();
            let state = fields.nth(1).unwrap_or_default();
            local.ends_with(&local_port) && state == ESTABLISHED
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_established_sockets_on_the_local_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue\n\
            0: 0100007F:1F90 00000000:0000 0A 00000000:00000000\n\
            1: 0100007F:1F90 0100007F:D431 01 00000000:00000000\n\
            2: 0100007F:D431 0100007F:1F90 01 00000000:00000000\n\
            3: 0100007F:1F90 0100007F:D432 06 00000000:00000000\n\
            4: 0100007F:1F90 0100007F:D433 01 00000000:00000000\n";
        assert_eq!(count_established(table, 8080), 2);
        assert_eq!(count_established(table, 54321), 1);
    }

    #[test]
    fn reads_kib_fields_of_status() {
        let status = "Name:\tanneal-shim\nVmHWM:\t  123456 kB\nVmRSS:\t   65432 kB\n";
        assert_eq!(status_field_kib(status, "VmHWM"), Some(123_456));
        assert_eq!(status_field_kib(status, "VmRSS"), Some(65_432));
        assert_eq!(status_field_kib(status, "VmSwap"), None);
    }

    #[test]
    fn reads_this_process_cpu_time() {
        let pid = i32::try_from(std::process::id()).expect("pid fits in i32");
        let seconds = cpu_seconds(pid).expect("own /proc/<pid>/stat is readable");
        assert!(seconds >= 0.0 && seconds.is_finite(), "{seconds}");
    }
}
