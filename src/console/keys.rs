//! Console keybindings: the `Action`s keys trigger, the key notation (`ctrl-c`, `G`, `pgdn`),
//! the default keymap and `[keys]` overrides from config, and the rows of the `?` help screen.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Where an action sits on the help screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    /// Works in every pane.
    Global,
    /// Moving the cursor and opening things.
    Navigation,
    /// The tables pane (profiles and tables).
    Tables,
    /// The entity grid: query, paging, columns, copy.
    Grid,
    /// Viewing and changing one entity.
    Entity,
}

impl Group {
    /// Every group, in help order.
    pub const ALL: [Group; 5] = [
        Group::Global,
        Group::Navigation,
        Group::Tables,
        Group::Grid,
        Group::Entity,
    ];

    /// Heading on the help screen.
    pub fn title(self) -> &'static str {
        match self {
            Group::Global => "Global",
            Group::Navigation => "Navigation",
            Group::Tables => "Tables",
            Group::Grid => "Grid",
            Group::Entity => "Entity",
        }
    }
}

macro_rules! actions {
    ($( $variant:ident = $name:literal, $group:ident, $desc:literal; )*) => {
        /// Something a key can make the console do.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Action {
            $( #[doc = $desc] $variant, )*
        }

        impl Action {
            /// How many actions there are.
            pub const COUNT: usize = [$(Action::$variant),*].len();
            /// Every action, in help order.
            pub const ALL: [Action; Action::COUNT] = [$(Action::$variant),*];

            /// The snake_case name used in config `[keys]`, e.g. `next_page`.
            pub fn name(self) -> &'static str {
                match self { $( Action::$variant => $name, )* }
            }

            /// One line for the help screen.
            pub fn description(self) -> &'static str {
                match self { $( Action::$variant => $desc, )* }
            }

            /// The help screen group.
            pub fn group(self) -> Group {
                match self { $( Action::$variant => Group::$group, )* }
            }
        }
    };
}

actions! {
    Quit = "quit", Global, "quit (asks first while jobs run)";
    ForceQuit = "force_quit", Global, "quit now, cancelling running jobs";
    Help = "help", Global, "show this help with the live key bindings";
    CommandMode = "command_mode", Global, "command line (:table NAME, :profile NAME, :filter EXPR, :theme NAME, :q)";
    NextPane = "next_pane", Global, "focus the next pane";
    PrevPane = "prev_pane", Global, "focus the previous pane";
    FocusTables = "focus_tables", Global, "focus the tables pane";
    FocusGrid = "focus_grid", Global, "focus the entity grid";
    FocusEntity = "focus_entity", Global, "focus the entity view";
    FocusDashboard = "focus_dashboard", Global, "show the live partition dashboard";
    Refresh = "refresh", Global, "reload what the focused pane shows";
    Search = "search", Global, "search and filter what is loaded (client-side)";
    ToggleTimeZone = "toggle_time_zone", Global, "show DateTime values in UTC or local time";
    Up = "up", Navigation, "move up";
    Down = "down", Navigation, "move down";
    Left = "left", Navigation, "move left (previous column)";
    Right = "right", Navigation, "move right (next column)";
    Top = "top", Navigation, "go to the first row";
    Bottom = "bottom", Navigation, "go to the last loaded row";
    PageUp = "page_up", Navigation, "scroll up one screen";
    PageDown = "page_down", Navigation, "scroll down one screen";
    Open = "open", Navigation, "open the table, profile or entity under the cursor";
    Back = "back", Navigation, "cancel, close the dialog, or go back";
    Insert = "insert", Tables, "create a table (tables pane); new entity (grid, with the entity editor)";
    Delete = "delete", Tables, "delete the table (type its name to confirm); entities with the entity editor";
    FilterBar = "filter_bar", Grid, "edit the server-side query ($filter, $select)";
    NextPage = "next_page", Grid, "next page (follows the continuation token)";
    PrevPage = "prev_page", Grid, "previous page (from the token stack, no rescan)";
    LoadMore = "load_more", Grid, "load the next page below the rows already shown";
    Select = "select", Grid, "mark or unmark the row (y then copies every marked row)";
    Copy = "copy", Grid, "copy the entity (or the marked rows, one JSON line each) via OSC 52, works over SSH";
    CopyToken = "copy_token", Grid, "copy the continuation token";
    ColumnWider = "column_wider", Grid, "widen the current column";
    ColumnNarrower = "column_narrower", Grid, "narrow the current column";
    Clone = "clone", Grid, "new entity from a copy of this one (with the entity editor)";
    Edit = "edit", Entity, "edit the entity (with the entity editor)";
}

impl Action {
    /// The action with this config name (any case, `-` accepted for `_`).
    pub fn from_name(name: &str) -> Option<Action> {
        let key = name.trim().to_ascii_lowercase().replace('-', "_");
        Action::ALL.into_iter().find(|action| action.name() == key)
    }

    /// Whether a held key (a Repeat event) repeats the action: movement only.
    pub fn repeats(self) -> bool {
        matches!(
            self,
            Action::Up
                | Action::Down
                | Action::Left
                | Action::Right
                | Action::PageUp
                | Action::PageDown
                | Action::ColumnWider
                | Action::ColumnNarrower
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A key with its modifiers, normalised so the same key compares equal however the terminal
/// reports it: a shifted letter is the capital without SHIFT, shift-tab is `BackTab`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyChord {
    code: KeyCode,
    modifiers: KeyModifiers,
}

/// Why a key notation did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyParseError {
    #[error("empty key")]
    Empty,
    #[error("unknown key '{0}' (expected a character, a name such as enter, esc, tab, space, pgdn, f1, optionally after ctrl-, alt-, shift-)")]
    Unknown(String),
}

impl KeyChord {
    /// Modifiers that take part in matching; others (hyper, meta, keypad state) are dropped.
    const MATCHED: KeyModifiers = KeyModifiers::CONTROL
        .union(KeyModifiers::ALT)
        .union(KeyModifiers::SHIFT)
        .union(KeyModifiers::SUPER);

    /// A chord, normalised.
    pub fn new(code: KeyCode, modifiers: KeyModifiers) -> KeyChord {
        let mut modifiers = modifiers & Self::MATCHED;
        let shift = modifiers.contains(KeyModifiers::SHIFT);
        let code = match code {
            // The character already says whether shift was down; some terminals also set SHIFT.
            KeyCode::Char(c) => {
                modifiers.remove(KeyModifiers::SHIFT);
                let mut upper = c.to_uppercase();
                match (shift, upper.next(), upper.next()) {
                    (true, Some(u), None) => KeyCode::Char(u),
                    _ => KeyCode::Char(c),
                }
            }
            KeyCode::Tab if shift => {
                modifiers.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            KeyCode::BackTab => {
                modifiers.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            other => other,
        };
        KeyChord { code, modifiers }
    }

    /// The chord a key event stands for.
    pub fn from_event(event: &KeyEvent) -> KeyChord {
        KeyChord::new(event.code, event.modifiers)
    }

    pub fn code(&self) -> KeyCode {
        self.code
    }

    pub fn modifiers(&self) -> KeyModifiers {
        self.modifiers
    }
}

impl From<KeyCode> for KeyChord {
    fn from(code: KeyCode) -> Self {
        KeyChord::new(code, KeyModifiers::NONE)
    }
}

const NAMED_KEYS: [(&str, KeyCode); 24] = [
    ("enter", KeyCode::Enter),
    ("return", KeyCode::Enter),
    ("esc", KeyCode::Esc),
    ("escape", KeyCode::Esc),
    ("tab", KeyCode::Tab),
    ("backtab", KeyCode::BackTab),
    ("space", KeyCode::Char(' ')),
    ("comma", KeyCode::Char(',')),
    ("backspace", KeyCode::Backspace),
    ("bs", KeyCode::Backspace),
    ("delete", KeyCode::Delete),
    ("del", KeyCode::Delete),
    ("insert", KeyCode::Insert),
    ("ins", KeyCode::Insert),
    ("up", KeyCode::Up),
    ("down", KeyCode::Down),
    ("left", KeyCode::Left),
    ("right", KeyCode::Right),
    ("home", KeyCode::Home),
    ("end", KeyCode::End),
    ("pgup", KeyCode::PageUp),
    ("pageup", KeyCode::PageUp),
    ("pgdn", KeyCode::PageDown),
    ("pagedown", KeyCode::PageDown),
];

impl FromStr for KeyChord {
    type Err = KeyParseError;

    /// Parses `q`, `G`, `ctrl-c`, `alt-x`, `shift-tab`, `backtab`, `enter`, `pgdn`, `f5`, `?`…
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.is_empty() {
            return Err(KeyParseError::Empty);
        }
        let mut modifiers = KeyModifiers::NONE;
        let mut rest = text;
        // A prefix is a modifier only when something follows its '-', so "-" and "ctrl--" work.
        while let Some((head, tail)) = rest.split_once('-') {
            let modifier = match head.to_ascii_lowercase().as_str() {
                "ctrl" | "control" => KeyModifiers::CONTROL,
                "alt" | "meta" | "option" => KeyModifiers::ALT,
                "shift" => KeyModifiers::SHIFT,
                "super" | "cmd" => KeyModifiers::SUPER,
                _ => break,
            };
            if tail.is_empty() {
                break;
            }
            modifiers |= modifier;
            rest = tail;
        }
        let mut chars = rest.chars();
        let code = match (chars.next(), chars.next()) {
            (Some(c), None) => KeyCode::Char(c),
            _ => {
                let lower = rest.to_ascii_lowercase();
                let function = lower
                    .strip_prefix('f')
                    .and_then(|n| n.parse::<u8>().ok())
                    .filter(|n| (1..=12).contains(n));
                match (NAMED_KEYS.iter().find(|(name, _)| *name == lower), function) {
                    (Some((_, code)), _) => *code,
                    (None, Some(n)) => KeyCode::F(n),
                    (None, None) => return Err(KeyParseError::Unknown(text.to_string())),
                }
            }
        };
        Ok(KeyChord::new(code, modifiers))
    }
}

impl fmt::Display for KeyChord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (modifier, prefix) in [
            (KeyModifiers::CONTROL, "ctrl-"),
            (KeyModifiers::ALT, "alt-"),
            (KeyModifiers::SUPER, "super-"),
            (KeyModifiers::SHIFT, "shift-"),
        ] {
            if self.modifiers.contains(modifier) {
                f.write_str(prefix)?;
            }
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(',') => f.write_str("comma"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::BackTab => f.write_str("shift-tab"),
            KeyCode::F(n) => write!(f, "f{n}"),
            KeyCode::Enter => f.write_str("enter"),
            KeyCode::Esc => f.write_str("esc"),
            KeyCode::Tab => f.write_str("tab"),
            KeyCode::Backspace => f.write_str("backspace"),
            KeyCode::Delete => f.write_str("delete"),
            KeyCode::Insert => f.write_str("insert"),
            KeyCode::Up => f.write_str("up"),
            KeyCode::Down => f.write_str("down"),
            KeyCode::Left => f.write_str("left"),
            KeyCode::Right => f.write_str("right"),
            KeyCode::Home => f.write_str("home"),
            KeyCode::End => f.write_str("end"),
            KeyCode::PageUp => f.write_str("pgup"),
            KeyCode::PageDown => f.write_str("pgdn"),
            other => write!(f, "{}", format!("{other:?}").to_ascii_lowercase()),
        }
    }
}

/// The default bindings; an action may have several keys.
const DEFAULT_BINDINGS: &[(Action, &[&str])] = &[
    (Action::Quit, &["q"]),
    (Action::ForceQuit, &["ctrl-c"]),
    (Action::Help, &["?"]),
    (Action::CommandMode, &[":"]),
    (Action::NextPane, &["tab"]),
    (Action::PrevPane, &["shift-tab"]),
    (Action::FocusTables, &["1"]),
    (Action::FocusGrid, &["2"]),
    (Action::FocusEntity, &["3"]),
    (Action::FocusDashboard, &["4"]),
    (Action::Refresh, &["r"]),
    (Action::Search, &["/"]),
    (Action::ToggleTimeZone, &["t"]),
    (Action::Up, &["k", "up"]),
    (Action::Down, &["j", "down"]),
    (Action::Left, &["h", "left"]),
    (Action::Right, &["l", "right"]),
    (Action::Top, &["g", "home"]),
    (Action::Bottom, &["G", "end"]),
    (Action::PageUp, &["pgup", "ctrl-b"]),
    (Action::PageDown, &["pgdn", "ctrl-f"]),
    (Action::Open, &["enter"]),
    (Action::Back, &["esc"]),
    (Action::Insert, &["i"]),
    (Action::Delete, &["d"]),
    (Action::FilterBar, &["f"]),
    (Action::NextPage, &["n"]),
    (Action::PrevPage, &["p"]),
    (Action::LoadMore, &["m"]),
    (Action::Select, &["space"]),
    (Action::Copy, &["y"]),
    (Action::CopyToken, &["Y"]),
    (Action::ColumnWider, &[">"]),
    (Action::ColumnNarrower, &["<"]),
    (Action::Clone, &["c"]),
    (Action::Edit, &["e"]),
];

/// Which action each key runs, and the keys of each action in the order they were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keymap {
    by_action: Vec<Vec<KeyChord>>,
    by_key: HashMap<KeyChord, Action>,
}

impl Default for Keymap {
    fn default() -> Self {
        let mut by_action = vec![Vec::new(); Action::COUNT];
        for (action, keys) in DEFAULT_BINDINGS {
            // Every default parses (tested); a failure here could only drop that key.
            by_action[*action as usize]
                .extend(keys.iter().filter_map(|k| k.parse::<KeyChord>().ok()));
        }
        Keymap::from_lists(by_action)
    }
}

impl Keymap {
    fn from_lists(by_action: Vec<Vec<KeyChord>>) -> Keymap {
        let mut by_key = HashMap::new();
        for (action, keys) in Action::ALL.into_iter().zip(&by_action) {
            for key in keys {
                by_key.entry(*key).or_insert(action);
            }
        }
        Keymap { by_action, by_key }
    }

    /// The default keymap with config `[keys]` overrides (action name → comma-separated keys)
    /// applied. An override replaces the action's keys and takes them from any other action.
    /// Problems come back as warnings; the rest still applies.
    pub fn with_overrides(overrides: &BTreeMap<String, String>) -> (Keymap, Vec<String>) {
        let defaults = Keymap::default();
        let mut warnings = Vec::new();
        let mut claimed: HashMap<KeyChord, Action> = HashMap::new();
        let mut replaced: Vec<Option<Vec<KeyChord>>> = vec![None; Action::COUNT];

        for (name, value) in overrides {
            let Some(action) = Action::from_name(name) else {
                warnings.push(format!(
                    "keys: unknown action '{name}' (ignored); actions: {}",
                    Action::ALL.map(Action::name).join(", ")
                ));
                continue;
            };
            let mut keys = Vec::new();
            for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                match part.parse::<KeyChord>() {
                    Ok(key) if !keys.contains(&key) => keys.push(key),
                    Ok(_) => {}
                    Err(e) => warnings.push(format!("keys.{name}: {e} (ignored)")),
                }
            }
            if keys.is_empty() && !value.trim().is_empty() {
                warnings.push(format!(
                    "keys.{name}: no usable key in \"{value}\"; keeping {}",
                    defaults.keys_text(action)
                ));
                continue;
            }
            // Two overrides naming one key: the first (in [keys] order) keeps it.
            keys.retain(|key| match claimed.get(key) {
                Some(owner) if *owner != action => {
                    warnings.push(format!(
                        "keys: '{key}' is given to both {owner} and {action}; {owner} keeps it"
                    ));
                    false
                }
                _ => {
                    claimed.insert(*key, action);
                    true
                }
            });
            replaced[action as usize] = Some(keys);
        }

        let mut by_action = defaults.by_action;
        for (action, keys) in Action::ALL.into_iter().zip(by_action.iter_mut()) {
            if let Some(new_keys) = replaced[action as usize].take() {
                *keys = new_keys;
                continue;
            }
            let before = keys.len();
            keys.retain(|key| match claimed.get(key) {
                Some(owner) => {
                    warnings.push(format!(
                        "keys: '{key}' now runs {owner}, so {action} no longer has it"
                    ));
                    false
                }
                None => true,
            });
            if keys.is_empty() && before > 0 {
                warnings.push(format!(
                    "keys: {action} has no key left; bind one in [keys] (e.g. {action} = \"…\")"
                ));
            }
        }
        (Keymap::from_lists(by_action), warnings)
    }

    /// The action a key event runs: on Press, and on Repeat only for movement.
    pub fn action(&self, key: &KeyEvent) -> Option<Action> {
        let action = *self.by_key.get(&KeyChord::from_event(key))?;
        match key.kind {
            KeyEventKind::Press => Some(action),
            KeyEventKind::Repeat => action.repeats().then_some(action),
            KeyEventKind::Release => None,
        }
    }

    /// The keys bound to an action, in configured order (empty when unbound).
    pub fn keys_for(&self, action: Action) -> Vec<KeyChord> {
        self.by_action
            .get(action as usize)
            .cloned()
            .unwrap_or_default()
    }

    /// The first key of an action in notation, for status-bar hints; empty when unbound.
    pub fn hint(&self, action: Action) -> String {
        self.by_action
            .get(action as usize)
            .and_then(|keys| keys.first())
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    fn keys_text(&self, action: Action) -> String {
        let keys = self.keys_for(action);
        if keys.is_empty() {
            return "(unbound)".to_string();
        }
        keys.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Help screen rows with the live bindings: (keys, action, description), grouped by
    /// `Action::group` in `Group::ALL` order; unbound actions show `(unbound)`.
    pub fn help_rows(&self) -> Vec<(String, Action, &'static str)> {
        let mut actions = Action::ALL;
        actions.sort_by_key(|action| action.group());
        actions
            .into_iter()
            .map(|action| (self.keys_text(action), action, action.description()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyEventState;

    fn press(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    fn chord(text: &str) -> KeyChord {
        text.parse().unwrap()
    }

    fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, k)| (a.to_string(), k.to_string()))
            .collect()
    }

    #[test]
    fn every_default_binding_parses_and_every_action_has_a_key() {
        for (action, keys) in DEFAULT_BINDINGS {
            for key in *keys {
                assert!(key.parse::<KeyChord>().is_ok(), "{action}: {key}");
            }
        }
        let map = Keymap::default();
        for action in Action::ALL {
            assert!(!map.keys_for(action).is_empty(), "{action} unbound");
        }
        let total: usize = DEFAULT_BINDINGS.iter().map(|(_, k)| k.len()).sum();
        assert_eq!(map.by_key.len(), total, "a default key is bound twice");
    }

    #[test]
    fn default_bindings() {
        let map = Keymap::default();
        let none = KeyModifiers::NONE;
        let cases = [
            (KeyCode::Char('q'), none, Action::Quit),
            (KeyCode::Char('c'), KeyModifiers::CONTROL, Action::ForceQuit),
            (KeyCode::Char('?'), none, Action::Help),
            (KeyCode::Char(':'), none, Action::CommandMode),
            (KeyCode::Tab, none, Action::NextPane),
            (KeyCode::BackTab, KeyModifiers::SHIFT, Action::PrevPane),
            (KeyCode::Char('1'), none, Action::FocusTables),
            (KeyCode::Char('j'), none, Action::Down),
            (KeyCode::Down, none, Action::Down),
            (KeyCode::Char('G'), none, Action::Bottom),
            (KeyCode::End, none, Action::Bottom),
            (KeyCode::Char('f'), KeyModifiers::CONTROL, Action::PageDown),
            (KeyCode::PageUp, none, Action::PageUp),
            (KeyCode::Enter, none, Action::Open),
            (KeyCode::Esc, none, Action::Back),
            (KeyCode::Char('/'), none, Action::Search),
            (KeyCode::Char('f'), none, Action::FilterBar),
            (KeyCode::Char('n'), none, Action::NextPage),
            (KeyCode::Char(' '), none, Action::Select),
            (KeyCode::Char('y'), none, Action::Copy),
            (KeyCode::Char('Y'), KeyModifiers::SHIFT, Action::CopyToken),
            (KeyCode::Char('>'), none, Action::ColumnWider),
            (
                KeyCode::Char('<'),
                KeyModifiers::SHIFT,
                Action::ColumnNarrower,
            ),
        ];
        for (code, mods, action) in cases {
            assert_eq!(
                map.action(&press(code, mods)),
                Some(action),
                "{code:?} {mods:?}"
            );
        }
        assert_eq!(map.action(&press(KeyCode::Char('x'), none)), None);
        assert_eq!(
            map.action(&press(KeyCode::Char('q'), KeyModifiers::CONTROL)),
            None
        );
    }

    #[test]
    fn release_is_ignored_and_repeat_only_moves() {
        let map = Keymap::default();
        let event = |code, kind| KeyEvent {
            code,
            modifiers: KeyModifiers::NONE,
            kind,
            state: KeyEventState::NONE,
        };
        assert_eq!(
            map.action(&event(KeyCode::Char('q'), KeyEventKind::Release)),
            None
        );
        assert_eq!(
            map.action(&event(KeyCode::Char('d'), KeyEventKind::Repeat)),
            None
        );
        assert_eq!(
            map.action(&event(KeyCode::Char('j'), KeyEventKind::Repeat)),
            Some(Action::Down)
        );
        assert_eq!(
            map.action(&event(KeyCode::PageDown, KeyEventKind::Repeat)),
            Some(Action::PageDown)
        );
    }

    #[test]
    fn shifted_letters_match_with_or_without_shift() {
        let map = Keymap::default();
        for event in [
            press(KeyCode::Char('G'), KeyModifiers::NONE),
            press(KeyCode::Char('G'), KeyModifiers::SHIFT),
            press(KeyCode::Char('g'), KeyModifiers::SHIFT),
        ] {
            assert_eq!(map.action(&event), Some(Action::Bottom), "{event:?}");
        }
        assert_eq!(chord("shift-g"), chord("G"));
        assert_eq!(chord("shift-tab"), chord("backtab"));
        assert_eq!(
            chord("shift-tab"),
            KeyChord::new(KeyCode::Tab, KeyModifiers::SHIFT)
        );
        assert_eq!(chord("ctrl-shift-a").to_string(), "ctrl-A");
        assert_eq!(chord("shift-up").to_string(), "shift-up");
        assert_ne!(chord("g"), chord("G"));
    }

    #[test]
    fn notation_round_trips() {
        let keys = [
            "q",
            "G",
            "ctrl-c",
            "alt-x",
            "shift-tab",
            "enter",
            "esc",
            "tab",
            "space",
            "backspace",
            "delete",
            "insert",
            "up",
            "down",
            "left",
            "right",
            "home",
            "end",
            "pgup",
            "pgdn",
            "f1",
            "f12",
            "?",
            ":",
            "/",
            "<",
            ">",
            "-",
            "ctrl--",
            "comma",
            "ctrl-alt-delete",
            "é",
        ];
        for key in keys {
            let parsed = chord(key);
            assert_eq!(parsed.to_string(), key);
            assert_eq!(chord(&parsed.to_string()), parsed);
        }
        assert_eq!(chord("CTRL-c"), chord("ctrl-c"));
        assert_ne!(chord("ctrl-C"), chord("ctrl-c"));
        assert_eq!(chord(" PageDown "), chord("pgdn"));
        assert_eq!(chord("backtab").to_string(), "shift-tab");
        assert_eq!(chord("escape"), chord("esc"));
    }

    #[test]
    fn bad_keys_are_errors() {
        for bad in [
            "", "  ", "ctrl-", "hyper-x", "f13", "f0", "enterr", "ctrl-foo",
        ] {
            assert!(bad.parse::<KeyChord>().is_err(), "{bad:?} parsed");
        }
        assert_eq!(
            "ctrl-".parse::<KeyChord>(),
            Err(KeyParseError::Unknown("ctrl-".into()))
        );
    }

    #[test]
    fn override_replaces_the_action_keys() {
        let (map, warnings) = Keymap::with_overrides(&overrides(&[("next_page", "n, ctrl-n")]));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            map.keys_for(Action::NextPage),
            [chord("n"), chord("ctrl-n")]
        );
        let (map, warnings) = Keymap::with_overrides(&overrides(&[("quit", "ctrl-q")]));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(map.keys_for(Action::Quit), [chord("ctrl-q")]);
        assert_eq!(
            map.action(&press(KeyCode::Char('q'), KeyModifiers::NONE)),
            None
        );
        assert_eq!(map.hint(Action::Quit), "ctrl-q");
    }

    #[test]
    fn override_steals_a_key_with_a_warning() {
        let (map, warnings) = Keymap::with_overrides(&overrides(&[("edit", "d")]));
        assert_eq!(
            map.action(&press(KeyCode::Char('d'), KeyModifiers::NONE)),
            Some(Action::Edit)
        );
        assert!(map.keys_for(Action::Delete).is_empty());
        assert_eq!(
            map.action(&press(KeyCode::Char('e'), KeyModifiers::NONE)),
            None
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("'d' now runs edit, so delete no longer has it"));
        assert!(warnings[1].contains("delete has no key left"));

        let (map, warnings) = Keymap::with_overrides(&overrides(&[("top", "g")]));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(map.keys_for(Action::Top), [chord("g")]);

        let (map, warnings) = Keymap::with_overrides(&overrides(&[("down", "J, j")]));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(map.keys_for(Action::Down), [chord("J"), chord("j")]);
    }

    #[test]
    fn two_overrides_for_one_key_first_keeps_it() {
        let (map, warnings) =
            Keymap::with_overrides(&overrides(&[("copy", "x"), ("delete", "x, D")]));
        assert_eq!(
            map.action(&press(KeyCode::Char('x'), KeyModifiers::NONE)),
            Some(Action::Copy)
        );
        assert_eq!(map.keys_for(Action::Delete), [chord("D")]);
        assert_eq!(
            warnings,
            ["keys: 'x' is given to both copy and delete; copy keeps it"]
        );
    }

    #[test]
    fn unknown_actions_and_bad_keys_warn_and_are_ignored() {
        let (map, warnings) = Keymap::with_overrides(&overrides(&[
            ("frobnicate", "x"),
            ("next_page", "ctrl-nn, ctrl-n"),
            ("refresh", "hyper-r"),
        ]));
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(warnings[0].starts_with("keys: unknown action 'frobnicate'"));
        assert!(warnings[1].starts_with("keys.next_page: unknown key 'ctrl-nn'"));
        assert!(warnings[2].starts_with("keys.refresh: unknown key 'hyper-r'"));
        assert_eq!(
            warnings[3],
            "keys.refresh: no usable key in \"hyper-r\"; keeping r"
        );
        assert_eq!(map.keys_for(Action::NextPage), [chord("ctrl-n")]);
        assert_eq!(map.keys_for(Action::Refresh), [chord("r")]);
        assert_eq!(
            map.action(&press(KeyCode::Char('x'), KeyModifiers::NONE)),
            None
        );
    }

    #[test]
    fn empty_override_unbinds() {
        let (map, warnings) = Keymap::with_overrides(&overrides(&[("delete", "")]));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(map.keys_for(Action::Delete).is_empty());
        assert_eq!(map.hint(Action::Delete), "");
        assert_eq!(
            map.action(&press(KeyCode::Char('d'), KeyModifiers::NONE)),
            None
        );
    }

    #[test]
    fn action_names_round_trip() {
        for action in Action::ALL {
            assert_eq!(Action::from_name(action.name()), Some(action));
            assert!(!action.description().is_empty());
        }
        assert_eq!(Action::NextPage.name(), "next_page");
        assert_eq!(Action::from_name("Next-Page"), Some(Action::NextPage));
        assert_eq!(Action::from_name("nope"), None);
    }

    #[test]
    fn help_rows_are_grouped_and_reflect_overrides() {
        let rows = Keymap::default().help_rows();
        assert_eq!(rows.len(), Action::COUNT);
        let groups: Vec<Group> = rows.iter().map(|(_, a, _)| a.group()).collect();
        assert!(
            groups.windows(2).all(|w| w[0] <= w[1]),
            "not grouped: {groups:?}"
        );
        assert_eq!(
            rows[0],
            ("q".to_string(), Action::Quit, Action::Quit.description())
        );
        let down = rows.iter().find(|(_, a, _)| *a == Action::Down).unwrap();
        assert_eq!(down.0, "j, down");

        let (map, _) = Keymap::with_overrides(&overrides(&[("down", "ctrl-n"), ("edit", "d")]));
        let rows = map.help_rows();
        let find = |action| {
            rows.iter()
                .find(|(_, a, _)| *a == action)
                .unwrap()
                .0
                .clone()
        };
        assert_eq!(find(Action::Down), "ctrl-n");
        assert_eq!(find(Action::Edit), "d");
        assert_eq!(find(Action::Delete), "(unbound)");
    }
}
