//! Drawing: a pure function of the app state (`draw(frame, &app)`), plus the pane areas it
//! used, which the app keeps for mouse hits.

use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::app::{scroll_for, App, Areas, Level, Overlay, Pane, TreeRow};
use super::grid::{self, CellKind, Grid, PINNED};
use super::input::Input;
use super::theme::{Slot, Theme};
use crate::azure::{EdmType, EdmValue};

const SPINNER: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];

/// Draws everything and returns the areas of the panes.
pub fn draw(frame: &mut Frame, app: &App) -> Areas {
    let t = &app.theme;
    let area = frame.area();
    frame.render_widget(Block::default().style(t.style(Slot::Base)), area);
    let [body, status] = Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
    let tables_width = (area.width / 5).clamp(20, 36).min(area.width / 2);
    let [tables, main] =
        Layout::horizontal([Constraint::Length(tables_width), Constraint::Min(10)]).areas(body);

    draw_tables(frame, app, tables);
    match (app.focus, &app.editor) {
        (Pane::Entity, _) => draw_entity(frame, app, main),
        (Pane::Editor, Some(ed)) => {
            super::editor_view::draw(frame, &app.theme, ed, main, app.local_time)
        }
        (Pane::Dashboard, _) => {
            super::dashboard::draw(frame, &app.theme, &app.dashboard, main, true)
        }
        (Pane::Stress, _) => match &app.stress {
            Some((_, view)) => super::stress_view::draw(frame, &app.theme, view, main),
            None => draw_grid(frame, app, main),
        },
        _ => draw_grid(frame, app, main),
    }
    draw_status(frame, app, status);
    if let Some(overlay) = &app.overlay {
        draw_overlay(frame, app, overlay, main, status);
    }
    Areas { tables, main }
}

fn pane_block<'a>(t: &Theme, title: Line<'a>, focused: bool) -> Block<'a> {
    Block::default()
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
        .title(title)
}

fn title<'a>(t: &Theme, text: impl Into<String>, focused: bool) -> Line<'a> {
    Line::from(Span::styled(
        format!(" {} ", text.into()),
        t.style(if focused {
            Slot::TitleFocused
        } else {
            Slot::Title
        }),
    ))
}

fn spinner(app: &App) -> &'static str {
    SPINNER[app.spinner % SPINNER.len()]
}

fn draw_tables(frame: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    let focused = app.focus == Pane::Tables;
    let mut heading = "Tables".to_string();
    if !app.tables_filter.is_empty() {
        heading = format!("Tables /{}", app.tables_filter);
    }
    let block = pane_block(t, title(t, heading, focused), focused);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let rows = app.tree_rows();
    let height = inner.height as usize;
    let cursor = app.tables_cursor.min(rows.len().saturating_sub(1));
    let scroll = scroll_for(cursor, app.tables_scroll, height);
    let mut lines = Vec::with_capacity(height);
    for (i, row) in rows.iter().enumerate().skip(scroll).take(height) {
        let selected = i == cursor;
        let line = match *row {
            TreeRow::Source(si) => {
                let s = &app.sources[si];
                let mut spans = vec![Span::styled(
                    if s.expanded { "▾ " } else { "▸ " },
                    t.style(Slot::Muted),
                )];
                let mut name_style = t.style(Slot::ProfileBadge);
                if let Some(c) = s.color.as_deref().and_then(|c| t.profile_color(c)) {
                    name_style = name_style.fg(c);
                }
                spans.push(Span::styled(
                    s.name.clone(),
                    name_style.add_modifier(Modifier::BOLD),
                ));
                if app.source_read_only(si) {
                    spans.push(Span::raw(" "));
                    spans.push(Span::styled(" RO ", t.style(Slot::ReadOnlyBadge)));
                }
                if s.loaded {
                    let more = if s.next_table.is_some() { "+" } else { "" };
                    spans.push(Span::styled(
                        format!(" {}{more}", s.tables.len()),
                        t.style(Slot::Muted),
                    ));
                }
                Line::from(spans)
            }
            TreeRow::Table(si, ti) => Line::from(vec![
                Span::raw("   "),
                Span::raw(app.sources[si].tables[ti].clone()),
            ]),
            TreeRow::Status(si) => {
                let s = &app.sources[si];
                match (&s.client, &s.error, s.loading) {
                    (Err(e), _, _) => {
                        Line::from(Span::styled(format!("   ✗ {e}"), t.style(Slot::Error)))
                    }
                    (_, _, Some(_)) => Line::from(Span::styled(
                        format!("   {} loading tables…", spinner(app)),
                        t.style(Slot::Muted),
                    )),
                    (_, Some(e), _) => {
                        Line::from(Span::styled(format!("   ✗ {e}"), t.style(Slot::Error)))
                    }
                    _ => Line::from(Span::styled(
                        "   (no tables; i creates one)",
                        t.style(Slot::Muted),
                    )),
                }
            }
        };
        let line = if selected {
            line.style(t.style(if focused {
                Slot::Selected
            } else {
                Slot::SelectedUnfocused
            }))
        } else {
            line
        };
        lines.push(line);
    }
    if rows.is_empty() {
        lines.push(Line::from(Span::styled(
            "no profiles",
            t.style(Slot::Muted),
        )));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

fn draw_grid(frame: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    let focused = app.focus == Pane::Grid;
    let Some(g) = &app.grid else {
        let block = pane_block(t, title(t, "Entities", focused), focused);
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let mut text = vec![
            Line::from(""),
            Line::from(Span::styled("No table open.", t.style(Slot::Muted))),
            Line::from(Span::styled(
                format!(
                    "Pick one in Tables and press {} — or type :table NAME. {} shows every key.",
                    app.keymap.hint(super::keys::Action::Open),
                    app.keymap.hint(super::keys::Action::Help)
                ),
                t.style(Slot::Muted),
            )),
        ];
        // The tree has room for a few characters of a source's problem; here it is whole.
        if let Some(s) = app.current_source().and_then(|si| app.sources.get(si)) {
            if let Some(problem) = s.client.as_ref().err().or(s.error.as_ref()) {
                text.push(Line::from(""));
                text.push(Line::from(Span::styled(
                    format!("✗ {}: {problem}", s.name),
                    t.style(Slot::Error),
                )));
            }
        }
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), inner);
        return;
    };
    let filter = g.spec.filter.as_deref().unwrap_or("all rows");
    let mut heading = vec![Span::styled(
        format!(" {} ", g.table),
        t.style(if focused {
            Slot::TitleFocused
        } else {
            Slot::Title
        }),
    )];
    heading.push(Span::styled(format!("· {filter} "), t.style(Slot::Muted)));
    heading.push(Span::styled(
        format!("· {} ", g.class.label()),
        t.style(Slot::Warning),
    ));
    if let Some(sel) = &g.spec.select {
        heading.push(Span::styled(
            format!("· select {} ", sel.join(",")),
            t.style(Slot::Muted),
        ));
    }
    let mut footer = vec![Span::raw(" "), Span::raw(g.position())];
    if let Some(n) = &g.next {
        footer.push(Span::styled(
            format!(" · next {}", token_short(n)),
            t.style(Slot::Muted),
        ));
    }
    if !g.marked.is_empty() {
        footer.push(Span::styled(
            format!(" · {} marked", g.marked.len()),
            t.style(Slot::Marked),
        ));
    }
    if let Some(s) = &g.search {
        footer.push(Span::styled(
            format!(" · /{s}: {} of {}", g.visible_len(), g.rows.len()),
            t.style(Slot::SearchMatch),
        ));
    }
    footer.push(Span::raw(" "));
    let block = pane_block(t, Line::from(heading), focused).title_bottom(Line::from(footer));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height < 2 || inner.width < 4 {
        return;
    }

    // States before there are rows to show.
    let state_line = if g.loading.is_some() && !g.loaded_once {
        Some((
            if g.scanned > 0 {
                format!(
                    "{} scanned {} pages, no match yet… (Esc cancels)",
                    spinner(app),
                    g.scanned
                )
            } else {
                format!("{} loading {}…", spinner(app), g.table)
            },
            Slot::Muted,
        ))
    } else if let (Some(e), false) = (&g.error, g.loaded_once) {
        Some((format!("✗ {e}  (r retries)"), Slot::Error))
    } else if g.loaded_once && g.rows.is_empty() {
        Some((
            if g.spec.filter.is_some() {
                "No entity matches the filter on this page.".to_string()
            } else {
                "The table is empty.".to_string()
            },
            Slot::Muted,
        ))
    } else {
        None
    };
    if let Some((text, slot)) = state_line {
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(text, t.style(slot))))
                .wrap(Wrap { trim: false }),
            inner,
        );
        return;
    }

    let cols = visible_columns(g, inner.width);
    let header: Vec<Span> = cols
        .iter()
        .flat_map(|&(ci, w)| {
            let c = &g.columns[ci];
            let mut style = t.style(Slot::Header);
            if ci == g.column && focused {
                style = style.add_modifier(Modifier::UNDERLINED);
            }
            [
                Span::styled(fit(&grid::header_text(c), w), style),
                Span::raw(" "),
            ]
        })
        .collect();
    let mut lines = vec![Line::from(header)];
    let height = inner.height as usize - 1;
    let len = g.visible_len();
    let cursor = g.cursor.min(len.saturating_sub(1));
    let scroll = scroll_for(cursor, g.scroll, height);
    for v in scroll..(scroll + height).min(len) {
        let Some(ri) = g.row_at(v) else { break };
        let e = &g.rows[ri];
        let marked = g.is_marked(e);
        let mut spans = Vec::with_capacity(cols.len() * 2);
        for &(ci, w) in &cols {
            let (text, kind) = grid::cell_text(e, &g.columns[ci].name, app.local_time);
            // The mark goes on every cell: a row-level style would lose to the cells' colours.
            let mut style = cell_style(t, kind);
            if marked {
                style = style.patch(t.style(Slot::Marked));
            }
            spans.push(Span::styled(fit(&text, w), style));
            spans.push(Span::raw(" "));
        }
        let mut line = Line::from(spans);
        if v == cursor {
            line = line.style(t.style(if focused {
                Slot::Selected
            } else {
                Slot::SelectedUnfocused
            }));
        }
        lines.push(line);
    }
    if g.loading.is_some() {
        // More is on its way; say so on the last line without hiding rows.
        let text = if g.scanned > 0 {
            format!(
                "{} scanned {} pages, no match yet…",
                spinner(app),
                g.scanned
            )
        } else {
            format!("{} loading…", spinner(app))
        };
        if lines.len() > height {
            lines.pop();
        }
        lines.push(Line::from(Span::styled(text, t.style(Slot::Spinner))));
    } else if let Some(e) = &g.error {
        if lines.len() > height {
            lines.pop();
        }
        lines.push(Line::from(Span::styled(
            format!("✗ {e}"),
            t.style(Slot::Error),
        )));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// Columns that fit: the pinned keys, then from the selected column's neighbourhood onwards.
fn visible_columns(g: &Grid, width: u16) -> Vec<(usize, u16)> {
    let mut out = Vec::new();
    let mut used: u16 = 0;
    let push = |ci: usize, out: &mut Vec<(usize, u16)>, used: &mut u16| -> bool {
        let w = g.columns[ci].width;
        if *used + 1 >= width {
            return false;
        }
        let w = w.min(width - *used - 1);
        out.push((ci, w));
        *used += w + 1;
        true
    };
    for ci in 0..PINNED.min(g.columns.len()) {
        push(ci, &mut out, &mut used);
    }
    // Scroll so the selected column is the last visible one when it would not fit otherwise.
    let selected = g.column.max(PINNED);
    let mut start = PINNED;
    let remaining = width.saturating_sub(used);
    let mut span: u16 = 0;
    for ci in (PINNED..=selected.min(g.columns.len().saturating_sub(1))).rev() {
        span += g.columns[ci].width + 1;
        if span > remaining {
            start = (ci + 1).min(selected);
            break;
        }
        start = ci;
    }
    for ci in start..g.columns.len() {
        if !push(ci, &mut out, &mut used) {
            break;
        }
    }
    out
}

fn cell_style(t: &Theme, kind: CellKind) -> Style {
    t.style(match kind {
        CellKind::Key => Slot::Key,
        CellKind::Missing => Slot::Missing,
        CellKind::Empty => Slot::Empty,
        CellKind::System => Slot::Muted,
        CellKind::Value(ty) => type_slot(ty),
    })
}

fn type_slot(ty: EdmType) -> Slot {
    match ty {
        EdmType::String => Slot::TypeString,
        EdmType::Int32 | EdmType::Int64 | EdmType::Double => Slot::TypeNumber,
        EdmType::DateTime => Slot::TypeDateTime,
        EdmType::Boolean => Slot::TypeBoolean,
        EdmType::Guid => Slot::TypeGuid,
        EdmType::Binary => Slot::TypeBinary,
    }
}

/// Pads or cuts (with …) to exactly `width` columns.
fn fit(text: &str, width: u16) -> String {
    let width = width as usize;
    let n = text.chars().count();
    if n <= width {
        let mut s = text.to_string();
        s.extend(std::iter::repeat_n(' ', width - n));
        s
    } else if width == 0 {
        String::new()
    } else {
        let mut s: String = text.chars().take(width - 1).collect();
        s.push('…');
        s
    }
}

fn token_short(c: &crate::azure::Continuation) -> String {
    let mut s = c.next_partition_key.clone();
    if let Some(rk) = &c.next_row_key {
        s.push('/');
        s.push_str(rk);
    }
    if s.chars().count() > 32 {
        s = s.chars().take(31).collect::<String>() + "…";
    }
    s
}

fn draw_entity(frame: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    let view = &app.entity;
    let Some(e) = &view.entity else { return };
    let heading = format!("{} · {} / {}", view.table, e.partition_key, e.row_key);
    let mut block = pane_block(t, title(t, heading, true), true);
    if view.loading.is_some() {
        block = block.title_bottom(Line::from(format!(" {} refreshing… ", spinner(app))));
    } else {
        block = block.title_bottom(Line::from(Span::styled(
            format!(
                " {} copy JSON · {} reload · {} back ",
                app.keymap.hint(super::keys::Action::Copy),
                app.keymap.hint(super::keys::Action::Refresh),
                app.keymap.hint(super::keys::Action::Back)
            ),
            t.style(Slot::Muted),
        )));
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let name_w = e
        .properties
        .iter()
        .map(|p| p.name.chars().count())
        .chain([12])
        .max()
        .unwrap_or(12)
        .min(32);
    let mut lines: Vec<Line> = Vec::new();
    let label = |s: &str| Span::styled(format!("{s:<name_w$}  "), t.style(Slot::Header));
    // Values wrap at their own column (a hanging indent), not back under the names.
    let width = inner.width as usize;
    let field = |lines: &mut Vec<Line<'static>>, lead: Vec<Span<'static>>, text: &str, style| {
        let indent: usize = lead.iter().map(Span::width).sum();
        let mut lead = Some(lead);
        for part in text.split('\n') {
            for chunk in wrap_at(part, width.saturating_sub(indent).max(8)) {
                let mut spans = lead
                    .take()
                    .unwrap_or_else(|| vec![Span::raw(" ".repeat(indent))]);
                spans.push(Span::styled(chunk, style));
                lines.push(Line::from(spans));
            }
        }
    };
    field(
        &mut lines,
        vec![label("ETag")],
        e.etag.as_deref().unwrap_or("—"),
        t.style(Slot::Muted),
    );
    field(
        &mut lines,
        vec![label("Timestamp")],
        &e.timestamp
            .map(|d| grid::datetime_text(d, app.local_time))
            .unwrap_or_else(|| "—".into()),
        t.style(Slot::TypeDateTime),
    );
    field(
        &mut lines,
        vec![label("PartitionKey")],
        &e.partition_key,
        t.style(Slot::Key),
    );
    field(
        &mut lines,
        vec![label("RowKey")],
        &e.row_key,
        t.style(Slot::Key),
    );
    lines.push(Line::from(Span::styled(
        format!("{} properties", e.properties.len()),
        t.style(Slot::Muted),
    )));
    for p in &e.properties {
        let ty = p.value.edm_type();
        let type_span = Span::styled(format!("{:<9}", ty.short_name()), t.style(Slot::Muted));
        let value_style = if matches!(&p.value, EdmValue::String(s) if s.is_empty()) {
            t.style(Slot::Empty)
        } else {
            t.style(type_slot(ty))
        };
        let text = match &p.value {
            EdmValue::String(s) if s.is_empty() => "\"\" (empty string)".to_string(),
            EdmValue::DateTime(d) => grid::datetime_text(*d, app.local_time),
            EdmValue::Binary(b) => {
                format!("{} · base64 {}", grid::binary_preview(b), p.value.to_text())
            }
            v => v.to_text(),
        };
        field(
            &mut lines,
            vec![label(&p.name), type_span, Span::raw(" ")],
            &text,
            value_style,
        );
    }
    if let Some(err) = &view.error {
        lines.push(Line::from(Span::styled(
            format!("✗ {err}"),
            t.style(Slot::Error),
        )));
    }
    let scroll = view.scroll.min(lines.len().saturating_sub(1)) as u16;
    frame.render_widget(
        Paragraph::new(lines)
            .scroll((scroll, 0))
            .wrap(Wrap { trim: false }),
        inner,
    );
}

/// Cuts text into pieces at most `width` columns wide (wide characters count twice).
fn wrap_at(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut piece = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = Span::raw(c.to_string()).width();
        if used + w > width && !piece.is_empty() {
            out.push(std::mem::take(&mut piece));
            used = 0;
        }
        piece.push(c);
        used += w;
    }
    out.push(piece);
    out
}

fn draw_status(frame: &mut Frame, app: &App, area: Rect) {
    use std::sync::atomic::Ordering::Relaxed;
    let t = &app.theme;
    let mut spans: Vec<Span> = Vec::new();
    let source = app.current_source();
    if let Some(si) = source {
        if app.source_read_only(si) {
            spans.push(Span::styled(" READ-ONLY ", t.style(Slot::ReadOnlyBadge)));
            spans.push(Span::raw(" "));
        }
        let mut style = t.style(Slot::ProfileBadge);
        if let Some(c) = app.sources[si]
            .color
            .as_deref()
            .and_then(|c| t.profile_color(c))
        {
            style = style.fg(c);
        }
        spans.push(Span::styled(app.sources[si].name.clone(), style));
    } else if app.read_only_flag {
        spans.push(Span::styled(" READ-ONLY ", t.style(Slot::ReadOnlyBadge)));
    }
    let sep = || Span::styled(" · ", t.style(Slot::Muted));
    if let Some(g) = &app.grid {
        spans.push(sep());
        spans.push(Span::raw(g.table.clone()));
        spans.push(sep());
        spans.push(Span::styled(g.class.label(), t.style(Slot::Warning)));
        spans.push(sep());
        spans.push(Span::raw(g.position()));
    }
    if app.in_flight() > 0 {
        spans.push(sep());
        spans.push(Span::styled(
            format!("{} {} in flight", spinner(app), app.in_flight()),
            t.style(Slot::Spinner),
        ));
    }
    let retries = app.traffic.retries.load(Relaxed);
    let busy = app.traffic.server_busy.load(Relaxed);
    if retries > 0 {
        spans.push(sep());
        spans.push(Span::styled(
            format!("retries {retries}"),
            t.style(Slot::Warning),
        ));
    }
    if busy > 0 {
        spans.push(sep());
        spans.push(Span::styled(format!("503 ×{busy}"), t.style(Slot::Error)));
    }
    if let Some(m) = &app.message {
        spans.push(sep());
        let slot = match m.level {
            Level::Info => Slot::StatusBar,
            Level::Success => Slot::Success,
            Level::Warning => Slot::Warning,
            Level::Error => Slot::Error,
        };
        spans.push(Span::styled(m.text.clone(), t.style(slot)));
    }
    let help = Span::styled(
        format!(" {} help ", app.keymap.hint(super::keys::Action::Help)),
        t.style(Slot::StatusKey),
    );
    let help_w = help.width() as u16;
    let [left, right] =
        Layout::horizontal([Constraint::Min(1), Constraint::Length(help_w)]).areas(area);
    frame.render_widget(
        Paragraph::new(Line::from(spans)).style(t.style(Slot::StatusBar)),
        left,
    );
    frame.render_widget(
        Paragraph::new(Line::from(help)).style(t.style(Slot::StatusBar)),
        right,
    );
}

pub(crate) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

pub(crate) fn popup<'a>(t: &Theme, heading: &str) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(t.style(Slot::PopupBorder))
        .style(t.style(Slot::Popup))
        .title(Line::from(Span::styled(
            format!(" {heading} "),
            t.style(Slot::TitleFocused),
        )))
}

/// Draws an input and places the terminal cursor in it.
fn input_line(
    frame: &mut Frame,
    t: &Theme,
    prefix: &str,
    input: &Input,
    area: Rect,
    active: bool,
    style: Style,
) {
    let prefix_w = prefix.chars().count() as u16;
    let visible = area.width.saturating_sub(prefix_w + 1) as usize;
    let chars: Vec<char> = input
        .text()
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .collect();
    let start = input.cursor().saturating_sub(visible);
    let shown: String = chars.iter().skip(start).take(visible).collect();
    if active {
        frame.set_cursor_position(Position::new(
            area.x + prefix_w + (input.cursor() - start) as u16,
            area.y,
        ));
    }
    let p = Paragraph::new(Line::from(vec![
        Span::styled(prefix.to_string(), t.style(Slot::StatusKey)),
        Span::styled(shown, t.style(Slot::Input)),
    ]))
    .style(style);
    frame.render_widget(p, area);
}

fn draw_overlay(frame: &mut Frame, app: &App, overlay: &Overlay, main: Rect, status: Rect) {
    let t = &app.theme;
    match overlay {
        Overlay::Help { scroll } => {
            let area = centered(frame.area(), 96, frame.area().height.saturating_sub(2));
            frame.render_widget(Clear, area);
            let block = popup(t, "Keys (live bindings) · j/k scroll · Esc closes");
            let inner = block.inner(area);
            frame.render_widget(block, area);
            let mut lines = Vec::new();
            for (keys, _action, description) in app.keymap.help_rows() {
                lines.push(Line::from(vec![
                    Span::styled(format!("{keys:>14}  "), t.style(Slot::StatusKey)),
                    Span::raw(description.to_string()),
                ]));
            }
            lines.push(Line::from(""));
            lines.push(Line::from(Span::styled("Commands", t.style(Slot::Header))));
            for (cmd, what) in [
                (":table NAME", "open a table of the current profile"),
                (":profile NAME", "jump to a profile"),
                (":filter EXPR", "set the server-side $filter"),
                (
                    ":theme NAME",
                    "switch theme (dark, light, high-contrast, ansi16, yours)",
                ),
                (
                    ":undo",
                    "revert this session's last change (conditional on its ETag)",
                ),
                (":dashboard", "the live partition dashboard (also 4)"),
                (
                    ":stress [N]",
                    "the seeds' partition stress test on N partitions (Esc stops)",
                ),
                (":q", "quit"),
            ] {
                lines.push(Line::from(vec![
                    Span::styled(format!("{cmd:>14}  "), t.style(Slot::StatusKey)),
                    Span::raw(what),
                ]));
            }
            // Keys that belong to one view, listed where people look for them.
            for (heading, rows) in [
                (
                    "In the editor",
                    &[
                        ("enter", "edit the cell (alt-enter: line break in a string)"),
                        ("t", "pick the type (the value is re-checked for it)"),
                        ("a / x", "add / remove a property"),
                        (
                            "s, ctrl-s",
                            "save: merge on the loaded ETag (replace when removing)",
                        ),
                        (
                            "m",
                            "merge ⇄ replace (new entity: insert ⇄ insert-or-replace)",
                        ),
                        ("F", "unconditional write, after typing force"),
                        ("E", "edit as JSON in $VISUAL / $EDITOR"),
                        (
                            "r / o / d",
                            "after a conflict: re-apply / overwrite / discard",
                        ),
                    ][..],
                ),
                (
                    "On the dashboard",
                    &[
                        ("s", "sort by entities/s or by throttling"),
                        ("w", "window: 60 s, 5 min, 10 s"),
                        ("space", "pause / resume"),
                        ("x / X", "export the view to JSON / CSV"),
                    ][..],
                ),
            ] {
                lines.push(Line::from(""));
                lines.push(Line::from(Span::styled(heading, t.style(Slot::Header))));
                for (k, what) in rows {
                    lines.push(Line::from(vec![
                        Span::styled(format!("{k:>14}  "), t.style(Slot::StatusKey)),
                        Span::raw(*what),
                    ]));
                }
            }
            frame.render_widget(Paragraph::new(lines).scroll((*scroll, 0)), inner);
        }
        Overlay::Command { input, error } => {
            frame.render_widget(Clear, status);
            input_line(frame, t, ":", input, status, true, t.style(Slot::StatusBar));
            if let Some(e) = error {
                let area = Rect {
                    y: status.y.saturating_sub(1),
                    height: 1,
                    ..status
                };
                frame.render_widget(Clear, area);
                frame.render_widget(
                    Paragraph::new(Span::styled(e.clone(), t.style(Slot::Error))),
                    area,
                );
            }
        }
        Overlay::Search { input } => {
            frame.render_widget(Clear, status);
            input_line(frame, t, "/", input, status, true, t.style(Slot::StatusBar));
        }
        Overlay::FilterBar {
            filter,
            select,
            field,
            error,
        } => {
            let width = main.width.saturating_sub(2);
            // Borders and three rows, plus the whole error (a parse error names the column).
            let error_rows = error.as_ref().map_or(0, |e| {
                let text_w = width.saturating_sub(2).max(1) as usize;
                let rows = Span::raw(e.as_str()).width().div_ceil(text_w);
                // Word wrapping can need a row more than the characters alone.
                (rows + usize::from(rows > 1)) as u16
            });
            let area = Rect {
                x: main.x + 1,
                y: main.y + 1,
                width,
                height: (5 + error_rows).min(main.height.saturating_sub(1)),
            };
            frame.render_widget(Clear, area);
            let block = popup(t, "Query · Enter applies · Tab switches · Esc cancels");
            let inner = block.inner(area);
            frame.render_widget(block, area);
            let rows = Layout::vertical([
                Constraint::Length(1),
                Constraint::Length(1),
                Constraint::Length(1),
                Constraint::Min(0),
            ])
            .split(inner);
            input_line(
                frame,
                t,
                "filter  ",
                filter,
                rows[0],
                *field == 0,
                Style::default(),
            );
            input_line(
                frame,
                t,
                "select  ",
                select,
                rows[1],
                *field == 1,
                Style::default(),
            );
            frame.render_widget(
                Paragraph::new(Span::styled(
                    "e.g. PartitionKey eq 'EU' and Amount gt 100L · select: Amount,Status (keys always included)",
                    t.style(Slot::Muted),
                )),
                rows[2],
            );
            if let Some(e) = error {
                frame.render_widget(
                    Paragraph::new(Span::styled(e.clone(), t.style(Slot::Error)))
                        .wrap(Wrap { trim: true }),
                    rows[3],
                );
            }
        }
        Overlay::CreateTable {
            source,
            name,
            error,
        } => {
            let area = centered(frame.area(), 60, 6);
            frame.render_widget(Clear, area);
            let block = popup(t, &format!("New table in {}", app.sources[*source].name));
            let inner = block.inner(area);
            frame.render_widget(block, area);
            let rows = Layout::vertical([
                Constraint::Length(1),
                Constraint::Length(1),
                Constraint::Min(0),
            ])
            .split(inner);
            input_line(frame, t, "name  ", name, rows[0], true, Style::default());
            let hint = error
                .clone()
                .unwrap_or_else(|| "3–63 letters and digits, starting with a letter".into());
            let style = if error.is_some() {
                t.style(Slot::Error)
            } else {
                t.style(Slot::Muted)
            };
            frame.render_widget(
                Paragraph::new(Span::styled(hint, style)).wrap(Wrap { trim: true }),
                rows[2],
            );
        }
        Overlay::DeleteEntities { keys } => {
            let area = centered(frame.area(), 64, 7);
            frame.render_widget(Clear, area);
            let heading = if keys.len() == 1 {
                format!("Delete {} / {}?", keys[0].0, keys[0].1)
            } else {
                format!("Delete {} marked entities?", keys.len())
            };
            let block = popup(t, &heading);
            let inner = block.inner(area);
            frame.render_widget(block, area);
            let text = "Each delete is conditional on the ETag you loaded (a changed entity is kept). It is journaled and can be undone with :undo.   y deletes · any other key cancels";
            frame.render_widget(
                Paragraph::new(Span::styled(text, t.style(Slot::Warning)))
                    .wrap(Wrap { trim: true }),
                inner,
            );
        }
        Overlay::DeleteTable {
            source,
            table,
            typed,
        } => {
            let area = centered(frame.area(), 64, 7);
            frame.render_widget(Clear, area);
            let block = popup(t, &format!("Delete table {table}?"));
            let inner = block.inner(area);
            frame.render_widget(block, area);
            let rows = Layout::vertical([
                Constraint::Length(2),
                Constraint::Length(1),
                Constraint::Min(0),
            ])
            .split(inner);
            frame.render_widget(
                Paragraph::new(Span::styled(
                    format!("Every entity in {table} ({}) will be deleted. Type the table's name to confirm:", app.sources[*source].name),
                    t.style(Slot::Warning),
                ))
                .wrap(Wrap { trim: true }),
                rows[0],
            );
            input_line(frame, t, "> ", typed, rows[1], true, Style::default());
            let matches = typed.text() == table;
            frame.render_widget(
                Paragraph::new(Span::styled(
                    if matches {
                        "Enter deletes · Esc cancels"
                    } else {
                        "Esc cancels"
                    },
                    t.style(if matches { Slot::Error } else { Slot::Muted }),
                )),
                rows[2],
            );
        }
    }
}
