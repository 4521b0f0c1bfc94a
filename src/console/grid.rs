//! The entity grid's state: the query cursor (filter, select, page size, a stack of page start
//! tokens so `p` never re-scans), a bounded window of loaded pages, the columns (the union of
//! properties seen, keys pinned) and type-aware cell text.

use std::collections::HashMap;

use crate::azure::edm::DateTime;
use crate::azure::filter::{self, QueryClass};
use crate::azure::{Continuation, EdmType, EdmValue, Entity, EntityPage, QuerySpec, TableClient};

use super::app::GridMove;
use super::event::JobId;

/// Pages kept in the view at most (load-more past this drops the oldest), so memory stays flat
/// however far the user walks.
pub const MAX_PAGES_IN_VIEW: usize = 5;
const MAX_COLUMN_WIDTH: u16 = 48;
const MIN_COLUMN_WIDTH: u16 = 4;
/// Rows sampled to size columns.
const WIDTH_SAMPLE: usize = 200;

/// Where a page begins: its continuation token and the absolute index of its first row.
#[derive(Clone, Debug, PartialEq)]
pub struct PageStart {
    pub token: Option<Continuation>,
    pub first_row: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    /// The type seen first; None for the system columns.
    pub ty: Option<EdmType>,
    /// True when rows disagree on the type (schemaless tables allow it).
    pub mixed: bool,
    pub width: u16,
}

/// How a cell should look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellKind {
    Key,
    Missing,
    Empty,
    Value(EdmType),
    System,
}

pub struct Grid {
    pub source: usize,
    pub table: String,
    pub client: TableClient,
    pub spec: QuerySpec,
    pub class: QueryClass,
    /// Start of every page walked so far (index = page number - 1).
    pub starts: Vec<PageStart>,
    /// The page number (0-based) of the first page in `rows`.
    pub first_page: usize,
    /// Row counts of the pages in `rows`, oldest first.
    pub page_lens: Vec<usize>,
    pub rows: Vec<Entity>,
    /// Where the page after the view begins; None at the end of the table.
    pub next: Option<Continuation>,
    pub loading: Option<JobId>,
    pub pending: Option<(GridMove, Option<Continuation>)>,
    /// Empty pages skipped by the running query ("scanned, no match yet").
    pub scanned: u32,
    pub error: Option<String>,
    pub columns: Vec<Column>,
    pub cursor: usize,
    /// First row drawn (kept by the drawing code so the cursor stays visible).
    pub scroll: usize,
    /// The selected column.
    pub column: usize,
    /// Client-side search over the loaded rows.
    pub search: Option<String>,
    /// Indices into `rows` that match the search.
    filtered: Vec<usize>,
    width_adjust: HashMap<String, i32>,
    pub loaded_once: bool,
    /// Rows marked with space, by key (they survive paging).
    pub marked: std::collections::HashSet<(String, String)>,
}

impl Grid {
    pub fn new(source: usize, table: String, client: TableClient, spec: QuerySpec) -> Grid {
        let class = classify(&spec);
        Grid {
            source,
            table,
            client,
            spec,
            class,
            starts: vec![PageStart {
                token: None,
                first_row: 0,
            }],
            first_page: 0,
            page_lens: Vec::new(),
            rows: Vec::new(),
            next: None,
            loading: None,
            pending: None,
            scanned: 0,
            error: None,
            columns: system_columns(),
            cursor: 0,
            scroll: 0,
            column: 0,
            search: None,
            filtered: Vec::new(),
            width_adjust: HashMap::new(),
            loaded_once: false,
            marked: std::collections::HashSet::new(),
        }
    }

    /// A new filter or projection: paging starts over.
    pub fn reset_paging(&mut self) {
        self.class = classify(&self.spec);
        self.starts = vec![PageStart {
            token: None,
            first_row: 0,
        }];
        self.first_page = 0;
        self.page_lens.clear();
        self.rows.clear();
        self.next = None;
        self.cursor = 0;
        self.scroll = 0;
        self.loaded_once = false;
        self.refilter();
    }

    pub fn page_index(&self) -> usize {
        self.first_page
    }

    /// The last page number (0-based) in the view.
    pub fn last_page_in_view(&self) -> usize {
        self.first_page + self.page_lens.len().saturating_sub(1)
    }

    pub fn current_start(&self) -> Option<&Continuation> {
        self.starts
            .get(self.first_page)
            .and_then(|s| s.token.as_ref())
    }

    pub fn previous_start(&self) -> Option<&Continuation> {
        self.first_page
            .checked_sub(1)
            .and_then(|p| self.starts.get(p))
            .and_then(|s| s.token.as_ref())
    }

    /// Absolute index of the first row in the view.
    pub fn first_row(&self) -> u64 {
        self.starts.get(self.first_page).map_or(0, |s| s.first_row)
    }

    pub fn apply_page(&mut self, how: GridMove, from: Option<Continuation>, page: EntityPage) {
        let n = page.entities.len();
        match how {
            GridMove::First | GridMove::Reload => {
                if how == GridMove::First {
                    self.starts.truncate(1);
                    self.first_page = 0;
                }
                self.rows = page.entities;
                self.page_lens = vec![n];
                self.cursor = self.cursor.min(n.saturating_sub(1));
                if how == GridMove::First {
                    self.cursor = 0;
                    self.scroll = 0;
                }
            }
            GridMove::Next | GridMove::Prev => {
                let target = if how == GridMove::Next {
                    self.last_page_in_view() + 1
                } else {
                    self.first_page.saturating_sub(1)
                };
                if how == GridMove::Next {
                    let first_row = self.first_row() + self.rows.len() as u64;
                    self.record_start(target, from, first_row);
                }
                self.first_page = target;
                self.rows = page.entities;
                self.page_lens = vec![n];
                self.cursor = 0;
                self.scroll = 0;
            }
            GridMove::More => {
                let target = self.last_page_in_view() + 1;
                let first_row = self.first_row() + self.rows.len() as u64;
                self.record_start(target, from, first_row);
                self.rows.extend(page.entities);
                self.page_lens.push(n);
                if self.page_lens.len() > MAX_PAGES_IN_VIEW {
                    let dropped = self.page_lens.remove(0);
                    self.rows.drain(..dropped);
                    self.first_page += 1;
                    self.cursor = self.cursor.saturating_sub(dropped);
                    self.scroll = self.scroll.saturating_sub(dropped);
                }
            }
        }
        self.next = page.continuation;
        self.loaded_once = true;
        self.error = None;
        self.rebuild_columns();
        self.refilter();
    }

    fn record_start(&mut self, page: usize, token: Option<Continuation>, first_row: u64) {
        let start = PageStart { token, first_row };
        if page < self.starts.len() {
            self.starts[page] = start;
        } else {
            self.starts.push(start);
        }
    }

    pub fn set_search(&mut self, search: Option<String>) {
        // Typing usually extends the search: every row matching the longer text matched the
        // shorter one, so only the current matches need checking again.
        let narrowing = match (&self.search, &search) {
            (Some(old), Some(new)) => new.to_lowercase().contains(&old.to_lowercase()),
            _ => false,
        };
        self.search = search;
        self.cursor = 0;
        self.scroll = 0;
        if narrowing {
            let candidates = std::mem::take(&mut self.filtered);
            self.filtered = self.matching(candidates.into_iter());
        } else {
            self.refilter();
        }
    }

    fn refilter(&mut self) {
        self.filtered = match &self.search {
            None => Vec::new(),
            Some(_) => self.matching(0..self.rows.len()),
        };
    }

    /// The indices among `candidates` whose row matches the search.
    fn matching(&self, candidates: impl Iterator<Item = usize>) -> Vec<usize> {
        let Some(s) = &self.search else {
            return Vec::new();
        };
        let needle = s.to_lowercase();
        let mut scratch = String::new();
        candidates
            .filter(|&i| {
                self.rows
                    .get(i)
                    .is_some_and(|e| entity_matches(e, &needle, &mut scratch))
            })
            .collect()
    }

    pub fn visible_len(&self) -> usize {
        match &self.search {
            None => self.rows.len(),
            Some(_) => self.filtered.len(),
        }
    }

    /// The row index in `rows` at a visible position.
    pub fn row_at(&self, visible: usize) -> Option<usize> {
        match &self.search {
            None => (visible < self.rows.len()).then_some(visible),
            Some(_) => self.filtered.get(visible).copied(),
        }
    }

    pub fn selected_entity(&self) -> Option<&Entity> {
        self.row_at(self.cursor).and_then(|i| self.rows.get(i))
    }

    pub fn is_marked(&self, e: &Entity) -> bool {
        !self.marked.is_empty()
            && self
                .marked
                .contains(&(e.partition_key.clone(), e.row_key.clone()))
    }

    pub fn toggle_mark(&mut self) {
        if let Some(e) = self.selected_entity() {
            let key = (e.partition_key.clone(), e.row_key.clone());
            if !self.marked.remove(&key) {
                self.marked.insert(key);
            }
        }
    }

    /// Marked rows that are loaded in the view.
    pub fn marked_entities(&self) -> Vec<&Entity> {
        if self.marked.is_empty() {
            return Vec::new();
        }
        self.rows.iter().filter(|e| self.is_marked(e)).collect()
    }

    pub fn move_cursor(&mut self, delta: i64) {
        let len = self.visible_len() as i64;
        if len == 0 {
            self.cursor = 0;
            return;
        }
        self.cursor = (self.cursor as i64 + delta).clamp(0, len - 1) as usize;
    }

    pub fn resize_column(&mut self, delta: i32) {
        if let Some(c) = self.columns.get_mut(self.column) {
            let adj = self.width_adjust.entry(c.name.clone()).or_insert(0);
            *adj += delta;
            c.width = (c.width as i32 + delta).clamp(MIN_COLUMN_WIDTH as i32, 200) as u16;
        }
    }

    fn rebuild_columns(&mut self) {
        let mut columns = system_columns();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for e in &self.rows {
            for p in &e.properties {
                match index.get(p.name.as_str()) {
                    Some(&i) => {
                        if columns[i].ty != Some(p.value.edm_type()) {
                            columns[i].mixed = true;
                        }
                    }
                    None => {
                        index.insert(p.name.as_str(), columns.len());
                        columns.push(Column {
                            name: p.name.clone(),
                            ty: Some(p.value.edm_type()),
                            mixed: false,
                            width: 0,
                        });
                    }
                }
            }
        }
        let sample = &self.rows[..self.rows.len().min(WIDTH_SAMPLE)];
        for c in &mut columns {
            let header = header_text(c).chars().count() as u16;
            let widest = sample
                .iter()
                .map(|e| cell_text(e, &c.name, false).0.chars().count() as u16)
                .max()
                .unwrap_or(0);
            let natural = header.max(widest).clamp(MIN_COLUMN_WIDTH, MAX_COLUMN_WIDTH);
            let adjust = self.width_adjust.get(&c.name).copied().unwrap_or(0);
            c.width = (natural as i32 + adjust).clamp(MIN_COLUMN_WIDTH as i32, 200) as u16;
        }
        self.columns = columns;
        self.column = self.column.min(self.columns.len().saturating_sub(1));
    }

    /// A one-line summary of where the view is ("page 3 · rows 2,001–3,000").
    pub fn position(&self) -> String {
        let first = self.first_row();
        let pages = if self.page_lens.len() > 1 {
            format!(
                "pages {}–{}",
                self.first_page + 1,
                self.last_page_in_view() + 1
            )
        } else {
            format!("page {}", self.first_page + 1)
        };
        if self.rows.is_empty() {
            // Before the first answer nothing is known yet, not even that the page is empty.
            if !self.loaded_once {
                return pages;
            }
            return format!("{pages} · no rows");
        }
        format!(
            "{pages} · rows {}–{}{}",
            group(first + 1),
            group(first + self.rows.len() as u64),
            if self.next.is_some() { "" } else { " (end)" }
        )
    }
}

fn classify(spec: &QuerySpec) -> QueryClass {
    match spec.filter.as_deref().map(filter::parse) {
        Some(Ok(expr)) => filter::classify(Some(&expr)),
        _ => filter::classify(None),
    }
}

fn system_columns() -> Vec<Column> {
    ["PartitionKey", "RowKey", "Timestamp"]
        .into_iter()
        .map(|n| Column {
            name: n.to_string(),
            ty: None,
            mixed: false,
            width: n.len() as u16,
        })
        .collect()
}

/// Number of pinned (always visible) columns: PartitionKey and RowKey.
pub const PINNED: usize = 2;

/// `Name:type` for non-string properties, so the header tells the type.
pub fn header_text(c: &Column) -> String {
    match (c.ty, c.mixed) {
        (_, true) => format!("{}:mixed", c.name),
        (None | Some(EdmType::String), _) => c.name.clone(),
        (Some(EdmType::Int64), _) => format!("{}:i64", c.name),
        (Some(EdmType::Int32), _) => format!("{}:i32", c.name),
        (Some(EdmType::Double), _) => format!("{}:f64", c.name),
        (Some(EdmType::Boolean), _) => format!("{}:bool", c.name),
        (Some(EdmType::DateTime), _) => format!("{}:dt", c.name),
        (Some(EdmType::Guid), _) => format!("{}:guid", c.name),
        (Some(EdmType::Binary), _) => format!("{}:bin", c.name),
    }
}

/// The text of one cell and how it should look.
pub fn cell_text(e: &Entity, column: &str, local_time: bool) -> (String, CellKind) {
    match column {
        "PartitionKey" => (one_line(&e.partition_key), CellKind::Key),
        "RowKey" => (one_line(&e.row_key), CellKind::Key),
        "Timestamp" => match e.timestamp {
            Some(t) => (datetime_text(t, local_time), CellKind::System),
            None => ("·".into(), CellKind::Missing),
        },
        name => match e.get(name) {
            None => ("·".into(), CellKind::Missing),
            Some(EdmValue::String(s)) if s.is_empty() => ("\"\"".into(), CellKind::Empty),
            Some(v) => (value_text(v, local_time), CellKind::Value(v.edm_type())),
        },
    }
}

/// A value as the grid shows it: exact, on one line, binaries as a short preview.
pub fn value_text(v: &EdmValue, local_time: bool) -> String {
    match v {
        EdmValue::String(s) => one_line(s),
        EdmValue::DateTime(d) => datetime_text(*d, local_time),
        EdmValue::Binary(b) => binary_preview(b),
        other => other.to_text(),
    }
}

pub fn binary_preview(b: &[u8]) -> String {
    let mut out = String::with_capacity(40);
    write_binary_preview(&mut out, b);
    out
}

fn write_binary_preview(out: &mut String, b: &[u8]) {
    use std::fmt::Write as _;
    out.push_str("0x");
    for x in b.iter().take(8) {
        let _ = write!(out, "{x:02x}");
    }
    let _ = write!(
        out,
        "{} ({} B)",
        if b.len() > 8 { "…" } else { "" },
        b.len()
    );
}

/// UTC with all 7 fractional digits, or local time with its offset.
pub fn datetime_text(d: DateTime, local: bool) -> String {
    if local {
        let offset = local_offset_seconds(d.unix_seconds());
        let (y, mo, da, h, mi, s, f) = d.offset_by_seconds(offset).parts();
        let sign = if offset < 0 { '-' } else { '+' };
        let off = offset.abs();
        format!(
            "{y:04}-{mo:02}-{da:02} {h:02}:{mi:02}:{s:02}.{f:07} {sign}{:02}:{:02}",
            off / 3600,
            off % 3600 / 60
        )
    } else {
        d.to_string()
    }
}

/// The local zone's offset from UTC at an instant (0 when unknown).
pub fn local_offset_seconds(unix_seconds: i64) -> i64 {
    #[cfg(unix)]
    {
        let t = unix_seconds as libc::time_t;
        // SAFETY: localtime_r writes only into the struct we own.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
        if ok {
            return tm.tm_gmtoff;
        }
    }
    let _ = unix_seconds;
    0
}

fn one_line(s: &str) -> String {
    if s.contains(['\n', '\r', '\t']) {
        s.replace('\n', "⏎").replace('\r', "").replace('\t', " ")
    } else {
        s.to_string()
    }
}

/// Whether a row's keys or any value as the grid shows it contains `needle` (lowercase),
/// ignoring case. Runs for every row on every key typed in a search, so it avoids allocating:
/// text is compared in place, and values that need formatting reuse `scratch`.
fn entity_matches(e: &Entity, needle: &str, scratch: &mut String) -> bool {
    use std::fmt::Write as _;
    contains_ignoring_case(&e.partition_key, needle)
        || contains_ignoring_case(&e.row_key, needle)
        || e.properties.iter().any(|p| match &p.value {
            EdmValue::String(s) if !s.contains(['\n', '\r', '\t']) => {
                contains_ignoring_case(s, needle)
            }
            EdmValue::DateTime(d) => {
                scratch.clear();
                let _ = write!(scratch, "{d}");
                contains_ignoring_case(scratch, needle)
            }
            EdmValue::Binary(b) => {
                scratch.clear();
                write_binary_preview(scratch, b);
                contains_ignoring_case(scratch, needle)
            }
            v => contains_ignoring_case(&value_text(v, false), needle),
        })
}

/// `haystack.to_lowercase().contains(needle)` for a lowercase needle, without allocating when
/// the haystack is ASCII (a non-ASCII needle cannot occur in ASCII text).
fn contains_ignoring_case(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    if !haystack.is_ascii() {
        return haystack.to_lowercase().contains(needle);
    }
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    needle.is_ascii()
        && h.len() >= n.len()
        && h.windows(n.len())
            .any(|w| w.iter().zip(n).all(|(a, b)| a.to_ascii_lowercase() == *b))
}

/// 12345 → "12,345".
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::{Account, ClientOptions};

    fn grid() -> Grid {
        let client = TableClient::new(Account::development(), ClientOptions::default()).unwrap();
        Grid::new(0, "T".into(), client, QuerySpec::default())
    }

    fn page(start: usize, n: usize, next: bool) -> EntityPage {
        EntityPage {
            entities: (start..start + n)
                .map(|i| Entity::new("p", format!("{i:06}")).with("N", EdmValue::Int64(i as i64)))
                .collect(),
            continuation: next.then(|| Continuation {
                next_partition_key: "p".into(),
                next_row_key: Some(format!("{:06}", start + n)),
            }),
        }
    }

    fn token(i: usize) -> Option<Continuation> {
        Some(Continuation {
            next_partition_key: "p".into(),
            next_row_key: Some(format!("{i:06}")),
        })
    }

    #[test]
    fn next_and_previous_use_the_token_stack() {
        let mut g = grid();
        g.apply_page(GridMove::First, None, page(0, 1000, true));
        assert_eq!(g.position(), "page 1 · rows 1–1,000");
        g.apply_page(GridMove::Next, token(1000), page(1000, 1000, true));
        g.apply_page(GridMove::Next, token(2000), page(2000, 1000, true));
        assert_eq!(g.position(), "page 3 · rows 2,001–3,000");
        assert_eq!(g.previous_start(), token(1000).as_ref());
        g.apply_page(GridMove::Prev, token(1000), page(1000, 1000, true));
        assert_eq!(g.position(), "page 2 · rows 1,001–2,000");
        assert_eq!(g.previous_start(), None);
        assert_eq!(g.starts.len(), 3, "going back keeps the tokens ahead");
    }

    #[test]
    fn load_more_keeps_a_bounded_window() {
        let mut g = grid();
        g.apply_page(GridMove::First, None, page(0, 1000, true));
        for p in 1..20 {
            g.apply_page(GridMove::More, token(p * 1000), page(p * 1000, 1000, true));
            assert!(g.rows.len() <= MAX_PAGES_IN_VIEW * 1000);
        }
        assert_eq!(g.rows.len(), MAX_PAGES_IN_VIEW * 1000);
        assert_eq!(g.first_page, 15);
        assert_eq!(g.rows[0].row_key, "015000");
        assert_eq!(g.position(), "pages 16–20 · rows 15,001–20,000");
    }

    #[test]
    fn columns_are_the_union_of_properties_with_keys_pinned() {
        let mut g = grid();
        let mut p = page(0, 3, false);
        p.entities[1].set("Extra", EdmValue::String("x".into()));
        p.entities[2].set("N", EdmValue::String("now a string".into()));
        g.apply_page(GridMove::First, None, p);
        let names: Vec<&str> = g.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["PartitionKey", "RowKey", "Timestamp", "N", "Extra"]);
        assert!(g.columns[3].mixed);
        assert_eq!(header_text(&g.columns[3]), "N:mixed");
        assert_eq!(g.position(), "page 1 · rows 1–3 (end)");
    }

    #[test]
    fn cells_distinguish_missing_from_empty_and_keep_values_exact() {
        let e = Entity::new("p", "r")
            .with("Empty", EdmValue::String(String::new()))
            .with("Big", EdmValue::Int64(9_007_199_254_740_993))
            .with("Bin", EdmValue::Binary((0..20).collect()))
            .with(
                "When",
                EdmValue::DateTime(DateTime::parse("2024-01-01T00:00:00.1234567Z").unwrap()),
            );
        assert_eq!(
            cell_text(&e, "Empty", false),
            ("\"\"".into(), CellKind::Empty)
        );
        assert_eq!(cell_text(&e, "Nope", false).1, CellKind::Missing);
        assert_eq!(cell_text(&e, "Big", false).0, "9007199254740993");
        assert_eq!(cell_text(&e, "Bin", false).0, "0x0001020304050607… (20 B)");
        assert_eq!(
            cell_text(&e, "When", false).0,
            "2024-01-01T00:00:00.1234567Z"
        );
    }

    #[test]
    fn search_filters_loaded_rows() {
        let mut g = grid();
        g.apply_page(GridMove::First, None, page(0, 100, false));
        g.set_search(Some("00004".into()));
        assert_eq!(g.visible_len(), 11);
        assert_eq!(g.selected_entity().unwrap().row_key, "000004");
        g.set_search(None);
        assert_eq!(g.visible_len(), 100);
    }

    #[test]
    fn search_narrows_and_widens_as_the_text_changes() {
        let mut g = grid();
        let mut p = page(0, 100, false);
        p.entities[7].set("Name", EdmValue::String("Ärger Über".into()));
        p.entities[8].set("Blob", EdmValue::Binary(vec![0xab, 0xcd]));
        p.entities[9].set("Note", EdmValue::String("two\nLines".into()));
        g.apply_page(GridMove::First, None, p);
        for (text, n) in [
            ("0000", 100),
            ("00004", 11),
            ("000042", 1),
            ("00004", 11),
            ("", 100),
        ] {
            g.set_search(Some(text.into()));
            assert_eq!(g.visible_len(), n, "{text:?}");
        }
        g.set_search(Some("über".into()));
        assert_eq!(g.selected_entity().unwrap().row_key, "000007");
        g.set_search(Some("0XABCD".into()));
        assert_eq!(g.selected_entity().unwrap().row_key, "000008");
        g.set_search(Some("two⏎l".into()));
        assert_eq!(g.selected_entity().unwrap().row_key, "000009");
        assert!(contains_ignoring_case("Hello World", "o w"));
        assert!(!contains_ignoring_case("Hello", "hellö"));
    }
}
