//! The stress job's live view: per step a bar of successful entities/s and, aligned under it, a
//! bar of throttled %, the running step as it fills, the knee once a step past it is over the
//! threshold, and (when there is room) the step table. State comes only from `StressEvent`s.

use std::time::Duration;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Bar, BarChart, BarGroup, Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use super::theme::{Slot, Theme};
use crate::stress::{find_knee, Progress, StepResult, StressEvent, StressReport};

/// Everything the view shows; feed it with `apply`.
#[derive(Clone, Debug, Default)]
pub struct StressView {
    pub table: Option<String>,
    pub partitions: usize,
    /// The concurrencies the test will try.
    pub planned: Vec<usize>,
    pub step_duration: Option<Duration>,
    pub threshold_pct: Option<f64>,
    pub steps: Vec<StepResult>,
    /// The running step (None between steps and at the end).
    pub progress: Option<Progress>,
    pub report: Option<StressReport>,
    pub error: Option<String>,
}

impl StressView {
    pub fn apply(&mut self, event: StressEvent) {
        match event {
            StressEvent::Started {
                table,
                partitions,
                steps,
                step_duration,
                threshold_pct,
                ..
            } => {
                self.table = Some(table);
                self.partitions = partitions;
                self.planned = steps;
                self.step_duration = Some(step_duration);
                self.threshold_pct = Some(threshold_pct);
            }
            StressEvent::Progress(p) => self.progress = Some(p),
            StressEvent::Step(s) => {
                self.progress = None;
                self.steps.push(s);
            }
            StressEvent::Finished(r) => {
                self.progress = None;
                self.table = Some(r.table.clone());
                self.steps = r.steps.clone();
                self.report = Some(r);
            }
            StressEvent::Failed(e) => {
                self.progress = None;
                self.error = Some(e);
            }
        }
    }

    fn threshold(&self) -> f64 {
        self.report
            .as_ref()
            .map(|r| r.threshold_pct)
            .or(self.threshold_pct)
            .unwrap_or(5.0)
    }

    /// The knee sentence: the report's, or while running the knee as it stands once a step past
    /// it went over the threshold.
    fn knee_line(&self) -> Option<String> {
        if let Some(r) = &self.report {
            return Some(r.knee_line());
        }
        let k = find_knee(&self.steps, self.partitions.max(1))?;
        k.limited.then(|| {
            format!(
                "knee so far: ~{} entities/s at concurrency {}",
                group(k.entities_per_s.round() as u64),
                k.concurrency
            )
        })
    }
}

pub fn draw(frame: &mut Frame, t: &Theme, state: &StressView, area: Rect) {
    let title = Line::from(vec![
        Span::styled(" Partition stress ", t.style(Slot::TitleFocused)),
        Span::styled(
            format!(
                "· {} · {} partition{} · threshold {} % ",
                state.table.as_deref().unwrap_or("starting…"),
                state.partitions.max(1),
                if state.partitions > 1 { "s" } else { "" },
                fmt_pct(state.threshold())
            ),
            t.style(Slot::Muted),
        ),
    ]);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.style(Slot::BorderFocused))
        .title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height < 4 || inner.width < 20 {
        return;
    }

    let table_rows = if inner.height >= 30 {
        state.steps.len().max(1) as u16 + 2
    } else {
        0
    };
    let summary_h = 3u16;
    let rest = inner
        .height
        .saturating_sub(1 + summary_h + table_rows)
        .max(4);
    let throttle_h = (rest / 3).max(3);
    let [status, bars, throttle, summary, table] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(rest - throttle_h),
        Constraint::Length(throttle_h),
        Constraint::Length(summary_h),
        Constraint::Length(table_rows),
    ])
    .areas(inner);

    frame.render_widget(Paragraph::new(status_line(t, state)), status);
    draw_bars(frame, t, state, bars, throttle);

    let mut lines = Vec::new();
    if let Some(e) = &state.error {
        lines.push(Line::from(Span::styled(e.clone(), t.style(Slot::Error))));
    }
    if let Some(k) = state.knee_line() {
        lines.push(Line::from(Span::styled(
            k,
            t.style(Slot::Success).add_modifier(Modifier::BOLD),
        )));
    }
    if let Some(r) = &state.report {
        lines.extend(r.target_line().map(|l| Line::from(Span::raw(l))));
        lines.push(Line::from(Span::styled(
            format!(
                "stopped: {} · {:.1} s · {}",
                r.stopped,
                r.duration.as_secs_f64(),
                match (&r.cleanup_error, r.table_kept) {
                    (Some(e), _) => format!("table NOT removed: {e}"),
                    (None, true) => "table kept".to_string(),
                    (None, false) => "table removed".to_string(),
                }
            ),
            t.style(if r.cleanup_error.is_some() {
                Slot::Error
            } else {
                Slot::Muted
            }),
        )));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), summary);

    if table_rows > 0 {
        let mut rows = vec![Line::from(Span::styled(
            StepResult::header(),
            t.style(Slot::Header),
        ))];
        for s in &state.steps {
            rows.push(Line::from(Span::styled(
                s.line(),
                t.style(if s.over_threshold {
                    Slot::Warning
                } else {
                    Slot::Base
                }),
            )));
        }
        frame.render_widget(Paragraph::new(rows), table);
    }
}

/// "step 3/7 · concurrency 4 · ██████░░░░ 1.2/2.5 s · 512 ok entities/s · 3 throttled".
fn status_line<'a>(t: &Theme, state: &StressView) -> Line<'a> {
    let total = state.planned.len().max(state.steps.len());
    match (&state.progress, &state.report, &state.error) {
        (Some(p), None, None) => {
            let frac = if p.step_duration.is_zero() {
                0.0
            } else {
                (p.elapsed.as_secs_f64() / p.step_duration.as_secs_f64()).clamp(0.0, 1.0)
            };
            let width = 20usize;
            let filled = (frac * width as f64).round() as usize;
            Line::from(vec![
                Span::raw(format!(
                    "step {}/{} · concurrency {} · ",
                    p.step, total, p.concurrency
                )),
                Span::styled("█".repeat(filled), t.style(Slot::Info)),
                Span::styled("░".repeat(width - filled), t.style(Slot::Muted)),
                Span::raw(format!(
                    " {:.1}/{:.1} s · {} ok entities/s · ",
                    p.elapsed.as_secs_f64(),
                    p.step_duration.as_secs_f64(),
                    group(p.rate().round() as u64)
                )),
                Span::styled(
                    format!("{} throttled", group(p.throttled_so_far)),
                    t.style(if p.throttled_so_far > 0 {
                        Slot::Warning
                    } else {
                        Slot::Muted
                    }),
                ),
            ])
        }
        (_, Some(r), _) => Line::from(Span::styled(
            format!("done: {} steps · {}", r.steps.len(), r.stopped),
            t.style(Slot::Success),
        )),
        (_, _, Some(_)) => Line::from(Span::styled("failed", t.style(Slot::Error))),
        _ if state.table.is_none() => Line::from(Span::styled(
            "creating and loading the test table…",
            t.style(Slot::Muted),
        )),
        _ => Line::from(Span::styled(
            format!("step {}/{} starting…", state.steps.len() + 1, total),
            t.style(Slot::Muted),
        )),
    }
}

/// The two aligned bar charts: entities/s above, throttled % below, one column per step (the
/// running one included, dimmed).
fn draw_bars(frame: &mut Frame, t: &Theme, state: &StressView, top: Rect, bottom: Rect) {
    let threshold = state.threshold();
    let knee = state
        .report
        .as_ref()
        .and_then(|r| r.knee.clone())
        .or_else(|| find_knee(&state.steps, state.partitions.max(1)).filter(|k| k.limited));
    // (concurrency, entities/s, throttled %, running, over)
    let mut cols: Vec<(usize, f64, f64, bool, bool)> = state
        .steps
        .iter()
        .map(|s| {
            (
                s.concurrency,
                s.entities_per_s,
                s.throttled_pct,
                false,
                s.over_threshold,
            )
        })
        .collect();
    if let Some(p) = &state.progress {
        let pct = if p.attempts_so_far == 0 {
            0.0
        } else {
            p.throttled_so_far as f64 * 100.0 / p.attempts_so_far as f64
        };
        cols.push((p.concurrency, p.rate(), pct, true, pct > threshold));
    }
    let planned = state.planned.len().max(cols.len()).max(1) as u16;
    let gap = 1u16;
    let width = top.width.saturating_sub(1);
    let bar_w = (width.saturating_sub(gap * (planned - 1)) / planned).clamp(1, 16);
    let compact = bar_w < 5;

    let peak = cols.iter().map(|c| c.1).fold(0.0, f64::max).max(1.0);
    let bars: Vec<Bar> = cols
        .iter()
        .map(|&(c, rate, _, running, over)| {
            let is_knee = knee.as_ref().is_some_and(|k| k.concurrency == c) && !running;
            let style = if running {
                t.style(Slot::Muted)
            } else if is_knee {
                t.style(Slot::Success).add_modifier(Modifier::BOLD)
            } else if over {
                t.style(Slot::GaugeHot)
            } else {
                t.style(Slot::Sparkline)
            };
            Bar::default()
                .value(rate.round().max(0.0) as u64)
                .text_value(if compact {
                    short(rate)
                } else {
                    group(rate.round() as u64)
                })
                .label(Line::from(c.to_string()))
                .style(style)
        })
        .collect();
    let top_chart = BarChart::default()
        .block(Block::default().title(Span::styled(
            "ok entities/s per step (label: concurrency; knee in bold)",
            t.style(Slot::Header),
        )))
        .data(BarGroup::default().bars(&bars))
        .bar_width(bar_w)
        .bar_gap(gap)
        .max((peak * 1.1).round() as u64)
        .value_style(t.style(Slot::Base).add_modifier(Modifier::REVERSED))
        .label_style(t.style(Slot::Muted));
    frame.render_widget(top_chart, top);

    let worst = cols.iter().map(|c| c.2).fold(0.0, f64::max);
    let scale = worst.max(threshold * 2.0).max(1.0);
    let tbars: Vec<Bar> = cols
        .iter()
        .map(|&(_, _, pct, running, _)| {
            let style = if running {
                t.style(Slot::Muted)
            } else if pct > threshold {
                t.style(Slot::Error)
            } else {
                t.style(Slot::GaugeOk)
            };
            Bar::default()
                .value((pct * 10.0).round() as u64)
                .text_value(if compact {
                    format!("{pct:.0}")
                } else {
                    format!("{pct:.1}%")
                })
                .style(style)
        })
        .collect();
    let bottom_chart = BarChart::default()
        .block(Block::default().title(Span::styled(
            format!(
                "throttled % (over {} % is past the knee)",
                fmt_pct(threshold)
            ),
            t.style(Slot::Header),
        )))
        .data(BarGroup::default().bars(&tbars))
        .bar_width(bar_w)
        .bar_gap(gap)
        .max((scale * 10.0).round() as u64)
        .value_style(t.style(Slot::Base).add_modifier(Modifier::REVERSED));
    frame.render_widget(bottom_chart, bottom);
}

/// 2345 → "2.3k", 505 → "505".
fn short(v: f64) -> String {
    if v >= 9_950.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        format!("{:.0}", v.max(0.0))
    }
}

fn fmt_pct(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p}")
    }
}

fn group(n: u64) -> String {
    super::grid::group(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_values_fit_narrow_bars() {
        assert_eq!(short(505.4), "505");
        assert_eq!(short(2345.0), "2.3k");
        assert_eq!(short(23_450.0), "23k");
    }

    #[test]
    fn events_build_the_state() {
        let mut v = StressView::default();
        v.apply(StressEvent::Failed("boom".into()));
        assert_eq!(v.error.as_deref(), Some("boom"));
        assert!(v.knee_line().is_none());
    }
}
