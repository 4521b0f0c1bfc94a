//! The stress job's view as drawn at 80×24 and 160×48: mid-run (the running step dimmed, the
//! knee found so far) and finished (the report's knee, target and cleanup).

use std::time::Duration;

use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tabletop::console::stress_view::{draw, StressView};
use tabletop::console::theme;
use tabletop::stress::{find_knee, Progress, StepResult, StopReason, StressEvent, StressReport};

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

fn step(step: usize, concurrency: usize, ok: f64, throttled_pct: f64) -> StepResult {
    StepResult {
        step,
        concurrency,
        duration: Duration::from_millis(2500),
        attempts: 1500,
        successes: 1250,
        server_busy: (throttled_pct * 15.0) as u64,
        operation_timeouts: 0,
        other_errors: 0,
        entities_per_s: ok,
        attempts_per_s: ok / (1.0 - throttled_pct / 100.0),
        throttled_pct,
        p50_ms: 1.5 * concurrency as f64,
        p99_ms: 6.0 * concurrency as f64,
        complete: true,
        over_threshold: throttled_pct > 5.0,
    }
}

fn fixture_steps() -> Vec<StepResult> {
    vec![
        step(1, 1, 452.0, 0.0),
        step(2, 2, 509.0, 0.0),
        step(3, 4, 505.0, 3.4),
        step(4, 8, 501.0, 7.0),
        step(5, 16, 496.0, 20.8),
    ]
}

fn started() -> StressView {
    let mut v = StressView::default();
    v.apply(StressEvent::Started {
        table: "tabletopstress6b026c2aa128ab".into(),
        partitions: 1,
        steps: vec![1, 2, 4, 8, 16, 32, 64],
        step_duration: Duration::from_millis(2500),
        threshold_pct: 5.0,
        warm_up: Duration::from_secs(1),
    });
    v
}

fn running() -> StressView {
    let mut v = started();
    for s in fixture_steps().into_iter().take(4) {
        v.apply(StressEvent::Step(s));
    }
    v.apply(StressEvent::Progress(Progress {
        step: 5,
        concurrency: 16,
        elapsed: Duration::from_millis(1500),
        step_duration: Duration::from_millis(2500),
        successes_so_far: 760,
        attempts_so_far: 950,
        throttled_so_far: 190,
    }));
    v
}

fn finished() -> StressView {
    let mut v = running();
    let steps = fixture_steps();
    v.apply(StressEvent::Step(steps[4].clone()));
    v.apply(StressEvent::Finished(StressReport {
        knee: find_knee(&steps, 1),
        steps,
        stopped: StopReason::OverThreshold,
        table: "tabletopstress6b026c2aa128ab".into(),
        partitions: 1,
        threshold_pct: 5.0,
        partition_target: 2000.0,
        warm_up: Duration::from_secs(1),
        duration: Duration::from_millis(13_100),
        requests: 6_912,
        cleanup_error: None,
        table_kept: false,
    }));
    v
}

fn snapshot(name: &str, view: &StressView) {
    let t = theme::load("dark", None, false).0;
    for (w, h) in SIZES {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        terminal.draw(|f| draw(f, &t, view, f.area())).unwrap();
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), terminal.backend());
    }
}

#[test]
fn stress_starting() {
    snapshot("stress_starting", &started());
}

#[test]
fn stress_running() {
    let v = running();
    assert_eq!(v.steps.len(), 4);
    assert!(v.progress.is_some());
    snapshot("stress_running", &v);
}

#[test]
fn stress_finished() {
    let v = finished();
    assert!(v.progress.is_none());
    assert!(v.report.as_ref().unwrap().knee.is_some());
    snapshot("stress_finished", &v);
}

#[test]
fn stress_failed() {
    let mut v = running();
    v.apply(StressEvent::Failed(
        "step 5 (concurrency 16) failed: The table was deleted (HTTP 404 TableNotFound)".into(),
    ));
    snapshot("stress_failed", &v);
}
