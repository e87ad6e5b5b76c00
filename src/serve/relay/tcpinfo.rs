//! The part of Linux's `struct tcp_info` the relay reads: byte counts in
//! both directions (which say how much went through a sockmap pair, and
//! whether everything one side sent has reached the other before its FIN is
//! passed on) and idle times. libc's struct stops before these fields.

use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;

/// struct tcp_info up to tcpi_notsent_bytes (Linux 4.6+ layout).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct RawTcpInfo {
    state: [u8; 8],
    u32s_a: [u32; 9], // rto .. fackets
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    u32s_b: [u32; 11], // pmtu .. total_retrans
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    pad: u32,
}

const _: () = assert!(std::mem::offset_of!(RawTcpInfo, bytes_acked) == 120);
const _: () = assert!(std::mem::offset_of!(RawTcpInfo, bytes_received) == 128);

/// What the relay uses of TCP_INFO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Sequence space this socket sent that the peer acknowledged: payload,
    /// plus one for its SYN if it connected actively, plus one for its FIN.
    pub bytes_acked: u64,
    /// Sequence space this socket received: payload plus one for a FIN.
    pub bytes_received: u64,
    /// Milliseconds since data was last sent.
    pub last_data_sent_ms: u32,
    /// Milliseconds since data was last received.
    pub last_data_recv_ms: u32,
}

/// getsockopt(TCP_INFO). Fails if the kernel returns less than the byte
/// counters (older than 4.1).
pub fn read(fd: RawFd) -> io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: valid fd; the buffer is as long as `len` says.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if (len as usize) < std::mem::offset_of!(RawTcpInfo, segs_out) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "TCP_INFO has no byte counters (kernel older than 4.1)",
        ));
    }
    Ok(TcpInfo {
        bytes_acked: raw.bytes_acked,
        bytes_received: raw.bytes_received,
        last_data_sent_ms: raw.last_data_sent,
        last_data_recv_ms: raw.last_data_recv,
    })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn counts_bytes_both_ways() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7u8; 1000]).unwrap();
        let mut buf = [0u8; 1000];
        s.read_exact(&mut buf).unwrap();
        let server = super::read(s.as_raw_fd()).unwrap();
        assert_eq!(server.bytes_received, 1000);
        // Acks on loopback are immediate but asynchronous: allow a moment.
        // The connecting side's SYN counts as one acknowledged byte.
        for _ in 0..100 {
            if super::read(c.as_raw_fd()).unwrap().bytes_acked == 1001 {
                c.shutdown(std::net::Shutdown::Write).unwrap();
                let mut rest = Vec::new();
                s.read_to_end(&mut rest).unwrap();
                // A received FIN counts one.
                assert_eq!(super::read(s.as_raw_fd()).unwrap().bytes_received, 1001);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("client never saw its 1000 bytes acknowledged");
    }
}
