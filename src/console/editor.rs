//! The entity editor: a form of (name, type, value) rows with per-type validation, the choice
//! of merge or replace, a confirmed force, and the three-column conflict view after a 412.
//! It owns no I/O: keys go in, `EditorAction`s (a write to send, close, …) come out.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::input::{Input, InputResult};
use crate::azure::{validate, Condition, EdmType, EdmValue, Entity, UpdateMode};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditorKind {
    Edit,
    New,
    Clone,
}

/// How a save is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveMode {
    Merge,
    Replace,
    Insert,
    /// Insert-or-replace, only when chosen.
    Upsert,
}

impl SaveMode {
    pub fn label(self) -> &'static str {
        match self {
            SaveMode::Merge => "MERGE",
            SaveMode::Replace => "REPLACE",
            SaveMode::Insert => "INSERT",
            SaveMode::Upsert => "UPSERT",
        }
    }
}

/// A write the app sends (through the journal): the journal's own mutation type.
pub use crate::journal::Mutation as WriteOp;

/// What the app should do after a key.
#[derive(Clone, Debug, PartialEq)]
pub enum EditorAction {
    None,
    Close,
    Save(WriteOp),
    /// 409 on insert: open the entity that exists.
    OpenExisting {
        partition_key: String,
        row_key: String,
    },
    /// Raw mode: edit this JSON in `$EDITOR`.
    ExternalEdit(String),
}

/// One editable property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    pub ty: EdmType,
    /// The value as text (`EdmValue::to_text` form); may hold newlines for strings.
    pub value: String,
}

/// Which part of a row has the cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Name,
    Type,
    Value,
}

/// The three versions after a 412 (or 404): loaded, mine, the server's now (None = deleted).
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    pub loaded: Option<Entity>,
    pub mine: Entity,
    pub server: Option<Entity>,
    /// Properties I changed or added, and removed, relative to what I loaded.
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

impl Conflict {
    /// Every property name in any version, in a stable order.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for e in [self.loaded.as_ref(), Some(&self.mine), self.server.as_ref()]
            .into_iter()
            .flatten()
        {
            for p in &e.properties {
                if !names.contains(&p.name) {
                    names.push(p.name.clone());
                }
            }
        }
        names
    }

    /// My changes re-applied onto the server's current version, conditional on its ETag.
    pub fn reapply(&self) -> WriteOp {
        let Some(server) = &self.server else {
            return WriteOp::Insert(strip(&self.mine));
        };
        let etag = Condition::IfMatch(server.etag.clone().unwrap_or_else(|| "*".into()));
        if self.removed.is_empty() {
            let mut partial =
                Entity::new(self.mine.partition_key.clone(), self.mine.row_key.clone());
            for name in &self.changed {
                if let Some(v) = self.mine.get(name) {
                    partial.set(name.clone(), v.clone());
                }
            }
            WriteOp::Update {
                entity: partial,
                mode: UpdateMode::Merge,
                condition: etag,
            }
        } else {
            let mut target = strip(server);
            for name in &self.changed {
                if let Some(v) = self.mine.get(name) {
                    target.set(name.clone(), v.clone());
                }
            }
            for name in &self.removed {
                target.remove(name);
            }
            WriteOp::Update {
                entity: target,
                mode: UpdateMode::Replace,
                condition: etag,
            }
        }
    }

    /// My whole version, conditional on the server's current ETag (never unconditional).
    pub fn overwrite(&self) -> WriteOp {
        match &self.server {
            None => WriteOp::Insert(strip(&self.mine)),
            Some(server) => WriteOp::Update {
                entity: strip(&self.mine),
                mode: UpdateMode::Replace,
                condition: Condition::IfMatch(server.etag.clone().unwrap_or_else(|| "*".into())),
            },
        }
    }
}

/// The entity without its server-maintained fields (never sent).
fn strip(e: &Entity) -> Entity {
    Entity {
        timestamp: None,
        etag: None,
        ..e.clone()
    }
}

/// A dialog inside the editor.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    /// Editing the focused cell.
    Editing(Input),
    TypePicker(usize),
    /// Merge cannot remove these properties: switch to Replace?
    ConfirmReplace(Vec<String>),
    /// Type `force` to write unconditionally.
    ConfirmForce(Input),
    ConfirmDiscard,
    Conflict(Box<Conflict>),
    /// The insert met an existing entity.
    Exists,
}

pub struct Editor {
    pub kind: EditorKind,
    pub table: String,
    pub source: usize,
    /// What was loaded (Edit and Clone).
    pub original: Option<Entity>,
    pub partition_key: String,
    pub row_key: String,
    pub rows: Vec<Row>,
    /// 0 = PartitionKey, 1 = RowKey, 2.. = rows.
    pub cursor: usize,
    pub field: Field,
    pub mode: SaveMode,
    /// Write with `If-Match: *` (confirmed by typing "force").
    pub force: bool,
    pub prompt: Option<Prompt>,
    /// Validation errors by line (same numbering as `cursor`).
    pub errors: Vec<(usize, String)>,
    pub message: Option<String>,
    pub saving: bool,
    pub read_only: bool,
}

impl Editor {
    pub fn edit(source: usize, table: &str, entity: &Entity, read_only: bool) -> Editor {
        Editor {
            kind: EditorKind::Edit,
            table: table.to_string(),
            source,
            original: Some(entity.clone()),
            partition_key: entity.partition_key.clone(),
            row_key: entity.row_key.clone(),
            rows: rows_of(entity),
            cursor: 2,
            field: Field::Value,
            mode: SaveMode::Merge,
            force: false,
            prompt: None,
            errors: Vec::new(),
            message: read_only
                .then(|| "read-only: this is a viewer; changes cannot be saved".to_string()),
            saving: false,
            read_only,
        }
    }

    pub fn new_entity(source: usize, table: &str, partition_key: &str, read_only: bool) -> Editor {
        Editor {
            kind: EditorKind::New,
            table: table.to_string(),
            source,
            original: None,
            partition_key: partition_key.to_string(),
            row_key: String::new(),
            rows: Vec::new(),
            cursor: if partition_key.is_empty() { 0 } else { 1 },
            field: Field::Value,
            mode: SaveMode::Insert,
            force: false,
            prompt: None,
            errors: Vec::new(),
            message: read_only
                .then(|| "read-only: this is a viewer; changes cannot be saved".to_string()),
            saving: false,
            read_only,
        }
    }

    /// New keys, same properties.
    pub fn clone_of(source: usize, table: &str, entity: &Entity, read_only: bool) -> Editor {
        let mut e = Editor::new_entity(source, table, &entity.partition_key, read_only);
        e.kind = EditorKind::Clone;
        e.rows = rows_of(entity);
        e.original = Some(entity.clone());
        e
    }

    pub fn keys_editable(&self) -> bool {
        self.kind != EditorKind::Edit
    }

    pub fn line_count(&self) -> usize {
        2 + self.rows.len()
    }

    pub fn error_for(&self, line: usize) -> Option<&str> {
        self.errors
            .iter()
            .find(|(l, _)| *l == line)
            .map(|(_, e)| e.as_str())
    }

    /// Whether anything differs from what was loaded.
    pub fn is_modified(&self) -> bool {
        match (&self.original, self.kind) {
            (Some(o), EditorKind::Edit) => rows_of(o) != self.rows,
            _ => !self.rows.is_empty() || !self.row_key.is_empty(),
        }
    }

    /// Whether the user typed anything since the last save (then a refetch must not clobber it).
    pub fn is_modified_since_save(&self) -> bool {
        self.kind == EditorKind::Edit && self.is_modified()
    }

    /// Whether a row differs from the loaded property of the same name.
    pub fn row_modified(&self, i: usize) -> bool {
        let Some(row) = self.rows.get(i) else {
            return false;
        };
        match &self.original {
            Some(o) if self.kind == EditorKind::Edit => !rows_of(o).contains(row),
            _ => true,
        }
    }

    /// The entity the form describes, or the errors by line.
    pub fn build(&self) -> Result<Entity, Vec<(usize, String)>> {
        let mut errors = Vec::new();
        if let Err(e) = validate::key("PartitionKey", &self.partition_key) {
            errors.push((0, e.to_string()));
        }
        if let Err(e) = validate::key("RowKey", &self.row_key) {
            errors.push((1, e.to_string()));
        }
        let mut entity = Entity::new(self.partition_key.clone(), self.row_key.clone());
        for (i, row) in self.rows.iter().enumerate() {
            let line = i + 2;
            if let Err(e) = validate::property_name(&row.name) {
                errors.push((line, e.to_string()));
                continue;
            }
            if self.rows[..i].iter().any(|r| r.name == row.name) {
                errors.push((line, format!("property '{}' is given twice", row.name)));
                continue;
            }
            match EdmValue::parse_as(row.ty, &row.value) {
                Ok(v) => {
                    if let Err(e) = validate::value(&row.name, &v) {
                        errors.push((line, e.to_string()));
                    }
                    entity.properties.push(crate::azure::Property {
                        name: row.name.clone(),
                        value: v,
                    });
                }
                Err(e) => errors.push((line, format!("{}: {e}", row.name))),
            }
        }
        if errors.is_empty() {
            if let Err(e) = validate::entity(&entity) {
                errors.push((self.cursor, e.to_string()));
            }
        }
        if errors.is_empty() {
            Ok(entity)
        } else {
            Err(errors)
        }
    }

    /// Changed-or-added and removed property names relative to what was loaded.
    pub fn changes(&self, new: &Entity) -> (Vec<String>, Vec<String>) {
        let Some(o) = &self.original else {
            return (
                new.properties.iter().map(|p| p.name.clone()).collect(),
                Vec::new(),
            );
        };
        let changed = new
            .properties
            .iter()
            .filter(|p| o.get(&p.name) != Some(&p.value))
            .map(|p| p.name.clone())
            .collect();
        let removed = o
            .properties
            .iter()
            .filter(|p| new.get(&p.name).is_none())
            .map(|p| p.name.clone())
            .collect();
        (changed, removed)
    }

    fn condition(&self) -> Condition {
        match (&self.original, self.force) {
            (_, true) => Condition::Force,
            (Some(o), false) => Condition::IfMatch(o.etag.clone().unwrap_or_else(|| "*".into())),
            (None, false) => Condition::Force,
        }
    }

    /// Validates and turns the form into a write.
    pub fn save(&mut self) -> EditorAction {
        if self.read_only {
            self.message = Some("read-only: nothing can be saved from this profile".into());
            return EditorAction::None;
        }
        let entity = match self.build() {
            Ok(e) => e,
            Err(errors) => {
                self.message = Some(format!("{} problem(s): {}", errors.len(), errors[0].1));
                if let Some((line, _)) = errors.first() {
                    self.cursor = *line;
                }
                self.errors = errors;
                return EditorAction::None;
            }
        };
        self.errors.clear();
        match self.kind {
            EditorKind::New | EditorKind::Clone => {
                self.saving = true;
                match self.mode {
                    SaveMode::Upsert => EditorAction::Save(WriteOp::Upsert {
                        entity,
                        mode: UpdateMode::Replace,
                    }),
                    _ => EditorAction::Save(WriteOp::Insert(entity)),
                }
            }
            EditorKind::Edit => {
                let (changed, removed) = self.changes(&entity);
                if changed.is_empty() && removed.is_empty() && self.mode == SaveMode::Merge {
                    self.message = Some("no changes to save".into());
                    return EditorAction::None;
                }
                if !removed.is_empty() && self.mode == SaveMode::Merge {
                    self.prompt = Some(Prompt::ConfirmReplace(removed));
                    return EditorAction::None;
                }
                self.saving = true;
                match self.mode {
                    SaveMode::Replace => EditorAction::Save(WriteOp::Update {
                        entity,
                        mode: UpdateMode::Replace,
                        condition: self.condition(),
                    }),
                    _ => {
                        // Merge sends only what changed: the rest of the entity is the server's.
                        let mut partial =
                            Entity::new(entity.partition_key.clone(), entity.row_key.clone());
                        for name in &changed {
                            if let Some(v) = entity.get(name) {
                                partial.set(name.clone(), v.clone());
                            }
                        }
                        EditorAction::Save(WriteOp::Update {
                            entity: partial,
                            mode: UpdateMode::Merge,
                            condition: self.condition(),
                        })
                    }
                }
            }
        }
    }

    /// The save was refused because the entity changed (412) or vanished (404): show the
    /// three versions. `server` is what the server has now.
    pub fn conflict(&mut self, server: Option<Entity>) {
        self.saving = false;
        let mine = match self.build() {
            Ok(e) => e,
            Err(_) => return,
        };
        let (changed, removed) = self.changes(&mine);
        self.prompt = Some(Prompt::Conflict(Box::new(Conflict {
            loaded: self.original.clone(),
            mine,
            server,
            changed,
            removed,
        })));
    }

    /// A successful save: the form now reflects the saved entity.
    pub fn saved(&mut self, etag: Option<String>, full: Entity) {
        self.saving = false;
        self.force = false;
        let mut original = full;
        original.etag = etag;
        self.partition_key = original.partition_key.clone();
        self.row_key = original.row_key.clone();
        self.rows = rows_of(&original);
        self.original = Some(original);
        self.kind = EditorKind::Edit;
        self.mode = SaveMode::Merge;
        self.prompt = None;
        self.message = Some("saved".into());
    }

    pub fn failed(&mut self, message: String, exists: bool) {
        self.saving = false;
        self.message = Some(message);
        if exists {
            self.prompt = Some(Prompt::Exists);
        }
    }

    /// Applies a raw JSON edit from `$EDITOR`; errors name the line.
    pub fn apply_raw(&mut self, text: &str) -> Result<(), String> {
        let mut parsed = crate::azure::edm::parse_entities(text);
        if parsed.len() != 1 {
            return Err(format!(
                "expected one entity object, found {}",
                parsed.len()
            ));
        }
        let entity = parsed.remove(0)?;
        if !self.keys_editable()
            && (entity.partition_key != self.partition_key || entity.row_key != self.row_key)
        {
            return Err(
                "keys cannot change when editing an existing entity (clone it instead)".into(),
            );
        }
        self.partition_key = entity.partition_key.clone();
        self.row_key = entity.row_key.clone();
        self.rows = rows_of(&entity);
        self.errors.clear();
        if let Err(errors) = self.build() {
            self.errors = errors;
        }
        self.message = Some("applied the edit from $EDITOR".into());
        Ok(())
    }

    /// The entity as the service's JSON (with annotations) for raw mode.
    pub fn raw_json(&self) -> String {
        let mut e = Entity::new(self.partition_key.clone(), self.row_key.clone());
        for row in &self.rows {
            match EdmValue::parse_as(row.ty, &row.value) {
                Ok(v) => e.set(row.name.clone(), v),
                Err(_) => e.set(row.name.clone(), EdmValue::String(row.value.clone())),
            }
        }
        pretty(&e.to_request_json())
    }

    pub fn handle_key(&mut self, key: &KeyEvent) -> EditorAction {
        self.message = None;
        if let Some(prompt) = self.prompt.take() {
            return self.handle_prompt(prompt, key);
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => {
                if self.is_modified() && !self.read_only {
                    self.prompt = Some(Prompt::ConfirmDiscard);
                    EditorAction::None
                } else {
                    EditorAction::Close
                }
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.cursor = self.cursor.saturating_sub(1);
                self.clamp_field();
                EditorAction::None
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.cursor = (self.cursor + 1).min(self.line_count() - 1);
                self.clamp_field();
                EditorAction::None
            }
            KeyCode::Left | KeyCode::Char('h') | KeyCode::BackTab => {
                self.field = match self.field {
                    Field::Value => Field::Type,
                    _ => Field::Name,
                };
                self.clamp_field();
                EditorAction::None
            }
            KeyCode::Right | KeyCode::Char('l') | KeyCode::Tab => {
                self.field = match self.field {
                    Field::Name => Field::Type,
                    _ => Field::Value,
                };
                EditorAction::None
            }
            KeyCode::Char('s') if ctrl => self.save(),
            _ if self.read_only => {
                self.message = Some("read-only: this is a viewer".into());
                EditorAction::None
            }
            KeyCode::Enter | KeyCode::Char('i') => {
                self.begin_edit();
                EditorAction::None
            }
            KeyCode::Char('t') if self.cursor >= 2 => {
                let current = EdmType::ALL
                    .iter()
                    .position(|t| *t == self.rows[self.cursor - 2].ty)
                    .unwrap_or(0);
                self.prompt = Some(Prompt::TypePicker(current));
                EditorAction::None
            }
            KeyCode::Char('a') | KeyCode::Char('o') => {
                self.rows.push(Row {
                    name: String::new(),
                    ty: EdmType::String,
                    value: String::new(),
                });
                self.cursor = self.line_count() - 1;
                self.field = Field::Name;
                self.begin_edit();
                EditorAction::None
            }
            KeyCode::Char('x') | KeyCode::Delete if self.cursor >= 2 => {
                let removed = self.rows.remove(self.cursor - 2);
                self.cursor = self.cursor.min(self.line_count() - 1);
                self.message = Some(
                    if self.kind == EditorKind::Edit
                        && self
                            .original
                            .as_ref()
                            .is_some_and(|o| o.get(&removed.name).is_some())
                    {
                        format!(
                            "removed {}: saving needs Replace (merge cannot remove a property)",
                            removed.name
                        )
                    } else {
                        format!("removed {}", removed.name)
                    },
                );
                EditorAction::None
            }
            KeyCode::Char('s') => self.save(),
            KeyCode::Char('m') => {
                self.mode = match (self.kind, self.mode) {
                    (EditorKind::Edit, SaveMode::Merge) => SaveMode::Replace,
                    (EditorKind::Edit, _) => SaveMode::Merge,
                    (_, SaveMode::Insert) => SaveMode::Upsert,
                    (_, _) => SaveMode::Insert,
                };
                self.message = Some(match self.mode {
                    SaveMode::Merge => {
                        "save mode: merge (only changed properties; cannot remove any)".into()
                    }
                    SaveMode::Replace => {
                        "save mode: replace (the entity becomes exactly this form)".into()
                    }
                    SaveMode::Insert => "save mode: insert (fails if the keys exist)".into(),
                    SaveMode::Upsert => {
                        "save mode: insert-or-replace (overwrites an existing entity)".into()
                    }
                });
                EditorAction::None
            }
            KeyCode::Char('F') if self.kind == EditorKind::Edit => {
                if self.force {
                    self.force = false;
                    self.message =
                        Some("force off: saves are conditional on the ETag again".into());
                } else {
                    self.prompt = Some(Prompt::ConfirmForce(Input::default()));
                }
                EditorAction::None
            }
            KeyCode::Char('E') => EditorAction::ExternalEdit(self.raw_json()),
            _ => EditorAction::None,
        }
    }

    fn clamp_field(&mut self) {
        if self.cursor < 2 {
            self.field = Field::Value;
        }
    }

    fn begin_edit(&mut self) {
        let text = match (self.cursor, self.field) {
            (0, _) if self.keys_editable() => self.partition_key.clone(),
            (1, _) if self.keys_editable() => self.row_key.clone(),
            (0 | 1, _) => {
                self.message = Some(
                    "keys of an existing entity cannot change (c clones it with new keys)".into(),
                );
                return;
            }
            (i, Field::Name) => self.rows[i - 2].name.clone(),
            (i, Field::Type) => {
                let current = EdmType::ALL
                    .iter()
                    .position(|t| *t == self.rows[i - 2].ty)
                    .unwrap_or(0);
                self.prompt = Some(Prompt::TypePicker(current));
                return;
            }
            (i, Field::Value) => self.rows[i - 2].value.clone(),
        };
        self.prompt = Some(Prompt::Editing(Input::new(text)));
    }

    fn commit_edit(&mut self, text: String) {
        match (self.cursor, self.field) {
            (0, _) => self.partition_key = text,
            (1, _) => self.row_key = text,
            (i, Field::Name) => self.rows[i - 2].name = text.trim().to_string(),
            (i, _) => self.rows[i - 2].value = text,
        }
        // Re-check the line at once so the user sees the rule before saving.
        self.errors.retain(|(l, _)| *l != self.cursor);
        if let Err(errors) = self.build() {
            if let Some(e) = errors.into_iter().find(|(l, _)| *l == self.cursor) {
                self.errors.push(e);
            }
        }
    }

    fn handle_prompt(&mut self, prompt: Prompt, key: &KeyEvent) -> EditorAction {
        match prompt {
            Prompt::Editing(mut input) => {
                // Alt-Enter or Ctrl-J adds a line break to a string value.
                let newline = (key.code == KeyCode::Enter
                    && key.modifiers.contains(KeyModifiers::ALT))
                    || (key.code == KeyCode::Char('j')
                        && key.modifiers.contains(KeyModifiers::CONTROL));
                if newline && self.field == Field::Value && self.cursor >= 2 {
                    input.insert_newline();
                    self.prompt = Some(Prompt::Editing(input));
                    return EditorAction::None;
                }
                match input.handle(key) {
                    InputResult::Submit => {
                        self.commit_edit(input.text().to_string());
                        if self.field == Field::Name && self.cursor >= 2 {
                            self.field = Field::Value;
                        }
                    }
                    InputResult::Cancel => {}
                    InputResult::Next => {
                        self.commit_edit(input.text().to_string());
                        self.field = match self.field {
                            Field::Name => Field::Type,
                            _ => Field::Value,
                        };
                        if self.field == Field::Type {
                            self.begin_edit();
                        }
                    }
                    _ => self.prompt = Some(Prompt::Editing(input)),
                }
                EditorAction::None
            }
            Prompt::TypePicker(sel) => {
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => {
                        self.prompt = Some(Prompt::TypePicker(sel.saturating_sub(1)))
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        self.prompt =
                            Some(Prompt::TypePicker((sel + 1).min(EdmType::ALL.len() - 1)))
                    }
                    KeyCode::Enter => {
                        if let Some(row) = self
                            .cursor
                            .checked_sub(2)
                            .and_then(|i| self.rows.get_mut(i))
                        {
                            row.ty = EdmType::ALL[sel];
                            // Check the value under its new type right away.
                            if let Err(e) = EdmValue::parse_as(row.ty, &row.value) {
                                self.message = Some(format!("{}: {e}", row.name));
                            }
                        }
                        self.commit_edit(
                            self.rows
                                .get(self.cursor.wrapping_sub(2))
                                .map(|r| r.value.clone())
                                .unwrap_or_default(),
                        );
                        self.field = Field::Value;
                    }
                    KeyCode::Esc => {}
                    _ => self.prompt = Some(Prompt::TypePicker(sel)),
                }
                EditorAction::None
            }
            Prompt::ConfirmReplace(removed) => match key.code {
                KeyCode::Char('y') | KeyCode::Enter => {
                    self.mode = SaveMode::Replace;
                    self.save()
                }
                KeyCode::Char('n') | KeyCode::Esc => {
                    self.message = Some(format!(
                        "not saved: merge cannot remove {}",
                        removed.join(", ")
                    ));
                    EditorAction::None
                }
                _ => {
                    self.prompt = Some(Prompt::ConfirmReplace(removed));
                    EditorAction::None
                }
            },
            Prompt::ConfirmForce(mut input) => {
                match input.handle(key) {
                    InputResult::Submit if input.text() == "force" => {
                        self.force = true;
                        self.message =
                            Some("FORCE: the next save is unconditional (If-Match: *)".into());
                    }
                    InputResult::Submit | InputResult::Cancel => {
                        self.message = Some("force not enabled".into())
                    }
                    _ => self.prompt = Some(Prompt::ConfirmForce(input)),
                }
                EditorAction::None
            }
            Prompt::ConfirmDiscard => match key.code {
                KeyCode::Char('y') | KeyCode::Enter => EditorAction::Close,
                _ => EditorAction::None,
            },
            Prompt::Conflict(conflict) => match key.code {
                KeyCode::Char('r') => {
                    self.saving = true;
                    self.adopt_server(&conflict);
                    EditorAction::Save(conflict.reapply())
                }
                KeyCode::Char('o') => {
                    self.saving = true;
                    self.adopt_server(&conflict);
                    EditorAction::Save(conflict.overwrite())
                }
                KeyCode::Char('d') | KeyCode::Esc => EditorAction::Close,
                _ => {
                    self.prompt = Some(Prompt::Conflict(conflict));
                    EditorAction::None
                }
            },
            Prompt::Exists => match key.code {
                KeyCode::Char('o') | KeyCode::Enter => EditorAction::OpenExisting {
                    partition_key: self.partition_key.clone(),
                    row_key: self.row_key.clone(),
                },
                _ => EditorAction::None,
            },
        }
    }

    /// After a conflict choice the server's version is the new base (its ETag the condition).
    fn adopt_server(&mut self, conflict: &Conflict) {
        if let Some(server) = &conflict.server {
            self.original = Some(server.clone());
        } else {
            self.original = None;
            self.kind = EditorKind::New;
        }
    }
}

pub fn rows_of(e: &Entity) -> Vec<Row> {
    e.properties
        .iter()
        .map(|p| Row {
            name: p.name.clone(),
            ty: p.value.edm_type(),
            value: p.value.to_text(),
        })
        .collect()
}

/// One property per line, so `$EDITOR` errors point at a useful line.
fn pretty(json: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(json) {
        // serde_json's map keeps keys sorted, which would separate a value from its annotation:
        // print the members in their original order instead.
        Ok(_) => {
            let mut out = String::from("{\n");
            let inner = &json[1..json.len() - 1];
            let mut depth = 0;
            let mut in_str = false;
            let mut escaped = false;
            let mut start = 0;
            let mut members = Vec::new();
            for (i, c) in inner.char_indices() {
                if in_str {
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => in_str = false,
                        _ => {}
                    }
                    continue;
                }
                match c {
                    '"' => in_str = true,
                    '{' | '[' => depth += 1,
                    '}' | ']' => depth -= 1,
                    ',' if depth == 0 => {
                        members.push(&inner[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            members.push(&inner[start..]);
            let n = members.len();
            for (i, m) in members.into_iter().enumerate() {
                out.push_str("  ");
                out.push_str(m);
                if i + 1 < n {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push('}');
            out.push('\n');
            out
        }
        Err(_) => json.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::DateTime;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn typed(ed: &mut Editor, text: &str) {
        for c in text.chars() {
            ed.handle_key(&key(KeyCode::Char(c)));
        }
    }

    fn loaded() -> Entity {
        let mut e = Entity::new("p", "r")
            .with("Amount", EdmValue::Int64(9_007_199_254_740_993))
            .with(
                "When",
                EdmValue::DateTime(DateTime::parse("2024-01-01T00:00:00.1234567Z").unwrap()),
            )
            .with("Note", EdmValue::String("x".into()));
        e.etag = Some("W/\"1\"".into());
        e
    }

    #[test]
    fn editing_a_value_merges_only_the_change_conditionally() {
        let mut ed = Editor::edit(0, "T", &loaded(), false);
        ed.cursor = 4; // Note
        ed.handle_key(&key(KeyCode::Enter));
        ed.handle_key(&KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
        typed(&mut ed, "changed");
        ed.handle_key(&key(KeyCode::Enter));
        let EditorAction::Save(WriteOp::Update {
            entity: e,
            mode: UpdateMode::Merge,
            condition: Condition::IfMatch(etag),
        }) = ed.handle_key(&key(KeyCode::Char('s')))
        else {
            panic!("expected a conditional merge")
        };
        assert_eq!(etag, "W/\"1\"");
        assert_eq!(e.properties.len(), 1);
        assert_eq!(e.get("Note"), Some(&EdmValue::String("changed".into())));
    }

    #[test]
    fn removing_a_property_asks_to_switch_to_replace() {
        let mut ed = Editor::edit(0, "T", &loaded(), false);
        ed.cursor = 4;
        ed.handle_key(&key(KeyCode::Char('x')));
        assert_eq!(ed.handle_key(&key(KeyCode::Char('s'))), EditorAction::None);
        assert!(
            matches!(ed.prompt, Some(Prompt::ConfirmReplace(ref r)) if r == &["Note".to_string()])
        );
        let EditorAction::Save(WriteOp::Update {
            entity: e,
            mode: UpdateMode::Replace,
            condition: Condition::IfMatch(_),
        }) = ed.handle_key(&key(KeyCode::Char('y')))
        else {
            panic!("expected a conditional replace")
        };
        assert_eq!(e.properties.len(), 2);
        assert_eq!(
            e.get("Amount"),
            Some(&EdmValue::Int64(9_007_199_254_740_993))
        );
    }

    #[test]
    fn type_changes_are_validated_with_the_rule_named() {
        let mut ed = Editor::new_entity(0, "T", "p", false);
        ed.row_key = "r".into();
        ed.handle_key(&key(KeyCode::Char('a')));
        typed(&mut ed, "Count");
        ed.handle_key(&key(KeyCode::Enter));
        ed.handle_key(&key(KeyCode::Enter));
        typed(&mut ed, "3000000000");
        ed.handle_key(&key(KeyCode::Enter));
        ed.handle_key(&key(KeyCode::Char('t')));
        for _ in 0..2 {
            ed.handle_key(&key(KeyCode::Down));
        }
        ed.handle_key(&key(KeyCode::Enter)); // Int32
        assert_eq!(ed.rows[0].ty, EdmType::Int32);
        assert_eq!(ed.handle_key(&key(KeyCode::Char('s'))), EditorAction::None);
        assert!(
            ed.errors[0].1.contains("Int32") && ed.errors[0].1.contains("Int64"),
            "{:?}",
            ed.errors
        );
    }

    #[test]
    fn new_entities_insert_and_keys_are_checked() {
        let mut ed = Editor::new_entity(0, "T", "", false);
        ed.partition_key = "a/b".into();
        ed.row_key = "r".into();
        ed.handle_key(&key(KeyCode::Char('s')));
        assert!(ed.errors[0].1.contains("'/'"), "{:?}", ed.errors);
        ed.partition_key = "a".into();
        assert!(matches!(
            ed.handle_key(&key(KeyCode::Char('s'))),
            EditorAction::Save(WriteOp::Insert(_))
        ));
    }

    #[test]
    fn force_needs_the_word_typed() {
        let mut ed = Editor::edit(0, "T", &loaded(), false);
        ed.handle_key(&key(KeyCode::Char('F')));
        typed(&mut ed, "yes");
        ed.handle_key(&key(KeyCode::Enter));
        assert!(!ed.force);
        ed.handle_key(&key(KeyCode::Char('F')));
        typed(&mut ed, "force");
        ed.handle_key(&key(KeyCode::Enter));
        assert!(ed.force);
    }

    #[test]
    fn conflict_reapplies_only_my_changes_onto_the_server_version() {
        let mut ed = Editor::edit(0, "T", &loaded(), false);
        ed.rows[2].value = "mine".into();
        let mut server = loaded().with("Other", EdmValue::Boolean(true));
        server.etag = Some("W/\"2\"".into());
        ed.conflict(Some(server.clone()));
        let Some(Prompt::Conflict(c)) = ed.prompt.clone() else {
            panic!()
        };
        assert_eq!(c.changed, ["Note"]);
        let WriteOp::Update {
            entity: e,
            mode: UpdateMode::Merge,
            condition: Condition::IfMatch(etag),
        } = c.reapply()
        else {
            panic!()
        };
        assert_eq!(etag, "W/\"2\"");
        assert_eq!(e.properties.len(), 1);
        let WriteOp::Update {
            entity: e,
            mode: UpdateMode::Replace,
            condition: Condition::IfMatch(_),
        } = c.overwrite()
        else {
            panic!()
        };
        assert!(e.get("Other").is_none());
        let deleted = Conflict { server: None, ..*c };
        assert!(matches!(deleted.reapply(), WriteOp::Insert(_)));
    }

    #[test]
    fn raw_json_round_trips_and_reports_lines() {
        let mut ed = Editor::edit(0, "T", &loaded(), false);
        let raw = ed.raw_json();
        assert!(raw.contains("\"Amount@odata.type\":\"Edm.Int64\""), "{raw}");
        ed.apply_raw(&raw).unwrap();
        assert_eq!(ed.rows, rows_of(&loaded()));
        let err = ed
            .apply_raw("{\n  \"PartitionKey\": \"p\",\n  \"RowKey\": \"r\",\n  oops\n}")
            .unwrap_err();
        assert!(err.contains("line 4"), "{err}");
    }
}
