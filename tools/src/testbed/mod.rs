//! Builds a topology out of network namespaces and veth pairs, runs processes inside
//! them, and removes everything it made — on drop, on `testbed down`, and after a crash
//! (a state file names what was made and by whom).
//!
//! Nothing is created in the root namespace: each veth pair is created with both ends
//! directly in their namespaces, and addresses only ever go inside them.

pub use pfctestkit::topology;

pub mod ovs;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use topology::{Interface, TestbedTopology, Topology};

/// The standard MTU a testbed needs for `size`-byte frames on the wire (FCS included,
/// untagged): 1500, RoCE's 4200, 9000, or the largest the switch carries.
pub fn mtu_for(size: usize) -> u32 {
    let max = afxdp::frame_size::MAX_MTU;
    [1500, 4200, 9000, max].into_iter().find(|&m| size <= m as usize + 18).unwrap_or(max)
}

/// `topology` with every link at `mtu` (links left at the kernel's 1500 when that is it).
pub fn at_mtu(mut topology: Topology, mtu: u32) -> Topology {
    if mtu != 1500 {
        for link in &mut topology.links {
            link.mtu = Some(mtu);
        }
    }
    topology
}

/// The directory under which testbeds record what they created (one state file each)
/// and keep their work directories: under /run where it exists (it goes with a reboot,
/// as the namespaces do), else the temporary directory.
pub fn state_dir() -> PathBuf {
    let run = Path::new("/run");
    if run.is_dir() { run } else { Path::new("/tmp") }.join("pfcswitch-testbed")
}
/// Every namespace a testbed creates starts with this.
pub const NETNS_PREFIX: &str = "pfcs-";

#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error(transparent)]
    Topology(#[from] topology::TopologyError),
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("running `{command}`: {source}")]
    Spawn { command: String, source: std::io::Error },
    #[error("testbed name {0:?}: use 1-32 letters, digits or '-'")]
    BadName(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("no interface {iface} on node {node}")]
    NoInterface { node: String, iface: String },
    #[error("no node {0} in this testbed")]
    NoNode(String),
    #[error("Open vSwitch: {0}")]
    Ovs(String),
    #[error("a testbed named {0} exists already (`pfctools testbed down {0}` removes it)")]
    Exists(String),
    #[error("namespace {ns} exists already{owner}: testbed {name} would share it (pick another name)")]
    NamespaceTaken { name: String, ns: String, owner: String },
    #[error("{0} is not a directory of this user's; refusing to keep testbed state there")]
    UnsafeStateDir(String),
    #[error("the state file of testbed {name} names {what}, which is not one of its own namespaces (pfcs-{name}-NODE); nothing was removed")]
    ForeignState { name: String, what: String },
}

/// A testbed name becomes part of a path and of namespace names: 1-32 letters, digits or
/// '-', so that neither can reach outside what the testbed owns.
fn check_name(name: &str) -> Result<(), TestbedError> {
    if name.is_empty() || name.len() > 32 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(TestbedError::BadName(name.to_string()));
    }
    Ok(())
}

/// What a testbed created, as saved in its state file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    pub name: String,
    pub owner_pid: u32,
    pub namespaces: Vec<String>,
}

impl State {
    /// Whether this file may be acted on as testbed `name`'s: it names that testbed, and
    /// only namespaces of that testbed's form (`down` kills every process in them, so a
    /// file that was edited or planted must not reach any other namespace).
    fn check(&self, name: &str) -> Result<(), TestbedError> {
        let foreign = |what: String| TestbedError::ForeignState { name: name.to_string(), what };
        if self.name != name {
            return Err(foreign(format!("the testbed {:?}", self.name)));
        }
        let prefix = format!("{NETNS_PREFIX}{name}-");
        for ns in &self.namespaces {
            let node = ns.strip_prefix(&prefix).unwrap_or_default();
            if node.is_empty() || node.len() > 24 || !node.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(foreign(format!("namespace {ns:?}")));
            }
        }
        Ok(())
    }
}

/// A live testbed. Dropping it removes it.
#[derive(Debug)]
pub struct Testbed {
    name: String,
    topology: Topology,
    interfaces: Vec<Interface>,
    namespaces: BTreeMap<String, String>,
    work_dir: PathBuf,
    /// The namespaces this testbed created itself: only those are ever removed.
    created: Vec<String>,
    /// Whether it made `work_dir` (one found there is not removed).
    made_work_dir: bool,
    removed: bool,
    /// Where its processes run unless a caller places one itself ([`Testbed::spawn`]).
    processes: Placement,
}

/// Runs `ip` (or another command) and returns stdout, or its stderr as the error.
pub fn run(program: &str, args: &[&str]) -> Result<String, TestbedError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| TestbedError::Spawn { command: command.clone(), source })?;
    if !out.status.success() {
        return Err(TestbedError::Command { command, stderr: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn state_path(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.json"))
}

fn work_dir_of(name: &str) -> PathBuf {
    state_dir().join(name)
}

/// Creates the state directory 0700, or checks that the one there is a real directory
/// of ours that nobody else can write to.
fn ensure_state_dir() -> Result<PathBuf, TestbedError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = state_dir();
    let io = |source| TestbedError::Io { what: dir.display().to_string(), source };
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => return Ok(dir),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    let meta = fs::symlink_metadata(&dir).map_err(io)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(TestbedError::UnsafeStateDir(dir.display().to_string()));
    }
    if meta.mode() & 0o077 != 0 {
        // Ours, from a version that made it 0755: tightened.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(io)?;
    }
    Ok(dir)
}

/// Network namespaces that exist now.
pub fn existing_namespaces() -> Result<Vec<String>, TestbedError> {
    let out = run("ip", &["netns", "list"])?;
    Ok(out.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect())
}

/// A testbed name unique to this process and call: "<tag>-<pid>-<n>".
pub fn unique_name(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!("{tag}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

impl Testbed {
    /// Creates the namespaces, links, MACs and addresses of `topology`. Namespaces are
    /// named "pfcs-<name>-<node>". On error, whatever was made is removed.
    pub fn up(name: &str, topology: Topology) -> Result<Testbed, TestbedError> {
        check_name(name)?;
        let interfaces = topology.interfaces()?;
        let namespaces: BTreeMap<String, String> =
            topology.node_names().map(|n| (n.to_string(), format!("{NETNS_PREFIX}{name}-{n}"))).collect();
        ensure_state_dir()?;
        // The state file is created, never overwritten: two testbeds of one name cannot both
        // start, and from here on a crash leaves a file that `down` can use.
        let path = state_path(name);
        fs::OpenOptions::new().write(true).create_new(true).open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => TestbedError::Exists(name.to_string()),
            _ => TestbedError::Io { what: path.display().to_string(), source: e },
        })?;
        let work_dir = work_dir_of(name);
        let mut tb = Testbed {
            name: name.to_string(),
            topology,
            interfaces,
            namespaces,
            work_dir,
            created: Vec::new(),
            made_work_dir: false,
            removed: false,
            processes: Placement::default(),
        };
        if let Err(e) = tb.claim().and_then(|()| tb.build()) {
            tb.down();
            return Err(e);
        }
        Ok(tb)
    }

    /// Makes the work directory (fresh, 0700) and checks that no namespace this testbed
    /// would make exists already or belongs to another testbed ("a" with node "b-c" and
    /// "a-b" with node "c" both give "pfcs-a-b-c").
    fn claim(&mut self) -> Result<(), TestbedError> {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new().mode(0o700).create(&self.work_dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => TestbedError::Exists(self.name.clone()),
            _ => TestbedError::Io { what: self.work_dir.display().to_string(), source: e },
        })?;
        self.made_work_dir = true;
        let existing = existing_namespaces()?;
        let others: Vec<State> = list().into_iter().filter(|s| s.name != self.name).collect();
        for ns in self.namespaces.values() {
            let owner = others.iter().find(|s| s.namespaces.contains(ns));
            if owner.is_some() || existing.contains(ns) {
                return Err(TestbedError::NamespaceTaken {
                    name: self.name.clone(),
                    ns: ns.clone(),
                    owner: owner.map_or(String::new(), |s| format!(" (testbed {})", s.name)),
                });
            }
        }
        self.save_state(std::process::id())
    }

    /// Records what this testbed made so far (and who owns it: 0 once kept on purpose).
    fn save_state(&self, owner_pid: u32) -> Result<(), TestbedError> {
        let state = State { name: self.name.clone(), owner_pid, namespaces: self.created.clone() };
        let path = state_path(&self.name);
        fs::write(&path, serde_json::to_string_pretty(&state).expect("state serializes"))
            .map_err(|source| TestbedError::Io { what: path.display().to_string(), source })
    }

    fn build(&mut self) -> Result<(), TestbedError> {
        let namespaces: Vec<String> = self.namespaces.values().cloned().collect();
        for ns in &namespaces {
            // Recorded before it exists: a crash between the two leaves a name `down`
            // finds nothing behind, never a namespace no record names.
            self.created.push(ns.clone());
            self.save_state(std::process::id())?;
            if let Err(e) = run("ip", &["netns", "add", ns]) {
                // Not ours after all (made by someone else since the check).
                self.created.pop();
                return Err(e);
            }
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        for pair in self.interfaces.chunks(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let (na, nb) = (self.ns(&a.node)?, self.ns(&b.node)?);
            let queues = a.queues.unwrap_or(1).to_string();
            let q = ["numtxqueues", queues.as_str(), "numrxqueues", queues.as_str()];
            let mut args = vec!["link", "add", "name", &a.name, "netns", &na];
            args.extend(q);
            args.extend(["type", "veth", "peer", "name", &b.name, "netns", &nb]);
            args.extend(q);
            run("ip", &args)?;
        }
        for i in &self.interfaces {
            let ns = self.ns(&i.node)?;
            if !self.topology.ipv6 {
                let key = format!("net.ipv6.conf.{}.disable_ipv6=1", i.name);
                run("ip", &["netns", "exec", &ns, "sysctl", "-q", "-w", &key])?;
            }
            run("ip", &["-n", &ns, "link", "set", "dev", &i.name, "address", &i.mac.to_string()])?;
            if let Some(mtu) = i.mtu {
                run("ip", &["-n", &ns, "link", "set", "dev", &i.name, "mtu", &mtu.to_string()])?;
            }
            if let Some(addr) = &i.addr {
                run("ip", &["-n", &ns, "addr", "add", addr, "dev", &i.name])?;
            }
            if self.topology.hosts.iter().any(|h| h.name == i.node) {
                // A veth leaves the transport checksum of the kernel's TCP and UDP to
                // "hardware" that never comes when an XDP program redirects the frame to
                // an AF_XDP socket: the switch would forward it unfinished and the other
                // host drop it. Hosts therefore checksum in software.
                run("ip", &["netns", "exec", &ns, "ethtool", "-K", &i.name, "tx", "off"])?;
            }
            run("ip", &["-n", &ns, "link", "set", "dev", &i.name, "up"])?;
        }
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The namespace of `node`.
    pub fn ns(&self, node: &str) -> Result<String, TestbedError> {
        self.namespaces.get(node).cloned().ok_or_else(|| TestbedError::NoNode(node.to_string()))
    }

    /// Interfaces of `node`, in link order.
    pub fn interfaces_of(&self, node: &str) -> Vec<&Interface> {
        self.interfaces.iter().filter(|i| i.node == node).collect()
    }

    pub fn interface(&self, node: &str, iface: &str) -> Result<&Interface, TestbedError> {
        self.interfaces
            .iter()
            .find(|i| i.node == node && i.name == iface)
            .ok_or_else(|| TestbedError::NoInterface { node: node.to_string(), iface: iface.to_string() })
    }

    /// The first interface of a host (hosts usually have one).
    pub fn host_iface(&self, node: &str) -> Result<&Interface, TestbedError> {
        self.interfaces_of(node).into_iter().next().ok_or_else(|| TestbedError::NoNode(node.to_string()))
    }

    /// A scratch directory for this testbed's files (configs, logs), removed with it.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// Runs a command inside `node`'s namespace and waits for it.
    pub fn exec(&self, node: &str, args: &[&str]) -> Result<String, TestbedError> {
        let ns = self.ns(node)?;
        let mut full = vec!["netns", "exec", ns.as_str()];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// The testbed, whose processes run as `placement` says wherever their caller does
    /// not place them itself: a test that judges timing raises them all at once
    /// ([`Placement::raised`]).
    pub fn with_processes(mut self, placement: Placement) -> Testbed {
        self.processes = placement;
        self
    }

    /// Where the testbed's processes run unless their caller places them.
    pub fn processes(&self) -> &Placement {
        &self.processes
    }

    /// Starts a command inside `node`'s namespace, placed as [`Testbed::processes`] says;
    /// its output goes to files in the work directory. The process is stopped when the
    /// handle is dropped.
    pub fn spawn<S: AsRef<str>>(&self, node: &str, label: &str, args: &[S]) -> Result<Proc, TestbedError> {
        self.spawn_on(node, label, &self.processes, args)
    }

    /// [`Testbed::spawn`], placed as `placement` says (its CPUs and its nice value).
    pub fn spawn_on<S: AsRef<str>>(
        &self,
        node: &str,
        label: &str,
        placement: &Placement,
        args: &[S],
    ) -> Result<Proc, TestbedError> {
        let ns = self.ns(node)?;
        let stdout_path = self.work_dir.join(format!("{label}.out"));
        let stderr_path = self.work_dir.join(format!("{label}.err"));
        let io = |what: &Path| {
            let what = what.display().to_string();
            move |source| TestbedError::Io { what, source }
        };
        let stdout = fs::File::create(&stdout_path).map_err(io(&stdout_path))?;
        let stderr = fs::File::create(&stderr_path).map_err(io(&stderr_path))?;
        let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        let command = format!("[{node}] {}", args.join(" "));
        let mut cmd = match &placement.cpus {
            Some(list) => {
                let mut c = Command::new("taskset");
                c.args(["-c", list, "ip"]);
                c
            }
            None => Command::new("ip"),
        };
        let (nice, own_session) = (placement.nice, placement.own_session);
        // The autogroup's value as the text the kernel reads, made here: the child may
        // read it but not allocate.
        let autogroup_nice = nice.filter(|_| own_session).map(|n| n.to_string());
        let parent = std::process::id() as libc::pid_t;
        if nice.is_some() || own_session {
            // An absolute value (the `nice` command adds to the caller's); what the child
            // execs inherits it, and its session.
            // SAFETY: setpriority, setsid, prctl, getppid, open, write and close are
            // async-signal-safe and touch no memory of ours.
            unsafe {
                cmd.pre_exec(move || {
                    if let Some(nice) = nice {
                        if libc::setpriority(libc::PRIO_PROCESS, 0, nice) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    if own_session {
                        if libc::setsid() < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        // Out of the caller's process group, a Ctrl-C at the terminal no
                        // longer reaches it: it is told to stop when its parent goes
                        // instead (a parent gone already is found by getppid).
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        if libc::getppid() != parent {
                            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                        }
                        if let Some(text) = &autogroup_nice {
                            raise_own_autogroup(text.as_bytes());
                        }
                    }
                    Ok(())
                });
            }
        }
        let child = cmd
            .args(["netns", "exec", &ns])
            .args(&args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|source| TestbedError::Spawn { command: command.clone(), source })?;
        Ok(Proc { child: Some(child), command, stdout_path, stderr_path })
    }

    /// Runs `f` on a new thread that has joined `node`'s network namespace (setns moves
    /// only the calling thread, so the caller's threads stay where they are): a client of
    /// something listening in the node needs no program of its own there.
    pub fn thread_in<T: Send + 'static>(
        &self,
        node: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<std::thread::JoinHandle<T>, TestbedError> {
        use std::os::fd::AsRawFd;
        let ns_path = PathBuf::from(format!("/run/netns/{}", self.ns(node)?));
        let ns = fs::File::open(&ns_path)
            .map_err(|source| TestbedError::Io { what: ns_path.display().to_string(), source })?;
        Ok(std::thread::spawn(move || {
            // SAFETY: setns on this thread with a namespace descriptor held open.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {}: {}", ns_path.display(), std::io::Error::last_os_error());
            drop(ns);
            f()
        }))
    }

    /// Turns `node` into a Linux bridge over all its interfaces (the reference switch of
    /// the benchmarks).
    pub fn make_linux_bridge(&self, node: &str) -> Result<(), TestbedError> {
        let ns = self.ns(node)?;
        run("ip", &["-n", &ns, "link", "add", "br0", "type", "bridge"])?;
        // Without this, a bridge hands frames to iptables and drops malformed IPv4.
        let _ = run("ip", &["netns", "exec", &ns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=0"]);
        for i in self.interfaces_of(node) {
            run("ip", &["-n", &ns, "link", "set", "dev", &i.name, "master", "br0"])?;
        }
        run("ip", &["-n", &ns, "link", "set", "br0", "up"])?;
        Ok(())
    }

    /// Leaves the testbed in place after this process exits, until `testbed down NAME`.
    pub fn keep(mut self) -> Result<(), TestbedError> {
        self.removed = true;
        self.save_state(0)
    }

    /// Removes every namespace (and with them the veths) and the state file. Idempotent.
    pub fn down(&mut self) {
        if self.removed {
            return;
        }
        self.removed = true;
        remove_namespaces(self.created.iter());
        let _ = fs::remove_file(state_path(&self.name));
        if self.made_work_dir {
            let _ = fs::remove_dir_all(&self.work_dir);
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.down();
    }
}

/// Deletes namespaces, killing whatever still runs inside them first (a namespace with
/// live processes would outlive its name).
pub fn remove_namespaces<'a>(namespaces: impl Iterator<Item = &'a String>) {
    for ns in namespaces {
        for pid in namespace_pids(ns) {
            // SAFETY: plain kill(2).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = run("ip", &["netns", "del", ns]);
    }
}

/// The processes running in namespace `ns` (none if it does not exist).
pub fn namespace_pids(ns: &str) -> Vec<i32> {
    run("ip", &["netns", "pids", ns])
        .map_or(Vec::new(), |out| out.split_whitespace().filter_map(|p| p.parse().ok()).collect())
}

/// Removes the testbed `name` from its state file (after a crash, or from another shell).
/// The name is checked as `up` checks it, the state directory as `up` makes it, and the
/// file's namespaces against the name before anything is removed.
pub fn down_by_name(name: &str) -> Result<State, TestbedError> {
    check_name(name)?;
    ensure_state_dir()?;
    let path = state_path(name);
    let text =
        fs::read_to_string(&path).map_err(|source| TestbedError::Io { what: path.display().to_string(), source })?;
    let state: State = serde_json::from_str(&text)
        .map_err(|e| TestbedError::Io { what: path.display().to_string(), source: std::io::Error::other(e) })?;
    state.check(name)?;
    remove_namespaces(state.namespaces.iter());
    let _ = fs::remove_file(&path);
    let _ = fs::remove_dir_all(work_dir_of(name));
    Ok(state)
}

/// Removes every testbed whose owning process is gone; returns their names. Testbeds
/// kept on purpose (`testbed up` from the command line, owner 0) stay.
pub fn clean_stale() -> Vec<String> {
    remove_where(|s| s.owner_pid != 0 && !Path::new(&format!("/proc/{}", s.owner_pid)).exists())
}

/// Removes every testbed this process made and still owns; returns their names. For a
/// process a signal ends: its testbeds' `Drop` never runs.
pub fn clean_own() -> Vec<String> {
    let me = std::process::id();
    remove_where(|s| s.owner_pid == me)
}

/// Removes the testbeds whose state `which` picks; returns the names of those removed.
fn remove_where(which: impl Fn(&State) -> bool) -> Vec<String> {
    list().into_iter().filter(|s| which(s)).filter(|s| down_by_name(&s.name).is_ok()).map(|s| s.name).collect()
}

/// Testbeds on this machine, from their state files.
pub fn list() -> Vec<State> {
    let Ok(dir) = fs::read_dir(state_dir()) else { return Vec::new() };
    dir.flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| fs::read_to_string(e.path()).ok())
        .filter_map(|t| serde_json::from_str(&t).ok())
        .collect()
}

/// Where a testbed process runs and how eagerly: the CPUs it may use and its nice value.
/// Timing-sensitive runs raise their processes above the machine's ordinary ones: beside
/// one busy process, the scheduler otherwise shares a CPU half and half between it and
/// the switch or the sender, in slices of milliseconds (docs/notes/measuring.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// A taskset list such as "0" or "0-2"; any CPU when `None`.
    pub cpus: Option<String>,
    /// The nice value (-20..19); the caller's when `None`.
    pub nice: Option<i32>,
    /// In a session of its own (setsid), as a daemon or a service is. With autogroup
    /// scheduling (`kernel.sched_autogroup_enabled`, on in Debian's kernels) the kernel
    /// shares CPU time between sessions first and between a session's processes after:
    /// a switch in the caller's session shares one session's time with the sender and
    /// the sink started beside it, where Open vSwitch, which detaches, has a session of
    /// its own. With a `nice` value, the new session's autogroup gets it too, so that
    /// the value ranks the process against every other session's processes, not only
    /// against its own (where it is alone). Out of the caller's process group, a Ctrl-C
    /// no longer reaches it: it is sent SIGTERM when the thread that started it ends
    /// (`PR_SET_PDEATHSIG`), so start it from a thread that lives as long as it should.
    pub own_session: bool,
}

/// Gives the calling process's autogroup the nice value written as `text`
/// (`/proc/self/autogroup`, sched(7)), between fork and exec: only async-signal-safe
/// calls. A kernel without autogroup has no such file, and one with it switched off
/// ignores the value; either way the process keeps its own nice value, so a failure here
/// is no reason to refuse the spawn.
fn raise_own_autogroup(text: &[u8]) {
    // SAFETY: a NUL-terminated path, a buffer of `text.len()` bytes, and a descriptor
    // closed before return.
    unsafe {
        let fd = libc::open(c"/proc/self/autogroup".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, text.as_ptr().cast(), text.len());
            libc::close(fd);
        }
    }
}

/// The nice value of a timing-sensitive run's processes. Beside one busy process on two
/// cores, the scheduler put it on the switch's CPU and gave it half: the switch waited
/// 200 ms for its CPU in 400 ms of traffic, in stalls of 5.5 ms, and every headroom run
/// at a long delay was disturbed; at -15 the busy process gets a few percent and 6 runs
/// in 6 were not (docs/notes/measuring.md). Against a busy process in another session it counts
/// only as its session's (autogroup's) nice value, which the processes get with theirs
/// ([`Placement::own_session`]).
pub const TIMING_NICE: i32 = -15;

impl Placement {
    /// A timing-sensitive process: at [`TIMING_NICE`], in a session of its own whose
    /// autogroup gets that value too (in the caller's session the value ranked it only
    /// against the session's other processes), on `cpus` (any when `None`).
    pub fn raised(cpus: Option<String>) -> Placement {
        Placement { cpus, nice: Some(TIMING_NICE), own_session: true }
    }
}

/// A process started in a namespace. Dropping it terminates it.
#[derive(Debug)]
pub struct Proc {
    child: Option<Child>,
    command: String,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
}

/// What a finished process left.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn command(&self) -> &str {
        &self.command
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// What the process has written to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    pub fn stdout_so_far(&self) -> String {
        fs::read_to_string(&self.stdout_path).unwrap_or_default()
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: i32) {
        if let Some(c) = &self.child {
            // SAFETY: plain kill(2) on our child.
            unsafe { libc::kill(c.id() as i32, signal) };
        }
    }

    /// Waits up to `timeout` for the process to exit by itself; kills it after that.
    pub fn wait(mut self, timeout: Duration) -> Finished {
        let mut child = self.child.take().expect("a Proc has its child until it is waited for");
        let deadline = Instant::now() + timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = child.kill();
                    break child.wait().expect("waiting for a killed child");
                }
            }
        };
        Finished { status, stdout: self.stdout_so_far(), stderr: self.stderr_so_far() }
    }

    /// SIGTERM, then up to `grace` for a clean exit, then SIGKILL.
    pub fn stop(self, grace: Duration) -> Finished {
        self.signal(libc::SIGTERM);
        self.wait(grace)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: plain kill(2) on our child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_refuses_a_name_that_up_would_refuse_before_reading_anything() {
        // A planted state file outside the state directory, naming another namespace.
        let planted = std::env::temp_dir().join(format!("pfcs-planted-{}.json", std::process::id()));
        let state = State { name: "x".into(), owner_pid: 0, namespaces: vec!["pfcs-victim-h1".into()] };
        fs::write(&planted, serde_json::to_string(&state).unwrap()).unwrap();
        let reach = format!("../../../..{}", planted.with_extension("").display());
        for name in [reach.as_str(), "a/b", "", "a b", &"x".repeat(33)] {
            assert!(matches!(down_by_name(name), Err(TestbedError::BadName(_))), "{name:?}");
        }
        assert!(planted.exists(), "nothing was acted on");
        fs::remove_file(planted).unwrap();
    }

    #[test]
    fn a_state_file_may_name_only_its_own_testbed_and_namespaces() {
        let state = |name: &str, ns: &[&str]| State {
            name: name.into(),
            owner_pid: 0,
            namespaces: ns.iter().map(|s| s.to_string()).collect(),
        };
        assert!(state("lab", &["pfcs-lab-h1", "pfcs-lab-sw-2"]).check("lab").is_ok());
        for (file, what) in [
            (state("other", &["pfcs-lab-h1"]), "the testbed \"other\""),
            (state("lab", &["pfcs-lab-h1", "default"]), "namespace \"default\""),
            (state("lab", &["pfcs-labx-h1"]), "namespace \"pfcs-labx-h1\""),
            (state("lab", &["pfcs-lab-"]), "namespace \"pfcs-lab-\""),
            (state("lab", &["pfcs-lab-h1/../x"]), "namespace \"pfcs-lab-h1/../x\""),
        ] {
            let err = file.check("lab").unwrap_err().to_string();
            assert!(err.contains(what) && err.contains("nothing was removed"), "{err}");
        }
    }
}
