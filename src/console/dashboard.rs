//! The live partition dashboard: account entities/s against its target, throttled % over
//! time, the top partitions, and the seeds' warnings, from the metrics hub's snapshots.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, BorderType, Borders, Chart, Dataset, GraphType, Paragraph, Sparkline, Wrap,
};
use ratatui::Frame;

use super::grid::group;
use super::theme::{Slot, Theme};
use crate::metrics::{Hub, RankBy, Snapshot, WarningKind};

/// The windows `w` cycles through.
pub const WINDOWS: [Duration; 3] = [
    Duration::from_secs(60),
    Duration::from_secs(300),
    Duration::from_secs(10),
];

pub struct Dashboard {
    pub hub: Arc<Hub>,
    /// What feeds the hub ("console traffic", "proxy 127.0.0.1:10102 → …").
    pub source: String,
    pub window: Duration,
    pub rank_by: RankBy,
    pub paused: bool,
    pub snapshot: Option<Snapshot>,
    pub selected: usize,
}

/// What a key asks of the app.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DashboardAction {
    None,
    /// Not a dashboard key: let the global keymap have it.
    Unhandled,
    /// Write the current view to a file.
    Export {
        file_name: String,
        contents: String,
    },
    Message(String),
}

impl Dashboard {
    pub fn new(hub: Arc<Hub>, source: impl Into<String>) -> Dashboard {
        Dashboard {
            hub,
            source: source.into(),
            window: WINDOWS[0],
            rank_by: RankBy::Entities,
            paused: false,
            snapshot: None,
            selected: 0,
        }
    }

    /// Takes a fresh snapshot unless paused.
    pub fn refresh(&mut self) {
        if !self.paused {
            self.snapshot = Some(self.hub.snapshot_by(
                self.window,
                SystemTime::now(),
                self.rank_by,
            ));
        }
    }

    pub fn handle_key(&mut self, key: &KeyEvent) -> DashboardAction {
        match key.code {
            KeyCode::Char('s') => {
                self.rank_by = match self.rank_by {
                    RankBy::Entities => RankBy::Throttled,
                    RankBy::Throttled => RankBy::Entities,
                };
                self.paused = false;
                self.refresh();
                DashboardAction::None
            }
            KeyCode::Char('w') => {
                let i = WINDOWS.iter().position(|w| *w == self.window).unwrap_or(0);
                self.window = WINDOWS[(i + 1) % WINDOWS.len()];
                self.paused = false;
                self.refresh();
                DashboardAction::None
            }
            KeyCode::Char(' ') => {
                self.paused = !self.paused;
                if !self.paused {
                    self.refresh();
                }
                DashboardAction::Message(if self.paused {
                    "dashboard paused (space resumes)".into()
                } else {
                    "dashboard live".into()
                })
            }
            KeyCode::Char('x') | KeyCode::Char('X') => {
                let Some(snap) = &self.snapshot else {
                    return DashboardAction::Message("nothing to export yet".into());
                };
                let csv = key.code == KeyCode::Char('X');
                let contents = if csv {
                    snap.to_csv().map_err(|e| e.to_string())
                } else {
                    snap.to_json().map_err(|e| e.to_string())
                };
                match contents {
                    Ok(contents) => DashboardAction::Export {
                        file_name: format!(
                            "tabletop-dashboard-{}.{}",
                            snap.now_unix_secs,
                            if csv { "csv" } else { "json" }
                        ),
                        contents,
                    },
                    Err(e) => DashboardAction::Message(format!("export failed: {e}")),
                }
            }
            KeyCode::Down | KeyCode::Char('j') => {
                let n = self.snapshot.as_ref().map_or(0, |s| s.partitions.len());
                self.selected = (self.selected + 1).min(n.saturating_sub(1));
                DashboardAction::None
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.selected = self.selected.saturating_sub(1);
                DashboardAction::None
            }
            _ => DashboardAction::Unhandled,
        }
    }
}

fn rate(v: f64) -> String {
    if v >= 100.0 {
        group(v.round() as u64)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "·".into(),
    }
}

fn warning_label(kind: WarningKind) -> &'static str {
    match kind {
        WarningKind::HotPartition => "HOT PARTITION",
        WarningKind::AccountOverTarget => "ACCOUNT OVER TARGET",
        WarningKind::AppendOnly => "APPEND-ONLY KEYS",
        WarningKind::PrependOnly => "PREPEND-ONLY KEYS",
        WarningKind::TableScan => "TABLE SCANS",
        WarningKind::RetryStorm => "RETRY STORM",
    }
}

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A one-line sparkline of the last `width` values, scaled to `max` (or their own maximum).
pub fn sparkline_text(values: &[u32], width: usize, max: Option<u32>) -> String {
    let tail = &values[values.len().saturating_sub(width)..];
    let top = max
        .unwrap_or(0)
        .max(tail.iter().copied().max().unwrap_or(0))
        .max(1);
    tail.iter()
        .map(|&v| {
            if v == 0 {
                ' '
            } else {
                BARS[((v as u64 * 7) / top as u64).min(7) as usize]
            }
        })
        .collect()
}

pub fn draw(frame: &mut Frame, t: &Theme, d: &Dashboard, area: Rect, focused: bool) {
    let live = if d.paused {
        Span::styled(
            " PAUSED ",
            t.style(Slot::Warning).add_modifier(Modifier::REVERSED),
        )
    } else {
        Span::styled(" LIVE ", t.style(Slot::Success))
    };
    let heading = Line::from(vec![
        Span::styled(
            " Dashboard ",
            t.style(if focused {
                Slot::TitleFocused
            } else {
                Slot::Title
            }),
        ),
        Span::styled(
            format!(
                "· {} · last {} s · by {} ",
                d.source,
                d.window.as_secs(),
                match d.rank_by {
                    RankBy::Entities => "entities/s",
                    RankBy::Throttled => "throttling",
                }
            ),
            t.style(Slot::Muted),
        ),
        live,
    ]);
    let hints = Line::from(Span::styled(
        " s sort · w window (10 s / 60 s / 5 min) · space pause · x export JSON · X export CSV ",
        t.style(Slot::Muted),
    ));
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(t.style(if focused {
            Slot::BorderFocused
        } else {
            Slot::Border
        }))
        .title(heading)
        .title_bottom(hints);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(snap) = &d.snapshot else {
        frame.render_widget(
            Paragraph::new(Span::styled("collecting…", t.style(Slot::Muted))),
            inner,
        );
        return;
    };
    let Some(account) = snap.account() else {
        let text = vec![
            Line::from(Span::styled("No traffic yet.", t.style(Slot::Muted))),
            Line::from(Span::styled(
                "The console's own requests appear here; `tabletop proxy` shows an application's traffic, and `tabletop demo` runs a synthetic one.",
                t.style(Slot::Muted),
            )),
        ];
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), inner);
        return;
    };

    let warnings_h = (snap.warnings.len() as u16 * 2).clamp(1, 8) + 1;
    let chart_h = if inner.height >= 30 { 10 } else { 6 };
    let [summary, charts, table, warnings] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(chart_h),
        Constraint::Min(4),
        Constraint::Length(warnings_h),
    ])
    .areas(inner);

    // Summary line.
    let over = account.pct_of_target >= 100.0;
    let mut spans = vec![
        Span::styled(format!("{} ", account.account), t.style(Slot::ProfileBadge)),
        Span::styled(
            format!("{} entities/s", rate(account.entities_per_s)),
            t.style(if over {
                Slot::GaugeHot
            } else if account.pct_of_target >= 75.0 {
                Slot::GaugeWarn
            } else {
                Slot::GaugeOk
            }),
        ),
        Span::styled(
            format!(
                " ({:.0} % of {})",
                account.pct_of_target,
                group(snap.account_target as u64)
            ),
            t.style(Slot::Muted),
        ),
        Span::raw(format!(" · {} req/s", rate(account.requests_per_s))),
        Span::styled(
            format!(" · throttled {:.1} %", account.throttled_pct),
            t.style(if account.throttled_pct > 0.0 {
                Slot::Error
            } else {
                Slot::Muted
            }),
        ),
        Span::raw(format!(
            " · 503 ×{} · 500 ×{} · timeouts ×{} · retries {}/s · p50 {} ms · p99 {} ms",
            account.totals.server_busy,
            account.totals.server_timeouts,
            account.totals.client_timeouts,
            rate(account.retries_per_s),
            ms(account.p50_ms),
            ms(account.p99_ms)
        )),
    ];
    if snap.accounts.len() > 1 {
        spans.push(Span::styled(
            format!(" · +{} accounts", snap.accounts.len() - 1),
            t.style(Slot::Muted),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), summary);

    // Account entities/s against its target, and throttled % over time.
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(65), Constraint::Percentage(35)]).areas(charts);
    let n = account.series.len().max(1);
    let points: Vec<(f64, f64)> = account
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| (i as f64, s.totals.entities as f64))
        .collect();
    let peak = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let target = snap.account_target as f64;
    let y_max = (peak.max(target * 0.25) * 1.15).max(10.0);
    let target_line: Vec<(f64, f64)> = if target <= y_max {
        vec![(0.0, target), ((n - 1) as f64, target)]
    } else {
        Vec::new()
    };
    let datasets = vec![
        Dataset::default()
            .name("entities/s")
            .marker(symbols::Marker::Braille)
            .graph_type(GraphType::Line)
            .style(t.style(Slot::Sparkline))
            .data(&points),
        Dataset::default()
            .name(format!("target {}", group(snap.account_target as u64)))
            .marker(symbols::Marker::Dot)
            .graph_type(GraphType::Line)
            .style(t.style(Slot::GaugeHot))
            .data(&target_line),
    ];
    let chart = Chart::new(datasets)
        .block(Block::default().title(Span::styled("account entities/s", t.style(Slot::Header))))
        .x_axis(
            Axis::default()
                .bounds([0.0, (n.saturating_sub(1)).max(1) as f64])
                .style(t.style(Slot::Muted)),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, y_max])
                .labels(vec![Span::raw("0"), Span::raw(rate(y_max))])
                .style(t.style(Slot::Muted)),
        );
    frame.render_widget(chart, left);
    let throttled: Vec<u64> = account
        .series
        .iter()
        .map(|s| (s.totals.throttled_pct() * 10.0).round() as u64)
        .collect();
    let tail = &throttled[throttled
        .len()
        .saturating_sub(right.width.saturating_sub(2) as usize)..];
    let spark = Sparkline::default()
        .block(Block::default().title(Span::styled(
            format!(
                    "throttled % (now {:.1} %)",
                    account
                        .series
                        .last()
                        .map_or(0.0, |s| s.totals.throttled_pct())
                ),
            t.style(Slot::Header),
        )))
        .data(tail)
        .max(1000)
        .style(t.style(Slot::Error));
    frame.render_widget(spark, right);

    // Top partitions.
    // The trend column only where there is room for names beside it.
    let trend_w = if table.width >= 110 { 16usize } else { 0 };
    let name_w = (table.width as usize)
        .saturating_sub(62 + trend_w)
        .clamp(12, 48);
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "{:<name_w$} {:>7} {:>8} {:>6} {:>6} {:>5} {:>7} {:>6} {:>6}  {}",
            "table / partition",
            "req/s",
            "ent/s",
            "%tgt",
            "503",
            "500",
            "retries",
            "p50",
            "p99",
            if trend_w > 0 { "entities/s" } else { "" }
        ),
        t.style(Slot::Header),
    ))];
    let visible = table.height.saturating_sub(1) as usize;
    let start = d.selected.saturating_sub(visible.saturating_sub(1));
    for (i, p) in snap
        .partitions
        .iter()
        .enumerate()
        .skip(start)
        .take(visible.saturating_sub(1))
    {
        let mut name = format!("{}/{}", p.table, p.partition_key);
        if name.chars().count() > name_w {
            name = name.chars().take(name_w - 1).collect::<String>() + "…";
        }
        let hot = p.pct_of_target >= 100.0;
        let slot = if hot {
            Slot::GaugeHot
        } else if p.pct_of_target >= 75.0 {
            Slot::GaugeWarn
        } else {
            Slot::Base
        };
        let mut line = Line::from(vec![
            Span::styled(
                format!(
                    "{:<name_w$} {:>7} {:>8} {:>5.0}% {:>6} {:>5} {:>7} {:>6} {:>6}  ",
                    name,
                    rate(p.requests_per_s),
                    rate(p.entities_per_s),
                    p.pct_of_target,
                    p.totals.server_busy,
                    p.totals.server_timeouts,
                    p.totals.retries,
                    ms(p.p50_ms),
                    ms(p.p99_ms),
                ),
                t.style(slot),
            ),
            Span::styled(
                if trend_w > 0 {
                    sparkline_text(&p.entities_series, trend_w, Some(snap.partition_target))
                } else {
                    String::new()
                },
                t.style(Slot::Sparkline),
            ),
        ]);
        if i == d.selected && focused {
            line = line.style(t.style(Slot::Selected));
        }
        lines.push(line);
    }
    if snap.partitions.is_empty() {
        lines.push(Line::from(Span::styled(
            "no partition traffic in the window",
            t.style(Slot::Muted),
        )));
    } else if snap.other.requests > 0 && lines.len() < visible {
        lines.push(Line::from(Span::styled(
            format!(
                "{:<name_w$} {:>7} requests, {} entities, 503 ×{} (untracked partitions, scans, table operations)",
                "other",
                group(snap.other.requests),
                group(snap.other.entities),
                snap.other.server_busy
            ),
            t.style(Slot::Muted),
        )));
    }
    frame.render_widget(Paragraph::new(lines), table);

    // Warnings from the seeds.
    let mut lines = vec![Line::from(Span::styled(
        format!("Warnings ({})", snap.warnings.len()),
        t.style(Slot::Header),
    ))];
    if snap.warnings.is_empty() {
        lines[0] = Line::from(Span::styled(
            "No warnings: no hot partition, key-order pattern, scan or retry storm in the window.",
            t.style(Slot::Success),
        ));
    }
    for w in &snap.warnings {
        lines.push(Line::from(vec![
            Span::styled(
                format!("⚠ {} ", warning_label(w.kind)),
                t.style(Slot::Warning).add_modifier(Modifier::BOLD),
            ),
            Span::raw(w.subject.clone()),
        ]));
        lines.push(Line::from(Span::styled(
            format!("  why: {}", w.why),
            t.style(Slot::Muted),
        )));
    }
    frame.render_widget(Paragraph::new(lines), warnings);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_to_the_target() {
        // The target is the full height unless the data goes beyond it.
        assert_eq!(sparkline_text(&[0, 500, 1000, 2000], 4, Some(2000)), " ▂▄█");
        assert_eq!(sparkline_text(&[0, 1000], 2, Some(2000)), " ▄");
        assert_eq!(
            sparkline_text(&[0, 1000, 2000, 4000], 4, Some(2000)),
            " ▂▄█"
        );
        assert_eq!(sparkline_text(&[5; 20], 3, None).chars().count(), 3);
    }
}
