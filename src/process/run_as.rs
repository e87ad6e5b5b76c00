//! Who a launched process runs as: `--user`, or the user who invoked sudo
//! (sockscope itself runs as root). The syscall tracer's launch and
//! `process::target` switch to it before execve.

use std::ffi::CString;

use anyhow::{Context, Result};
use nix::unistd::{Gid, Uid, User, getgrouplist};

use crate::error;

/// Identity the child switches to before execve.
#[derive(Clone, Debug)]
pub struct RunAs {
    /// User name (for messages).
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

fn run_as_user(user: User, gid: Option<u32>) -> Result<RunAs> {
    let gid = gid.unwrap_or(user.gid.as_raw());
    let cname = CString::new(user.name.clone()).context("user name contains NUL")?;
    let groups = getgrouplist(&cname, Gid::from_raw(gid))
        .with_context(|| format!("listing the groups of {}", user.name))?
        .into_iter()
        .map(Gid::as_raw)
        .collect();
    Ok(RunAs {
        name: user.name,
        uid: user.uid.as_raw(),
        gid,
        groups,
    })
}

/// Decides who the command runs as: `--user` if given; else, when sockscope
/// itself runs as root through sudo, the user who invoked sudo (unless
/// `as_root`); else unchanged.
pub fn resolve(user: Option<&str>, as_root: bool) -> Result<Option<RunAs>> {
    if let Some(u) = user {
        let found = match u.parse::<u32>() {
            Ok(uid) => User::from_uid(Uid::from_raw(uid)),
            Err(_) => User::from_name(u),
        }
        .with_context(|| format!("looking up user {u}"))?;
        let Some(found) = found else {
            return Err(error::usage(format!("--user {u}: no such user")));
        };
        return run_as_user(found, None).map(Some);
    }
    if as_root || !Uid::effective().is_root() {
        return Ok(None);
    }
    let (Some(uid), gid) = (
        std::env::var("SUDO_UID")
            .ok()
            .and_then(|v| v.parse::<u32>().ok()),
        std::env::var("SUDO_GID")
            .ok()
            .and_then(|v| v.parse::<u32>().ok()),
    ) else {
        return Ok(None);
    };
    if uid == 0 {
        return Ok(None);
    }
    let user = User::from_uid(Uid::from_raw(uid))
        .context("looking up SUDO_UID")?
        .with_context(|| format!("SUDO_UID {uid} names no user"))?;
    run_as_user(user, gid).map(Some)
}
