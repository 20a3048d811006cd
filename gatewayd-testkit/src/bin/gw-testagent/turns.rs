//! `turns OP TARGET N K ROLE FIFO_A FIFO_B`: K batches of N operations, taking turns with a
//! second process through two FIFOs (the lead runs first, writes a byte to A, waits for one
//! on B; the follower the reverse): a bare process and an agent alternate batch by batch, so
//! a drifting machine slows both alike. Prints ns per operation of each batch.
//!
//! - OP: `open` (open+close TARGET, a path), `connect` (TCP connect to TARGET, IP:PORT,
//!   where nothing listens: refused is the expected outcome), `connect-own` (a TCP connect
//!   to a listener of the process's own on TARGET, an IP, port 0, accepted and closed),
//!   `exec` (run TARGET, a program, and wait for it).
//! - ROLE: `lead`, `follow`, or `lead-filtered`: the lead, under a seccomp filter that
//!   allows every syscall. Any filter puts each syscall on the kernel's slower entry path;
//!   against this lead, an agent's figure shows what gatewayd's kernel programs cost apart
//!   from that.
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};

use crate::addr;

/// One operation of `turns`, made ready before the first batch.
enum Op {
    Open(String),
    Connect(std::net::SocketAddr),
    /// A listener of this process's own, on loopback, connected to and accepted from.
    ConnectOwn(TcpListener),
    Exec(String),
}

impl Op {
    fn new(op: &str, target: &str) -> Result<Op, String> {
        Ok(match op {
            "open" => Op::Open(target.to_owned()),
            "connect" => Op::Connect(addr(target)?),
            "connect-own" => Op::ConnectOwn(
                TcpListener::bind((target, 0)).map_err(|e| format!("{target}: {e}"))?,
            ),
            "exec" => Op::Exec(target.to_owned()),
            _ => {
                return Err(format!(
                    "turns: {op}: want open, connect, connect-own or exec"
                ));
            }
        })
    }

    fn run(&self) -> Result<(), String> {
        match self {
            Op::Open(path) => std::fs::File::open(path)
                .map(drop)
                .map_err(|e| e.to_string()),
            Op::Connect(to) => match TcpStream::connect(to) {
                Ok(_) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(()),
                Err(e) => Err(e.to_string()),
            },
            Op::ConnectOwn(listener) => {
                let to = listener.local_addr().map_err(|e| e.to_string())?;
                let client = TcpStream::connect(to).map_err(|e| e.to_string())?;
                // The accepted side closes first: its TIME_WAIT holds no client port.
                drop(listener.accept().map_err(|e| e.to_string())?);
                drop(client);
                Ok(())
            }
            Op::Exec(program) => match std::process::Command::new(program).status() {
                Ok(st) if st.success() => Ok(()),
                Ok(st) => Err(format!("{program}: {st}")),
                Err(e) => Err(format!("{program}: {e}")),
            },
        }
    }
}

/// `turns OP TARGET N K ROLE FIFO_A FIFO_B` (see the module docs).
pub(crate) fn turns(args: &[String]) -> Result<String, String> {
    let [op, target, n, k, role, a, b] = args else {
        return Err("turns: want OP TARGET N K ROLE FIFO_A FIFO_B".into());
    };
    let n: u32 = n.parse().map_err(|_| "N: not a number".to_string())?;
    let k: u32 = k.parse().map_err(|_| "K: not a number".to_string())?;
    let op = Op::new(op, target)?;
    let lead = match role.as_str() {
        "lead" => true,
        "lead-filtered" => {
            allow_all_filter()?;
            true
        }
        "follow" => false,
        _ => return Err(format!("turns: {role}: want lead, lead-filtered or follow")),
    };
    let fifo = |p: &str, write: bool| {
        std::fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .open(p)
            .map_err(|e| format!("{p}: {e}"))
    };
    // Opened in the same order on both sides (A, then B), so neither open blocks forever.
    let (mut give, mut take) = if lead {
        let give = fifo(a, true)?;
        (give, fifo(b, false)?)
    } else {
        let take = fifo(a, false)?;
        (fifo(b, true)?, take)
    };
    let mut byte = [0u8; 1];
    let mut figures = Vec::new();
    for _ in 0..k {
        if !lead {
            take.read_exact(&mut byte).map_err(|e| e.to_string())?;
        }
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            op.run()?;
        }
        figures.push((t0.elapsed().as_nanos() / u128::from(n.max(1))).to_string());
        give.write_all(&byte).map_err(|e| e.to_string())?;
        if lead {
            take.read_exact(&mut byte).map_err(|e| e.to_string())?;
        }
    }
    Ok(format!("{k} turns of {n}, ns each: {}", figures.join(" ")))
}

/// Installs a seccomp filter of one instruction, `SECCOMP_RET_ALLOW` (after `no_new_privs`,
/// which an unprivileged process needs for it).
fn allow_all_filter() -> Result<(), String> {
    let allow = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!("no_new_privs: {}", std::io::Error::last_os_error()));
    }
    let prog = libc::sock_fprog {
        len: 1,
        filter: allow.as_ptr().cast_mut(),
    };
    // SAFETY: the kernel copies the program; `prog` and `allow` outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &raw const prog,
        )
    };
    if rc != 0 {
        return Err(format!("seccomp: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}
