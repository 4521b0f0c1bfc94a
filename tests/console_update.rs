//! `App::update`: keys, mouse and job results in; state and queued commands out. Each test plays
//! the job runner by reading the job ids from the queued commands and answering them.

#[path = "console_common/mod.rs"]
mod common;

use crossterm::event::{KeyCode, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use tabletop::azure::{EntityPage, QuerySpec};
use tabletop::console::app::{App, Overlay, Pane, Source, TreeRow};
use tabletop::console::event::{Command, Event, JobOutput};
use tabletop::console::grid::MAX_PAGES_IN_VIEW;
use tabletop::console::theme::Slot;

use common::*;

fn tables() -> Vec<&'static str> {
    vec!["Audit", "Customers", "OrderLines", "Orders", "Sessions"]
}

fn grid_rows(app: &App) -> Vec<String> {
    app.grid
        .as_ref()
        .expect("grid")
        .rows
        .iter()
        .map(|e| e.row_key.clone())
        .collect()
}

/// Orders opened and its first page (1,000 rows, more to come) answered.
fn on_first_page() -> App {
    let mut a = app_with_tables(&tables());
    open_with_page(&mut a, "Orders", page(0, 1000, true));
    a
}

fn next_page(a: &mut App, start: usize, more: bool) {
    press_char(a, 'n');
    let (job, _, from) = only_query(a);
    assert_eq!(
        from,
        Some(token(start)),
        "n starts where the last page ended"
    );
    answer_page(a, job, page(start, 1000, more));
}

fn commands(a: &mut App) -> Vec<Command> {
    a.take_commands()
}

fn message(a: &App) -> String {
    a.message
        .as_ref()
        .map(|m| m.text.clone())
        .unwrap_or_default()
}

// ---- paging -----------------------------------------------------------------------------

#[test]
fn opening_a_table_queries_its_first_page_from_no_token() {
    let mut a = app_with_tables(&tables());
    // Cursor: the source, Audit, Customers, OrderLines, Orders.
    for _ in 0..4 {
        press_char(&mut a, 'j');
    }
    press(&mut a, KeyCode::Enter);
    let cmds = commands(&mut a);
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    match &cmds[0] {
        Command::QueryPage {
            table, spec, from, ..
        } => {
            assert_eq!(table, "Orders");
            assert_eq!(from, &None);
            assert_eq!(spec.filter, None);
            assert_eq!(spec.page_size, Some(1000));
        }
        other => panic!("expected QueryPage, got {other:?}"),
    }
    assert_eq!(a.focus, Pane::Grid);
    assert!(a.grid.as_ref().unwrap().loading.is_some());
}

#[test]
fn next_page_starts_from_the_continuation_of_the_page_shown() {
    let mut a = on_first_page();
    next_page(&mut a, 1000, true);
    let g = a.grid.as_ref().unwrap();
    assert_eq!(g.position(), "page 2 · rows 1,001–2,000");
    assert_eq!(grid_rows(&a)[0], "001000");
}

#[test]
fn previous_page_reuses_the_stored_start_token_instead_of_rescanning() {
    let mut a = on_first_page();
    next_page(&mut a, 1000, true);
    next_page(&mut a, 2000, false);
    assert_eq!(
        a.grid.as_ref().unwrap().position(),
        "page 3 · rows 2,001–3,000 (end)"
    );

    press_char(&mut a, 'p');
    let (job, _, from) = only_query(&mut a);
    assert_eq!(
        from,
        Some(token(1000)),
        "page 2 starts at the token page 1 returned, not at the table's start"
    );
    answer_page(&mut a, job, page(1000, 1000, true));
    assert_eq!(
        a.grid.as_ref().unwrap().position(),
        "page 2 · rows 1,001–2,000"
    );

    press_char(&mut a, 'p');
    let (job, _, from) = only_query(&mut a);
    assert_eq!(from, None, "page 1 starts at the table's start");
    answer_page(&mut a, job, page(0, 1000, true));
    assert_eq!(a.grid.as_ref().unwrap().position(), "page 1 · rows 1–1,000");

    press_char(&mut a, 'p');
    assert!(
        commands(&mut a).is_empty(),
        "there is no page before the first"
    );
    assert_eq!(message(&a), "this is the first page");
}

#[test]
fn load_more_appends_below_and_keeps_the_window_bounded() {
    let mut a = on_first_page();
    press_char(&mut a, 'm');
    let (job, _, from) = only_query(&mut a);
    assert_eq!(from, Some(token(1000)));
    answer_page(&mut a, job, page(1000, 1000, true));
    assert_eq!(a.grid.as_ref().unwrap().rows.len(), 2000);
    assert_eq!(grid_rows(&a)[1999], "001999");
    assert_eq!(
        a.grid.as_ref().unwrap().position(),
        "pages 1–2 · rows 1–2,000"
    );

    for p in 2..12 {
        press_char(&mut a, 'm');
        let (job, _, from) = only_query(&mut a);
        assert_eq!(from, Some(token(p * 1000)));
        answer_page(&mut a, job, page(p * 1000, 1000, true));
        assert!(a.grid.as_ref().unwrap().rows.len() <= MAX_PAGES_IN_VIEW * 1000);
    }
    let g = a.grid.as_ref().unwrap();
    assert_eq!(g.rows.len(), MAX_PAGES_IN_VIEW * 1000);
    assert_eq!(
        g.rows[0].row_key,
        format!("{:06}", (12 - MAX_PAGES_IN_VIEW) * 1000)
    );
    assert_eq!(g.rows.last().unwrap().row_key, "011999");
}

#[test]
fn a_page_for_a_superseded_table_is_dropped() {
    let mut a = app_with_tables(&tables());
    type_command(&mut a, "table Audit");
    let (audit_job, _, _) = only_query(&mut a);
    type_command(&mut a, "table Orders");
    let cmds = commands(&mut a);
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::Cancel(j) if *j == audit_job)),
        "opening another table cancels the first query: {cmds:?}"
    );
    let orders_job = cmds
        .iter()
        .find(|c| matches!(c, Command::QueryPage { .. }))
        .and_then(job_of)
        .expect("Orders query");

    let mut stale = page(0, 3, false);
    stale.entities[0].row_key = "from-audit".into();
    answer_page(&mut a, audit_job, stale);
    let g = a.grid.as_ref().unwrap();
    assert_eq!(g.table, "Orders");
    assert!(g.rows.is_empty(), "Audit's rows must not show under Orders");
    assert_eq!(g.loading, Some(orders_job), "still waiting for Orders");

    answer_page(&mut a, orders_job, page(0, 3, false));
    assert_eq!(grid_rows(&a), ["000000", "000001", "000002"]);
    assert!(!a.busy());
}

#[test]
fn esc_while_loading_cancels_the_query_and_stops_waiting() {
    let mut a = on_first_page();
    press_char(&mut a, 'n');
    let (job, _, _) = only_query(&mut a);
    press(&mut a, KeyCode::Esc);
    let cmds = commands(&mut a);
    assert!(
        matches!(cmds.as_slice(), [Command::Cancel(j)] if *j == job),
        "{cmds:?}"
    );
    assert_eq!(a.grid.as_ref().unwrap().loading, None);
    assert!(!a.busy());
    // The cancelled job's answer changes nothing.
    answer_page(&mut a, job, page(1000, 1000, true));
    assert_eq!(a.grid.as_ref().unwrap().position(), "page 1 · rows 1–1,000");
}

#[test]
fn scanned_progress_updates_the_count_of_the_running_query_only() {
    let mut a = app_with_tables(&tables());
    type_command(&mut a, "table Audit");
    let (old, _, _) = only_query(&mut a);
    type_command(&mut a, "table Orders");
    let (job, _, _) = only_query(&mut a);
    a.update(Event::Job(job, JobOutput::Scanned(12)));
    assert_eq!(a.grid.as_ref().unwrap().scanned, 12);
    a.update(Event::Job(old, JobOutput::Scanned(99)));
    assert_eq!(a.grid.as_ref().unwrap().scanned, 12);
    let screen = screen_text(&render(&mut a, 120, 30));
    assert!(
        screen.contains("scanned 12 pages, no match yet"),
        "{screen}"
    );
}

// ---- server-side filter -----------------------------------------------------------------

#[test]
fn a_bad_filter_shows_its_error_and_queues_nothing() {
    let mut a = on_first_page();
    press_char(&mut a, 'f');
    type_text(&mut a, "PartitionKey eq 'EU");
    press(&mut a, KeyCode::Enter);
    assert!(commands(&mut a).is_empty());
    match &a.overlay {
        Some(Overlay::FilterBar {
            error: Some(e),
            filter,
            ..
        }) => {
            assert!(e.contains("unterminated string"), "{e}");
            assert_eq!(
                filter.text(),
                "PartitionKey eq 'EU",
                "the text is kept to fix"
            );
        }
        other => panic!("expected the filter bar with an error, got {other:?}"),
    }
    assert_eq!(a.grid.as_ref().unwrap().spec.filter, None);
}

#[test]
fn a_good_filter_queries_from_the_start_with_that_filter() {
    let mut a = on_first_page();
    next_page(&mut a, 1000, true);
    press_char(&mut a, 'f');
    type_text(&mut a, "PartitionKey eq 'EU'");
    press(&mut a, KeyCode::Enter);
    assert_eq!(a.overlay, None);
    let (job, spec, from) = only_query(&mut a);
    assert_eq!(spec.filter.as_deref(), Some("PartitionKey eq 'EU'"));
    assert_eq!(from, None, "a new filter starts over");
    answer_page(&mut a, job, page(0, 2, false));
    let g = a.grid.as_ref().unwrap();
    assert_eq!(g.position(), "page 1 · rows 1–2 (end)");
    assert_eq!(g.class.label(), "PARTITION");
}

// ---- tables pane ------------------------------------------------------------------------

#[test]
fn slash_filters_the_tables_and_loads_the_names_not_yet_listed() {
    let mut a = app(vec![source("dev")]);
    let many: Vec<String> = (0..100).map(|i| format!("Table{i:03}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    answer_tables(&mut a, &many, Some("Table100"));
    assert!(
        commands(&mut a).is_empty(),
        "far from the end: no next page yet"
    );

    press_char(&mut a, '/');
    type_text(&mut a, "09");
    let cmds = commands(&mut a);
    assert!(
        matches!(cmds.as_slice(), [Command::ListTables { next: Some(n), .. }] if n == "Table100"),
        "a filter must see every name: {cmds:?}"
    );
    press(&mut a, KeyCode::Enter);
    assert_eq!(a.tables_filter, "09");
    let shown: Vec<&str> = a
        .tree_rows()
        .iter()
        .filter_map(|r| match r {
            TreeRow::Table(si, ti) => Some(a.sources[*si].tables[*ti].as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        shown,
        [
            "Table009", "Table090", "Table091", "Table092", "Table093", "Table094", "Table095",
            "Table096", "Table097", "Table098", "Table099"
        ]
    );
}

#[test]
fn create_table_dialog_explains_an_invalid_name_and_queues_a_valid_one() {
    let mut a = app_with_tables(&tables());
    press_char(&mut a, 'i');
    type_text(&mut a, "1bad");
    press(&mut a, KeyCode::Enter);
    assert!(commands(&mut a).is_empty());
    match &a.overlay {
        Some(Overlay::CreateTable { error: Some(e), .. }) => {
            assert!(e.contains("must start with a letter"), "{e}")
        }
        other => panic!("expected the dialog with an error, got {other:?}"),
    }
    a.update(Event::Key(crossterm::event::KeyEvent::new(
        KeyCode::Char('u'),
        KeyModifiers::CONTROL,
    )));
    type_text(&mut a, "Invoices");
    press(&mut a, KeyCode::Enter);
    assert_eq!(a.overlay, None);
    let cmds = commands(&mut a);
    assert!(
        matches!(cmds.as_slice(), [Command::CreateTable { name, .. }] if name == "Invoices"),
        "{cmds:?}"
    );
    // Success reloads the list.
    let job = job_of(&cmds[0]).unwrap();
    a.update(Event::Job(
        job,
        JobOutput::Done(Ok("created table Invoices".into())),
    ));
    assert_eq!(message(&a), "created table Invoices");
    answer_tables(&mut a, &["Invoices"], None);
    assert_eq!(a.sources[0].tables, ["Invoices"]);
}

#[test]
fn delete_table_proceeds_only_when_the_exact_name_is_typed() {
    let mut a = app_with_tables(&tables());
    for _ in 0..4 {
        press_char(&mut a, 'j');
    }
    press_char(&mut a, 'd');
    assert!(matches!(&a.overlay, Some(Overlay::DeleteTable { table, .. }) if table == "Orders"));
    type_text(&mut a, "orders");
    press(&mut a, KeyCode::Enter);
    assert!(
        commands(&mut a).is_empty(),
        "a different case is not the name"
    );
    assert!(a.overlay.is_some());
    for _ in 0.."orders".len() {
        press(&mut a, KeyCode::Backspace);
    }
    type_text(&mut a, "Orders");
    press(&mut a, KeyCode::Enter);
    let cmds = commands(&mut a);
    assert!(
        matches!(cmds.as_slice(), [Command::DeleteTable { name, .. }] if name == "Orders"),
        "{cmds:?}"
    );
    assert_eq!(a.overlay, None);
}

#[test]
fn esc_closes_the_delete_confirmation_without_deleting() {
    let mut a = app_with_tables(&tables());
    press_char(&mut a, 'j');
    press_char(&mut a, 'd');
    type_text(&mut a, "Audit");
    press(&mut a, KeyCode::Esc);
    assert_eq!(a.overlay, None);
    assert!(commands(&mut a).is_empty());
}

#[test]
fn read_only_sources_refuse_create_and_delete_with_a_message() {
    let mut a = app(vec![Source::new("prod", Ok(client()), true, None)]);
    answer_tables(&mut a, &tables(), None);
    press_char(&mut a, 'i');
    assert_eq!(a.overlay, None);
    assert_eq!(
        message(&a),
        "prod is read-only: tables cannot be created (the profile's read_only or --read-only)"
    );
    press_char(&mut a, 'j');
    press_char(&mut a, 'd');
    assert_eq!(a.overlay, None);
    assert_eq!(
        message(&a),
        "prod is read-only: tables cannot be deleted (the profile's read_only or --read-only)"
    );
    assert!(commands(&mut a).is_empty());
}

// ---- command line -----------------------------------------------------------------------

#[test]
fn command_table_opens_that_table_of_the_current_profile() {
    let mut a = app_with_tables(&tables());
    type_command(&mut a, "table Customers");
    let (_, spec, from) = only_query(&mut a);
    assert_eq!(from, None);
    assert_eq!(
        spec,
        QuerySpec {
            page_size: Some(1000),
            ..QuerySpec::default()
        }
    );
    assert_eq!(a.grid.as_ref().unwrap().table, "Customers");
    assert_eq!(a.overlay, None);
}

#[test]
fn command_profile_jumps_to_the_profile_and_lists_its_tables() {
    let mut a = app(vec![source("dev"), source("staging")]);
    answer_tables(&mut a, &tables(), None);
    type_command(&mut a, "profile staging");
    assert_eq!(a.focus, Pane::Tables);
    assert_eq!(a.tree_rows()[a.tables_cursor], TreeRow::Source(1));
    assert!(a.sources[1].expanded);
    answer_tables(&mut a, &["Staged"], None);
    assert_eq!(a.sources[1].tables, ["Staged"]);
}

#[test]
fn command_profile_with_an_unknown_name_lists_the_known_ones() {
    let mut a = app_with_tables(&tables());
    type_command(&mut a, "profile nope");
    match &a.overlay {
        Some(Overlay::Command { error: Some(e), .. }) => {
            assert_eq!(e, "no profile 'nope' (known: dev)")
        }
        other => panic!("expected the command line with an error, got {other:?}"),
    }
}

#[test]
fn command_theme_switches_the_theme() {
    let mut a = app_with_tables(&tables());
    assert_eq!(a.theme.name, "dark");
    type_command(&mut a, "theme light");
    assert_eq!(a.theme.name, "light");
    assert_eq!(a.overlay, None);
}

#[test]
fn an_unknown_command_is_an_error_and_the_line_stays_open() {
    let mut a = app_with_tables(&tables());
    type_command(&mut a, "frobnicate");
    assert!(matches!(
        &a.overlay,
        Some(Overlay::Command { error: Some(e), .. }) if e.starts_with("unknown command ':frobnicate'")
    ));
    assert!(!a.should_quit);
    // Typing again clears the error.
    press(&mut a, KeyCode::Backspace);
    assert!(matches!(
        &a.overlay,
        Some(Overlay::Command { error: None, .. })
    ));
}

#[test]
fn command_q_quits() {
    let mut a = app_with_tables(&tables());
    type_command(&mut a, "q");
    assert!(a.should_quit);
}

// ---- quitting ---------------------------------------------------------------------------

#[test]
fn q_with_a_job_in_flight_asks_first_and_a_second_q_quits() {
    let mut a = app_with_tables(&tables());
    type_command(&mut a, "table Orders");
    press_char(&mut a, 'q');
    assert!(!a.should_quit);
    assert_eq!(message(&a), "1 request(s) in flight: press q again to quit");
    press_char(&mut a, 'q');
    assert!(a.should_quit);
}

#[test]
fn another_key_between_the_two_qs_disarms_the_quit() {
    let mut a = app_with_tables(&tables());
    type_command(&mut a, "table Orders");
    press_char(&mut a, 'q');
    press_char(&mut a, 'j');
    press_char(&mut a, 'q');
    assert!(!a.should_quit);
}

#[test]
fn q_when_idle_quits_at_once_but_backs_out_of_the_entity_view_first() {
    let mut a = on_first_page();
    press(&mut a, KeyCode::Enter);
    assert_eq!(a.focus, Pane::Entity);
    press_char(&mut a, 'q');
    assert_eq!(a.focus, Pane::Grid);
    assert!(!a.should_quit);
    press_char(&mut a, 'q');
    assert!(a.should_quit);
}

// ---- copy, mouse, ticks -----------------------------------------------------------------

#[test]
fn y_copies_the_selected_entity_as_its_json_line() {
    let mut a = on_first_page();
    press_char(&mut a, 'j');
    press_char(&mut a, 'y');
    let expected = rows(1, 1)[0].to_json_line();
    let cmds = commands(&mut a);
    assert!(
        matches!(cmds.as_slice(), [Command::Copy(text)] if *text == expected),
        "{cmds:?}"
    );
    assert!(expected.contains("\"RowKey\":\"000001\""), "{expected}");
}

#[test]
fn y_with_marked_rows_copies_one_json_line_each() {
    let mut a = on_first_page();
    press_char(&mut a, ' ');
    press_char(&mut a, 'j');
    press_char(&mut a, ' ');
    press_char(&mut a, 'y');
    let expected: Vec<String> = rows(0, 3)
        .iter()
        .filter(|e| e.row_key != "000001")
        .map(|e| e.to_json_line())
        .collect();
    let cmds = commands(&mut a);
    assert!(
        matches!(cmds.as_slice(), [Command::Copy(text)] if *text == expected.join("\n")),
        "{cmds:?}"
    );
}

#[test]
fn marked_rows_are_drawn_in_the_marked_style() {
    let mut a = on_first_page();
    press_char(&mut a, ' ');
    press_char(&mut a, 'j');
    let terminal = render(&mut a, 80, 24);
    let buffer = terminal.backend().buffer();
    let main = a.areas.main;
    // Data rows start two lines below the pane's top (border, header); the key column's cell.
    let marked = &buffer[(main.x + 1, main.y + 2)];
    let plain = &buffer[(main.x + 1, main.y + 4)];
    let style = a.theme.style(Slot::Marked);
    assert_eq!(marked.bg, style.bg.unwrap_or(marked.bg));
    assert_eq!(marked.fg, style.fg.unwrap_or(marked.fg));
    assert_ne!(
        (marked.fg, marked.bg, marked.modifier),
        (plain.fg, plain.bg, plain.modifier),
        "a marked row must look different from an unmarked one"
    );
}

fn mouse(kind: MouseEventKind, column: u16, row: u16) -> Event {
    Event::Mouse(MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    })
}

#[test]
fn a_click_selects_the_row_under_the_pointer_and_the_wheel_scrolls() {
    let mut a = on_first_page();
    render(&mut a, 80, 24);
    let main = a.areas.main;
    a.update(mouse(
        MouseEventKind::Down(MouseButton::Left),
        main.x + 5,
        main.y + 2 + 4,
    ));
    assert_eq!(a.grid.as_ref().unwrap().cursor, 4);
    a.update(mouse(MouseEventKind::ScrollDown, main.x + 5, main.y + 5));
    assert_eq!(a.grid.as_ref().unwrap().cursor, 7);
    a.update(mouse(MouseEventKind::ScrollUp, main.x + 5, main.y + 5));
    assert_eq!(a.grid.as_ref().unwrap().cursor, 4);

    // A click in the tables pane focuses it and selects that row.
    let tables = a.areas.tables;
    a.update(mouse(
        MouseEventKind::Down(MouseButton::Left),
        tables.x + 3,
        tables.y + 1 + 2,
    ));
    assert_eq!(a.focus, Pane::Tables);
    assert_eq!(a.tree_rows()[a.tables_cursor], TreeRow::Table(0, 1));
    // The wheel over the grid scrolls it without taking the focus back.
    a.update(mouse(MouseEventKind::ScrollDown, main.x + 5, main.y + 5));
    assert_eq!(a.grid.as_ref().unwrap().cursor, 7);
    assert_eq!(a.focus, Pane::Tables);
}

#[test]
fn a_tick_turns_the_spinner_only_while_work_is_pending() {
    let mut a = app_with_tables(&tables());
    render(&mut a, 80, 24);
    assert!(!a.dirty);
    a.update(Event::Tick);
    assert!(!a.dirty, "an idle tick must not cause a redraw");
    assert_eq!(a.spinner, 0);

    type_command(&mut a, "table Orders");
    render(&mut a, 80, 24);
    a.update(Event::Tick);
    assert!(a.dirty);
    assert_eq!(a.spinner, 1);

    let (job, _, _) = only_query(&mut a);
    answer_page(&mut a, job, EntityPage::default());
    render(&mut a, 80, 24);
    a.update(Event::Tick);
    assert!(!a.dirty, "the spinner stops once the answer is in");
    assert_eq!(a.spinner, 1);
}

#[test]
fn stress_starts_a_job_shows_its_view_and_esc_stops_it() {
    use tabletop::console::app::Pane;
    use tabletop::console::event::{Command, Event, JobOutput};
    let mut app = app_with_tables(&["Orders"]);
    app.take_commands();
    type_command(&mut app, "stress 2");
    let cmds = app.take_commands();
    let (job, partitions) = cmds
        .iter()
        .find_map(|c| match c {
            Command::Stress { job, config, .. } => Some((*job, config.partitions)),
            _ => None,
        })
        .expect("a stress job");
    assert_eq!(partitions, 2);
    assert_eq!(app.focus, Pane::Stress);
    press(&mut app, KeyCode::Esc);
    assert!(app
        .take_commands()
        .iter()
        .any(|c| matches!(c, Command::Cancel(j) if *j == job)));
    // The job reports its end; Esc then leaves the view.
    app.update(Event::Job(job, JobOutput::Done(Err("cancelled".into()))));
    press(&mut app, KeyCode::Esc);
    assert_ne!(app.focus, Pane::Stress);
}

#[test]
fn stress_is_refused_on_a_read_only_profile() {
    let mut app = app(vec![tabletop::console::app::Source::new(
        "prod",
        Ok(client()),
        true,
        None,
    )]);
    type_command(&mut app, "stress");
    assert!(app
        .take_commands()
        .iter()
        .all(|c| !matches!(c, tabletop::console::event::Command::Stress { .. })));
}
