//! Key press to redrawn frame, in process (issue target: p99 under 16 ms while a query is in
//! flight). A console with 1,000 loaded rows × 20 mixed-type properties and a `n` (next page)
//! issued and never answered; then KEYS key presses (j/k, l/h, PgDn/PgUp, g/G, `/` search
//! typing, Backspace, Esc), each timed from `update` through a full `Terminal::draw` into a
//! 200×60 `TestBackend` (what the run loop does for a key, minus the terminal write).
//!
//! Run: `cargo bench --bench console_latency` (KEYS=… ROWS=… to change the sizes; BY_KEY=1
//! also prints each key's figures, with the `update` part alone).

mod support;

use std::time::{Duration, Instant};

use crossterm::event::KeyCode;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tabletop::console::app::key;
use tabletop::console::event::Event;
use tabletop::console::ui;

/// One round of the key script: moves, column moves, pages, and a typed search that narrows,
/// widens and is dropped.
fn script() -> Vec<Event> {
    let c = |ch| key(KeyCode::Char(ch));
    let mut keys = Vec::new();
    keys.extend((0..20).map(|_| c('j')));
    keys.extend((0..5).map(|_| c('l')));
    keys.push(key(KeyCode::PageDown));
    keys.push(key(KeyCode::PageDown));
    keys.extend((0..10).map(|_| c('k')));
    keys.extend((0..5).map(|_| c('h')));
    keys.push(key(KeyCode::PageUp));
    keys.push(c('G'));
    keys.push(c('g'));
    keys.push(c('/'));
    keys.extend("r00000004".chars().map(c));
    keys.extend((0..4).map(|_| key(KeyCode::Backspace)));
    keys.push(key(KeyCode::Esc));
    keys
}

fn main() {
    let presses = support::env_usize("KEYS", 10_000);
    let rows = support::env_usize("ROWS", 1_000);
    let mut app = support::loaded_app(rows, 20);
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    terminal
        .draw(|f| app.areas = ui::draw(f, &app))
        .expect("draw");
    app.after_draw();
    // A next page in flight: the spinner line shows and `n` is refused until it lands.
    app.update(key(KeyCode::Char('n')));
    let job = support::query_job(&mut app);
    assert!(job.is_some(), "n issued a query");
    assert!(app.grid.as_ref().expect("grid").loading.is_some());

    let keys = script();
    let mut times = Vec::with_capacity(presses);
    let mut by_key: std::collections::BTreeMap<String, Vec<Duration>> = Default::default();
    let mut frames = 0usize;
    let t_all = Instant::now();
    for i in 0..presses {
        let ev = match &keys[i % keys.len()] {
            Event::Key(k) => Event::Key(*k),
            _ => unreachable!(),
        };
        let t0 = Instant::now();
        app.update(ev);
        let t_update = t0.elapsed();
        if app.dirty {
            let mut areas = None;
            terminal
                .draw(|f| areas = Some(ui::draw(f, &app)))
                .expect("draw");
            app.areas = areas.expect("areas");
            app.after_draw();
            frames += 1;
        }
        let dt = t0.elapsed();
        times.push(dt);
        let name = match &keys[i % keys.len()] {
            Event::Key(k) if app.overlay.is_some() || k.code == KeyCode::Esc => {
                format!("search {}", k.code)
            }
            Event::Key(k) => format!("{}", k.code),
            _ => unreachable!(),
        };
        by_key.entry(name.clone()).or_default().push(dt);
        by_key
            .entry(format!("{name} (update)"))
            .or_default()
            .push(t_update);
        // Nothing answers the query, but drop what the keys queue (search has no commands).
        app.take_commands();
    }
    let wall = t_all.elapsed();
    if std::env::var_os("BY_KEY").is_some() {
        for (k, mut v) in by_key {
            v.sort();
            println!(
                "  {k:>14}: n {:>5}  p50 {}  p99 {}  max {}",
                v.len(),
                support::ms(support::quantile(&v, 0.5)),
                support::ms(support::quantile(&v, 0.99)),
                support::ms(*v.last().expect("v"))
            );
        }
    }
    assert!(
        app.grid.as_ref().expect("grid").loading.is_some(),
        "still in flight"
    );
    times.sort();
    let total: Duration = times.iter().sum();
    println!(
        "key→frame in process, {presses} keys ({frames} frames), {rows} rows loaded, 200×60, query in flight:"
    );
    println!(
        "  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  mean {}  ({:.1} s wall)",
        support::ms(support::quantile(&times, 0.50)),
        support::ms(support::quantile(&times, 0.90)),
        support::ms(support::quantile(&times, 0.99)),
        support::ms(support::quantile(&times, 0.999)),
        support::ms(*times.last().expect("times")),
        support::ms(total / presses as u32),
        wall.as_secs_f64()
    );
}
