//! Drawing the entity editor, its dialogs, and the three-column conflict view.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::editor::{Conflict, Editor, EditorKind, Field, Prompt};
use super::theme::{Slot, Theme};
use super::ui::{centered, popup};
use crate::azure::{EdmType, EdmValue, Entity};

const TYPE_W: usize = 9;

pub fn draw(frame: &mut Frame, t: &Theme, ed: &Editor, area: Rect, local_time: bool) {
    if let Some(Prompt::Conflict(c)) = &ed.prompt {
        draw_conflict(frame, t, ed, c, area);
        return;
    }
    let verb = match ed.kind {
        EditorKind::Edit if ed.read_only => "View",
        EditorKind::Edit => "Edit",
        EditorKind::New => "New",
        EditorKind::Clone => "Clone",
    };
    let mut heading = vec![Span::styled(
        format!(" {verb} {} ", ed.table),
        t.style(Slot::TitleFocused),
    )];
    if !ed.read_only {
        heading.push(Span::styled(
            format!("· {} ", ed.mode.label()),
            t.style(Slot::Warning),
        ));
    }
    if ed.force {
        heading.push(Span::styled(
            " FORCE (If-Match: *) ",
            t.style(Slot::Error).add_modifier(Modifier::REVERSED),
        ));
        heading.push(Span::raw(" "));
    } else if let Some(etag) = ed
        .original
        .as_ref()
        .and_then(|o| o.etag.as_ref())
        .filter(|_| ed.kind == EditorKind::Edit)
    {
        heading.push(Span::styled(
            format!("· if-match {etag} "),
            t.style(Slot::Muted),
        ));
    }
    if ed.is_modified() && !ed.read_only {
        heading.push(Span::styled("● modified ", t.style(Slot::Modified)));
    }
    let hints = if ed.read_only {
        " read-only viewer · Esc closes ".to_string()
    } else {
        " Enter edit · t type · a add · x remove · s save · m merge/replace · F force · E $EDITOR · Esc close ".to_string()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Thick)
        .border_style(t.style(Slot::BorderFocused))
        .title(Line::from(heading))
        .title_bottom(Line::from(Span::styled(hints, t.style(Slot::Muted))));
    let inner = block.inner(area);
    frame.render_widget(block, area);

    // Names get what they need, up to a quarter of the pane, so values keep most of the width.
    let name_w: usize = ed
        .rows
        .iter()
        .map(|r| r.name.chars().count())
        .chain([12])
        .max()
        .unwrap_or(12)
        .min((inner.width as usize / 4).max(12));
    let mut lines: Vec<Line> = Vec::new();
    let mut cursor_line = 0;
    lines.push(Line::from(vec![
        Span::styled(
            format!("  {:<name_w$} {:<TYPE_W$} ", "Property", "Type"),
            t.style(Slot::Header),
        ),
        Span::styled("Value", t.style(Slot::Header)),
    ]));
    let locked = !ed.keys_editable();
    for (i, (name, value)) in [("PartitionKey", &ed.partition_key), ("RowKey", &ed.row_key)]
        .into_iter()
        .enumerate()
    {
        if ed.cursor == i {
            cursor_line = lines.len();
        }
        let mut spans = vec![
            Span::raw(if ed.cursor == i { "› " } else { "  " }),
            Span::styled(format!("{name:<name_w$} "), t.style(Slot::Key)),
            Span::styled(format!("{:<TYPE_W$} ", "String"), t.style(Slot::Muted)),
            Span::styled(
                if value.is_empty() {
                    "(required)".to_string()
                } else {
                    value.clone()
                },
                value_style(t, ed, i, Field::Value, Slot::Key),
            ),
        ];
        if locked {
            spans.push(Span::styled("  locked", t.style(Slot::Muted)));
        }
        lines.push(Line::from(spans));
        push_error(&mut lines, t, ed, i);
    }
    if let Some(ts) = ed
        .original
        .as_ref()
        .and_then(|o| o.timestamp)
        .filter(|_| ed.kind == EditorKind::Edit)
    {
        lines.push(Line::from(vec![
            Span::styled(
                format!("  {:<name_w$} {:<TYPE_W$} ", "Timestamp", "DateTime"),
                t.style(Slot::Muted),
            ),
            Span::styled(
                super::grid::datetime_text(ts, local_time),
                t.style(Slot::Muted),
            ),
            Span::styled("  server-maintained, never sent", t.style(Slot::Muted)),
        ]));
    }
    for (i, row) in ed.rows.iter().enumerate() {
        let line_no = i + 2;
        if ed.cursor == line_no {
            cursor_line = lines.len();
        }
        let marker = if ed.row_modified(i) && ed.kind == EditorKind::Edit {
            "●"
        } else {
            " "
        };
        let value_lines: Vec<&str> = row.value.split('\n').collect();
        let type_slot = type_slot(row.ty);
        for (k, part) in value_lines.iter().enumerate() {
            let mut spans = Vec::new();
            if k == 0 {
                spans.push(Span::raw(if ed.cursor == line_no { "›" } else { " " }));
                spans.push(Span::styled(marker, t.style(Slot::Modified)));
                spans.push(Span::styled(
                    format!(
                        "{:<name_w$} ",
                        if row.name.is_empty() {
                            "(name)"
                        } else {
                            &row.name
                        }
                    ),
                    value_style(t, ed, line_no, Field::Name, Slot::Base),
                ));
                spans.push(Span::styled(
                    format!("{:<TYPE_W$} ", row.ty.short_name()),
                    value_style(t, ed, line_no, Field::Type, Slot::Muted),
                ));
            } else {
                spans.push(Span::raw(" ".repeat(2 + name_w + 1 + TYPE_W + 1)));
            }
            let shown = if row.value.is_empty() && row.ty == EdmType::String {
                "\"\" (empty string)".to_string()
            } else {
                part.to_string()
            };
            spans.push(Span::styled(
                shown,
                value_style(t, ed, line_no, Field::Value, type_slot),
            ));
            lines.push(Line::from(spans));
        }
        push_error(&mut lines, t, ed, line_no);
    }
    if !ed.read_only {
        lines.push(Line::from(Span::styled(
            "  + a adds a property",
            t.style(Slot::Muted),
        )));
    }
    if let Some(m) = &ed.message {
        lines.push(Line::from(""));
        let slot = if ed.errors.is_empty() {
            Slot::Info
        } else {
            Slot::Error
        };
        lines.push(Line::from(Span::styled(m.clone(), t.style(slot))));
    }
    if ed.saving {
        lines.push(Line::from(Span::styled("saving…", t.style(Slot::Spinner))));
    }
    let height = inner.height as usize;
    let scroll = cursor_line.saturating_sub(height.saturating_sub(3));
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll as u16, 0)),
        inner,
    );

    match &ed.prompt {
        Some(Prompt::Editing(input)) => {
            let label = match (ed.cursor, ed.field) {
                (0, _) => "PartitionKey".to_string(),
                (1, _) => "RowKey".to_string(),
                (i, Field::Name) => format!("name of property {}", i - 1),
                (i, _) => format!("{} ({})", ed.rows[i - 2].name, ed.rows[i - 2].ty.short_name()),
            };
            let area = bottom_popup(inner, 4);
            frame.render_widget(Clear, area);
            let block = popup(t, &format!("{label} · Enter keeps · Esc cancels · alt-Enter new line"));
            let input_area = block.inner(area);
            frame.render_widget(block, area);
            let text: String = input.text().chars().map(|c| if c == '\n' { '⏎' } else { c }).collect();
            let cursor_x = input.cursor().min(input_area.width.saturating_sub(1) as usize) as u16;
            frame.render_widget(Paragraph::new(Span::styled(text, t.style(Slot::Input))), input_area);
            frame.set_cursor_position((input_area.x + cursor_x, input_area.y));
        }
        Some(Prompt::TypePicker(sel)) => {
            let area = centered(inner, 30, EdmType::ALL.len() as u16 + 2);
            frame.render_widget(Clear, area);
            let block = popup(t, "Type");
            let list_area = block.inner(area);
            frame.render_widget(block, area);
            let lines: Vec<Line> = EdmType::ALL
                .iter()
                .enumerate()
                .map(|(i, ty)| {
                    let line = Line::from(format!(" {} ", ty.odata_name()));
                    if i == *sel {
                        line.style(t.style(Slot::Selected))
                    } else {
                        line
                    }
                })
                .collect();
            frame.render_widget(Paragraph::new(lines), list_area);
        }
        Some(Prompt::ConfirmReplace(removed)) => confirm(
            frame,
            t,
            inner,
            "Switch to Replace?",
            &format!(
                "Merge cannot remove a property ({}). Save with Replace instead? The entity then becomes exactly this form, still conditional on its ETag.   y replace · n keep editing",
                removed.join(", ")
            ),
        ),
        Some(Prompt::ConfirmForce(input)) => confirm(
            frame,
            t,
            inner,
            "Unconditional write",
            &format!(
                "Type force and Enter to save with If-Match: *, overwriting whatever changed since you loaded it.  > {}",
                input.text()
            ),
        ),
        Some(Prompt::ConfirmDiscard) => confirm(frame, t, inner, "Discard changes?", "Your edits are not saved.   y discard · any other key keeps editing"),
        Some(Prompt::Exists) => confirm(
            frame,
            t,
            inner,
            "Entity exists",
            "An entity with this PartitionKey and RowKey already exists (409). o opens it · any other key keeps editing (m switches to insert-or-replace)",
        ),
        _ => {}
    }
}

fn push_error<'a>(lines: &mut Vec<Line<'a>>, t: &Theme, ed: &Editor, line_no: usize) {
    if let Some(e) = ed.error_for(line_no) {
        lines.push(Line::from(Span::styled(
            format!("    ↳ {e}"),
            t.style(Slot::Error),
        )));
    }
}

fn value_style(
    t: &Theme,
    ed: &Editor,
    line: usize,
    field: Field,
    base: Slot,
) -> ratatui::style::Style {
    let style = t.style(base);
    if ed.cursor == line && ed.field == field {
        style.patch(t.style(Slot::Selected))
    } else {
        style
    }
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

fn bottom_popup(area: Rect, height: u16) -> Rect {
    let h = height.min(area.height);
    Rect {
        x: area.x,
        y: area.y + area.height - h,
        width: area.width,
        height: h,
    }
}

fn confirm(frame: &mut Frame, t: &Theme, area: Rect, title: &str, text: &str) {
    let dialog = centered(area, 70, 6);
    frame.render_widget(Clear, dialog);
    let block = popup(t, title);
    let inner = block.inner(dialog);
    frame.render_widget(block, dialog);
    frame.render_widget(
        Paragraph::new(Span::styled(text.to_string(), t.style(Slot::Warning)))
            .wrap(Wrap { trim: true }),
        inner,
    );
}

fn text_of(e: Option<&Entity>, name: &str) -> (String, bool) {
    match e.and_then(|e| e.get(name)) {
        None => ("·".into(), false),
        Some(v) => (short_value(v), true),
    }
}

fn short_value(v: &EdmValue) -> String {
    let text = match v {
        EdmValue::String(s) if s.is_empty() => "\"\"".to_string(),
        EdmValue::Binary(b) => super::grid::binary_preview(b),
        other => other.to_text().replace('\n', "⏎"),
    };
    format!("{text} ({})", v.edm_type().short_name())
}

/// Loaded | yours | server now, one line per property, differences highlighted.
fn draw_conflict(frame: &mut Frame, t: &Theme, ed: &Editor, c: &Conflict, area: Rect) {
    let title = if c.server.is_some() {
        format!(
            " Conflict: {} · {} / {} changed since you loaded it (412) ",
            ed.table, c.mine.partition_key, c.mine.row_key
        )
    } else {
        format!(
            " Conflict: {} · {} / {} was deleted since you loaded it (404) ",
            ed.table, c.mine.partition_key, c.mine.row_key
        )
    };
    let hints = if c.server.is_some() {
        " r re-apply your changes onto the server's version · o overwrite with yours (conditional on the new ETag) · d discard "
    } else {
        " r / o re-create it with your version (insert) · d discard "
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Thick)
        .border_style(t.style(Slot::Error))
        .title(Line::from(Span::styled(title, t.style(Slot::Error))))
        .title_bottom(Line::from(Span::styled(hints, t.style(Slot::Warning))));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let name_w = 18u16.min(inner.width / 4);
    let col_w = inner.width.saturating_sub(name_w) / 3;
    let cols = Layout::horizontal([
        Constraint::Length(name_w),
        Constraint::Length(col_w),
        Constraint::Length(col_w),
        Constraint::Min(0),
    ]);
    let mut rows: Vec<[Line; 4]> = vec![[
        Line::from(Span::styled("Property", t.style(Slot::Header))),
        Line::from(Span::styled("You loaded", t.style(Slot::Header))),
        Line::from(Span::styled("You changed", t.style(Slot::Header))),
        Line::from(Span::styled(
            if c.server.is_some() {
                "Server now"
            } else {
                "Server now: deleted"
            },
            t.style(Slot::Header),
        )),
    ]];
    let etag = |e: Option<&Entity>| e.and_then(|e| e.etag.clone()).unwrap_or_else(|| "·".into());
    rows.push([
        Line::from(Span::styled("ETag", t.style(Slot::Muted))),
        Line::from(Span::styled(etag(c.loaded.as_ref()), t.style(Slot::Muted))),
        Line::from(""),
        Line::from(Span::styled(etag(c.server.as_ref()), t.style(Slot::Muted))),
    ]);
    for name in c.names() {
        let (loaded, _) = text_of(c.loaded.as_ref(), &name);
        let (mine, in_mine) = text_of(Some(&c.mine), &name);
        let (server, _) = text_of(c.server.as_ref(), &name);
        let mine_changed = c.changed.contains(&name) || c.removed.contains(&name);
        let server_changed = c.loaded.as_ref().and_then(|l| l.get(&name))
            != c.server.as_ref().and_then(|s| s.get(&name));
        let mine_slot = if c.removed.contains(&name) {
            Slot::DiffRemoved
        } else if mine_changed {
            Slot::DiffAdded
        } else {
            Slot::Base
        };
        let server_slot = if server_changed {
            Slot::Modified
        } else {
            Slot::Base
        };
        rows.push([
            Line::from(Span::styled(
                name.clone(),
                t.style(if mine_changed || server_changed {
                    Slot::Warning
                } else {
                    Slot::Base
                }),
            )),
            Line::from(loaded),
            Line::from(Span::styled(
                if in_mine {
                    mine
                } else if c.removed.contains(&name) {
                    "(removed)".into()
                } else {
                    "·".into()
                },
                t.style(mine_slot),
            )),
            Line::from(Span::styled(server, t.style(server_slot))),
        ]);
    }
    for (i, row) in rows.into_iter().enumerate() {
        if i as u16 >= inner.height {
            break;
        }
        let line_area = Rect {
            y: inner.y + i as u16,
            height: 1,
            ..inner
        };
        let parts = cols.split(line_area);
        for (k, line) in row.into_iter().enumerate() {
            // Cut each cell to its column (one space apart) so neighbours never run together.
            let width = parts[k].width.saturating_sub(1) as usize;
            let style = line.spans.first().map(|s| s.style).unwrap_or_default();
            let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
            let shown = if text.chars().count() > width {
                let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
                cut.push('…');
                cut
            } else {
                text
            };
            frame.render_widget(Paragraph::new(Span::styled(shown, style)), parts[k]);
        }
    }
}
