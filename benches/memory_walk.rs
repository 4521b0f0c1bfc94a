//! Memory while walking a big table (issue target: resident memory flat, under 60 MB at any
//! point, walking a 1,000,000-entity table page by page). Loads ENTITIES entities of ~200–500
//! bytes into Azurite with 100-entity batches, then drives the real console logic — `App` with
//! the real job runner (`console::jobs::Jobs` on an unbounded channel) and the real client —
//! opening the table with keys and pressing `n` until the end (PAGES pages), waiting for each
//! page and drawing each frame into a 160×48 `TestBackend`, sampling this process's VmRSS at
//! every page. Then the same with `m` (load more), which keeps a bounded window of pages.
//!
//! Run: `cargo bench --bench memory_walk` (ENTITIES=100000 for a quick run; CONCURRENCY=…
//! for the loader; PAGES=… to stop earlier).

mod support;

use std::time::{Duration, Instant};

use crossterm::event::KeyCode;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tabletop::azure::{Account, ClientOptions, TableClient};
use tabletop::console::app::{key, App};
use tabletop::console::event::{Command, Event, JobOutput};
use tabletop::console::jobs::Jobs;
use tabletop::console::ui;
use tokio::sync::mpsc::{self, UnboundedReceiver};

const TABLE: &str = "Walk";

struct Console {
    app: App,
    jobs: Jobs,
    rx: UnboundedReceiver<Event>,
    terminal: Terminal<TestBackend>,
}

impl Console {
    /// Hands queued commands to the job runner and feeds results back until nothing is
    /// awaited, then draws a frame (the run loop's work, minus the terminal).
    async fn settle(&mut self) {
        loop {
            for c in self.app.take_commands() {
                if !matches!(c, Command::Copy(_)) {
                    self.jobs.spawn(c);
                }
            }
            if !self.app.busy() {
                break;
            }
            let ev = self.rx.recv().await.expect("job result");
            if let Event::Job(id, ref out) = ev {
                if !matches!(out, JobOutput::Scanned(_)) {
                    self.jobs.finished(id);
                }
            }
            self.app.update(ev);
        }
        self.draw();
    }

    fn draw(&mut self) {
        let app = &mut self.app;
        let mut areas = None;
        self.terminal
            .draw(|f| areas = Some(ui::draw(f, app)))
            .expect("draw");
        app.areas = areas.expect("areas");
        app.after_draw();
    }

    async fn press(&mut self, code: KeyCode) {
        self.app.update(key(code));
        self.settle().await;
    }

    fn rows(&self) -> usize {
        self.app.grid.as_ref().map_or(0, |g| g.rows.len())
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// VmHWM: the peak resident set so far, in KiB.
fn hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

async fn walk(console: &mut Console, code: KeyCode, pages: usize, label: &str) {
    console.app.open_table(0, TABLE);
    console.settle().await;
    let t0 = Instant::now();
    let mut samples = vec![(1usize, support::rss_kib(), console.rows())];
    let mut max = samples[0].1;
    let mut page_times = Vec::with_capacity(pages);
    for page in 2..=pages {
        let t = Instant::now();
        console.press(code).await;
        page_times.push(t.elapsed());
        if let Some(e) = console.app.grid.as_ref().and_then(|g| g.error.clone()) {
            panic!("page {page}: {e}");
        }
        let rss = support::rss_kib();
        max = max.max(rss);
        samples.push((page, rss, console.rows()));
    }
    page_times.sort();
    let g = console.app.grid.as_ref().expect("grid");
    println!(
        "{label}: {} pages in {:.1} s (per page p50 {} p99 {}), view at the end: {} · {} rows held",
        pages,
        t0.elapsed().as_secs_f64(),
        support::ms(support::quantile(&page_times, 0.5)),
        support::ms(support::quantile(&page_times, 0.99)),
        g.position(),
        g.rows.len()
    );
    let marks = [1, 100, 500, pages];
    let curve: Vec<String> = samples
        .iter()
        .filter(|(p, ..)| marks.contains(p))
        .map(|(p, rss, rows)| format!("page {p}: {:.1} MiB ({rows} rows)", mib(*rss)))
        .collect();
    println!("  RSS {}", curve.join(" · "));
    println!(
        "  RSS max {:.1} MiB, peak (VmHWM) so far {:.1} MiB",
        mib(max),
        mib(hwm_kib())
    );
}

fn main() {
    let entities = support::env_usize("ENTITIES", 1_000_000);
    let concurrency = support::env_usize("CONCURRENCY", 12);
    let pages = support::env_usize("PAGES", entities.div_ceil(1000));
    let emulator = support::start_emulator();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let account = Account::from_connection_string(&emulator.connection_string()).expect("account");

    runtime.block_on(async {
        let loader = TableClient::new(account.clone(), ClientOptions::default()).expect("client");
        let took = support::load_table(&loader, TABLE, entities, concurrency).await;
        let size = support::stored_entity(entities / 2).to_request_json().len();
        println!(
            "loaded {entities} entities (~{size} B each mid-table) in {:.1} s: {:.0} entities/s (batches of 100, concurrency {concurrency})",
            took.as_secs_f64(),
            entities as f64 / took.as_secs_f64()
        );
        drop(loader);
        tokio::time::sleep(Duration::from_millis(200)).await;
        println!("RSS before the console: {:.1} MiB (peak so far {:.1} MiB, the loader's)", mib(support::rss_kib()), mib(hwm_kib()));

        let (tx, rx) = mpsc::unbounded_channel();
        let mut console = Console {
            app: support::app(account.clone(), 1000),
            jobs: Jobs::new(tx),
            rx,
            terminal: Terminal::new(TestBackend::new(160, 48)).expect("terminal"),
        };
        console.settle().await;
        // Open the table as a user would: down to it in the tables pane, Enter.
        let names = &console.app.sources[0].tables;
        assert_eq!(names, &[TABLE.to_string()], "tables listed");
        console.press(KeyCode::Char('j')).await;
        console.press(KeyCode::Enter).await;
        assert_eq!(console.rows(), 1000.min(entities), "first page");

        walk(&mut console, KeyCode::Char('n'), pages, "n (next page)").await;
        walk(&mut console, KeyCode::Char('m'), pages, "m (load more)").await;
    });
    drop(runtime);
    emulator.stop();
}
