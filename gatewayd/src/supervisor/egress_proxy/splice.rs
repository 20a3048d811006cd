//! An allowed connection that is not inspected, passed through without copies: each way the
//! bytes go from one socket into a pipe and from the pipe into the other socket with
//! `splice(2)` (pages moved, never copied into the proxy's memory), so a bulk transfer costs
//! the proxy two system calls per megabyte and no buffer of its own.
use std::os::fd::AsRawFd as _;

use nix::{
    fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl, splice},
    sys::socket::{Shutdown, shutdown},
};
use tokio::{io::Interest, net::TcpStream};

/// The most one splice moves, and the size asked for each pipe (a pipe the kernel keeps
/// smaller only moves less at a time).
const CHUNK: usize = 1 << 20;

/// Passes bytes both ways until both sides have closed their writing (each side's end is
/// passed on as a shutdown of the other's writing), or either fails.
pub(super) async fn both_ways(a: &TcpStream, b: &TcpStream) -> std::io::Result<()> {
    tokio::try_join!(one_way(a, b), one_way(b, a)).map(|((), ())| ())
}

/// Passes what `from` sends on to `to` until `from` ends its writing.
async fn one_way(from: &TcpStream, to: &TcpStream) -> std::io::Result<()> {
    let (pipe_out, pipe_in) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    let _ = fcntl(&pipe_in, FcntlArg::F_SETPIPE_SZ(CHUNK as i32));
    let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
    loop {
        // The pipe is empty here, so `EAGAIN` can only be the socket's: no bytes yet.
        let n = from
            .async_io(Interest::READABLE, || {
                Ok(splice(from, None, &pipe_in, None, CHUNK, flags)?)
            })
            .await?;
        if n == 0 {
            let _ = shutdown(to.as_raw_fd(), Shutdown::Write);
            return Ok(());
        }
        let mut left = n;
        while left > 0 {
            left -= to
                .async_io(Interest::WRITABLE, || {
                    Ok(splice(&pipe_out, None, to, None, left, flags)?)
                })
                .await?;
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::{TcpListener, TcpStream};

    /// A connected pair of loopback sockets.
    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let near = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (far, _) = l.accept().await.unwrap();
        (near, far)
    }

    /// Reads to the end, failing the test after 20 s (a pass-through that stopped).
    async fn all_of(s: &mut TcpStream) -> Vec<u8> {
        let mut got = Vec::new();
        let reading = s.read_to_end(&mut got);
        tokio::time::timeout(std::time::Duration::from_secs(20), reading)
            .await
            .expect("the bytes stopped coming")
            .unwrap();
        got
    }

    #[tokio::test]
    async fn bytes_pass_both_ways_and_each_end_is_passed_on() {
        let (mut client, agent) = pair().await;
        let (upstream, mut server) = pair().await;
        let passing = tokio::spawn(async move { super::both_ways(&agent, &upstream).await });
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        client.shutdown().await.unwrap();
        let request = all_of(&mut server).await;
        assert_eq!(
            request, b"GET / HTTP/1.1\r\n\r\n",
            "the client's end reached the server"
        );
        // More than one pipe's worth, in one go.
        let body: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
        server.write_all(&body).await.unwrap();
        drop(server);
        let got = all_of(&mut client).await;
        assert!(
            got == body,
            "{} of {} bytes, in order",
            got.len(),
            body.len()
        );
        passing.await.unwrap().unwrap();
    }
}
