//! The real `tabletop` console in a pseudo-terminal (120×40) against the shared Azurite: paging,
//! the filter bar and the entity view driven by keystrokes, and the terminal restored (main
//! screen, visible cursor, canonical mode with echo) after `q`, SIGTERM and SIGHUP.
#![cfg(unix)]

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, ExitStatus, MasterPty, PtySize};
use tabletop::azure::{BatchOp, EdmValue, Entity};

use crate::common::{client, fresh_table};
use crate::support;

const ROWS: u16 = 40;
const COLS: u16 = 120;
/// How long one step (a key and its effect on screen) may take.
const STEP: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(20);

const ENTER_ALT_SCREEN: &str = "\x1b[?1049h";
const LEAVE_ALT_SCREEN: &str = "\x1b[?1049l";
const HIDE_CURSOR: &str = "\x1b[?25l";
const SHOW_CURSOR: &str = "\x1b[?25h";

/// The console running in a pty; the child is killed on drop so a failed test never hangs.
struct Console {
    child: Box<dyn Child + Send + Sync>,
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    output: Arc<Mutex<Vec<u8>>>,
    output_ended: Arc<AtomicBool>,
    parser: vt100::Parser,
    parsed: usize,
    _config: tempfile::NamedTempFile,
}

impl Console {
    fn start() -> Console {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a pty");
        // An empty config: no user profiles, theme or keys.
        let config = tempfile::NamedTempFile::new().expect("temp config");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_tabletop"));
        cmd.args([
            "--connection-string",
            &support::azurite().connection_string(),
        ]);
        cmd.env("TABLETOP_CONFIG", config.path());
        cmd.env("TERM", "xterm-256color");
        cmd.env("NO_COLOR", "1");
        cmd.env_remove("AZURE_STORAGE_CONNECTION_STRING");
        let child = pair.slave.spawn_command(cmd).expect("spawn tabletop");
        // Only the child holds the slave: its exit ends the output stream.
        drop(pair.slave);

        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let output = Arc::new(Mutex::new(Vec::new()));
        let output_ended = Arc::new(AtomicBool::new(false));
        let (sink, ended) = (output.clone(), output_ended.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
            }
            ended.store(true, Ordering::SeqCst);
        });
        Console {
            child,
            master: pair.master,
            writer,
            output,
            output_ended,
            parser: vt100::Parser::new(ROWS, COLS, 0),
            parsed: 0,
            _config: config,
        }
    }

    /// The screen as the terminal shows it now.
    fn screen(&mut self) -> String {
        let out = self.output.lock().unwrap();
        self.parser.process(&out[self.parsed..]);
        self.parsed = out.len();
        drop(out);
        self.parser.screen().contents()
    }

    fn wait_for(&mut self, what: &str) -> String {
        self.wait_until(what, |s| s.contains(what))
    }

    fn wait_until(&mut self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + STEP;
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what:?}; the screen:\n{screen}");
            }
            std::thread::sleep(POLL);
        }
    }

    fn send(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).expect("write keys");
        self.writer.flush().expect("flush keys");
    }

    fn pid(&self) -> libc::pid_t {
        self.child.process_id().expect("child pid") as libc::pid_t
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + STEP;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                panic!("tabletop did not exit; the screen:\n{}", self.screen());
            }
            std::thread::sleep(POLL);
        }
    }

    /// Everything the console wrote, once the stream has ended (the child closed the pty).
    fn all_output(&mut self) -> String {
        let deadline = Instant::now() + STEP;
        while !self.output_ended.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the pty output never ended");
            std::thread::sleep(POLL);
        }
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// (ICANON, ECHO) of the pty's line discipline, shared by master and slave.
    fn canonical_and_echo(&self) -> (bool, bool) {
        let fd = self.master.as_raw_fd().expect("master fd");
        // SAFETY: tcgetattr only writes into the struct we own; fd is the open master.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::tcgetattr(fd, &mut t) };
        assert_eq!(rc, 0, "tcgetattr: {}", std::io::Error::last_os_error());
        (t.c_lflag & libc::ICANON != 0, t.c_lflag & libc::ECHO != 0)
    }

    /// Waits for the first frame and checks the console really took the terminal over, so
    /// the restoration checks afterwards mean something.
    fn wait_for_first_frame(&mut self) {
        self.wait_for("Tables");
        assert_eq!(
            self.canonical_and_echo(),
            (false, false),
            "the console runs in raw mode"
        );
        let out = String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned();
        assert!(
            out.contains(ENTER_ALT_SCREEN),
            "the console uses the alternate screen"
        );
    }

    /// The terminal is as the console found it: main screen, cursor shown, cooked mode.
    fn assert_restored(&mut self) {
        let out = self.all_output();
        let left = out
            .rfind(LEAVE_ALT_SCREEN)
            .expect("never left the alternate screen");
        assert!(
            out.rfind(ENTER_ALT_SCREEN)
                .is_some_and(|entered| entered < left),
            "the output ends inside the alternate screen"
        );
        let shown = out.rfind(SHOW_CURSOR).expect("never showed the cursor");
        assert!(
            out.rfind(HIDE_CURSOR).is_none_or(|hidden| hidden < shown),
            "the output ends with the cursor hidden"
        );
        assert_eq!(
            self.canonical_and_echo(),
            (true, true),
            "the pty is back in canonical mode with echo"
        );
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A table of 2,500 entities: 25 partitions (p00…p24) of 100 rows.
fn table_of_2500() -> String {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let c = client();
        let table = fresh_table(&c, "pty").await;
        for p in 0..25 {
            let ops: Vec<BatchOp> = (0..100)
                .map(|r| {
                    BatchOp::Insert(
                        Entity::new(format!("p{p:02}"), format!("r{:04}", p * 100 + r))
                            .with("Seq", EdmValue::Int64(p * 100 + r))
                            .with("Note", EdmValue::String(format!("row {}", p * 100 + r))),
                    )
                })
                .collect();
            c.submit_batch(&table, &ops).await.expect("insert a batch");
        }
        table
    })
}

#[test]
fn pages_filters_and_opens_entities_then_quits_restoring_the_terminal() {
    let table = table_of_2500();
    let mut console = Console::start();
    console.wait_for_first_frame();

    // The table is listed (the search narrows a busy shared emulator's list to it).
    console.wait_for("command line");
    console.send("/");
    console.send(&table);
    console.send("\r");
    console.wait_until("the table in the tree", |s| {
        s.lines().any(|l| l.contains(&format!("   {table}")))
    });

    console.send(&format!(":table {table}\r"));
    console.wait_for("page 1 · rows 1–1,000 · next");
    console.send("n");
    console.wait_for("page 2 · rows 1,001–2,000");
    console.send("n");
    let screen = console.wait_for("page 3 · rows 2,001–2,500 (end)");
    assert!(screen.contains("r2000"), "{screen}");
    console.send("p");
    console.wait_for("page 2 · rows 1,001–2,000");
    console.send("p");
    let screen = console.wait_for("page 1 · rows 1–1,000");
    assert!(screen.contains("r0000"), "{screen}");

    console.send("f");
    console.wait_for("filter");
    console.send("PartitionKey eq 'p07'\r");
    let screen = console.wait_for("page 1 · rows 1–100 (end)");
    assert!(screen.contains("PartitionKey eq 'p07'"), "{screen}");
    assert!(screen.contains("r0700"), "{screen}");
    assert!(
        !screen.contains("r0000"),
        "only the filtered rows: {screen}"
    );

    console.send("\r");
    let screen = console.wait_for("ETag");
    assert!(screen.contains("W/\"datetime'"), "{screen}");
    assert!(screen.contains("row 700"), "{screen}");
    console.send("q");
    console.wait_until("back to the grid", |s| !s.contains("ETag"));
    console.send("q");
    let status = console.wait_exit();
    assert!(status.success(), "{status:?}");
    console.assert_restored();
}

fn signal_restores_the_terminal(signal: libc::c_int) {
    let mut console = Console::start();
    console.wait_for_first_frame();
    // SAFETY: kill has no memory effects; the pid is our own child's.
    let rc = unsafe { libc::kill(console.pid(), signal) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    let status = console.wait_exit();
    assert!(
        status.success(),
        "the console handles the signal and exits cleanly: {status:?}"
    );
    console.assert_restored();
}

#[test]
fn sigterm_exits_and_restores_the_terminal() {
    signal_restores_the_terminal(libc::SIGTERM);
}

#[test]
fn sighup_exits_and_restores_the_terminal() {
    signal_restores_the_terminal(libc::SIGHUP);
}
