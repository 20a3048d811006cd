//! A scripted stand-in for an agent, for tests, the demo and the VM suite. It runs actions
//! in order and prints one line per action (`OK ...` or `FAIL ... <errno text>`):
//!
//! ```text
//! gw-testagent read PATH                  # read a file, print its size
//! gw-testagent send HOST:PORT TEXT        # TCP connect + send TEXT
//! gw-testagent exfil PATH HOST:PORT       # read PATH, send its contents (what a hijacked agent does)
//! gw-testagent udp HOST:PORT TEXT         # unconnected UDP sendto
//! gw-testagent write PATH                 # create PATH (a marker that the agent ran)
//! gw-testagent rm PATH                    # unlink PATH
//! gw-testagent mv FROM TO                 # rename FROM to TO
//! gw-testagent truncate PATH              # truncate PATH to 0 bytes without opening it
//! gw-testagent pid                        # print this process's pid
//! gw-testagent cgroup                     # print this process's cgroup
//! gw-testagent run PROGRAM [ARGS]        # run another program (up to the next `+`)
//! gw-testagent bpf                        # bpf(BPF_MAP_CREATE) a tiny array map
//! gw-testagent escape PROCS_FILE          # write "0" to a cgroup.procs (leave our cgroup)
//! gw-testagent mount DIR                  # mount a tmpfs on DIR (and unmount it)
//! gw-testagent killparent SIG             # send SIG to our parent (gatewayd)
//! gw-testagent ptraceparent               # PTRACE_SEIZE our parent (and detach)
//! gw-testagent waitfile PATH             # wait (up to 30 s) until PATH exists
//! gw-testagent openloop PATH N           # open+close PATH N times, print ns per open
//! gw-testagent mkdirloop DIR N           # mkdir+rmdir of one name in DIR N times, ns per pair
//! gw-testagent connectloop IP:PORT N     # N TCP connects, print ns per connect
//! gw-testagent openbest PATH N K         # K batches of N open+close, each followed by a batch
//!                                         # of N stat() of PATH (no gatewayd program hooks it);
//!                                         # print the best batch's ns per stat and per open (a
//!                                         # busy machine only slows batches down; the stat
//!                                         # figure, taken alongside, shows how busy)
//! gw-testagent turns OP TARGET N K ROLE FIFO_A FIFO_B
//!                                         # K batches of N operations, taking turns with a
//!                                         # second process (`gw-testagent/turns.rs`)
//! gw-testagent subread PATH              # make a sub-cgroup of ours, start a child in it
//!                                         # (clone3 CLONE_INTO_CGROUP), the child reads PATH
//! gw-testagent tryconnect IP:PORT N      # N TCP connect attempts, print how many failed
//! gw-testagent tryports IP:PORT N        # N connect attempts, the i-th to PORT + i (mod
//!                                         # 65536, 0 skipped): every one to another port
//! gw-testagent rpc METHOD PARAMS_JSON    # one request to the gateway at $GATEWAYD_SOCKET
//!                                         # ($GW_RPC_SOCKET instead when set; `$SESSION` in
//!                                         # PARAMS_JSON becomes $GATEWAYD_SESSION); prints the
//!                                         # answer line, FAIL on an error answer
//! gw-testagent sleep SECS
//! gw-testagent winsize                    # the window size of the terminal on stdin
//! gw-testagent tick MS                    # print `tick N` every MS ms, until ended
//! gw-testagent fork                       # the rest of the chain runs in a child (which
//!                                         # outlives gatewayd); this process waits until killed
//! gw-testagent exit CODE                  # exit now with CODE
//! gw-testagent mcpserver                  # a minimal MCP server on stdio (tools `read`
//!                                         # {path}, `list` {path} and `send` {to, text});
//!                                         # runs until EOF
//! ```
//! and the actions on the file tree in `gw-testagent/fs_actions.rs` (`link`, `mkfile`,
//! `mkdir`, `symlink`, `mkfifo`, `umount`, `movemount`), and the HTTP probes of the egress
//! proxy bench in `gw-testagent/http_probes.rs` (`httploop`, `download`), and what the QEMU
//! guest's init holds in `gw-testagent/guest.rs` (`holdperf`).
//! Actions are chained with `+`: `gw-testagent read /etc/hostname + send 127.0.0.1:9 hi`.
//! The exit code is the number of failed actions (capped at 100) unless `exit` says otherwise.
// Binaries, tests and benches see every dependency of the package; the lint guards the
// library's own list (its src/lib.rs).
#![allow(unused_crate_dependencies)]
mod fs_actions;
mod guest;
mod http_probes;
mod mcp_server;
mod turns;

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream, UdpSocket},
    process::ExitCode,
    time::Duration,
};

fn addr(s: &str) -> Result<SocketAddr, String> {
    s.parse()
        .map_err(|_| format!("bad address {s} (want IP:PORT or [IPv6]:PORT)"))
}

fn read(path: &str) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut buf))
        .map_err(|e| e.to_string())?;
    Ok(buf)
}

fn send(to: &str, data: &[u8]) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&addr(to)?, Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    s.write_all(data).map_err(|e| e.to_string())
}

/// Why an action printed no `OK`: it was not one of the family asked, or it failed.
pub(crate) enum Failure {
    /// Not this family's action: [`run`] asks the next family.
    NotMine,
    /// The action ran and failed, with this message.
    Failed(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Failed(message)
    }
}

/// What a family of actions gives back: the `OK` line's text, or why there is none.
pub(crate) type Outcome = Result<String, Failure>;

/// The families of actions, asked in turn: the first whose `match` has an arm for the action
/// runs it. Each family says "not mine" from that same `match`, so there is no list of
/// names to keep in step with its arms (one such list once left out `connectloop`).
const FAMILIES: &[fn(&[String]) -> Outcome] = &[
    files_and_network,
    probes,
    process,
    attacks,
    fs_actions::run,
    http_probes::run,
    guest::run,
];

fn run(action: &[String]) -> Result<String, String> {
    for family in FAMILIES {
        match family(action) {
            Ok(message) => return Ok(message),
            Err(Failure::Failed(e)) => return Err(e),
            Err(Failure::NotMine) => {}
        }
    }
    Err(format!("unknown action {}", action[0]))
}

/// How long `waitfile` waits for its file.
const WAITFILE_DEADLINE: Duration = Duration::from_mins(5);

/// The action's argument `i`, or an error naming the action.
fn argument(action: &[String], i: usize) -> Result<&str, String> {
    action
        .get(i)
        .map(String::as_str)
        .ok_or_else(|| format!("{}: missing argument", action[0]))
}

/// Files read, written, moved, truncated; data sent.
fn files_and_network(action: &[String]) -> Outcome {
    let arg = |i: usize| argument(action, i);
    let outcome = match action[0].as_str() {
        "read" => read(arg(1)?).map(|b| format!("read {} bytes", b.len())),
        "send" => {
            send(arg(1)?, arg(2)?.as_bytes()).map(|()| format!("sent to {}", arg(1).unwrap_or("")))
        }
        "exfil" => {
            let data = read(arg(1)?)?;
            send(arg(2)?, &data).map(|()| {
                format!(
                    "sent {} bytes of {} to {}",
                    data.len(),
                    arg(1).unwrap_or(""),
                    arg(2).unwrap_or("")
                )
            })
        }
        "udp" => {
            let to = addr(arg(1)?)?;
            let bind = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
            let s = UdpSocket::bind(bind).map_err(|e| e.to_string())?;
            s.send_to(arg(2)?.as_bytes(), to)
                .map_err(|e| e.to_string())?;
            Ok(format!("udp sent to {to}"))
        }
        "write" => std::fs::write(arg(1)?, b"ran\n")
            .map(|()| format!("wrote {}", arg(1).unwrap_or("")))
            .map_err(|e| e.to_string()),
        "rm" => std::fs::remove_file(arg(1)?)
            .map(|()| format!("removed {}", arg(1).unwrap_or("")))
            .map_err(|e| e.to_string()),
        "mv" => std::fs::rename(arg(1)?, arg(2)?)
            .map(|()| format!("renamed {}", arg(1).unwrap_or("")))
            .map_err(|e| e.to_string()),
        "truncate" => {
            let c = std::ffi::CString::new(arg(1)?).map_err(|e| e.to_string())?;
            // SAFETY: a valid NUL-terminated path.
            if unsafe { libc::truncate(c.as_ptr(), 0) } != 0 {
                return Err(std::io::Error::last_os_error().to_string().into());
            }
            Ok(format!("truncated {}", arg(1).unwrap_or("")))
        }
        _ => return Err(Failure::NotMine),
    };
    outcome.map_err(Failure::Failed)
}

/// Probes that report what was allowed: connects, ports, opens in a loop, a sub-cgroup read.
fn probes(action: &[String]) -> Outcome {
    let arg = |i: usize| argument(action, i);
    let outcome = match action[0].as_str() {
        "openloop" | "connectloop" => {
            let n: u32 = arg(2)?.parse().map_err(|_| "N: not a number".to_string())?;
            let t0 = std::time::Instant::now();
            for _ in 0..n {
                if action[0] == "openloop" {
                    std::fs::File::open(arg(1)?).map_err(|e| e.to_string())?;
                } else {
                    TcpStream::connect(addr(arg(1)?)?).map_err(|e| e.to_string())?;
                }
            }
            let per = t0.elapsed().as_nanos() / u128::from(n.max(1));
            Ok(format!("{n} in a row, {per} ns each"))
        }
        "mkdirloop" => {
            // A name made and removed in DIR, N times: the cost of a call that changes names.
            let n: u32 = arg(2)?.parse().map_err(|_| "N: not a number".to_string())?;
            let name = std::path::Path::new(arg(1)?).join("gw-mkdirloop");
            let t0 = std::time::Instant::now();
            for _ in 0..n {
                std::fs::create_dir(&name).map_err(|e| e.to_string())?;
                std::fs::remove_dir(&name).map_err(|e| e.to_string())?;
            }
            let per = t0.elapsed().as_nanos() / u128::from(n.max(1));
            Ok(format!("{n} in a row, {per} ns each"))
        }
        "openbest" => {
            let n: u32 = arg(2)?.parse().map_err(|_| "N: not a number".to_string())?;
            let k: u32 = arg(3)?.parse().map_err(|_| "K: not a number".to_string())?;
            let path = arg(1)?;
            let (mut best, mut best_stat) = (u128::MAX, u128::MAX);
            for _ in 0..k.max(1) {
                let t0 = std::time::Instant::now();
                for _ in 0..n {
                    std::fs::File::open(path).map_err(|e| e.to_string())?;
                }
                best = best.min(t0.elapsed().as_nanos() / u128::from(n.max(1)));
                let t0 = std::time::Instant::now();
                for _ in 0..n {
                    std::fs::metadata(path).map_err(|e| e.to_string())?;
                }
                best_stat = best_stat.min(t0.elapsed().as_nanos() / u128::from(n.max(1)));
            }
            Ok(format!(
                "best of {k} batches of {n}: stat {best_stat} ns, open {best} ns each"
            ))
        }
        "tryconnect" => {
            let n: u32 = arg(2)?.parse().map_err(|_| "N: not a number".to_string())?;
            let to = addr(arg(1)?)?;
            let failed = (0..n).filter(|_| TcpStream::connect(to).is_err()).count();
            Ok(format!("{n} attempts, {failed} failed"))
        }
        "tryports" => {
            let n: u32 = arg(2)?.parse().map_err(|_| "N: not a number".to_string())?;
            let mut to = addr(arg(1)?)?;
            let first = to.port();
            let failed = (0..n)
                .filter(|i| {
                    let port = (u32::from(first) + i) % 65_536;
                    to.set_port(u16::try_from(port).unwrap_or(1).max(1));
                    TcpStream::connect_timeout(&to, Duration::from_millis(200)).is_err()
                })
                .count();
            Ok(format!("{n} attempts, {failed} failed"))
        }
        "subread" => subcgroup_read(arg(1)?),
        _ => return Err(Failure::NotMine),
    };
    outcome.map_err(Failure::Failed)
}

/// The agent as a process: its pid, cgroup, terminal, timing, the gateway socket.
fn process(action: &[String]) -> Outcome {
    let arg = |i: usize| argument(action, i);
    let outcome = match action[0].as_str() {
        "pid" => Ok(format!("pid {}", std::process::id())),
        "cgroup" => std::fs::read_to_string("/proc/self/cgroup")
            .map(|s| s.trim().replace('\n', " "))
            .map_err(|e| e.to_string()),
        "waitfile" => {
            // The test makes the file when it is ready: it may first start another session,
            // which on a busy machine takes tens of seconds. The deadline only ends an agent
            // whose test gave up.
            let path = std::path::Path::new(arg(1)?);
            let deadline = std::time::Instant::now() + WAITFILE_DEADLINE;
            while std::time::Instant::now() < deadline {
                if path.exists() {
                    return Ok(format!("{} exists", path.display()));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(format!("{} did not appear", path.display()))
        }
        "turns" => turns::turns(&action[1..]),
        "rpc" => rpc(arg(1)?, arg(2)?),
        "sleep" => {
            let secs: f64 = arg(1)?
                .parse()
                .map_err(|_| "sleep: not a number".to_string())?;
            std::thread::sleep(Duration::from_secs_f64(secs));
            Ok(format!("slept {secs}s"))
        }
        "winsize" => {
            // SAFETY: TIOCGWINSZ writes one winsize into the struct it is given.
            let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
            // SAFETY: fd 0 and a valid pointer to that struct.
            if unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &raw mut ws) } != 0 {
                return Err(std::io::Error::last_os_error().to_string().into());
            }
            Ok(format!("{} rows, {} columns", ws.ws_row, ws.ws_col))
        }
        "tick" => {
            let ms: u64 = arg(1)?
                .parse()
                .map_err(|_| "tick: not a number".to_string())?;
            for n in 0u64.. {
                println!("tick {n}");
                std::thread::sleep(Duration::from_millis(ms));
            }
            Ok("ticked".to_string())
        }
        _ => return Err(Failure::NotMine),
    };
    outcome.map_err(Failure::Failed)
}

/// Attempts on the kernel and the parent, and the test MCP server.
fn attacks(action: &[String]) -> Outcome {
    let arg = |i: usize| argument(action, i);
    let outcome = match action[0].as_str() {
        "bpf" => bpf_map_create(),
        "run" => {
            let st = std::process::Command::new(arg(1)?)
                .args(&action[2..])
                .status()
                .map_err(|e| e.to_string())?;
            Ok(format!("{} exited with {st}", arg(1).unwrap_or("")))
        }
        "escape" => std::fs::write(arg(1)?, b"0")
            .map(|()| format!("moved into {}", arg(1).unwrap_or("")))
            .map_err(|e| e.to_string()),
        "mount" => {
            let dir = std::ffi::CString::new(arg(1)?).map_err(|e| e.to_string())?;
            // SAFETY: valid NUL-terminated strings; no data argument.
            let r = unsafe {
                libc::mount(
                    c"none".as_ptr(),
                    dir.as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            if r != 0 {
                return Err(std::io::Error::last_os_error().to_string().into());
            }
            // SAFETY: as above.
            unsafe { libc::umount(dir.as_ptr()) };
            Ok(format!(
                "mounted and unmounted a tmpfs on {}",
                arg(1).unwrap_or("")
            ))
        }
        "killparent" => {
            let sig: i32 = arg(1)?
                .parse()
                .map_err(|_| "killparent: not a signal number".to_string())?;
            // SAFETY: plain syscalls.
            let r = unsafe { libc::kill(parent(), sig) };
            if r != 0 {
                return Err(std::io::Error::last_os_error().to_string().into());
            }
            Ok(format!("sent signal {sig} to the parent"))
        }
        "ptraceparent" => {
            // SAFETY: plain syscalls; PTRACE_SEIZE does not stop the tracee.
            unsafe {
                let ppid = parent();
                if libc::ptrace(libc::PTRACE_SEIZE, ppid, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error().to_string().into());
                }
                libc::ptrace(libc::PTRACE_DETACH, ppid, 0, 0);
            }
            Ok("seized and released the parent".into())
        }
        "mcpserver" => mcp_server::serve(),
        _ => return Err(Failure::NotMine),
    };
    outcome.map_err(Failure::Failed)
}

/// "The parent" of `killparent` and `ptraceparent`: the pid in `GW_TESTAGENT_TARGET` (the
/// tests put gatewayd's there: under `gatewayd run` the agent's parent is the init of its
/// PID namespace), else this process's parent.
fn parent() -> libc::pid_t {
    std::env::var("GW_TESTAGENT_TARGET")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            // SAFETY: getppid cannot fail.
            unsafe { libc::getppid() }
        })
}

/// Creates `<our cgroup>/sub`, starts a child directly in it with `clone3(CLONE_INTO_CGROUP)`
/// (no write to any cgroup file), and has the child open `path`.
fn subcgroup_read(path: &str) -> Result<String, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("no cgroup v2 line")?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let mount = info
        .lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            (post.split_whitespace().next() == Some("cgroup2"))
                .then(|| pre.split_whitespace().nth(4))?
        })
        .ok_or("no cgroup2 mount")?;
    let sub = format!("{mount}{rel}/sub");
    std::fs::create_dir(&sub).map_err(|e| format!("mkdir {sub}: {e}"))?;
    let dir = std::fs::File::open(&sub).map_err(|e| format!("open {sub}: {e}"))?;
    let target = std::ffi::CString::new(path).map_err(|e| e.to_string())?;
    // struct clone_args { flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
    //                     tls, set_tid, set_tid_size, cgroup } (11 x u64)
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
    let mut args = [0u64; 11];
    args[0] = CLONE_INTO_CGROUP;
    args[4] = libc::SIGCHLD as u64;
    args[10] = std::os::fd::AsRawFd::as_raw_fd(&dir) as u64;
    // SAFETY: clone3 without a new stack behaves like fork; the child only makes raw syscalls
    // and _exits.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            args.as_ptr(),
            std::mem::size_of_val(&args),
        )
    };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_dir(&sub);
        return Err(format!("clone3 into {sub}: {e}"));
    }
    if pid == 0 {
        // SAFETY: async-signal-safe calls only.
        unsafe {
            let fd = libc::open(target.as_ptr(), libc::O_RDONLY);
            libc::_exit(if fd >= 0 {
                0
            } else {
                *libc::__errno_location()
            });
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid as i32, &raw mut status, 0) };
    let _ = std::fs::remove_dir(&sub);
    match libc::WEXITSTATUS(status) {
        0 => Ok(format!("a child in {sub} read {path}")),
        errno => Err(format!(
            "child in {sub}: {}",
            std::io::Error::from_raw_os_error(errno)
        )),
    }
}

/// One JSON-RPC request to the gateway `gatewayd run` serves to its agent, over the socket
/// named by `$GATEWAYD_SOCKET` (or to another gateway, `$GW_RPC_SOCKET`), line by line with the standard library only (the guest has no
/// other client). The daemon writes answers with sorted keys, so an error answer starts with
/// `{"error"`.
fn rpc(method: &str, params: &str) -> Result<String, String> {
    use std::io::BufRead as _;
    let path = std::env::var_os("GW_RPC_SOCKET")
        .or_else(|| std::env::var_os("GATEWAYD_SOCKET"))
        .ok_or("GATEWAYD_SOCKET is not set")?;
    let session = std::env::var("GATEWAYD_SESSION").unwrap_or_default();
    let params = params.replace("$SESSION", &session);
    let mut s = std::os::unix::net::UnixStream::connect(&path)
        .map_err(|e| format!("connect {}: {e}", path.to_string_lossy()))?;
    let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#);
    s.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    std::io::BufReader::new(&s)
        .read_line(&mut answer)
        .map_err(|e| e.to_string())?;
    let answer = answer.trim_end().to_owned();
    if answer.is_empty() {
        return Err("the gateway closed the connection".into());
    }
    if answer.starts_with(r#"{"error""#) {
        return Err(answer);
    }
    Ok(answer)
}

/// `bpf(BPF_MAP_CREATE)` of a 1-entry array map, closed at once.
fn bpf_map_create() -> Result<String, String> {
    // union bpf_attr for BPF_MAP_CREATE: map_type, key_size, value_size, max_entries, ...
    let mut attr = [0u32; 32];
    attr[0] = 2; // BPF_MAP_TYPE_ARRAY
    attr[1] = 4;
    attr[2] = 4;
    attr[3] = 1;
    // SAFETY: attr is a zeroed buffer larger than the fields the kernel reads for this command.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            0,
            attr.as_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: fd was just returned by the kernel.
    unsafe { libc::close(fd as i32) };
    Ok("created a BPF map".into())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut failures = 0u8;
    for action in args.split(|a| a == "+").filter(|a| !a.is_empty()) {
        if action[0] == "exit" {
            let code = action.get(1).and_then(|c| c.parse().ok()).unwrap_or(0);
            let _ = std::io::stdout().flush();
            return ExitCode::from(code);
        }
        if action[0] == "fork" {
            // SAFETY: the process is single-threaded; both sides go on in plain Rust.
            match unsafe { libc::fork() } {
                -1 => {
                    println!("FAIL fork: {}", std::io::Error::last_os_error());
                    failures = failures.saturating_add(1).min(100);
                }
                0 => {}
                child => {
                    println!("OK fork: child {child}");
                    let _ = std::io::stdout().flush();
                    loop {
                        // SAFETY: waits for a signal; nothing else.
                        unsafe { libc::pause() };
                    }
                }
            }
            continue;
        }
        match run(action) {
            Ok(msg) => println!("OK {}: {msg}", action[0]),
            Err(e) => {
                println!("FAIL {}: {e}", action[0]);
                failures = failures.saturating_add(1).min(100);
            }
        }
        let _ = std::io::stdout().flush();
    }
    ExitCode::from(failures)
}

#[cfg(test)]
mod tests {
    use super::run;

    fn action(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    /// Each family is reached: an action of the first, one of a family further down, and one
    /// of a module's (each answers, or fails for its own reason), and a name no family has
    /// is an unknown action.
    #[test]
    fn every_family_is_asked_in_turn_and_an_unknown_name_is_refused() {
        let dir = std::env::temp_dir();
        let dir = dir.to_str().expect("a UTF-8 temporary directory");
        assert!(run(&action(&["read", "/proc/self/status"])).is_ok());
        assert_eq!(
            run(&action(&["pid"])),
            Ok(format!("pid {}", std::process::id()))
        );
        assert!(run(&action(&["list", dir])).is_ok());
        let refused = run(&action(&["download", "not-an-address", "h"]));
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("bad address")),
            "{refused:?}"
        );
        assert_eq!(
            run(&action(&["connectloop"])),
            Err("connectloop: missing argument".to_owned())
        );
        assert_eq!(
            run(&action(&["nosuch"])),
            Err("unknown action nosuch".to_owned())
        );
    }
}
