//! The event loop: one channel for terminal input, job results and ticks; `App::update` for
//! each event; a redraw only when state changed, at most ~60 per second, inside a synchronized
//! update; a tick only while work is pending (idle CPU ≈ 0).

use std::time::{Duration, Instant};

use crossterm::event::{Event as TermEvent, EventStream};
use futures_util::StreamExt;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use tokio::sync::mpsc;

use super::app::App;
use super::event::{Command, Event};
use super::jobs::Jobs;
use super::terminal::{self, TerminalGuard};
use super::ui;

const FRAME: Duration = Duration::from_millis(16);
/// The shortest gap between frames that answer keys (auto-repeat still coalesces).
const KEY_FRAME: Duration = Duration::from_millis(4);
const TICK: Duration = Duration::from_millis(100);
/// The dashboard's refresh while it is on screen.
const DASHBOARD_TICK: Duration = Duration::from_secs(1);

/// Runs the console until the user quits or a signal arrives. The terminal is restored on
/// every way out of this function (the guard), and on panic (its hook).
pub async fn run(mut app: App) -> anyhow::Result<()> {
    let guard = TerminalGuard::enter()?;
    let backend = CrosstermBackend::new(std::io::stdout());
    let mut terminal = Terminal::new(backend)?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let mut jobs = Jobs::new(tx.clone());
    let mut input = EventStream::new();
    let mut signals = Signals::new()?;
    let mut last_draw: Option<Instant> = None;
    let mut key_pending = false;

    loop {
        for command in app.take_commands() {
            match command {
                Command::Copy(text) => {
                    let _ = terminal::copy_osc52(&text);
                }
                Command::ExternalEdit { job, text } => {
                    // The editor needs the terminal and stdin: stop reading input and leave
                    // the console's mode until it returns.
                    drop(input);
                    let result = terminal::edit_externally(&text);
                    input = EventStream::new();
                    // A full repaint without `clear()`, which would query the cursor position.
                    let area = terminal.size()?;
                    terminal.resize(ratatui::layout::Rect::new(0, 0, area.width, area.height))?;
                    app.update(Event::Job(job, super::event::JobOutput::Edited(result)));
                }
                other => jobs.spawn(other),
            }
        }
        if app.should_quit {
            break;
        }
        // A key is answered at once (a typist's keys are far apart); other changes wait for
        // the next frame slot, so bursts of results cost one frame.
        let frame = if key_pending { KEY_FRAME } else { FRAME };
        if app.dirty {
            let due = last_draw.map_or(Duration::ZERO, |t| frame.saturating_sub(t.elapsed()));
            if due.is_zero() {
                draw(&mut terminal, &mut app)?;
                last_draw = Some(Instant::now());
                key_pending = false;
            }
        }
        // Wait for the next event; wake for a pending redraw or the spinner only when needed.
        let redraw_in = if app.dirty {
            Some(last_draw.map_or(Duration::ZERO, |t| frame.saturating_sub(t.elapsed())))
        } else if app.busy() {
            Some(TICK)
        } else if app.dashboard_live() {
            Some(DASHBOARD_TICK)
        } else {
            None
        };
        let sleep = async {
            match redraw_in {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            ev = input.next() => match ev {
                Some(Ok(TermEvent::Key(k))) => {
                    app.update(Event::Key(k));
                    key_pending = true;
                }
                Some(Ok(TermEvent::Mouse(m))) => app.update(Event::Mouse(m)),
                Some(Ok(TermEvent::Resize(w, h))) => {
                    terminal.autoresize()?;
                    app.update(Event::Resize(w, h));
                }
                Some(Ok(TermEvent::Paste(p))) => app.update(Event::Paste(p)),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.into()),
                None => break,
            },
            Some(ev) = rx.recv() => {
                if let Event::Job(id, ref out) = ev {
                    if !out.is_progress() {
                        jobs.finished(id);
                    }
                }
                app.update(ev);
                // Drain what else is ready so a burst of results costs one frame.
                while let Ok(ev) = rx.try_recv() {
                    if let Event::Job(id, ref out) = ev {
                        if !out.is_progress() {
                            jobs.finished(id);
                        }
                    }
                    app.update(ev);
                }
            }
            _ = sleep => {
                if !app.dirty && (app.busy() || app.dashboard_live()) {
                    app.update(Event::Tick);
                }
            }
            _ = signals.recv() => break,
        }
    }
    jobs.cancel_all();
    drop(terminal);
    drop(guard);
    Ok(())
}

fn draw(
    terminal: &mut Terminal<CrosstermBackend<std::io::Stdout>>,
    app: &mut App,
) -> anyhow::Result<()> {
    use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
    crossterm::execute!(std::io::stdout(), BeginSynchronizedUpdate)?;
    let mut areas = None;
    terminal.draw(|frame| areas = Some(ui::draw(frame, app)))?;
    crossterm::execute!(std::io::stdout(), EndSynchronizedUpdate)?;
    if let Some(a) = areas {
        app.areas = a;
    }
    app.after_draw();
    Ok(())
}

/// SIGTERM, SIGHUP and SIGINT end the loop so the guard restores the terminal.
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                term: signal(SignalKind::terminate())?,
                hup: signal(SignalKind::hangup())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.hup.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
