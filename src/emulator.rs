//! Local Azure Table emulator: installs the pinned Azurite (npm) and runs its table service.
//!
//! Owns the Azurite child process for integration tests, `tabletop demo` and benchmarks: the
//! pinned install (`ensure_installed`), the free loopback port, readiness, the per-instance log
//! file, and making sure the child never outlives its owner.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The Azurite release pinned by `package.json` / `package-lock.json`.
pub const AZURITE_VERSION: &str = "3.37.0";
/// Azurite's well-known development account.
pub const DEV_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's well-known development account key (public, not a secret).
pub const DEV_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

const PACKAGE_JSON: &str = include_str!("../package.json");
const PACKAGE_LOCK: &str = include_str!("../package-lock.json");

/// How long Azurite may take from spawn to answering HTTP.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts with a fresh port when another process grabs ours between pick and listen.
const PORT_ATTEMPTS: usize = 5;
/// How long to wait for another process's install of the same directory.
const LOCK_TIMEOUT: Duration = Duration::from_secs(15 * 60);
const MIN_NODE_MAJOR: u32 = 18;
const TAIL_LINES: usize = 20;

#[cfg(windows)]
const NPM: &str = "npm.cmd";
#[cfg(not(windows))]
const NPM: &str = "npm";

/// Why the emulator could not be installed or started.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error(
        "tabletop needs Node.js {MIN_NODE_MAJOR}+ to run the local emulator; install it (e.g. apt-get install nodejs npm)"
    )]
    NodeNotFound,
    #[error(
        "tabletop needs Node.js {MIN_NODE_MAJOR}+ to run the local emulator, found {found}; upgrade it (see https://nodejs.org)"
    )]
    NodeTooOld { found: String },
    #[error(
        "npm was not found; tabletop uses it to install the Azurite emulator (install Node.js {MIN_NODE_MAJOR}+ with npm, e.g. apt-get install nodejs npm)"
    )]
    NpmNotFound,
    #[error("`npm ci` in {dir} failed ({status}); the first run needs the npm registry. npm said:\n{stderr_excerpt}")]
    NpmFailed {
        dir: PathBuf,
        status: String,
        stderr_excerpt: String,
    },
    #[error(
        "the Azurite install in {dir} is unusable ({problem}); delete {dir}/node_modules and try again"
    )]
    BadInstall { dir: PathBuf, problem: String },
    #[error(
        "timed out after {}s waiting for another process to finish installing Azurite in {dir}; if none is running, delete {lock}",
        LOCK_TIMEOUT.as_secs()
    )]
    LockTimeout { dir: PathBuf, lock: PathBuf },
    #[error("could not pick a free loopback port for Azurite: {0}")]
    PortPick(#[source] io::Error),
    #[error("Azurite could not bind a free port after {PORT_ATTEMPTS} attempts (ports kept being taken)")]
    PortsInUse,
    #[error("Azurite exited during startup ({status}); its last output:\n{log_tail}")]
    Exited { status: String, log_tail: String },
    #[error("Azurite did not become ready within {secs}s; its last output:\n{log_tail}")]
    NotReady { secs: u64, log_tail: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> EmulatorError {
    let what = what.into();
    move |source| EmulatorError::Io { what, source }
}

/// A running Azurite table service on a loopback port; killed on `stop` or drop.
#[derive(Debug)]
pub struct Emulator {
    child: Child,
    port: u16,
    log_path: PathBuf,
}

impl Emulator {
    /// Installs (if needed) into `install_dir` and starts Azurite's table service on a free
    /// loopback port, returning once it answers HTTP.
    pub fn start(install_dir: &Path) -> Result<Emulator, EmulatorError> {
        check_node()?;
        let main_js = ensure_installed(install_dir)?;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port()?;
            match launch(&main_js, install_dir, port)? {
                Launch::Ready(emulator) => return Ok(emulator),
                Launch::PortTaken => continue,
            }
        }
        Err(EmulatorError::PortsInUse)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT/devstoreaccount1` (path-style, as Azurite expects).
    pub fn table_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{DEV_ACCOUNT}", self.port)
    }

    pub fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};TableEndpoint={}",
            self.table_endpoint()
        )
    }

    /// Kills Azurite and waits for it (the same happens on drop).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        // Errors mean it already exited; nothing else to clean up (in-memory persistence).
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_file(&self.log_path);
    }
}

/// The per-user install dir for the demo: `<platform cache dir>/tabletop/azurite-<version>`.
pub fn user_install_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "tabletop")
        .map(|dirs| dirs.cache_dir().join(format!("azurite-{AZURITE_VERSION}")))
}

/// Ensures the pinned Azurite is installed in `dir` (running `npm ci` there if needed, with the
/// pinned `package.json` / `package-lock.json` written into `dir` when it lacks them) and
/// returns the path to the table service's `main.js`. Safe when processes race on one `dir`.
pub fn ensure_installed(dir: &Path) -> Result<PathBuf, EmulatorError> {
    let main_js = main_js_path(dir);
    if is_installed(dir) {
        return Ok(main_js);
    }
    fs::create_dir_all(dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
    let _lock = InstallLock::acquire(dir)?;
    // Another process may have finished the install while we waited for the lock.
    if is_installed(dir) {
        return Ok(main_js);
    }
    for (name, contents) in [
        ("package.json", PACKAGE_JSON),
        ("package-lock.json", PACKAGE_LOCK),
    ] {
        let path = dir.join(name);
        if !path.exists() {
            fs::write(&path, contents)
                .map_err(io_err(format!("cannot write {}", path.display())))?;
        }
    }
    run_npm_ci(dir)?;
    if !main_js.is_file() {
        return Err(EmulatorError::BadInstall {
            dir: dir.to_path_buf(),
            problem: format!("{} is missing after npm ci", main_js.display()),
        });
    }
    match installed_version(dir) {
        Some(v) if v == AZURITE_VERSION => Ok(main_js),
        found => Err(EmulatorError::BadInstall {
            dir: dir.to_path_buf(),
            problem: format!(
                "found azurite {}, expected {AZURITE_VERSION}; its package.json pins another version",
                found.as_deref().unwrap_or("(unknown)")
            ),
        }),
    }
}

fn main_js_path(dir: &Path) -> PathBuf {
    dir.join("node_modules/azurite/dist/src/table/main.js")
}

fn installed_version(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(dir.join("node_modules/azurite/package.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("version")?.as_str().map(str::to_owned)
}

/// Complete install of the pinned version: npm writes `node_modules/.package-lock.json` last,
/// so its presence tells a finished install from an interrupted one.
pub fn is_installed(dir: &Path) -> bool {
    main_js_path(dir).is_file()
        && dir.join("node_modules/.package-lock.json").is_file()
        && installed_version(dir).as_deref() == Some(AZURITE_VERSION)
}

fn run_npm_ci(dir: &Path) -> Result<(), EmulatorError> {
    let output = Command::new(NPM)
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .env("npm_config_update_notifier", "false")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => EmulatorError::NpmNotFound,
            _ => io_err(format!("cannot run npm in {}", dir.display()))(e),
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(EmulatorError::NpmFailed {
        dir: dir.to_path_buf(),
        status: output.status.to_string(),
        stderr_excerpt: excerpt(&String::from_utf8_lossy(&output.stderr)),
    })
}

fn check_node() -> Result<(), EmulatorError> {
    let output = Command::new("node")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => EmulatorError::NodeNotFound,
            _ => io_err("cannot run `node --version`")(e),
        })?;
    let found = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let major = found
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(m) if m >= MIN_NODE_MAJOR => Ok(()),
        _ => Err(EmulatorError::NodeTooOld { found }),
    }
}

/// Port that was free a moment ago; `launch` detects the rare steal and the caller retries.
fn free_port() -> Result<u16, EmulatorError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(EmulatorError::PortPick)?;
    let port = listener
        .local_addr()
        .map_err(EmulatorError::PortPick)?
        .port();
    Ok(port)
}

enum Launch {
    Ready(Emulator),
    PortTaken,
}

fn launch(main_js: &Path, cwd: &Path, port: u16) -> Result<Launch, EmulatorError> {
    let log_path = new_log_path();
    let log =
        File::create(&log_path).map_err(io_err(format!("cannot create {}", log_path.display())))?;
    let log_err = log
        .try_clone()
        .map_err(io_err(format!("cannot reopen {}", log_path.display())))?;
    let port_arg = port.to_string();
    let mut cmd = Command::new("node");
    cmd.arg(main_js)
        .args(["--tableHost", "127.0.0.1", "--tablePort", &port_arg])
        .args(["--inMemoryPersistence", "--disableTelemetry"])
        // cwd must be writable; with in-memory persistence Azurite writes nothing there.
        .current_dir(cwd)
        // A user's AZURITE_ACCOUNTS would disable the well-known dev account we advertise.
        .env_remove("AZURITE_ACCOUNTS")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    let child = match spawn_owned(cmd) {
        Ok(child) => child,
        Err(e) => {
            let _ = fs::remove_file(&log_path);
            return Err(match e.kind() {
                io::ErrorKind::NotFound => EmulatorError::NodeNotFound,
                _ => io_err("cannot start Azurite (node)")(e),
            });
        }
    };
    // From here on, Drop kills the child and removes the log on every early return.
    let mut emulator = Emulator {
        child,
        port,
        log_path,
    };
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = emulator.child.try_wait() {
            let log = read_log(&emulator.log_path);
            if log.contains("EADDRINUSE") {
                return Ok(Launch::PortTaken);
            }
            return Err(exited(status, &log));
        }
        // The log line proves *our* Azurite owns the port, not a thief answering on it.
        if read_log(&emulator.log_path).contains("successfully started") && answers_http(port) {
            // Owners that are never dropped (test statics) would leave the log behind; the
            // child keeps its open descriptor, and only startup failures needed the file.
            #[cfg(unix)]
            let _ = fs::remove_file(&emulator.log_path);
            return Ok(Launch::Ready(emulator));
        }
        if Instant::now() >= deadline {
            return Err(EmulatorError::NotReady {
                secs: READY_TIMEOUT.as_secs(),
                log_tail: tail_lines(&read_log(&emulator.log_path), TAIL_LINES),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn exited(status: ExitStatus, log: &str) -> EmulatorError {
    EmulatorError::Exited {
        status: status.to_string(),
        log_tail: tail_lines(log, TAIL_LINES),
    }
}

fn new_log_path() -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("tabletop-azurite-{}-{seq}.log", std::process::id()))
}

fn read_log(path: &Path) -> String {
    fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// npm's cause is in its first `npm error` lines (warnings and usage help bury it), and the
/// last line names its debug log, so keep those.
fn excerpt(text: &str) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let errors: Vec<&str> = all
        .iter()
        .copied()
        .filter(|l| l.starts_with("npm error") || l.starts_with("npm ERR!"))
        .collect();
    let lines = if errors.is_empty() { all } else { errors };
    if lines.len() <= TAIL_LINES {
        return lines.join("\n");
    }
    let head = lines[..TAIL_LINES - 2].join("\n");
    let tail = lines[lines.len() - 1];
    format!("{head}\n[...]\n{tail}")
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Any HTTP response to `GET /devstoreaccount1/Tables` (an unsigned request gets 403) means ready.
fn answers_http(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let timeout = Some(Duration::from_secs(2));
    if stream.set_read_timeout(timeout).is_err() || stream.set_write_timeout(timeout).is_err() {
        return false;
    }
    let request = format!(
        "GET /{DEV_ACCOUNT}/Tables HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 8];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
}

/// Spawns `cmd` so that the child is SIGKILLed when this process dies, even without `Drop`.
#[cfg(target_os = "linux")]
fn spawn_owned(mut cmd: Command) -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    use std::sync::mpsc;
    use std::sync::OnceLock;

    type Job = (Command, mpsc::Sender<io::Result<Child>>);
    // PDEATHSIG fires when the forking *thread* exits, so one never-ending thread forks them all.
    static SPAWNER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();

    let parent = std::process::id();
    // SAFETY: the closure only calls async-signal-safe functions (prctl, getppid) and does not
    // allocate (errors are built from raw OS codes).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The owner died before prctl took effect: its signal will never come.
            if libc::getppid() as u32 != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }

    let spawner = match SPAWNER.get() {
        Some(tx) => tx,
        None => {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("tabletop-emulator-spawner".into())
                .spawn(move || {
                    // Ends only if the sender is dropped, i.e. if another thread won the race below.
                    for (cmd, reply) in rx {
                        let mut cmd = cmd;
                        let _ = reply.send(cmd.spawn());
                    }
                })?;
            // A racing thread may have installed its spawner first; ours then exits unused.
            let _ = SPAWNER.set(tx);
            SPAWNER
                .get()
                .ok_or_else(|| io::Error::other("emulator spawner thread unavailable"))?
        }
    };
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("emulator spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("emulator spawner thread is gone"))?
}

/// Without PDEATHSIG the child is only killed by `Emulator`'s `Drop`.
#[cfg(not(target_os = "linux"))]
fn spawn_owned(mut cmd: Command) -> io::Result<Child> {
    cmd.spawn()
}

/// Exclusive right to run `npm ci` in one directory, across processes.
struct InstallLock {
    #[cfg(unix)]
    _file: File,
    #[cfg(not(unix))]
    path: PathBuf,
}

impl InstallLock {
    /// flock is released by the kernel when the holder exits, so a crashed install never
    /// leaves a stale lock; the lock file itself stays (deleting it would race).
    #[cfg(unix)]
    fn acquire(dir: &Path) -> Result<InstallLock, EmulatorError> {
        use std::os::unix::io::AsRawFd;
        let path = dir.join(".install.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err(format!("cannot open {}", path.display())))?;
        let deadline = Instant::now() + LOCK_TIMEOUT;
        loop {
            // SAFETY: flock on a file descriptor we own for the duration of the call.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(InstallLock { _file: file });
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::WouldBlock {
                return Err(io_err(format!("cannot lock {}", path.display()))(err));
            }
            if Instant::now() >= deadline {
                return Err(EmulatorError::LockTimeout {
                    dir: dir.to_path_buf(),
                    lock: path,
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Lock file created exclusively; one older than the timeout is a crashed holder's.
    #[cfg(not(unix))]
    fn acquire(dir: &Path) -> Result<InstallLock, EmulatorError> {
        let path = dir.join(".install.lock");
        let deadline = Instant::now() + LOCK_TIMEOUT;
        loop {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(_) => return Ok(InstallLock { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(format!("cannot create {}", path.display()))(e)),
            }
            let stale = fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > LOCK_TIMEOUT);
            if stale {
                let _ = fs::remove_file(&path);
                continue;
            }
            if Instant::now() >= deadline {
                return Err(EmulatorError::LockTimeout {
                    dir: dir.to_path_buf(),
                    lock: path,
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[cfg(not(unix))]
impl Drop for InstallLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_package_pins_the_version() {
        assert!(PACKAGE_JSON.contains(&format!("\"azurite\": \"{AZURITE_VERSION}\"")));
        let lock: serde_json::Value = serde_json::from_str(PACKAGE_LOCK).unwrap();
        assert_eq!(
            lock["packages"]["node_modules/azurite"]["version"],
            AZURITE_VERSION
        );
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail_lines("a", 5), "a");
    }

    #[test]
    fn excerpt_keeps_npm_errors_first_lines_and_log_path() {
        let mut out = String::from("npm warn noise\n");
        for i in 0..40 {
            out.push_str(&format!("npm error line{i}\n"));
        }
        let e = excerpt(&out);
        assert!(e.starts_with("npm error line0\n"));
        assert!(!e.contains("npm warn"));
        assert!(e.ends_with("[...]\nnpm error line39"));
        assert_eq!(excerpt("boom\n\nbang"), "boom\nbang");
    }

    #[test]
    fn user_install_dir_is_versioned() {
        if let Some(dir) = user_install_dir() {
            assert!(dir.ends_with(format!("azurite-{AZURITE_VERSION}")));
        }
    }
}
