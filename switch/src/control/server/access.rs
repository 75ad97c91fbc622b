//! Who may use the socket: its directory made or checked, the socket bound with its
//! mode in a private directory and renamed into place, and every connection's peer
//! credentials against the owner, root and the configured group.

use super::*;

/// Who may use the control socket besides its owner and root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SocketAccess {
    /// A group whose members may connect too (socket mode 0660).
    pub group: Option<(String, u32)>,
}

impl SocketAccess {
    /// The owner (and root) only: mode 0600.
    pub fn owner_only() -> SocketAccess {
        SocketAccess::default()
    }

    /// Also the members of group `name`, which must exist.
    pub fn group(name: &str) -> Result<SocketAccess, ControlError> {
        let c = std::ffi::CString::new(name).map_err(|_| ControlError::NoGroup(name.to_string()))?;
        // SAFETY: getgrnam returns a pointer into static storage or null; we read one
        // field at once, before any other call could overwrite it.
        let gr = unsafe { libc::getgrnam(c.as_ptr()) };
        if gr.is_null() {
            return Err(ControlError::NoGroup(name.to_string()));
        }
        // SAFETY: non-null, as checked.
        let gid = unsafe { (*gr).gr_gid };
        Ok(SocketAccess { group: Some((name.to_string(), gid)) })
    }

    pub(super) fn mode(&self) -> u32 {
        if self.group.is_some() {
            0o660
        } else {
            0o600
        }
    }

    /// Whether a peer with these credentials may talk to the switch.
    pub(super) fn allows(&self, peer: &PeerCred) -> bool {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        peer.uid == 0
            || peer.uid == me
            || self.group.as_ref().is_some_and(|(_, gid)| peer.gid == *gid || in_group(peer.pid, *gid))
    }
}

/// Makes the socket's directory (0755, so that members of `--socket-group` can reach the
/// socket) or checks the one there: a real directory (not a symlink), owned by us or root,
/// and writable by no one else unless sticky (as /tmp is: there no one else may rename or
/// remove what we create). Anything else would let another user replace the socket.
pub(super) fn ensure_socket_dir(dir: &Path) -> Result<(), ControlError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let unsafe_dir = |why: &str| ControlError::UnsafeDir { path: dir.display().to_string(), why: why.to_string() };
    let io = |source| ControlError::Io { path: dir.display().to_string(), source };
    match std::fs::DirBuilder::new().recursive(true).mode(0o755).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io)?;
    if meta.file_type().is_symlink() {
        return Err(unsafe_dir("is a symbolic link"));
    }
    if !meta.is_dir() {
        return Err(unsafe_dir("is not a directory"));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        return Err(unsafe_dir(&format!("belongs to uid {}, neither this user nor root", meta.uid())));
    }
    if meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0 {
        return Err(unsafe_dir(&format!("is writable by others (mode {:o}) and not sticky", meta.mode() & 0o7777)));
    }
    Ok(())
}

/// Binds the socket in a directory only we can enter, gives it its mode (and group) there,
/// then renames it to `path`: the path never names a socket with a looser mode, and no one
/// can swap what a chmod by path would act on.
///
/// The private directory's name is longer than the socket's, and a path to bind must fit
/// a sockaddr_un (107 bytes) where `path` alone may just fit: the bind goes through
/// `/proc/self/fd/N/`, N the private directory opened, whatever its own path's length.
/// (A netns test's socket of 79 bytes failed to bind at 113 through the directory.)
pub(super) fn bind_with_mode(path: &Path, dir: &Path, access: &SocketAccess) -> Result<UnixListener, ControlError> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::DirBuilderExt;
    let io = |source| ControlError::Io { path: path.display().to_string(), source };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let nonce = crate::sys::now().as_nanos();
    let private = dir.join(format!(".{name}.{}.{nonce}", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&private).map_err(io)?;
    let inside = private.join("socket");
    let bound = (|| {
        let opened = std::fs::File::open(&private)?;
        let listener = UnixListener::bind(format!("/proc/self/fd/{}/socket", opened.as_raw_fd()))?;
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(access.mode()))?;
        if let Some((_, gid)) = &access.group {
            std::os::unix::fs::chown(&inside, None, Some(*gid))?;
        }
        std::fs::rename(&inside, path)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_file(&inside);
    let _ = std::fs::remove_dir(&private);
    bound.map_err(io)
}

/// Who is at the other end of a Unix socket.
#[derive(Clone, Copy, Debug)]
pub(super) struct PeerCred {
    pub(super) pid: i32,
    pub(super) uid: u32,
    pub(super) gid: u32,
}

pub(super) fn peer_cred(stream: &UnixStream) -> std::io::Result<PeerCred> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(PeerCred { pid: cred.pid, uid: cred.uid, gid: cred.gid })
}

/// Whether process `pid` has `gid` among its supplementary groups.
pub(super) fn in_group(pid: i32, gid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .is_some_and(|groups| groups.split_whitespace().any(|g| g.parse() == Ok(gid)))
}
