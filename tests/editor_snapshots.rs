//! The entity editor as drawn: the form, the type picker, validation errors, the switch to
//! Replace, the conflict diff after a 412 and after a 404, and the read-only viewer; plus the
//! update path from a key to the write it queues.

#[path = "console_common/mod.rs"]
mod common;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tabletop::azure::{Condition, EdmValue, EntityPage, UpdateMode};
use tabletop::console::app::{App, Pane};
use tabletop::console::editor::WriteOp;
use tabletop::console::event::{Command, Event, JobOutput, WriteFailure};

use common::*;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

fn snapshot(name: &str, build: impl Fn() -> App) {
    for (w, h) in SIZES {
        let mut app = build();
        let terminal = render(&mut app, w, h);
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), terminal.backend());
    }
}

fn grid_app() -> App {
    let mut a = app_with_tables(&["Orders"]);
    open_with_page(
        &mut a,
        "Orders",
        EntityPage {
            entities: typed_rows(),
            continuation: None,
        },
    );
    a
}

fn editing() -> App {
    let mut a = grid_app();
    press_char(&mut a, 'e');
    a
}

/// The editor's line for a property (0 and 1 are the keys).
fn go_to(a: &mut App, name: &str) {
    let line = a
        .editor
        .as_ref()
        .unwrap()
        .rows
        .iter()
        .position(|r| r.name == name)
        .unwrap()
        + 2;
    while a.editor.as_ref().unwrap().cursor < line {
        press(a, KeyCode::Down);
    }
}

fn set_value(a: &mut App, name: &str, text: &str) {
    go_to(a, name);
    press(a, KeyCode::Enter);
    a.update(Event::Key(KeyEvent::new(
        KeyCode::Char('u'),
        KeyModifiers::CONTROL,
    )));
    type_text(a, text);
    press(a, KeyCode::Enter);
}

fn only_write(a: &mut App) -> (tabletop::console::event::JobId, WriteOp) {
    let writes: Vec<_> = a
        .take_commands()
        .into_iter()
        .filter_map(|c| match c {
            Command::Write { job, op, .. } => Some((job, op)),
            _ => None,
        })
        .collect();
    assert_eq!(writes.len(), 1, "expected one write");
    writes.into_iter().next().unwrap()
}

fn conflict_app(deleted: bool) -> App {
    let mut a = editing();
    set_value(&mut a, "Count", "7");
    press_char(&mut a, 's');
    let (job, _) = only_write(&mut a);
    let status = if deleted { 404 } else { 412 };
    a.update(Event::Job(
        job,
        JobOutput::Written(Err(WriteFailure {
            status: Some(status),
            code: Some("UpdateConditionNotSatisfied".into()),
            message: "changed".into(),
        })),
    ));
    let fetch = a
        .take_commands()
        .into_iter()
        .find_map(|c| match c {
            Command::GetEntity { job, .. } => Some(job),
            _ => None,
        })
        .expect("the server's version is fetched");
    let mut server = typed_rows()
        .remove(0)
        .with("Count", EdmValue::Int32(100))
        .with("AddedByOthers", EdmValue::Boolean(true));
    server.etag = Some("W/\"datetime'2026-11-02T11%3A00%3A00.0000000Z'\"".into());
    let result = if deleted {
        Err("not found".to_string())
    } else {
        Ok(server)
    };
    a.update(Event::Job(fetch, JobOutput::Entity(result)));
    a
}

#[test]
fn the_editor_form_shows_every_property_with_its_type_and_locked_keys() {
    snapshot("editor_form", editing);
}

#[test]
fn the_type_picker_lists_the_eight_edm_types() {
    snapshot("editor_type_picker", || {
        let mut a = editing();
        go_to(&mut a, "Count");
        press_char(&mut a, 't');
        a
    });
}

#[test]
fn validation_errors_name_the_property_and_the_rule() {
    snapshot("editor_validation_error", || {
        let mut a = editing();
        set_value(&mut a, "Count", "3000000000");
        press_char(&mut a, 's');
        a
    });
}

#[test]
fn removing_a_property_asks_to_switch_to_replace() {
    snapshot("editor_replace_prompt", || {
        let mut a = editing();
        go_to(&mut a, "Note");
        press_char(&mut a, 'x');
        press_char(&mut a, 's');
        a
    });
}

#[test]
fn a_412_shows_loaded_changed_and_server_columns() {
    snapshot("editor_conflict_412", || conflict_app(false));
}

#[test]
fn a_404_shows_the_entity_as_deleted() {
    snapshot("editor_conflict_404", || conflict_app(true));
}

#[test]
fn a_new_entity_starts_with_editable_keys() {
    snapshot("editor_new", || {
        let mut a = grid_app();
        press_char(&mut a, 'i');
        a
    });
}

#[test]
fn a_read_only_profile_opens_the_editor_as_a_viewer() {
    snapshot("editor_read_only", || {
        let mut a = app(vec![tabletop::console::app::Source::new(
            "prod",
            Ok(client()),
            true,
            None,
        )]);
        answer_tables(&mut a, &["Orders"], None);
        open_with_page(
            &mut a,
            "Orders",
            EntityPage {
                entities: typed_rows(),
                continuation: None,
            },
        );
        press_char(&mut a, 'e');
        a
    });
}

#[test]
fn saving_an_edit_queues_a_merge_of_only_the_changed_property_on_the_loaded_etag() {
    let mut a = editing();
    assert_eq!(a.focus, Pane::Editor);
    set_value(&mut a, "Count", "7");
    press_char(&mut a, 's');
    let (_, op) = only_write(&mut a);
    let WriteOp::Update {
        entity: e,
        mode: UpdateMode::Merge,
        condition: Condition::IfMatch(etag),
    } = op
    else {
        panic!("expected a conditional merge, got {op:?}")
    };
    assert_eq!(etag, typed_rows()[0].etag.clone().unwrap());
    assert_eq!(e.properties.len(), 1);
    assert_eq!(e.get("Count"), Some(&EdmValue::Int32(7)));
}

#[test]
fn conflict_choices_write_conditionally_on_the_server_etag() {
    let mut a = conflict_app(false);
    press_char(&mut a, 'r');
    let (_, op) = only_write(&mut a);
    let WriteOp::Update {
        entity: e,
        mode: UpdateMode::Merge,
        condition: Condition::IfMatch(etag),
    } = op
    else {
        panic!("re-apply is a merge of my changes, got {op:?}")
    };
    assert!(etag.contains("11%3A00"), "{etag}");
    assert_eq!(e.properties.len(), 1);

    let mut a = conflict_app(false);
    press_char(&mut a, 'o');
    let (_, op) = only_write(&mut a);
    assert!(
        matches!(op, WriteOp::Update { entity: _, mode: UpdateMode::Replace, condition: Condition::IfMatch(ref t) } if t.contains("11%3A00")),
        "{op:?}"
    );

    let mut a = conflict_app(false);
    press_char(&mut a, 'd');
    assert!(a
        .take_commands()
        .iter()
        .all(|c| !matches!(c, Command::Write { .. })));
    assert_eq!(a.focus, Pane::Grid);

    let mut a = conflict_app(true);
    press_char(&mut a, 'r');
    let (_, op) = only_write(&mut a);
    assert!(matches!(op, WriteOp::Insert(_)), "{op:?}");
}

#[test]
fn read_only_editor_never_queues_a_write() {
    let mut a = app(vec![tabletop::console::app::Source::new(
        "prod",
        Ok(client()),
        true,
        None,
    )]);
    answer_tables(&mut a, &["Orders"], None);
    open_with_page(
        &mut a,
        "Orders",
        EntityPage {
            entities: typed_rows(),
            continuation: None,
        },
    );
    press_char(&mut a, 'e');
    press_char(&mut a, 'x');
    press_char(&mut a, 's');
    assert!(a
        .take_commands()
        .iter()
        .all(|c| !matches!(c, Command::Write { .. })));
}
