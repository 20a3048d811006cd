//! gw-testagent's HTTP/1 probes, for the egress proxy bench (`xtask/src/proxy_bench.rs`):
//! plain HTTP to an address with a `Host` header, the way a client reaches a server by name
//! (the session proxy decides by that name).
//!
//! ```text
//! httploop IP:PORT HOST N THREADS   # N requests, each on a new connection (GET /, read to
//!                                   # the end), spread over THREADS threads; prints the
//!                                   # p50 and p99 time of one request and requests per second
//! download IP:PORT HOST             # one GET /bulk read to the end; prints bytes and MiB/s
//! ```
use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    time::{Duration, Instant},
};

use super::{Failure, Outcome};

/// Runs `action` when it is one of this module's (its name, then its arguments).
pub(crate) fn run(action: &[String]) -> Outcome {
    let (name, args) = (action[0].as_str(), &action[1..]);
    let arg = |i: usize| {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("{name}: missing argument"))
    };
    let target = || Ok::<_, String>((super::addr(arg(0)?)?, arg(1)?));
    let outcome = match name {
        "httploop" => {
            let (to, host) = target()?;
            let n: usize = arg(2)?.parse().map_err(|_| "N: not a number".to_owned())?;
            let threads: usize = arg(3)?
                .parse()
                .map_err(|_| "THREADS: not a number".to_owned())?;
            http_loop(to, host, n, threads.max(1))
        }
        "download" => {
            let (to, host) = target()?;
            download(to, host)
        }
        _ => return Err(Failure::NotMine),
    };
    outcome.map_err(Failure::Failed)
}

/// One `GET path` on a new connection, read to the end: the bytes of the answer.
fn get(to: SocketAddr, host: &str, path: &str, buf: &mut [u8]) -> Result<u64, String> {
    let mut s =
        TcpStream::connect_timeout(&to, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    // The status line is in the first bytes read; later reads reuse the buffer.
    let first = s.read(buf).map_err(|e| e.to_string())?;
    if first == 0 {
        return Err("the connection closed without an answer".into());
    }
    if !buf[..first].starts_with(b"HTTP/1.1 200") {
        let shown = String::from_utf8_lossy(&buf[..first.min(64)]);
        return Err(format!("not a 200: {shown:?}"));
    }
    let mut total = first as u64;
    loop {
        match s.read(buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n as u64,
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn http_loop(to: SocketAddr, host: &str, n: usize, threads: usize) -> Result<String, String> {
    let per_thread = n.div_ceil(threads);
    let t0 = Instant::now();
    let results: Vec<Result<Vec<u64>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || {
                    let mut buf = vec![0u8; 4096];
                    let mut times = Vec::with_capacity(per_thread);
                    for _ in 0..per_thread {
                        let start = Instant::now();
                        get(to, host, "/", &mut buf)?;
                        times.push(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
                    }
                    Ok(times)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect()
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let mut times = Vec::new();
    for r in results {
        times.extend(r?);
    }
    times.sort_unstable();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    Ok(format!(
        "{} requests on {threads} threads: p50 {} ns, p99 {} ns, {:.0} per s",
        times.len(),
        at(0.50),
        at(0.99),
        times.len() as f64 / elapsed
    ))
}

fn download(to: SocketAddr, host: &str) -> Result<String, String> {
    let mut buf = vec![0u8; 1 << 20];
    let t0 = Instant::now();
    let bytes = get(to, host, "/bulk", &mut buf)?;
    let secs = t0.elapsed().as_secs_f64();
    Ok(format!(
        "{bytes} bytes in {:.0} ms, {:.0} MiB/s",
        secs * 1000.0,
        bytes as f64 / secs / f64::from(1 << 20)
    ))
}
