//! Drawing cost (issue target: a 200×60 frame of a grid with 100 rows × 20 columns under 2 ms
//! in release). Each iteration is one full `Terminal::draw` into a `TestBackend`: the pure
//! `ui::draw` of every pane plus ratatui's buffer diff, as the run loop does it (minus the
//! terminal writes).
//!
//! Run: `cargo bench --bench ui` (criterion prints the median as the middle of `time: [..]`).

mod support;

use criterion::{criterion_group, criterion_main, Criterion};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tabletop::console::app::{key, App};
use tabletop::console::ui;

use crossterm::event::KeyCode;

fn bench_frame(c: &mut Criterion, name: &str, app: &mut App, width: u16, height: u16) {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    // Alternate two cursor rows so every frame has something to diff, as a key press would.
    let mut down = true;
    c.bench_function(name, |b| {
        b.iter(|| {
            app.update(key(if down {
                KeyCode::Char('j')
            } else {
                KeyCode::Char('k')
            }));
            down = !down;
            let mut areas = None;
            terminal
                .draw(|frame| areas = Some(ui::draw(frame, app)))
                .expect("draw");
            app.areas = areas.expect("areas");
            app.after_draw();
        })
    });
}

fn frames(c: &mut Criterion) {
    let mut app = support::loaded_app(100, 20);
    bench_frame(c, "draw 200x60, 100 rows x 20 props", &mut app, 200, 60);
    let mut app = support::loaded_app(1000, 20);
    bench_frame(c, "draw 250x70, 1000 rows x 20 props", &mut app, 250, 70);
}

criterion_group!(benches, frames);
criterion_main!(benches);
