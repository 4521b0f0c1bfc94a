//! The real binary in a pseudo-terminal against Azurite:
//!
//! 1. Start to first frame (issue target: under 100 ms): RUNS spawns of the release binary with
//!    an empty config (`TABLETOP_CONFIG`) and `--connection-string` to the emulator, timed from
//!    spawn to the first output byte, to the alternate-screen switch, and to the first drawn
//!    frame (the screen, parsed by vt100, shows the Tables pane).
//! 2. Key press to redrawn frame end to end (issue target: p99 under 16 ms while a query is in
//!    flight): a table of ENTITIES entities (loaded with 100-entity batches), opened with keys;
//!    then rounds of `n` (next page, not awaited) followed at once by `j` presses, each timed
//!    from the write of the key to the arrival of the next output bytes. Keys are paced
//!    KEY_GAP_MS apart (default 20 ms, a held key's auto-repeat rate), because the run loop
//!    draws at most one frame per 16 ms by design: a key sent right after a frame waits for the
//!    next frame slot.
//!
//! Run: `cargo bench --bench console_pty` (RUNS=… ENTITIES=… KEYS=… KEY_GAP_MS=…).

mod support;

use std::io::{Read, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};
use tabletop::azure::{Account, ClientOptions, TableClient};

const COLS: u16 = 200;
const ROWS: u16 = 60;
const TABLE: &str = "PtyWalk";

struct Session {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    chunks: Receiver<(Instant, Vec<u8>)>,
    parser: vt100::Parser,
    _master: Box<dyn MasterPty + Send>,
    spawned: Instant,
}

impl Session {
    fn spawn(connection_string: &str, config: &std::path::Path) -> Session {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_tabletop"));
        cmd.args(["--connection-string", connection_string]);
        cmd.env("TABLETOP_CONFIG", config);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("AZURE_STORAGE_CONNECTION_STRING");
        cmd.env_remove("NO_COLOR");
        let mut reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        let (tx, chunks) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        });
        let spawned = Instant::now();
        let child = pair.slave.spawn_command(cmd).expect("spawn tabletop");
        drop(pair.slave);
        Session {
            child,
            writer,
            chunks,
            parser: vt100::Parser::new(ROWS, COLS, 0),
            _master: pair.master,
            spawned,
        }
    }

    /// Feeds output to the screen until `done` holds; returns the arrival time of the chunk
    /// that made it true.
    fn wait_for(
        &mut self,
        timeout: Duration,
        mut done: impl FnMut(&[u8], &vt100::Screen) -> bool,
    ) -> Instant {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.chunks.recv_timeout(left) {
                Ok((at, bytes)) => {
                    self.parser.process(&bytes);
                    if done(&bytes, self.parser.screen()) {
                        return at;
                    }
                }
                Err(e) => panic!(
                    "timed out ({e:?}); screen:\n{}",
                    self.parser.screen().contents()
                ),
            }
        }
    }

    fn contains(&mut self, text: &str, timeout: Duration) -> Instant {
        let text = text.to_string();
        self.wait_for(timeout, |_, s| s.contents().contains(&text))
    }

    /// Drops output already received (feeding the screen).
    fn drain(&mut self) {
        while let Ok((_, bytes)) = self.chunks.try_recv() {
            self.parser.process(&bytes);
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Instant {
        self.writer.write_all(bytes).expect("write key");
        self.writer.flush().expect("flush");
        Instant::now()
    }

    /// Ctrl-C quits at once; kill if it lingers.
    fn quit(mut self) {
        let _ = self.send(b"\x03");
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn summary(mut v: Vec<Duration>) -> String {
    v.sort();
    format!(
        "median {}  p95 {}  p99 {}  min {}  max {}",
        support::ms(support::quantile(&v, 0.5)),
        support::ms(support::quantile(&v, 0.95)),
        support::ms(support::quantile(&v, 0.99)),
        support::ms(v[0]),
        support::ms(*v.last().expect("samples"))
    )
}

fn main() {
    let runs = support::env_usize("RUNS", 20);
    let entities = support::env_usize("ENTITIES", 50_000);
    let presses = support::env_usize("KEYS", 2_000);
    let gap = Duration::from_millis(support::env_usize("KEY_GAP_MS", 20) as u64);
    let emulator = support::start_emulator();
    let cs = emulator.connection_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").expect("empty config");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let account = Account::from_connection_string(&cs).expect("account");
    let client = TableClient::new(account, ClientOptions::default()).expect("client");
    let took = runtime.block_on(support::load_table(&client, TABLE, entities, 12));
    println!(
        "loaded {entities} entities in {:.1} s ({:.0}/s)",
        took.as_secs_f64(),
        entities as f64 / took.as_secs_f64()
    );

    // 1. Start to first frame.
    let (mut first_byte, mut alt_screen, mut first_frame) = (vec![], vec![], vec![]);
    for _ in 0..runs {
        let mut s = Session::spawn(&cs, &config);
        let mut seen_any = None;
        let mut seen_alt = None;
        let at = s.wait_for(Duration::from_secs(10), |bytes, screen| {
            let now = Instant::now();
            seen_any.get_or_insert(now);
            if seen_alt.is_none() && bytes.windows(8).any(|w| w == b"\x1b[?1049h") {
                seen_alt = Some(now);
            }
            screen.contents().contains("Tables")
        });
        first_byte.push(seen_any.expect("output") - s.spawned);
        alt_screen.push(seen_alt.unwrap_or(at) - s.spawned);
        first_frame.push(at - s.spawned);
        s.quit();
    }
    println!(
        "start → first output byte ({runs} runs): {}",
        summary(first_byte)
    );
    println!(
        "start → alternate screen    ({runs} runs): {}",
        summary(alt_screen)
    );
    println!(
        "start → first frame         ({runs} runs): {}",
        summary(first_frame)
    );

    // 2. Key → frame with a page in flight.
    let mut s = Session::spawn(&cs, &config);
    s.contains(TABLE, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(50));
    s.send(b"j");
    std::thread::sleep(Duration::from_millis(50));
    s.send(b"\r");
    s.contains("rows 1–1,000", Duration::from_secs(10));
    let per_round = 25;
    let mut times = Vec::with_capacity(presses);
    let mut page_keys = 0usize;
    let mut timeouts = 0usize;
    while times.len() < presses {
        std::thread::sleep(gap);
        s.drain();
        s.send(b"n");
        page_keys += 1;
        for _ in 0..per_round {
            std::thread::sleep(gap);
            s.drain();
            let t0 = s.send(b"j");
            match s.chunks.recv_timeout(Duration::from_secs(1)) {
                Ok((at, bytes)) => {
                    s.parser.process(&bytes);
                    times.push(at.saturating_duration_since(t0));
                }
                Err(RecvTimeoutError::Timeout) => timeouts += 1,
                Err(e) => panic!("pty closed: {e}"),
            }
        }
        // At the end of the table, go back to the start.
        if s.parser.screen().contents().contains("(end)") {
            s.send(b"g");
            std::thread::sleep(Duration::from_millis(100));
            s.drain();
            // Reload from the first page: Esc to tables, Enter reopens.
            s.send(b"\x1b");
            std::thread::sleep(Duration::from_millis(100));
            s.send(b"\r");
            s.contains("rows 1–1,000", Duration::from_secs(10));
        }
    }
    let n = times.len();
    println!(
        "key → next output bytes, end to end in a pty, {COLS}×{ROWS}, {entities}-entity table, `n` then {per_round} `j` per round ({page_keys} rounds), keys {} ms apart: {n} keys, {timeouts} without output within 1 s",
        gap.as_millis()
    );
    println!("  {}", summary(times));
    s.quit();
    drop(runtime);
    emulator.stop();
}
