//! Moving one direction's bytes (source socket to destination socket) in
//! userspace: through a loop-wide read buffer (`--mode userspace`), or
//! through a pipe with splice(2) so the bytes are never copied into this
//! process (`--mode splice`). sockmap pairs use the buffer path for the
//! rare bytes the kernel hands back (see sockmap.rs).
//!
//! Backpressure: a direction whose destination would not take more stops
//! reading its source until the destination drains (the loop drops EPOLLIN
//! for it), so a slow reader costs at most one buffer (or one pipe) of
//! memory and fills the sockets' own buffers instead.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Most bytes a direction holds (unwritten buffer, or bytes in its pipe).
pub const CAP: usize = 64 << 10;
/// Read/write rounds per readiness report before other pairs get a turn.
const ROUNDS: usize = 8;

/// A pipe used to splice one direction, sized to CAP.
pub struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
}

impl Pipe {
    /// A non-blocking pipe of CAP bytes.
    pub fn new() -> io::Result<Self> {
        let mut fds = [0; 2];
        // SAFETY: valid array for the two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors are new and owned by us.
        let p = unsafe {
            Self {
                r: OwnedFd::from_raw_fd(fds[0]),
                w: OwnedFd::from_raw_fd(fds[1]),
            }
        };
        // 64 KiB is also the default; asking makes it explicit. A smaller
        // grant (pipe-user-pages-soft exceeded) still works, only slower.
        // SAFETY: fcntl on our own descriptor.
        unsafe { libc::fcntl(p.w.as_raw_fd(), libc::F_SETPIPE_SZ, CAP as libc::c_int) };
        Ok(p)
    }
}

/// Where a direction keeps bytes it read but could not write yet.
pub enum Store {
    /// Unwritten bytes (empty and unallocated while idle).
    Buffer(Vec<u8>),
    /// A pipe (taken from the loop's pool when first needed) and how many
    /// bytes are in it.
    Splice(Option<Pipe>, usize),
}

/// One direction of a pair.
pub struct Dir {
    /// Pending bytes.
    pub store: Store,
    /// The source reported end of stream.
    pub src_eof: bool,
    /// The destination's write side has been shut down.
    pub shut: bool,
    /// The last write would block: wait for EPOLLOUT on the destination.
    pub dst_blocked: bool,
    /// Bytes moved from source to destination.
    pub bytes: u64,
    /// Of those, bytes copied through this process's memory.
    pub bytes_user: u64,
}

/// What a pump did besides moving bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Pumped {
    /// Moved some bytes (or saw the end of stream).
    Progress,
    /// Nothing to do right now.
    Idle,
}

/// The loop's shared resources for pumping.
pub struct Scratch {
    /// The read buffer every buffered direction of the loop shares.
    pub buf: Vec<u8>,
    /// Empty pipes kept for reuse.
    pub pipes: Vec<Pipe>,
}

/// Spare pipes a loop keeps (beyond, they are closed).
const POOL_MAX: usize = 256;

impl Scratch {
    /// A fresh scratch area.
    pub fn new() -> Self {
        Self {
            buf: vec![0u8; CAP],
            pipes: Vec::new(),
        }
    }

    fn pipe(&mut self) -> io::Result<Pipe> {
        match self.pipes.pop() {
            Some(p) => Ok(p),
            None => Pipe::new(),
        }
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// What one round of a pump did.
struct Step {
    /// Bytes moved (or the end of stream was seen).
    moved: bool,
    /// The source may have more right now (its last read filled the room).
    more: bool,
}

impl Step {
    const IDLE: Step = Step {
        moved: false,
        more: false,
    };
    fn moved(more: bool) -> Step {
        Step { moved: true, more }
    }
}

fn would_block(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
}

fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: valid fd and buffer.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: valid fd and buffer.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Splices everything in the pipe (`in_pipe` bytes) to `dst`; sets
/// `blocked` when some is left. Returns whether anything moved.
fn drain_pipe(
    pipe: RawFd,
    dst: RawFd,
    in_pipe: &mut usize,
    bytes: &mut u64,
    blocked: &mut bool,
) -> io::Result<bool> {
    let mut moved = false;
    while *in_pipe > 0 {
        match splice(pipe, dst, *in_pipe) {
            Ok(0) => break,
            Ok(n) => {
                *in_pipe -= n;
                *bytes += n as u64;
                moved = true;
            }
            Err(e) if would_block(&e) => break,
            Err(e) => return Err(e),
        }
    }
    *blocked = *in_pipe > 0;
    Ok(moved)
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: plain syscall on our descriptors; no offsets.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl Dir {
    /// A direction using a buffer (`splice` false) or a pipe.
    pub fn new(splice: bool) -> Self {
        Self {
            store: if splice {
                Store::Splice(None, 0)
            } else {
                Store::Buffer(Vec::new())
            },
            src_eof: false,
            shut: false,
            dst_blocked: false,
            bytes: 0,
            bytes_user: 0,
        }
    }

    /// Bytes read but not yet written.
    pub fn pending(&self) -> usize {
        match &self.store {
            Store::Buffer(b) => b.len(),
            Store::Splice(_, n) => *n,
        }
    }

    /// True when the source should be read now.
    pub fn wants_read(&self) -> bool {
        !self.src_eof && !self.dst_blocked && self.pending() < CAP
    }

    /// True when everything read has been written and the source is done.
    pub fn drained(&self) -> bool {
        self.src_eof && self.pending() == 0
    }

    /// Moves bytes from `src` to `dst` until nothing moves (or ROUNDS).
    /// An error is the connection's end (reset, broken pipe...).
    pub fn pump(&mut self, src: RawFd, dst: RawFd, scratch: &mut Scratch) -> io::Result<Pumped> {
        let mut any = false;
        for _ in 0..ROUNDS {
            let step = match &mut self.store {
                Store::Buffer(_) => self.pump_buffer(src, dst, scratch)?,
                Store::Splice(..) => self.pump_splice(src, dst, scratch)?,
            };
            any |= step.moved;
            // A short read emptied the source: asking again would only
            // cost a read that returns EAGAIN (epoll reports new data).
            if !step.moved || !step.more {
                break;
            }
        }
        Ok(if any { Pumped::Progress } else { Pumped::Idle })
    }

    fn pump_buffer(&mut self, src: RawFd, dst: RawFd, scratch: &mut Scratch) -> io::Result<Step> {
        let Store::Buffer(rest) = &mut self.store else {
            unreachable!()
        };
        if !rest.is_empty() {
            match send(dst, rest) {
                Ok(n) => {
                    self.bytes += n as u64;
                    rest.drain(..n);
                    if rest.is_empty() {
                        // Idle directions hold no memory.
                        *rest = Vec::new();
                        self.dst_blocked = false;
                        return Ok(Step::moved(true));
                    }
                    self.dst_blocked = true;
                    return Ok(if n > 0 {
                        Step::moved(false)
                    } else {
                        Step::IDLE
                    });
                }
                Err(e) if would_block(&e) => {
                    self.dst_blocked = true;
                    return Ok(Step::IDLE);
                }
                Err(e) => return Err(e),
            }
        }
        if self.src_eof {
            return Ok(Step::IDLE);
        }
        let n = match recv(src, &mut scratch.buf) {
            Ok(0) => {
                self.src_eof = true;
                return Ok(Step::moved(false));
            }
            Ok(n) => n,
            Err(e) if would_block(&e) => return Ok(Step::IDLE),
            Err(e) => return Err(e),
        };
        self.bytes_user += n as u64;
        // Write straight from the shared buffer; keep only what the
        // destination would not take.
        let w = match send(dst, &scratch.buf[..n]) {
            Ok(w) => w,
            Err(e) if would_block(&e) => 0,
            Err(e) => return Err(e),
        };
        self.bytes += w as u64;
        if w < n {
            rest.extend_from_slice(&scratch.buf[w..n]);
            self.dst_blocked = true;
        }
        Ok(Step::moved(n == scratch.buf.len()))
    }

    /// One round of splicing: drain the pipe into the destination, read
    /// more from the source, drain again. On return, bytes left in the pipe
    /// always mean the destination would block (so the loop waits for
    /// EPOLLOUT and nothing sits in the pipe unwatched).
    fn pump_splice(&mut self, src: RawFd, dst: RawFd, scratch: &mut Scratch) -> io::Result<Step> {
        let Store::Splice(pipe, in_pipe) = &mut self.store else {
            unreachable!()
        };
        if pipe.is_none() {
            *pipe = Some(scratch.pipe()?);
        }
        let p = pipe.as_ref().expect("set above");
        let (pr, pw) = (p.r.as_raw_fd(), p.w.as_raw_fd());
        let drained = drain_pipe(pr, dst, in_pipe, &mut self.bytes, &mut self.dst_blocked)?;
        // A zero-length splice returns 0, which would read as end of stream.
        if self.dst_blocked || self.src_eof || *in_pipe >= CAP {
            return Ok(if drained {
                Step::moved(!self.dst_blocked)
            } else {
                Step::IDLE
            });
        }
        let room = CAP - *in_pipe;
        match splice(src, pw, room) {
            Ok(0) => {
                self.src_eof = true;
                Ok(Step::moved(false))
            }
            Ok(n) => {
                *in_pipe += n;
                drain_pipe(pr, dst, in_pipe, &mut self.bytes, &mut self.dst_blocked)?;
                Ok(Step::moved(n == room && !self.dst_blocked))
            }
            // No data now. (The pipe cannot be out of slots: it was just
            // drained empty, or the destination would have blocked.)
            Err(e) if would_block(&e) => Ok(if drained {
                Step::moved(false)
            } else {
                Step::IDLE
            }),
            Err(e) => Err(e),
        }
    }

    /// Gives an empty pipe back to the loop's pool (a pipe with bytes in it
    /// is closed: those bytes belong to a connection that is gone).
    pub fn release(&mut self, scratch: &mut Scratch) {
        if let Store::Splice(pipe, in_pipe) = &mut self.store {
            if let Some(p) = pipe.take() {
                if *in_pipe == 0 && scratch.pipes.len() < POOL_MAX {
                    scratch.pipes.push(p);
                }
            }
            *in_pipe = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    fn moves_everything(splice: bool) {
        // src_peer -> src ==pump==> dst -> dst_peer
        let (mut src_peer, src) = pair();
        let (dst, mut dst_peer) = pair();
        src.set_nonblocking(true).unwrap();
        dst.set_nonblocking(true).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let expect = data.clone();
        let writer = std::thread::spawn(move || {
            src_peer.write_all(&data).unwrap();
            src_peer.shutdown(Shutdown::Write).unwrap();
        });
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            dst_peer.read_to_end(&mut got).unwrap();
            got
        });
        let mut d = Dir::new(splice);
        let mut scratch = Scratch::new();
        let t0 = std::time::Instant::now();
        while !d.drained() {
            d.pump(src.as_raw_fd(), dst.as_raw_fd(), &mut scratch)
                .unwrap();
            assert!(t0.elapsed().as_secs() < 10, "stuck");
            std::thread::yield_now();
        }
        dst.shutdown(Shutdown::Write).unwrap();
        writer.join().unwrap();
        assert_eq!(reader.join().unwrap(), expect);
        assert_eq!(d.bytes, 200_000);
        assert_eq!(d.bytes_user, if splice { 0 } else { 200_000 });
        d.release(&mut scratch);
        assert_eq!(scratch.pipes.len(), usize::from(splice));
    }

    #[test]
    fn buffer_moves_everything_in_order() {
        moves_everything(false);
    }

    #[test]
    fn splice_moves_everything_in_order_without_copies() {
        moves_everything(true);
    }
}
