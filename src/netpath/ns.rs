//! Anonymous network namespaces and the interface set-up done inside them.
//!
//! A namespace is made by a short-lived thread that calls
//! unshare(CLONE_NEWNET) (which changes that thread only) and opens
//! /proc/thread-self/ns/net; the descriptor is all that keeps it alive. It
//! has no name (it never appears in `ip netns list`, nothing mounts it), so
//! it vanishes when sockscope's descriptors and the processes started in
//! it are gone, however sockscope ends: SIGKILL cannot leak it, and there
//! are no leftovers of dead runs to find and remove at start.

use std::fs::File;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use anyhow::{Context, Result, bail};

/// An interface request (`struct ifreq`): a name and a 24-byte union.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> Result<Self> {
        let mut r = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: [0; 24],
        };
        if name.len() >= libc::IFNAMSIZ {
            bail!("interface name {name:?} is too long");
        }
        r.name[..name.len()].copy_from_slice(name.as_bytes());
        Ok(r)
    }

    fn set_addr(&mut self, ip: Ipv4Addr) {
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(ip).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: sockaddr_in (16 bytes) fits the 24-byte union, which is
        // where the kernel reads ifr_addr / ifr_dstaddr / ifr_netmask.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&sa as *const libc::sockaddr_in).cast::<u8>(),
                self.data.as_mut_ptr(),
                std::mem::size_of::<libc::sockaddr_in>(),
            )
        };
    }

    fn set_short(&mut self, v: libc::c_short) {
        self.data[..2].copy_from_slice(&v.to_ne_bytes());
    }

    fn short(&self) -> libc::c_short {
        libc::c_short::from_ne_bytes([self.data[0], self.data[1]])
    }
}

fn ioctl(fd: RawFd, req: libc::c_ulong, r: &mut IfReq, what: &str) -> Result<()> {
    // SAFETY: `r` is a valid ifreq for these requests.
    if unsafe { libc::ioctl(fd, req as _, r as *mut IfReq) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| what.to_string());
    }
    Ok(())
}

/// An AF_INET datagram socket of the calling thread's namespace, for
/// interface ioctls.
fn ctl_socket() -> Result<OwnedFd> {
    // SAFETY: plain syscall; a returned descriptor is ours.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("socket(AF_INET) for ioctls");
    }
    // SAFETY: fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets `flags` on interface `name` (of the calling thread's namespace).
fn up(sock: RawFd, name: &str) -> Result<()> {
    let mut r = IfReq::new(name)?;
    ioctl(sock, libc::SIOCGIFFLAGS, &mut r, "SIOCGIFFLAGS")?;
    let flags = r.short() | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    r.set_short(flags);
    ioctl(
        sock,
        libc::SIOCSIFFLAGS,
        &mut r,
        &format!("bringing {name} up"),
    )
}

/// Runs `f` on a fresh thread inside a fresh anonymous network namespace
/// (loopback up, IPv6 off so the path carries only the run's traffic) and
/// returns the namespace's descriptor with `f`'s result.
pub fn with_new_netns<T: Send>(f: impl FnOnce() -> Result<T> + Send) -> Result<(OwnedFd, T)> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("sockscope-netns".into())
            .spawn_scoped(s, || {
                // SAFETY: unshare of this thread's network namespace only.
                if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error()).context(
                        "unshare(CLONE_NEWNET): making a network namespace needs root \
                         (CAP_SYS_ADMIN)",
                    );
                }
                let ns = File::open("/proc/thread-self/ns/net")
                    .context("opening /proc/thread-self/ns/net")?;
                let sock = ctl_socket()?;
                up(sock.as_raw_fd(), "lo")?;
                // Absent where IPv6 is compiled out: nothing to turn off.
                for f in ["all", "default"] {
                    if let Ok(mut w) =
                        File::create(format!("/proc/sys/net/ipv6/conf/{f}/disable_ipv6"))
                    {
                        let _ = w.write_all(b"1");
                    }
                }
                let v = f()?;
                Ok((OwnedFd::from(ns), v))
            })
            .context("starting a thread to make a network namespace")?
            .join()
            .unwrap_or_else(|_| bail!("the namespace thread panicked"))
    })
}

/// Moves the calling thread into the namespace `ns` (threads it starts
/// afterwards are born there).
pub fn enter(ns: RawFd) -> Result<()> {
    // SAFETY: setns on the calling thread with an open nsfs descriptor.
    if unsafe { libc::setns(ns, libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).context("setns into the path's namespace");
    }
    Ok(())
}

/// Opens a TUN device `name` (IFF_TUN | IFF_NO_PI, non-blocking) in the
/// calling thread's namespace, gives it `local` with point-to-point peer
/// `peer`, and brings it up. The device lives as long as the descriptor.
pub fn open_tun(name: &str, local: Ipv4Addr, peer: Ipv4Addr) -> Result<OwnedFd> {
    // SAFETY: plain open(2) of a C string; a returned descriptor is ours.
    let fd = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context(
            "opening /dev/net/tun (the delayline backend needs the TUN driver, \
             CONFIG_TUN / module tun)",
        );
    }
    // SAFETY: fresh descriptor.
    let tun = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut r = IfReq::new(name)?;
    r.set_short((libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short);
    ioctl(
        tun.as_raw_fd(),
        libc::TUNSETIFF as libc::c_ulong,
        &mut r,
        &format!("TUNSETIFF {name}"),
    )?;
    let sock = ctl_socket()?;
    let s = sock.as_raw_fd();
    let mut a = IfReq::new(name)?;
    a.set_addr(local);
    ioctl(
        s,
        libc::SIOCSIFADDR,
        &mut a,
        &format!("address {local} on {name}"),
    )?;
    let mut d = IfReq::new(name)?;
    d.set_addr(peer);
    ioctl(
        s,
        libc::SIOCSIFDSTADDR,
        &mut d,
        &format!("peer {peer} on {name}"),
    )?;
    up(s, name)?;
    Ok(tun)
}
