//! Shared by the console's snapshot and update tests: an `App` with no network (the tests play
//! the job runner), fixed sample entities, and helpers to find and answer queued jobs.
//! Included with `#[path = "console_common/mod.rs"] mod common;`.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::sync::Arc;

use crossterm::event::KeyCode;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tabletop::azure::{
    Account, ClientOptions, Continuation, DateTime, EdmValue, Entity, EntityPage, QuerySpec,
    TableClient, TablePage,
};
use tabletop::console::app::{key, App, AppOptions, Source, TrafficCounters};
use tabletop::console::event::{Command, Event, JobId, JobOutput};
use tabletop::console::keys::Keymap;
use tabletop::console::theme;
use tabletop::console::ui;

/// A client for the local emulator's address; never contacted (the tests answer its jobs).
pub fn client() -> TableClient {
    TableClient::new(Account::development(), ClientOptions::default()).expect("client")
}

pub fn source(name: &str) -> Source {
    Source::new(name, Ok(client()), false, None)
}

pub fn app(sources: Vec<Source>) -> App {
    App::new(AppOptions {
        sources,
        keymap: Keymap::default(),
        theme: theme::load("dark", None, false).0,
        user_config_dir: None,
        no_color: false,
        page_size: 1000,
        traffic: Arc::new(TrafficCounters::default()),
        read_only_flag: false,
        warnings: Vec::new(),
        // Commands are answered by the tests, so the journal is never written here.
        dashboard: tabletop::console::dashboard::Dashboard::new(
            Arc::new(tabletop::metrics::Hub::new(
                tabletop::config::Targets::default(),
                std::time::SystemTime::now,
            )),
            "test traffic",
        ),
        journal: Ok(Arc::new(tabletop::journal::Journal::for_reading(
            std::env::temp_dir().join("tabletop-console-tests-journal.jsonl"),
        ))),
    })
}

/// One source, "dev", its first page of tables answered with `tables`.
pub fn app_with_tables(tables: &[&str]) -> App {
    let mut a = app(vec![source("dev")]);
    answer_tables(&mut a, tables, None);
    a
}

pub fn job_of(c: &Command) -> Option<JobId> {
    match c {
        Command::ListTables { job, .. }
        | Command::QueryPage { job, .. }
        | Command::GetEntity { job, .. }
        | Command::CreateTable { job, .. }
        | Command::DeleteTable { job, .. }
        | Command::Write { job, .. }
        | Command::ExternalEdit { job, .. }
        | Command::Undo { job, .. }
        | Command::Export { job, .. }
        | Command::Stress { job, .. } => Some(*job),
        Command::Cancel(_) | Command::Copy(_) => None,
    }
}

/// Answers the one queued `ListTables`.
pub fn answer_tables(app: &mut App, names: &[&str], next: Option<&str>) {
    let job = only_list_tables(app);
    app.update(Event::Job(
        job,
        JobOutput::Tables(Ok(TablePage {
            names: names.iter().map(|s| s.to_string()).collect(),
            next_table_name: next.map(str::to_string),
        })),
    ));
}

pub fn only_list_tables(app: &mut App) -> JobId {
    let jobs: Vec<JobId> = app
        .take_commands()
        .iter()
        .filter(|c| matches!(c, Command::ListTables { .. }))
        .filter_map(job_of)
        .collect();
    assert_eq!(jobs.len(), 1, "expected exactly one ListTables");
    jobs[0]
}

/// The one queued `QueryPage`: its job, spec and start token.
pub fn only_query(app: &mut App) -> (JobId, QuerySpec, Option<Continuation>) {
    let mut found = Vec::new();
    for c in app.take_commands() {
        if let Command::QueryPage {
            job, spec, from, ..
        } = c
        {
            found.push((job, spec, from));
        }
    }
    assert_eq!(found.len(), 1, "expected exactly one QueryPage");
    found.remove(0)
}

pub fn answer_page(app: &mut App, job: JobId, page: EntityPage) {
    app.update(Event::Job(
        job,
        JobOutput::Page {
            result: Ok(page),
            scanned: 0,
        },
    ));
}

/// Opens `table` through the command line and answers its first page.
pub fn open_with_page(app: &mut App, table: &str, page: EntityPage) {
    type_command(app, &format!("table {table}"));
    let (job, _, _) = only_query(app);
    answer_page(app, job, page);
}

pub fn press(app: &mut App, code: KeyCode) {
    app.update(key(code));
}

pub fn press_char(app: &mut App, c: char) {
    app.update(key(KeyCode::Char(c)));
}

pub fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        press_char(app, c);
    }
}

/// `:` + text + Enter.
pub fn type_command(app: &mut App, text: &str) {
    press_char(app, ':');
    type_text(app, text);
    press(app, KeyCode::Enter);
}

pub fn timestamp() -> DateTime {
    DateTime::parse("2026-11-02T10:01:03.1234567Z").expect("timestamp")
}

/// `n` plain rows with keys `p` / `000000`…, fixed timestamps and ETags.
pub fn rows(start: usize, n: usize) -> Vec<Entity> {
    (start..start + n)
        .map(|i| {
            let mut e = Entity::new("p", format!("{i:06}"))
                .with("N", EdmValue::Int64(i as i64))
                .with("Status", EdmValue::String(["open", "closed"][i % 2].into()));
            e.timestamp = Some(timestamp());
            e.etag = Some(format!("W/\"datetime'2026-11-02T10%3A01%3A03.{i:07}Z'\""));
            e
        })
        .collect()
}

pub fn token(i: usize) -> Continuation {
    Continuation {
        next_partition_key: "p".into(),
        next_row_key: Some(format!("{i:06}")),
    }
}

/// A page of `n` rows starting at row `start`, with a continuation unless it is the last.
pub fn page(start: usize, n: usize, more: bool) -> EntityPage {
    EntityPage {
        entities: rows(start, n),
        continuation: more.then(|| token(start + n)),
    }
}

/// Rows that exercise every EDM type and the edge values the grid must show exactly.
pub fn typed_rows() -> Vec<Entity> {
    let dt = |s: &str| EdmValue::DateTime(DateTime::parse(s).expect("datetime"));
    let guid = |s: &str| EdmValue::Guid(uuid::Uuid::parse_str(s).expect("guid"));
    let mut out = vec![
        Entity::new("EU", "2024-0001")
            .with("Amount", EdmValue::Int64(9_007_199_254_740_993))
            .with("Count", EdmValue::Int32(-42))
            .with("Ratio", EdmValue::Double(f64::NAN))
            .with("Active", EdmValue::Boolean(true))
            .with("When", dt("2024-02-29T23:59:59.1234567Z"))
            .with("Id", guid("4185404a-5818-48c3-b9be-f217df0dba6f"))
            .with("Blob", EdmValue::Binary((0..20).collect()))
            .with("Note", EdmValue::String(String::new())),
        Entity::new("EU", "2024-0002")
            .with("Amount", EdmValue::Int64(i64::MIN))
            .with("Count", EdmValue::Int32(i32::MAX))
            .with("Ratio", EdmValue::Double(f64::INFINITY))
            .with("Active", EdmValue::Boolean(false))
            .with("When", dt("2024-01-01T00:00:00.0000001Z"))
            .with("Blob", EdmValue::Binary(vec![0xde, 0xad])),
        // No Note at all: missing, which is not the same as the empty string above.
        Entity::new("US", "2024-0003")
            .with("Amount", EdmValue::Int64(7))
            .with("Ratio", EdmValue::Double(f64::NEG_INFINITY))
            .with("Note", EdmValue::String("two\nlines".into())),
        Entity::new("US", "2024-0004")
            .with("Ratio", EdmValue::Double(-0.1))
            .with("Note", EdmValue::String("plain".into())),
    ];
    for (i, e) in out.iter_mut().enumerate() {
        e.timestamp = Some(timestamp());
        e.etag = Some(format!(
            "W/\"datetime'2026-11-02T10%3A01%3A03.000000{i}Z'\""
        ));
    }
    out
}

/// Draws like the run loop (areas kept, scroll offsets updated) and returns the terminal.
pub fn render(app: &mut App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    let mut areas = None;
    terminal
        .draw(|frame| areas = Some(ui::draw(frame, app)))
        .expect("draw");
    app.areas = areas.expect("areas");
    app.after_draw();
    terminal
}

/// The screen as plain text, one line per row.
pub fn screen_text(terminal: &Terminal<TestBackend>) -> String {
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            out.push_str(buffer[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}
