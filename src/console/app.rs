//! The console's state and `update`: every event (key, mouse, job result, tick) changes state
//! and may queue commands; nothing here awaits or touches the network.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

use super::dashboard::{Dashboard, DashboardAction};
use super::editor::{Editor, EditorAction, WriteOp};
use super::event::{Command, Event, JobId, JobOutput};
use super::grid::Grid;
use super::input::{Input, InputResult};
use super::keys::{Action, Keymap};
use super::stress_view::StressView;
use super::theme::Theme;
use crate::azure::filter;
use crate::azure::{Entity, QuerySpec, TableClient, Telemetry};
use crate::journal::Journal;

/// Where a list of tables comes from: a profile, the local emulator, or `--connection-string`.
pub struct Source {
    pub name: String,
    pub read_only: bool,
    /// A profile's colour name (production in red).
    pub color: Option<String>,
    pub client: Result<TableClient, String>,
    pub expanded: bool,
    pub tables: Vec<String>,
    /// `NextTableName` of the last page loaded: more tables exist.
    pub next_table: Option<String>,
    pub loading: Option<JobId>,
    pub error: Option<String>,
    pub loaded: bool,
}

impl Source {
    pub fn new(
        name: impl Into<String>,
        client: Result<TableClient, String>,
        read_only: bool,
        color: Option<String>,
    ) -> Source {
        Source {
            name: name.into(),
            read_only,
            color,
            client,
            expanded: false,
            tables: Vec::new(),
            next_table: None,
            loading: None,
            error: None,
            loaded: false,
        }
    }
}

/// A row of the tables tree as shown (after the `/` filter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeRow {
    Source(usize),
    Table(usize, usize),
    /// "loading…" or an error under a source.
    Status(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pane {
    Tables,
    Grid,
    Entity,
    Editor,
    Dashboard,
    Stress,
}

/// What an awaited job's result is for (beyond table lists and grid pages).
#[derive(Clone, Debug, PartialEq)]
pub enum Pending {
    /// The editor's save.
    Save(WriteOp),
    /// The server's current version after a 412/404, for the conflict view.
    ConflictFetch,
    /// Open this entity in the editor once read (a 409 on insert: "open the existing one").
    OpenForEdit,
    /// Raw mode in `$EDITOR`.
    ExternalEdit,
    /// One of the deletes of a confirmed delete action.
    Delete(String, String),
    /// The entity as the server has it after a save (the editor shows exactly that).
    Refetch,
    /// `:undo`.
    Undo,
    /// A dashboard export.
    Export,
}

/// A dialog or input line drawn over the panes; it gets keys first.
#[derive(Clone, Debug, PartialEq)]
pub enum Overlay {
    Help {
        scroll: u16,
    },
    Command {
        input: Input,
        error: Option<String>,
    },
    /// `/`: client-side search over the tables list or the loaded rows.
    Search {
        input: Input,
    },
    /// `f`: the server-side `$filter` / `$select` / page size.
    FilterBar {
        filter: Input,
        select: Input,
        field: usize,
        error: Option<String>,
    },
    CreateTable {
        source: usize,
        name: Input,
        error: Option<String>,
    },
    /// Deleting a table: the user types its name.
    DeleteTable {
        source: usize,
        table: String,
        typed: Input,
    },
    /// Deleting entities: asked once per action; each delete is conditional on its ETag.
    DeleteEntities {
        keys: Vec<(String, String, Option<String>)>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Success,
    Warning,
    Error,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub text: String,
    pub level: Level,
}

/// Counters fed by the client's attempt records (for the status bar).
#[derive(Default)]
pub struct TrafficCounters {
    pub attempts: AtomicU64,
    pub retries: AtomicU64,
    pub server_busy: AtomicU64,
    pub timeouts: AtomicU64,
}

impl TrafficCounters {
    pub fn attach(telemetry: &Telemetry) -> Arc<TrafficCounters> {
        let counters = Arc::new(TrafficCounters::default());
        let c = counters.clone();
        telemetry.subscribe_fn(move |r| {
            c.attempts.fetch_add(1, Ordering::Relaxed);
            if r.attempt > 1 {
                c.retries.fetch_add(1, Ordering::Relaxed);
            }
            match r.status {
                Some(503) => {
                    c.server_busy.fetch_add(1, Ordering::Relaxed);
                }
                Some(500) | None => {
                    c.timeouts.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        });
        counters
    }
}

/// The entity view: one entity with every property, its type and ETag.
#[derive(Clone, Debug, Default)]
pub struct EntityView {
    pub entity: Option<Entity>,
    pub table: String,
    pub scroll: usize,
    pub loading: Option<JobId>,
    pub error: Option<String>,
}

/// Where the panes were drawn last, for mouse hits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Areas {
    pub tables: Rect,
    pub main: Rect,
}

pub struct App {
    pub sources: Vec<Source>,
    pub tables_cursor: usize,
    pub tables_filter: String,
    pub tables_scroll: usize,
    pub focus: Pane,
    pub grid: Option<Grid>,
    pub entity: EntityView,
    pub overlay: Option<Overlay>,
    pub keymap: Keymap,
    pub theme: Theme,
    pub user_config_dir: Option<std::path::PathBuf>,
    pub no_color: bool,
    pub page_size: u32,
    pub message: Option<Message>,
    pub last_error: Option<String>,
    pub traffic: Arc<TrafficCounters>,
    pub spinner: usize,
    pub should_quit: bool,
    /// Set whenever something visible changed; the run loop redraws and clears it.
    pub dirty: bool,
    pub areas: Areas,
    /// Jobs whose results are awaited (the status bar's "in flight"); others are dropped.
    awaited: std::collections::HashSet<JobId>,
    /// Show DateTimes in local time instead of UTC.
    pub local_time: bool,
    /// The global read-only flag (`--read-only`).
    pub read_only_flag: bool,
    commands: Vec<Command>,
    next_job: u64,
    /// Table create/delete jobs and the source they refresh.
    pending_table_ops: Vec<(JobId, usize)>,
    /// `q` was pressed once while jobs ran; a second `q` quits.
    quit_armed: bool,
    pub editor: Option<Editor>,
    pending: std::collections::HashMap<JobId, Pending>,
    /// Every write goes to this journal first; without one, writes are refused.
    pub journal: Result<Arc<Journal>, String>,
    pub dashboard: Dashboard,
    last_dashboard_refresh: std::time::Instant,
    /// The stress test shown (its job while it runs).
    pub stress: Option<(Option<JobId>, StressView)>,
}

pub struct AppOptions {
    pub sources: Vec<Source>,
    pub keymap: Keymap,
    pub theme: Theme,
    pub user_config_dir: Option<std::path::PathBuf>,
    pub no_color: bool,
    pub page_size: u32,
    pub traffic: Arc<TrafficCounters>,
    pub read_only_flag: bool,
    /// Messages to show at start (config warnings).
    pub warnings: Vec<String>,
    pub journal: Result<Arc<Journal>, String>,
    pub dashboard: Dashboard,
}

impl App {
    pub fn new(options: AppOptions) -> App {
        let message = (!options.warnings.is_empty()).then(|| Message {
            text: options.warnings.join("; "),
            level: Level::Warning,
        });
        let mut app = App {
            sources: options.sources,
            tables_cursor: 0,
            tables_filter: String::new(),
            tables_scroll: 0,
            focus: Pane::Tables,
            grid: None,
            entity: EntityView::default(),
            overlay: None,
            keymap: options.keymap,
            theme: options.theme,
            user_config_dir: options.user_config_dir,
            no_color: options.no_color,
            page_size: options.page_size,
            message,
            last_error: None,
            traffic: options.traffic,
            spinner: 0,
            should_quit: false,
            dirty: true,
            areas: Areas::default(),
            awaited: std::collections::HashSet::new(),
            local_time: false,
            read_only_flag: options.read_only_flag,
            commands: Vec::new(),
            next_job: 1,
            pending_table_ops: Vec::new(),
            quit_armed: false,
            editor: None,
            pending: std::collections::HashMap::new(),
            journal: options.journal,
            dashboard: options.dashboard,
            last_dashboard_refresh: std::time::Instant::now(),
            stress: None,
        };
        // The first source opens at start so the user sees tables at once.
        if !app.sources.is_empty() {
            app.expand_source(0);
        }
        app
    }

    pub fn take_commands(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.commands)
    }

    fn job(&mut self) -> JobId {
        let id = JobId(self.next_job);
        self.next_job += 1;
        self.awaited.insert(id);
        id
    }

    /// Whether a spinner should turn (some job is awaited).
    pub fn busy(&self) -> bool {
        !self.awaited.is_empty()
    }

    /// The dashboard is on screen and not paused: it refreshes every second.
    pub fn dashboard_live(&self) -> bool {
        self.focus == Pane::Dashboard && !self.dashboard.paused
    }

    fn dashboard_due(&mut self) -> bool {
        let now = std::time::Instant::now();
        if now.duration_since(self.last_dashboard_refresh) >= std::time::Duration::from_millis(900)
        {
            self.last_dashboard_refresh = now;
            true
        } else {
            false
        }
    }

    pub fn in_flight(&self) -> usize {
        self.awaited.len()
    }

    /// Stops waiting for a job and asks the runner to cancel it.
    fn cancel(&mut self, job: JobId) {
        self.awaited.remove(&job);
        self.commands.push(Command::Cancel(job));
    }

    /// After a frame: nothing is pending, and scroll offsets follow the cursors.
    pub fn after_draw(&mut self) {
        self.dirty = false;
        let tables_height = self.areas.tables.height.saturating_sub(2) as usize;
        self.tables_scroll = scroll_for(self.tables_cursor, self.tables_scroll, tables_height);
        let grid_height = self.areas.main.height.saturating_sub(3) as usize;
        if let Some(g) = self.grid.as_mut() {
            g.scroll = scroll_for(g.cursor, g.scroll, grid_height);
        }
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.message = Some(Message {
            text: text.into(),
            level: Level::Info,
        });
    }

    pub fn success(&mut self, text: impl Into<String>) {
        self.message = Some(Message {
            text: text.into(),
            level: Level::Success,
        });
    }

    pub fn error(&mut self, text: impl Into<String>) {
        let text = text.into();
        self.last_error = Some(text.clone());
        self.message = Some(Message {
            text,
            level: Level::Error,
        });
    }

    // ---- events -------------------------------------------------------------------------

    pub fn update(&mut self, event: Event) {
        match event {
            Event::Key(key) => {
                if key.kind == KeyEventKind::Release {
                    return;
                }
                self.dirty = true;
                self.on_key(key);
            }
            Event::Mouse(m) => self.on_mouse(m),
            Event::Resize(..) => self.dirty = true,
            Event::Paste(text) => {
                if let Some(input) = self.overlay_input() {
                    input.insert_str(&text);
                    self.dirty = true;
                }
            }
            Event::Job(id, output) => self.on_job(id, output),
            Event::Tick => {
                if self.busy() {
                    self.spinner = self.spinner.wrapping_add(1);
                    self.dirty = true;
                }
                if self.dashboard_live() && self.dashboard_due() {
                    self.dashboard.refresh();
                    self.dirty = true;
                }
            }
        }
    }

    fn overlay_input(&mut self) -> Option<&mut Input> {
        match self.overlay.as_mut()? {
            Overlay::Command { input, .. } | Overlay::Search { input } => Some(input),
            Overlay::FilterBar {
                filter,
                select,
                field,
                ..
            } => Some(if *field == 0 { filter } else { select }),
            Overlay::CreateTable { name, .. } => Some(name),
            Overlay::DeleteTable { typed, .. } => Some(typed),
            Overlay::DeleteEntities { .. } => None,
            Overlay::Help { .. } => None,
        }
    }

    fn on_key(&mut self, key: KeyEvent) {
        if key.code == KeyCode::Char('c')
            && key.modifiers.contains(KeyModifiers::CONTROL)
            && self.overlay.is_none()
        {
            self.should_quit = true;
            return;
        }
        if self.overlay.is_some() {
            self.on_overlay_key(key);
            return;
        }
        if self.focus == Pane::Dashboard {
            match self.dashboard.handle_key(&key) {
                DashboardAction::Unhandled => {}
                DashboardAction::None => return,
                DashboardAction::Message(m) => {
                    self.info(m);
                    return;
                }
                DashboardAction::Export {
                    file_name,
                    contents,
                } => {
                    let job = self.job();
                    self.pending.insert(job, Pending::Export);
                    self.commands.push(Command::Export {
                        job,
                        file_name,
                        contents,
                    });
                    return;
                }
            }
        }
        if self.focus == Pane::Editor {
            if let Some(mut ed) = self.editor.take() {
                let action = ed.handle_key(&key);
                self.editor = Some(ed);
                self.on_editor_action(action);
                return;
            }
        }
        let Some(action) = self.keymap.action(&key) else {
            return;
        };
        self.on_action(action);
    }

    pub fn on_action(&mut self, action: Action) {
        if action != Action::Quit {
            self.quit_armed = false;
        }
        match action {
            Action::Quit => {
                if self.focus == Pane::Entity {
                    self.focus = Pane::Grid;
                } else if self.busy() && !self.quit_armed {
                    self.quit_armed = true;
                    self.message = Some(Message {
                        text: format!(
                            "{} request(s) in flight: press q again to quit",
                            self.in_flight()
                        ),
                        level: Level::Warning,
                    });
                } else {
                    self.should_quit = true;
                }
            }
            Action::ForceQuit => self.should_quit = true,
            Action::Help => self.overlay = Some(Overlay::Help { scroll: 0 }),
            Action::CommandMode => {
                self.overlay = Some(Overlay::Command {
                    input: Input::default(),
                    error: None,
                })
            }
            Action::NextPane => self.cycle_focus(1),
            Action::PrevPane => self.cycle_focus(-1),
            Action::FocusTables => self.focus = Pane::Tables,
            Action::FocusGrid if self.grid.is_some() => self.focus = Pane::Grid,
            Action::FocusEntity if self.entity.entity.is_some() => self.focus = Pane::Entity,
            Action::FocusDashboard => {
                self.focus = Pane::Dashboard;
                self.dashboard.refresh();
            }
            Action::ToggleTimeZone => {
                self.local_time = !self.local_time;
                self.info(if self.local_time {
                    "DateTimes in local time"
                } else {
                    "DateTimes in UTC"
                });
            }
            _ => match self.focus {
                Pane::Tables => self.tables_action(action),
                Pane::Grid => self.grid_action(action),
                Pane::Entity => self.entity_action(action),
                Pane::Editor => {}
                Pane::Stress => {
                    if action == Action::Back {
                        match self.stress.as_ref().and_then(|(job, _)| *job) {
                            Some(job) => {
                                self.commands.push(Command::Cancel(job));
                                self.info("stopping the stress test and removing its table…");
                            }
                            None => {
                                self.focus = if self.grid.is_some() {
                                    Pane::Grid
                                } else {
                                    Pane::Tables
                                }
                            }
                        }
                    }
                }
                Pane::Dashboard => {
                    if action == Action::Back {
                        self.focus = if self.grid.is_some() {
                            Pane::Grid
                        } else {
                            Pane::Tables
                        };
                    } else if action == Action::Refresh {
                        self.dashboard.refresh();
                    }
                }
            },
        }
    }

    fn cycle_focus(&mut self, step: i32) {
        let mut panes = vec![Pane::Tables];
        if self.grid.is_some() {
            panes.push(Pane::Grid);
        }
        if self.entity.entity.is_some() {
            panes.push(Pane::Entity);
        }
        if self.editor.is_some() {
            panes.push(Pane::Editor);
        }
        panes.push(Pane::Dashboard);
        let i = panes.iter().position(|p| *p == self.focus).unwrap_or(0) as i32;
        let n = panes.len() as i32;
        self.focus = panes[((i + step).rem_euclid(n)) as usize];
    }

    // ---- tables pane --------------------------------------------------------------------

    /// The visible rows of the tables tree, filtered by the `/` search.
    pub fn tree_rows(&self) -> Vec<TreeRow> {
        let needle = self.tables_filter.to_lowercase();
        let mut rows = Vec::new();
        for (si, s) in self.sources.iter().enumerate() {
            rows.push(TreeRow::Source(si));
            if !s.expanded {
                continue;
            }
            for (ti, t) in s.tables.iter().enumerate() {
                if needle.is_empty() || t.to_lowercase().contains(&needle) {
                    rows.push(TreeRow::Table(si, ti));
                }
            }
            if s.loading.is_some()
                || s.error.is_some()
                || (s.loaded && s.tables.is_empty())
                || s.client.is_err()
            {
                rows.push(TreeRow::Status(si));
            }
        }
        rows
    }

    fn expand_source(&mut self, si: usize) {
        let Some(s) = self.sources.get_mut(si) else {
            return;
        };
        s.expanded = true;
        if !s.loaded && s.loading.is_none() {
            self.load_tables(si, false);
        }
    }

    fn load_tables(&mut self, si: usize, more: bool) {
        let client = match &self.sources[si].client {
            Ok(c) => c.clone(),
            Err(_) => return,
        };
        let next = if more {
            self.sources[si].next_table.clone()
        } else {
            None
        };
        if more && next.is_none() {
            return;
        }
        let job = self.job();
        if let Some(old) = self.sources[si].loading.replace(job) {
            self.cancel(old);
        }
        if !more {
            self.sources[si].error = None;
        }
        self.commands
            .push(Command::ListTables { job, client, next });
    }

    fn tables_action(&mut self, action: Action) {
        let rows = self.tree_rows();
        let len = rows.len();
        let cursor = self.tables_cursor.min(len.saturating_sub(1));
        match action {
            Action::Up => self.tables_cursor = cursor.saturating_sub(1),
            Action::Down => self.tables_cursor = (cursor + 1).min(len.saturating_sub(1)),
            Action::Top => self.tables_cursor = 0,
            Action::Bottom => self.tables_cursor = len.saturating_sub(1),
            Action::PageUp => {
                self.tables_cursor =
                    cursor.saturating_sub(self.areas.tables.height.max(3) as usize - 2)
            }
            Action::PageDown => {
                self.tables_cursor = (cursor + self.areas.tables.height.max(3) as usize - 2)
                    .min(len.saturating_sub(1))
            }
            Action::Open | Action::Right => match rows.get(cursor) {
                Some(TreeRow::Source(si)) => {
                    let si = *si;
                    if self.sources[si].expanded && action == Action::Open {
                        self.sources[si].expanded = false;
                    } else {
                        self.expand_source(si);
                    }
                }
                Some(TreeRow::Table(si, ti)) => {
                    let (si, ti) = (*si, *ti);
                    let name = self.sources[si].tables[ti].clone();
                    self.open_table(si, &name);
                }
                _ => {}
            },
            Action::Left | Action::Back => match rows.get(cursor) {
                Some(TreeRow::Table(si, _)) | Some(TreeRow::Status(si)) => {
                    let si = *si;
                    if action == Action::Left {
                        self.sources[si].expanded = false;
                        self.tables_cursor = self
                            .tree_rows()
                            .iter()
                            .position(|r| *r == TreeRow::Source(si))
                            .unwrap_or(0);
                    } else if !self.tables_filter.is_empty() {
                        self.tables_filter.clear();
                    }
                }
                Some(TreeRow::Source(si)) if action == Action::Left => {
                    self.sources[*si].expanded = false
                }
                _ => {
                    if !self.tables_filter.is_empty() {
                        self.tables_filter.clear();
                    }
                }
            },
            Action::Search => {
                self.overlay = Some(Overlay::Search {
                    input: Input::new(self.tables_filter.clone()),
                })
            }
            Action::Refresh => {
                if let Some(si) = self.row_source(rows.get(cursor)) {
                    let s = &mut self.sources[si];
                    s.tables.clear();
                    s.loaded = false;
                    s.next_table = None;
                    s.expanded = true;
                    self.load_tables(si, false);
                }
            }
            Action::Insert => {
                if let Some(si) = self.row_source(rows.get(cursor)) {
                    if !self.refuse_read_only(si, "tables cannot be created") {
                        self.overlay = Some(Overlay::CreateTable {
                            source: si,
                            name: Input::default(),
                            error: None,
                        });
                    }
                }
            }
            Action::Delete => {
                if let Some(TreeRow::Table(si, ti)) = rows.get(cursor) {
                    let (si, ti) = (*si, *ti);
                    if !self.refuse_read_only(si, "tables cannot be deleted") {
                        self.overlay = Some(Overlay::DeleteTable {
                            source: si,
                            table: self.sources[si].tables[ti].clone(),
                            typed: Input::default(),
                        });
                    }
                }
            }
            Action::Copy => {
                if let Some(TreeRow::Table(si, ti)) = rows.get(cursor) {
                    let name = self.sources[*si].tables[*ti].clone();
                    self.commands.push(Command::Copy(name.clone()));
                    self.info(format!("copied table name {name}"));
                }
            }
            _ => {}
        }
        self.maybe_load_more_tables();
    }

    /// Loads the next page of table names when the cursor nears the end of what is loaded, or
    /// while a filter is active (it must see every name).
    fn maybe_load_more_tables(&mut self) {
        let rows = self.tree_rows();
        let near_end = self.tables_cursor + 50 >= rows.len();
        for si in 0..self.sources.len() {
            let s = &self.sources[si];
            if s.expanded
                && s.loading.is_none()
                && s.next_table.is_some()
                && (near_end || !self.tables_filter.is_empty())
            {
                self.load_tables(si, true);
            }
        }
    }

    fn row_source(&self, row: Option<&TreeRow>) -> Option<usize> {
        match row? {
            TreeRow::Source(si) | TreeRow::Table(si, _) | TreeRow::Status(si) => Some(*si),
        }
    }

    /// Says why a write is refused on a read-only source; true when it was refused.
    fn refuse_read_only(&mut self, si: usize, what: &str) -> bool {
        let refused = self.source_read_only(si);
        if refused {
            self.error(format!(
                "{} is read-only: {what} (the profile's read_only or --read-only)",
                self.sources[si].name
            ));
        }
        refused
    }

    pub fn source_read_only(&self, si: usize) -> bool {
        self.read_only_flag || self.sources.get(si).is_some_and(|s| s.read_only)
    }

    pub fn open_table(&mut self, si: usize, table: &str) {
        let client = match &self.sources[si].client {
            Ok(c) => c.clone(),
            Err(e) => {
                self.error(e.clone());
                return;
            }
        };
        if let Some(old) = self.grid.as_ref().and_then(|g| g.loading) {
            self.cancel(old);
        }
        let spec = QuerySpec {
            page_size: Some(self.page_size),
            ..QuerySpec::default()
        };
        self.grid = Some(Grid::new(si, table.to_string(), client, spec));
        self.entity = EntityView::default();
        self.focus = Pane::Grid;
        self.query_grid(GridMove::First);
    }

    // ---- grid ---------------------------------------------------------------------------

    fn query_grid(&mut self, how: GridMove) {
        if self.grid.is_none() {
            return;
        }
        let job = self.job();
        let Some(grid) = self.grid.as_mut() else {
            return;
        };
        let from = match how {
            GridMove::First => None,
            GridMove::Reload => grid.current_start().cloned(),
            GridMove::Next | GridMove::More => grid.next.clone(),
            GridMove::Prev => grid.previous_start().cloned(),
        };
        let old = grid.loading.replace(job);
        grid.pending = Some((how, from.clone()));
        grid.scanned = 0;
        grid.error = None;
        let cmd = Command::QueryPage {
            job,
            client: grid.client.clone(),
            table: grid.table.clone(),
            spec: grid.spec.clone(),
            from,
        };
        self.commands.push(cmd);
        if let Some(old) = old {
            self.cancel(old);
        }
    }

    fn grid_action(&mut self, action: Action) {
        let Some(grid) = self.grid.as_mut() else {
            return;
        };
        let visible = self.areas.main.height.saturating_sub(4).max(1) as usize;
        match action {
            Action::Up => grid.move_cursor(-1),
            Action::Down => grid.move_cursor(1),
            Action::PageUp => grid.move_cursor(-(visible as i64)),
            Action::PageDown => grid.move_cursor(visible as i64),
            Action::Top => grid.cursor = 0,
            Action::Bottom => grid.cursor = grid.visible_len().saturating_sub(1),
            Action::Left => grid.column = grid.column.saturating_sub(1),
            Action::Right => {
                grid.column = (grid.column + 1).min(grid.columns.len().saturating_sub(1))
            }
            Action::ColumnWider => grid.resize_column(4),
            Action::ColumnNarrower => grid.resize_column(-4),
            Action::NextPage => {
                if grid.loading.is_some() {
                    self.info("a page is still loading (Esc cancels)");
                } else if grid.next.is_some() {
                    self.query_grid(GridMove::Next);
                } else {
                    self.info("this is the last page");
                }
            }
            Action::LoadMore => {
                if grid.loading.is_none() && grid.next.is_some() {
                    self.query_grid(GridMove::More);
                } else if grid.next.is_none() {
                    self.info("no more rows: this is the end of the table");
                }
            }
            Action::PrevPage => {
                if grid.loading.is_some() {
                    self.info("a page is still loading (Esc cancels)");
                } else if grid.page_index() > 0 {
                    self.query_grid(GridMove::Prev);
                } else {
                    self.info("this is the first page");
                }
            }
            Action::Refresh => self.query_grid(GridMove::Reload),
            Action::Back => {
                if let Some(job) = grid.loading.take() {
                    grid.pending = None;
                    self.cancel(job);
                    self.info("query cancelled");
                } else if grid.search.is_some() {
                    grid.set_search(None);
                } else {
                    self.focus = Pane::Tables;
                }
            }
            Action::Search => {
                self.overlay = Some(Overlay::Search {
                    input: Input::new(grid.search.clone().unwrap_or_default()),
                })
            }
            Action::FilterBar => {
                self.overlay = Some(Overlay::FilterBar {
                    filter: Input::new(grid.spec.filter.clone().unwrap_or_default()),
                    select: Input::new(
                        grid.spec
                            .select
                            .as_ref()
                            .map(|s| s.join(","))
                            .unwrap_or_default(),
                    ),
                    field: 0,
                    error: None,
                })
            }
            Action::Open => {
                if let Some(e) = grid.selected_entity().cloned() {
                    self.entity = EntityView {
                        entity: Some(e),
                        table: grid.table.clone(),
                        ..EntityView::default()
                    };
                    self.focus = Pane::Entity;
                }
            }
            Action::Select => {
                grid.toggle_mark();
                grid.move_cursor(1);
            }
            Action::Copy => {
                let marked = grid.marked_entities();
                if !marked.is_empty() {
                    let lines: Vec<String> = marked.iter().map(|e| e.to_json_line()).collect();
                    let n = lines.len();
                    self.commands.push(Command::Copy(lines.join("\n")));
                    self.info(format!("copied {n} marked entities as JSON lines (OSC 52)"));
                } else if let Some(e) = grid.selected_entity() {
                    let json = e.to_json_line();
                    self.commands.push(Command::Copy(json));
                    self.info("copied the entity as JSON (OSC 52)");
                }
            }
            Action::CopyToken => match grid.next.clone() {
                Some(c) => {
                    self.commands.push(Command::Copy(c.as_az_marker()));
                    self.info(format!("copied continuation token: {}", c.as_az_marker()));
                }
                None => self.info("no continuation token: this is the last page"),
            },
            Action::Edit => {
                if let Some(e) = grid.selected_entity().cloned() {
                    let (si, table) = (grid.source, grid.table.clone());
                    self.open_editor(Editor::edit(si, &table, &e, self.source_read_only(si)));
                }
            }
            Action::Clone => {
                if let Some(e) = grid.selected_entity().cloned() {
                    let (si, table) = (grid.source, grid.table.clone());
                    self.open_editor(Editor::clone_of(si, &table, &e, self.source_read_only(si)));
                }
            }
            Action::Insert => {
                // A filter pinned to one partition, else the selected row's, is the likely key.
                let pk = grid
                    .spec
                    .filter
                    .as_deref()
                    .and_then(|f| filter::parse(f).ok())
                    .and_then(|e| filter::single_partition(&e).map(str::to_string))
                    .or_else(|| grid.selected_entity().map(|e| e.partition_key.clone()))
                    .unwrap_or_default();
                let (si, table) = (grid.source, grid.table.clone());
                self.open_editor(Editor::new_entity(
                    si,
                    &table,
                    &pk,
                    self.source_read_only(si),
                ));
            }
            Action::Delete => {
                let si = grid.source;
                let mut keys: Vec<(String, String, Option<String>)> = grid
                    .marked_entities()
                    .iter()
                    .map(|e| (e.partition_key.clone(), e.row_key.clone(), e.etag.clone()))
                    .collect();
                if keys.is_empty() {
                    if let Some(e) = grid.selected_entity() {
                        keys.push((e.partition_key.clone(), e.row_key.clone(), e.etag.clone()));
                    }
                }
                if !self.refuse_read_only(si, "entities cannot be deleted") && !keys.is_empty() {
                    self.overlay = Some(Overlay::DeleteEntities { keys });
                }
            }
            _ => {}
        }
    }

    fn entity_action(&mut self, action: Action) {
        match action {
            Action::Edit => {
                if let (Some(e), Some(g)) = (self.entity.entity.clone(), self.grid.as_ref()) {
                    let si = g.source;
                    let table = self.entity.table.clone();
                    self.open_editor(Editor::edit(si, &table, &e, self.source_read_only(si)));
                }
            }
            Action::Back => self.focus = Pane::Grid,
            Action::Up => self.entity.scroll = self.entity.scroll.saturating_sub(1),
            Action::Down => self.entity.scroll += 1,
            Action::PageUp => self.entity.scroll = self.entity.scroll.saturating_sub(10),
            Action::PageDown => self.entity.scroll += 10,
            Action::Top => self.entity.scroll = 0,
            Action::Copy => {
                if let Some(e) = &self.entity.entity {
                    self.commands.push(Command::Copy(e.to_json_line()));
                    self.info("copied the entity as JSON (OSC 52)");
                }
            }
            Action::Refresh => {
                let (Some(e), Some(grid)) = (&self.entity.entity, &self.grid) else {
                    return;
                };
                let (pk, rk, client) = (
                    e.partition_key.clone(),
                    e.row_key.clone(),
                    grid.client.clone(),
                );
                let table = self.entity.table.clone();
                let job = self.job();
                self.entity.loading = Some(job);
                self.commands.push(Command::GetEntity {
                    job,
                    client,
                    table,
                    partition_key: pk,
                    row_key: rk,
                });
            }
            _ => {}
        }
    }

    // ---- overlays -----------------------------------------------------------------------

    fn on_overlay_key(&mut self, key: KeyEvent) {
        let Some(mut overlay) = self.overlay.take() else {
            return;
        };
        let keep = match &mut overlay {
            Overlay::Help { scroll } => match self.keymap.action(&key) {
                Some(Action::Down) => {
                    *scroll += 1;
                    true
                }
                Some(Action::Up) => {
                    *scroll = scroll.saturating_sub(1);
                    true
                }
                Some(Action::PageDown) => {
                    *scroll += 10;
                    true
                }
                Some(Action::PageUp) => {
                    *scroll = scroll.saturating_sub(10);
                    true
                }
                _ => false,
            },
            Overlay::Command { input, error } => match input.handle(&key) {
                InputResult::Submit => {
                    let text = input.text().to_string();
                    match self.run_command(&text) {
                        Ok(()) => false,
                        Err(e) => {
                            *error = Some(e);
                            true
                        }
                    }
                }
                InputResult::Cancel => false,
                _ => {
                    *error = None;
                    true
                }
            },
            Overlay::Search { input } => {
                let result = input.handle(&key);
                let text = input.text().to_string();
                match self.focus {
                    Pane::Tables => {
                        self.tables_filter = text;
                        self.tables_cursor = 0;
                        self.maybe_load_more_tables();
                    }
                    _ => {
                        if let Some(g) = self.grid.as_mut() {
                            g.set_search((!text.is_empty()).then_some(text));
                        }
                    }
                }
                match result {
                    InputResult::Cancel => {
                        // Esc drops the search; Enter keeps it applied.
                        self.tables_filter.clear();
                        if let Some(g) = self.grid.as_mut().filter(|_| self.focus != Pane::Tables) {
                            g.set_search(None);
                        }
                        false
                    }
                    InputResult::Submit => false,
                    _ => true,
                }
            }
            Overlay::FilterBar {
                filter,
                select,
                field,
                error,
            } => match if *field == 0 {
                filter.handle(&key)
            } else {
                select.handle(&key)
            } {
                InputResult::Next | InputResult::Prev => {
                    *field = 1 - *field;
                    true
                }
                InputResult::Cancel => false,
                InputResult::Submit => match self.apply_filter(filter.text(), select.text()) {
                    Ok(()) => false,
                    Err(e) => {
                        *error = Some(e);
                        true
                    }
                },
                _ => {
                    *error = None;
                    true
                }
            },
            Overlay::CreateTable {
                source,
                name,
                error,
            } => match name.handle(&key) {
                InputResult::Submit => match crate::azure::validate::table_name(name.text()) {
                    Ok(()) => {
                        let (si, table) = (*source, name.text().to_string());
                        self.create_table(si, table);
                        false
                    }
                    Err(e) => {
                        *error = Some(e.to_string());
                        true
                    }
                },
                InputResult::Cancel => false,
                _ => {
                    *error = None;
                    true
                }
            },
            Overlay::DeleteEntities { keys } => {
                if matches!(key.code, KeyCode::Char('y') | KeyCode::Enter) {
                    let keys = std::mem::take(keys);
                    self.delete_entities(keys);
                } else {
                    self.info("nothing deleted");
                }
                false
            }
            Overlay::DeleteTable {
                source,
                table,
                typed,
            } => match typed.handle(&key) {
                InputResult::Submit if typed.text() == table => {
                    let (si, table) = (*source, table.clone());
                    self.delete_table(si, table);
                    false
                }
                InputResult::Submit => true,
                InputResult::Cancel => false,
                _ => true,
            },
        };
        if keep {
            self.overlay = Some(overlay);
        }
    }

    fn apply_filter(&mut self, filter_text: &str, select_text: &str) -> Result<(), String> {
        let filter_text = filter_text.trim();
        if !filter_text.is_empty() {
            filter::parse(filter_text).map_err(|e| e.to_string())?;
        }
        let select: Vec<String> = select_text
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        for name in &select {
            if !matches!(name.as_str(), "PartitionKey" | "RowKey" | "Timestamp") {
                crate::azure::validate::property_name(name).map_err(|e| format!("select: {e}"))?;
            }
        }
        let Some(grid) = self.grid.as_mut() else {
            return Err("open a table first".into());
        };
        grid.spec.filter = (!filter_text.is_empty()).then(|| filter_text.to_string());
        grid.spec.select = (!select.is_empty()).then_some(select);
        grid.reset_paging();
        self.query_grid(GridMove::First);
        Ok(())
    }

    fn create_table(&mut self, si: usize, name: String) {
        let Ok(client) = self.sources[si].client.clone() else {
            return;
        };
        let job = self.job();
        self.pending_table_ops.push((job, si));
        self.commands
            .push(Command::CreateTable { job, client, name });
    }

    fn delete_table(&mut self, si: usize, name: String) {
        let Ok(client) = self.sources[si].client.clone() else {
            return;
        };
        let job = self.job();
        self.pending_table_ops.push((job, si));
        self.commands
            .push(Command::DeleteTable { job, client, name });
    }

    fn open_editor(&mut self, editor: Editor) {
        self.editor = Some(editor);
        self.focus = Pane::Editor;
    }

    fn grid_client(&self) -> Option<(TableClient, String)> {
        let g = self.grid.as_ref()?;
        Some((g.client.clone(), self.sources.get(g.source)?.name.clone()))
    }

    fn send_write(&mut self, table: String, op: WriteOp, pending: Pending) {
        let Some((client, profile)) = self.grid_client() else {
            self.error("no table open");
            return;
        };
        let journal = match &self.journal {
            Ok(j) => j.clone(),
            Err(e) => {
                // Never an unjournaled write: without the journal there is no undo.
                self.error(format!("not sent: the journal cannot be written ({e})"));
                if let Some(ed) = self.editor.as_mut() {
                    ed.saving = false;
                }
                return;
            }
        };
        let job = self.job();
        self.pending.insert(job, pending);
        self.commands.push(Command::Write {
            job,
            journal,
            client,
            profile,
            table,
            op,
        });
    }

    fn delete_entities(&mut self, keys: Vec<(String, String, Option<String>)>) {
        let Some(table) = self.grid.as_ref().map(|g| g.table.clone()) else {
            return;
        };
        let n = keys.len();
        for (pk, rk, etag) in keys {
            let condition = match etag {
                Some(t) => crate::azure::Condition::IfMatch(t),
                None => {
                    self.error(format!(
                        "{pk} / {rk} has no ETag (select it again after a refresh)"
                    ));
                    continue;
                }
            };
            let op = WriteOp::Delete {
                partition_key: pk.clone(),
                row_key: rk.clone(),
                condition,
            };
            self.send_write(table.clone(), op, Pending::Delete(pk, rk));
        }
        self.info(format!(
            "deleting {n} entit{}…",
            if n == 1 { "y" } else { "ies" }
        ));
    }

    fn on_editor_action(&mut self, action: EditorAction) {
        match action {
            EditorAction::None => {}
            EditorAction::Close => {
                self.editor = None;
                self.focus = if self.grid.is_some() {
                    Pane::Grid
                } else {
                    Pane::Tables
                };
            }
            EditorAction::Save(op) => {
                let Some(table) = self.editor.as_ref().map(|e| e.table.clone()) else {
                    return;
                };
                self.send_write(table, op.clone(), Pending::Save(op));
            }
            EditorAction::OpenExisting {
                partition_key,
                row_key,
            } => {
                let Some((client, _)) = self.grid_client() else {
                    return;
                };
                let Some(table) = self.editor.as_ref().map(|e| e.table.clone()) else {
                    return;
                };
                let job = self.job();
                self.pending.insert(job, Pending::OpenForEdit);
                self.commands.push(Command::GetEntity {
                    job,
                    client,
                    table,
                    partition_key,
                    row_key,
                });
            }
            EditorAction::ExternalEdit(text) => {
                let job = self.job();
                self.pending.insert(job, Pending::ExternalEdit);
                self.commands.push(Command::ExternalEdit { job, text });
            }
        }
    }

    /// Results of writes, conflict fetches and `$EDITOR` sessions.
    fn on_pending(&mut self, pending: Pending, output: JobOutput) {
        match (pending, output) {
            (Pending::Save(op), JobOutput::Written(Ok(done))) => {
                let note = done.note.clone();
                if let Some(ed) = self.editor.as_mut() {
                    // The saved entity as it now stands: the form (merge: onto what was loaded).
                    let full = match ed.build() {
                        Ok(e) => e,
                        Err(_) => match &op {
                            WriteOp::Insert(e)
                            | WriteOp::Update { entity: e, .. }
                            | WriteOp::Upsert { entity: e, mode: _ } => e.clone(),
                            WriteOp::Delete { .. } => crate::azure::Entity::default(),
                        },
                    };
                    ed.saved(done.etag.clone(), full);
                }
                self.success(match note {
                    Some(n) => format!("saved: {} ({n})", op.describe()),
                    None => format!("saved: {}", op.describe()),
                });
                self.fetch_for_editor(&op, Pending::Refetch);
                self.refresh_grid_quietly();
            }
            (Pending::Save(op), JobOutput::Written(Err(f))) if f.is_conflict() => {
                // Fetch the server's version to show the three-way view.
                self.fetch_for_editor(&op, Pending::ConflictFetch);
                self.message = Some(Message {
                    text: if f.status == Some(404) {
                        "not saved: the entity was deleted since you loaded it".into()
                    } else {
                        "not saved: someone changed the entity since you loaded it (412)".into()
                    },
                    level: Level::Warning,
                });
            }
            (Pending::Save(_), JobOutput::Written(Err(f))) => {
                let exists = f.status == Some(409);
                if let Some(ed) = self.editor.as_mut() {
                    ed.failed(f.message.clone(), exists);
                }
                self.error(f.message);
            }
            (Pending::ConflictFetch, JobOutput::Entity(result)) => {
                let server = result.ok();
                if let Some(ed) = self.editor.as_mut() {
                    ed.conflict(server);
                }
            }
            (Pending::OpenForEdit, JobOutput::Entity(Ok(e))) => {
                if let Some(ed) = self.editor.take() {
                    let read_only = self.source_read_only(ed.source);
                    self.open_editor(Editor::edit(ed.source, &ed.table, &e, read_only));
                }
            }
            (Pending::OpenForEdit, JobOutput::Entity(Err(e))) => self.error(e),
            (Pending::Export, JobOutput::Done(Ok(msg))) => self.success(msg),
            (Pending::Export, JobOutput::Done(Err(e))) => self.error(e),
            (Pending::Undo, JobOutput::Done(Ok(msg))) => {
                self.success(msg);
                self.refresh_grid_quietly();
            }
            (Pending::Undo, JobOutput::Done(Err(e))) => self.error(e),
            (Pending::Undo, JobOutput::UndoConflict { table, conflict }) => {
                self.undo_conflict(table, *conflict)
            }
            (Pending::Refetch, JobOutput::Entity(Ok(e))) => {
                if let Some(ed) = self
                    .editor
                    .as_mut()
                    .filter(|ed| !ed.saving && !ed.is_modified_since_save())
                {
                    let etag = e.etag.clone();
                    ed.saved(etag, e);
                }
            }
            (Pending::ExternalEdit, JobOutput::Edited(Ok(text))) => {
                if let Some(ed) = self.editor.as_mut() {
                    if let Err(e) = ed.apply_raw(&text) {
                        ed.message = Some(format!("not applied: {e}"));
                        ed.errors = vec![(0, e)];
                    }
                }
            }
            (Pending::ExternalEdit, JobOutput::Edited(Err(e))) => self.error(e),
            (Pending::Delete(pk, rk), JobOutput::Written(result)) => match result {
                Ok(_) => {
                    if let Some(g) = self.grid.as_mut() {
                        g.marked.remove(&(pk.clone(), rk.clone()));
                    }
                    self.success(format!("deleted {pk} / {rk}"));
                    self.refresh_grid_quietly();
                }
                Err(f) if f.status == Some(412) => self.error(format!(
                    "{pk} / {rk} was not deleted: it changed since it was loaded (412); r reloads"
                )),
                Err(f) => self.error(format!("{pk} / {rk}: {}", f.message)),
            },
            _ => {}
        }
    }

    /// `:undo` found the entity changed since: show the three versions in the editor's conflict
    /// view: what the change left, the before-image undo would restore, and what is there now.
    fn undo_conflict(&mut self, table: String, c: crate::journal::UndoConflict) {
        let si = self
            .grid
            .as_ref()
            .map(|g| g.source)
            .or(self.current_source())
            .unwrap_or(0);
        let read_only = self.source_read_only(si);
        match (c.before, c.expected_after, c.current) {
            (Some(before), after, current) => {
                let mut ed = match &after {
                    Some(a) => Editor::edit(si, &table, a, read_only),
                    None => Editor::new_entity(si, &table, &before.partition_key, read_only),
                };
                ed.partition_key = before.partition_key.clone();
                ed.row_key = before.row_key.clone();
                ed.rows = super::editor::rows_of(&before);
                ed.conflict(current);
                self.message = Some(Message {
                    text: "undo not applied: the entity changed since your change (r re-applies the undo onto it, o restores the before-image, d leaves it)".into(),
                    level: Level::Warning,
                });
                self.open_editor(ed);
            }
            (None, _, current) => self.error(format!(
                "undo not applied: the entity your insert created has changed since ({}); delete it by hand if you still want it gone",
                current.map_or("it is gone".to_string(), |e| format!("now {} properties", e.properties.len()))
            )),
        }
    }

    /// Reads the entity a write was about, for the editor (its saved state or a conflict view).
    fn fetch_for_editor(&mut self, op: &WriteOp, pending: Pending) {
        let (pk, rk) = op.keys();
        let (partition_key, row_key) = (pk.to_string(), rk.to_string());
        let table = self.editor.as_ref().map(|e| e.table.clone());
        if let (Some((client, _)), Some(table)) = (self.grid_client(), table) {
            let job = self.job();
            self.pending.insert(job, pending);
            self.commands.push(Command::GetEntity {
                job,
                client,
                table,
                partition_key,
                row_key,
            });
        }
    }

    /// Reloads the grid's current page after a write, keeping the cursor.
    fn refresh_grid_quietly(&mut self) {
        if self
            .grid
            .as_ref()
            .is_some_and(|g| g.loading.is_none() && g.loaded_once)
        {
            self.query_grid(GridMove::Reload);
        }
    }

    /// `:` commands.
    pub fn run_command(&mut self, text: &str) -> Result<(), String> {
        let text = text.trim().trim_start_matches(':');
        let (cmd, arg) = text
            .split_once(' ')
            .map_or((text, ""), |(c, a)| (c, a.trim()));
        match cmd {
            "q" | "quit" | "q!" => {
                self.should_quit = true;
                Ok(())
            }
            "table" | "t" => {
                if arg.is_empty() {
                    return Err("usage: :table NAME".into());
                }
                let si = self.current_source().ok_or("no profile selected")?;
                self.open_table(si, arg);
                Ok(())
            }
            "profile" | "p" => {
                let si = self
                    .sources
                    .iter()
                    .position(|s| s.name == arg)
                    .ok_or_else(|| format!("no profile '{arg}' (known: {})", self.source_names()))?;
                self.expand_source(si);
                self.tables_cursor = self.tree_rows().iter().position(|r| *r == TreeRow::Source(si)).unwrap_or(0);
                self.focus = Pane::Tables;
                Ok(())
            }
            "theme" => {
                if arg.is_empty() {
                    return Err(format!(
                        "usage: :theme NAME (available: {})",
                        super::theme::available(self.user_config_dir.as_deref()).join(", ")
                    ));
                }
                let (theme, warnings) = super::theme::load(arg, self.user_config_dir.as_deref(), self.no_color);
                if let Some(w) = warnings.first() {
                    return Err(w.clone());
                }
                self.theme = theme;
                self.info(format!("theme {arg}"));
                Ok(())
            }
            "filter" => self.apply_filter(arg, &self.grid.as_ref().and_then(|g| g.spec.select.as_ref()).map(|s| s.join(",")).unwrap_or_default()),
            "help" => {
                self.overlay = Some(Overlay::Help { scroll: 0 });
                Ok(())
            }
            "stress" => {
                let si = self.current_source().ok_or("no profile selected")?;
                if self.source_read_only(si) {
                    return Err(format!("{} is read-only: the stress test writes to a table it creates", self.sources[si].name));
                }
                if self.stress.as_ref().is_some_and(|(job, _)| job.is_some()) {
                    self.focus = Pane::Stress;
                    return Err("a stress test is already running (Esc stops it)".into());
                }
                let client = self.sources[si].client.clone()?;
                let mut config = crate::stress::StressConfig::default();
                if !arg.is_empty() {
                    config.partitions = arg.parse().map_err(|_| format!("usage: :stress [PARTITIONS] ('{arg}' is not a number)"))?;
                }
                config.check().map_err(|e| e.to_string())?;
                let job = self.job();
                self.stress = Some((Some(job), StressView::default()));
                self.commands.push(Command::Stress { job, client, config });
                self.focus = Pane::Stress;
                self.info("stress test started: Esc stops it (its table is removed either way)");
                Ok(())
            }
            "dashboard" | "dash" => {
                self.on_action(Action::FocusDashboard);
                Ok(())
            }
            "undo" => {
                let journal = self.journal.clone().map_err(|e| format!("no journal: {e}"))?;
                let clients: Vec<(String, TableClient)> = self
                    .sources
                    .iter()
                    .filter_map(|s| s.client.as_ref().ok().map(|c| (s.name.clone(), c.clone())))
                    .collect();
                let job = self.job();
                self.pending.insert(job, Pending::Undo);
                self.commands.push(Command::Undo { job, journal, clients });
                self.info("undoing the last change of this session…");
                Ok(())
            }
            "" => Ok(()),
            other => Err(format!(
                "unknown command ':{other}' (try :table NAME, :profile NAME, :filter EXPR, :undo, :dashboard, :stress, :theme NAME, :help, :q)"
            )),
        }
    }

    fn source_names(&self) -> String {
        self.sources
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The source of the grid, else of the tables cursor.
    pub fn current_source(&self) -> Option<usize> {
        if let Some(g) = &self.grid {
            if self.focus != Pane::Tables {
                return Some(g.source);
            }
        }
        let rows = self.tree_rows();
        self.row_source(rows.get(self.tables_cursor))
            .or(self.grid.as_ref().map(|g| g.source))
    }

    // ---- mouse --------------------------------------------------------------------------

    fn on_mouse(&mut self, m: MouseEvent) {
        let inside = |r: Rect| {
            m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
        };
        let in_tables = inside(self.areas.tables);
        let in_main = inside(self.areas.main);
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                if in_tables {
                    self.focus = Pane::Tables;
                    let row = (m.row.saturating_sub(self.areas.tables.y + 1)) as usize
                        + self.tables_scroll;
                    if row < self.tree_rows().len() {
                        self.tables_cursor = row;
                    }
                    self.dirty = true;
                } else if in_main && self.grid.is_some() && self.focus != Pane::Entity {
                    self.focus = Pane::Grid;
                    if let Some(g) = self.grid.as_mut() {
                        // Border, header: data starts two lines below the top.
                        let row = m.row.saturating_sub(self.areas.main.y + 2) as usize + g.scroll;
                        if m.row >= self.areas.main.y + 2 && row < g.visible_len() {
                            g.cursor = row;
                        }
                    }
                    self.dirty = true;
                }
            }
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                // The wheel scrolls the pane under the pointer without moving the focus.
                let target = if in_tables {
                    Pane::Tables
                } else if in_main && self.focus == Pane::Entity {
                    Pane::Entity
                } else if in_main && self.grid.is_some() {
                    Pane::Grid
                } else {
                    return;
                };
                let action = if m.kind == MouseEventKind::ScrollDown {
                    Action::Down
                } else {
                    Action::Up
                };
                let saved = self.focus;
                self.focus = target;
                for _ in 0..3 {
                    self.on_action(action);
                }
                self.focus = saved;
                self.dirty = true;
            }
            _ => {}
        }
    }

    // ---- job results --------------------------------------------------------------------

    fn on_job(&mut self, id: JobId, output: JobOutput) {
        if let Some((job, view)) = self.stress.as_mut() {
            if *job == Some(id) {
                match output {
                    JobOutput::Stress(ev) => view.apply(ev),
                    JobOutput::Done(result) => {
                        *job = None;
                        self.awaited.remove(&id);
                        match result {
                            Ok(line) => self.success(format!("stress test done: {line}")),
                            Err(e) => self.error(format!("stress test: {e}")),
                        }
                    }
                    _ => {}
                }
                self.dirty = true;
                return;
            }
        }
        if let JobOutput::Scanned(n) = output {
            if let Some(g) = self.grid.as_mut().filter(|g| g.loading == Some(id)) {
                g.scanned = n;
                self.dirty = true;
            }
            return;
        }
        if !self.awaited.remove(&id) {
            // A superseded or cancelled request: its result is dropped.
            return;
        }
        self.dirty = true;
        // Table lists.
        if let Some(si) = self.sources.iter().position(|s| s.loading == Some(id)) {
            let s = &mut self.sources[si];
            s.loading = None;
            match output {
                JobOutput::Tables(Ok(page)) => {
                    s.tables.extend(page.names);
                    s.next_table = page.next_table_name;
                    s.loaded = true;
                    s.error = None;
                    self.maybe_load_more_tables();
                }
                JobOutput::Tables(Err(e)) => {
                    s.error = Some(e.clone());
                    self.error(format!("{}: {e}", self.sources[si].name));
                }
                _ => {}
            }
            return;
        }
        if let Some(p) = self.pending.remove(&id) {
            self.on_pending(p, output);
            return;
        }
        if let Some(pos) = self.pending_table_ops.iter().position(|(j, _)| *j == id) {
            let (_, si) = self.pending_table_ops.remove(pos);
            match output {
                JobOutput::Done(Ok(msg)) => {
                    self.success(msg);
                    let s = &mut self.sources[si];
                    s.tables.clear();
                    s.loaded = false;
                    s.next_table = None;
                    self.load_tables(si, false);
                }
                JobOutput::Done(Err(e)) => self.error(e),
                _ => {}
            }
            return;
        }
        if self.entity.loading == Some(id) {
            self.entity.loading = None;
            match output {
                JobOutput::Entity(Ok(e)) => {
                    self.entity.entity = Some(e);
                    self.entity.error = None;
                }
                JobOutput::Entity(Err(e)) => {
                    self.entity.error = Some(e.clone());
                    self.error(e);
                }
                _ => {}
            }
            return;
        }
        let Some(grid) = self.grid.as_mut().filter(|g| g.loading == Some(id)) else {
            // A superseded request: its result is dropped.
            return;
        };
        grid.loading = None;
        let pending = grid.pending.take();
        match output {
            JobOutput::Page {
                result: Ok(page), ..
            } => {
                if let Some((how, from)) = pending {
                    grid.apply_page(how, from, page);
                }
            }
            JobOutput::Page { result: Err(e), .. } => {
                grid.error = Some(e.clone());
                self.error(e);
            }
            JobOutput::Cancelled => self.info("query cancelled"),
            _ => {}
        }
    }
}

/// The first visible line so that `cursor` is on screen, moving as little as possible.
pub fn scroll_for(cursor: usize, previous: usize, height: usize) -> usize {
    if height == 0 {
        return 0;
    }
    if cursor < previous {
        cursor
    } else if cursor >= previous + height {
        cursor + 1 - height
    } else {
        previous
    }
}

/// How a grid query moves the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridMove {
    First,
    Next,
    Prev,
    More,
    Reload,
}

/// A key event for tests and benches.
pub fn key(code: KeyCode) -> Event {
    Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn ctrl(c: char) -> Event {
    Event::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}
