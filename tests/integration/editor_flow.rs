//! The editor's save path against the emulator: the form's write goes through the journal
//! exactly as the console sends it, a second client reads the result, races lead to the
//! conflict flow, and undo restores the before-image.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tabletop::azure::{ClientOptions, EdmType, EdmValue, Entity, TableClient, UpdateMode};
use tabletop::console::editor::{Editor, EditorAction, Prompt, WriteOp};
use tabletop::console::jobs;
use tabletop::journal::{self, Journal};

use crate::common::{self, client, diff, every_type, fresh_table};

fn journal() -> (tempfile::TempDir, Journal) {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open(dir.path().join("journal.jsonl")).unwrap();
    (dir, j)
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn save(ed: &mut Editor) -> WriteOp {
    match ed.handle_key(&key(KeyCode::Char('s'))) {
        EditorAction::Save(op) => op,
        other => panic!(
            "expected a save, got {other:?} ({:?}, {:?})",
            ed.message, ed.errors
        ),
    }
}

#[tokio::test]
async fn every_type_typed_into_the_form_reads_back_identical_from_a_second_client() {
    let c = client();
    let table = fresh_table(&c, "edform").await;
    let (_d, j) = journal();
    let wanted = every_type("p", "typed");
    // Type every property as text, with its type, the way a user fills the form.
    let mut ed = Editor::new_entity(0, &table, "p", false);
    ed.row_key = "typed".into();
    for p in &wanted.properties {
        ed.rows.push(tabletop::console::editor::Row {
            name: p.name.clone(),
            ty: p.value.edm_type(),
            value: p.value.to_text(),
        });
    }
    let op = save(&mut ed);
    jobs::write(&j, &c, "test", &table, op).await.unwrap();
    let got = client().get_entity(&table, "p", "typed").await.unwrap();
    assert!(diff(&wanted, &got).is_empty(), "{:#?}", diff(&wanted, &got));

    // Edit each value through the form and save: still exact.
    let mut ed = Editor::edit(0, &table, &got, false);
    for row in ed.rows.iter_mut() {
        if row.ty == EdmType::String {
            row.value.push_str(" (edited)");
        }
    }
    let op = save(&mut ed);
    assert!(matches!(
        op,
        WriteOp::Update {
            entity: _,
            mode: UpdateMode::Merge,
            condition: _
        }
    ));
    jobs::write(&j, &c, "test", &table, op).await.unwrap();
    let again = client().get_entity(&table, "p", "typed").await.unwrap();
    for p in &wanted.properties {
        let v = again.get(&p.name).unwrap();
        match (&p.value, v) {
            (EdmValue::String(a), EdmValue::String(b)) => assert_eq!(format!("{a} (edited)"), *b),
            (a, b) => assert_eq!(a, b, "{}", p.name),
        }
    }
}

#[tokio::test]
async fn a_race_leads_to_the_conflict_flow_and_each_choice_does_what_it_says() {
    let c = client();
    let table = fresh_table(&c, "edrace").await;
    let (_d, j) = journal();
    for rk in ["reapply", "overwrite", "discard"] {
        c.insert(
            &table,
            &Entity::new("p", rk)
                .with("A", EdmValue::Int32(1))
                .with("B", EdmValue::Int32(1)),
        )
        .await
        .unwrap();
        let loaded = c.get_entity(&table, "p", rk).await.unwrap();
        let mut ed = Editor::edit(0, &table, &loaded, false);
        ed.rows.iter_mut().find(|r| r.name == "A").unwrap().value = "2".into();

        // Another client changes B meanwhile.
        let other = client();
        other
            .update(
                &table,
                &Entity::new("p", rk).with("B", EdmValue::Int32(9)),
                UpdateMode::Merge,
                &tabletop::azure::Condition::Force,
            )
            .await
            .unwrap();

        let op = save(&mut ed);
        let failure = jobs::write(&j, &c, "test", &table, op).await.unwrap_err();
        assert_eq!(failure.status, Some(412), "{failure:?}");
        let server = c.get_entity(&table, "p", rk).await.unwrap();
        ed.conflict(Some(server));
        assert!(matches!(ed.prompt, Some(Prompt::Conflict(_))));
        let choice = match rk {
            "reapply" => 'r',
            "overwrite" => 'o',
            _ => 'd',
        };
        match ed.handle_key(&key(KeyCode::Char(choice))) {
            EditorAction::Save(op) => {
                jobs::write(&j, &c, "test", &table, op).await.unwrap();
            }
            EditorAction::Close => assert_eq!(rk, "discard"),
            other => panic!("{other:?}"),
        }
        let now = client().get_entity(&table, "p", rk).await.unwrap();
        let (a, b) = (now.get("A").cloned(), now.get("B").cloned());
        match rk {
            // My A onto their B.
            "reapply" => assert_eq!((a, b), (Some(EdmValue::Int32(2)), Some(EdmValue::Int32(9)))),
            // My whole version, B as I loaded it.
            "overwrite" => assert_eq!((a, b), (Some(EdmValue::Int32(2)), Some(EdmValue::Int32(1)))),
            // Theirs untouched.
            _ => assert_eq!((a, b), (Some(EdmValue::Int32(1)), Some(EdmValue::Int32(9)))),
        }
    }
}

#[tokio::test]
async fn removing_a_property_goes_through_replace_and_undo_restores_the_before_image() {
    let c = client();
    let table = fresh_table(&c, "edremove").await;
    let (_d, j) = journal();
    let original = every_type("p", "r");
    c.insert(&table, &original).await.unwrap();
    let loaded = c.get_entity(&table, "p", "r").await.unwrap();
    let mut ed = Editor::edit(0, &table, &loaded, false);
    let i = ed.rows.iter().position(|r| r.name == "DblNaN").unwrap();
    ed.rows.remove(i);
    assert_eq!(ed.handle_key(&key(KeyCode::Char('s'))), EditorAction::None);
    assert!(matches!(ed.prompt, Some(Prompt::ConfirmReplace(_))));
    let EditorAction::Save(op) = ed.handle_key(&key(KeyCode::Char('y'))) else {
        panic!()
    };
    assert!(matches!(
        op,
        WriteOp::Update {
            entity: _,
            mode: UpdateMode::Replace,
            condition: _
        }
    ));
    jobs::write(&j, &c, "test", &table, op).await.unwrap();
    assert!(client()
        .get_entity(&table, "p", "r")
        .await
        .unwrap()
        .get("DblNaN")
        .is_none());

    // Undo: the before-image comes back with every type exact.
    let entry = j
        .last_undoable(journal::session_id())
        .unwrap()
        .expect("an undoable entry");
    journal::undo(&j, &c, &entry).await.unwrap();
    let restored = client().get_entity(&table, "p", "r").await.unwrap();
    assert!(
        diff(&original, &restored).is_empty(),
        "{:#?}",
        diff(&original, &restored)
    );
}

#[tokio::test]
async fn a_read_only_profile_refuses_the_editors_writes() {
    let c = client();
    let table = fresh_table(&c, "edro").await;
    c.insert(&table, &Entity::new("p", "r").with("A", EdmValue::Int32(1)))
        .await
        .unwrap();
    let ro = TableClient::new(
        common::account(),
        ClientOptions {
            read_only: true,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let (_d, j) = journal();
    let loaded = c.get_entity(&table, "p", "r").await.unwrap();
    // The editor opens as a viewer...
    let mut ro_editor = Editor::edit(0, &table, &loaded, true);
    assert_eq!(
        ro_editor.handle_key(&key(KeyCode::Char('s'))),
        EditorAction::None
    );
    // ...and even a write built elsewhere is refused by the client before it is sent.
    let mut ed = Editor::edit(0, &table, &loaded, false);
    ed.rows[0].value = "5".into();
    let op = save(&mut ed);
    let failure = jobs::write(&j, &ro, "test", &table, op).await.unwrap_err();
    assert!(failure.message.contains("read-only"), "{failure:?}");
    assert_eq!(
        c.get_entity(&table, "p", "r").await.unwrap().get("A"),
        Some(&EdmValue::Int32(1))
    );
}
