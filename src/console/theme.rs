//! Console colour themes: the style slots the UI draws with, the built-in themes embedded from
//! `themes/*.toml`, user themes layered over them, and `NO_COLOR`.
//!
//! A theme file is TOML:
//!
//! ```toml
//! inherits = "light"          # user files only: the built-in to start from (default: same name, else dark)
//! palette = "ansi16"          # optional: only the 16 ANSI colour names are allowed
//! [slots]
//! selected = { fg = "white", bg = "#264f78", bold = true }
//! ```
//!
//! A slot a user file names replaces that slot whole; slots it does not name keep the base's.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use toml::Spanned;

macro_rules! slots {
    ($( $variant:ident = $name:literal, $doc:literal; )*) => {
        /// A place in the UI that has its own style; every theme gives each one a style.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Slot {
            $( #[doc = $doc] $variant, )*
        }

        impl Slot {
            /// How many slots there are.
            pub const COUNT: usize = [$(Slot::$variant),*].len();
            /// Every slot, in declaration order.
            pub const ALL: [Slot; Slot::COUNT] = [$(Slot::$variant),*];

            /// The snake_case name used in theme files, e.g. `border_focused`.
            pub fn name(self) -> &'static str {
                match self { $( Slot::$variant => $name, )* }
            }

            /// What the slot styles (one line, for a theme preview).
            pub fn description(self) -> &'static str {
                match self { $( Slot::$variant => $doc, )* }
            }
        }
    };
}

slots! {
    Base = "base", "Normal text and the background of every pane.";
    Border = "border", "Border of a pane without focus.";
    BorderFocused = "border_focused", "Border of the focused pane.";
    Title = "title", "Title of a pane without focus.";
    TitleFocused = "title_focused", "Title of the focused pane.";
    Header = "header", "Grid column headers.";
    Selected = "selected", "Cursor row in the focused pane.";
    SelectedUnfocused = "selected_unfocused", "Cursor row in a pane without focus.";
    Marked = "marked", "Rows marked with `space` for a bulk action.";
    Muted = "muted", "Secondary text: type suffixes, counts, hints, timestamps of little interest.";
    Missing = "missing", "A property the entity does not have (must differ from an empty string).";
    Empty = "empty", "A property whose value is the empty string.";
    TypeString = "type_string", "Edm.String values.";
    TypeNumber = "type_number", "Edm.Int32, Edm.Int64 and Edm.Double values.";
    TypeDateTime = "type_date_time", "Edm.DateTime values (and the Timestamp column).";
    TypeBoolean = "type_boolean", "Edm.Boolean values.";
    TypeGuid = "type_guid", "Edm.Guid values.";
    TypeBinary = "type_binary", "Edm.Binary values.";
    Key = "key", "PartitionKey and RowKey cells.";
    SearchMatch = "search_match", "Text matching the client-side search.";
    StatusBar = "status_bar", "The status line at the bottom.";
    StatusKey = "status_key", "Key hints in the status line.";
    Error = "error", "Error messages.";
    Warning = "warning", "Warnings (throttling, retries, config problems).";
    Success = "success", "Completed operations.";
    Info = "info", "Neutral notices (in flight, scanned with no match yet).";
    ReadOnlyBadge = "read_only_badge", "The read-only badge: loud in every theme.";
    ProfileBadge = "profile_badge", "The profile name badge (a profile's own colour wins when set).";
    Spinner = "spinner", "The activity spinner while work is pending.";
    Popup = "popup", "Body of help, command and confirm dialogs.";
    PopupBorder = "popup_border", "Border and title of dialogs.";
    Input = "input", "Text input fields (command line, filter bar, editor fields).";
    InputCursor = "input_cursor", "The cursor cell in a text input.";
    Modified = "modified", "A field changed in the editor and not yet saved.";
    DiffAdded = "diff_added", "Added lines or fields in a diff (conflict view, undo preview).";
    DiffRemoved = "diff_removed", "Removed lines or fields in a diff.";
    Scrollbar = "scrollbar", "Scrollbar track and thumb.";
    Sparkline = "sparkline", "Dashboard sparklines.";
    GaugeOk = "gauge_ok", "Dashboard load well under its target.";
    GaugeWarn = "gauge_warn", "Dashboard load nearing its target.";
    GaugeHot = "gauge_hot", "Dashboard load at or over its target, or throttled.";
}

impl Slot {
    /// The slot with this snake_case name (`-` accepted for `_`, any case).
    pub fn from_name(name: &str) -> Option<Slot> {
        let key = name.trim().to_ascii_lowercase().replace('-', "_");
        Slot::ALL.into_iter().find(|slot| slot.name() == key)
    }

    /// Modifiers added under `NO_COLOR`, so the slots that carry meaning still stand out.
    fn monochrome(self) -> Modifier {
        match self {
            Slot::Selected | Slot::ReadOnlyBadge | Slot::InputCursor | Slot::GaugeHot => {
                Modifier::REVERSED | Modifier::BOLD
            }
            Slot::StatusBar | Slot::ProfileBadge => Modifier::REVERSED,
            Slot::StatusKey => Modifier::REVERSED | Modifier::BOLD,
            Slot::TitleFocused => Modifier::REVERSED | Modifier::BOLD,
            Slot::SearchMatch => Modifier::REVERSED | Modifier::UNDERLINED,
            Slot::SelectedUnfocused | Slot::Input => Modifier::UNDERLINED,
            Slot::Header => Modifier::BOLD | Modifier::UNDERLINED,
            Slot::Modified => Modifier::BOLD | Modifier::UNDERLINED,
            Slot::Missing => Modifier::DIM | Modifier::ITALIC,
            Slot::Empty => Modifier::ITALIC,
            Slot::Muted | Slot::Scrollbar => Modifier::DIM,
            Slot::DiffRemoved => Modifier::CROSSED_OUT | Modifier::DIM,
            Slot::BorderFocused
            | Slot::PopupBorder
            | Slot::Marked
            | Slot::Key
            | Slot::Error
            | Slot::Warning
            | Slot::GaugeWarn
            | Slot::DiffAdded => Modifier::BOLD,
            _ => Modifier::empty(),
        }
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The built-in themes, default first.
const BUILTIN: [(&str, &str); 4] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("ansi16", include_str!("../../themes/ansi16.toml")),
];

const DEFAULT_THEME: &str = "dark";

/// Names of the built-in themes, the default (`dark`) first.
pub fn builtin_names() -> &'static [&'static str] {
    const NAMES: [&str; BUILTIN.len()] = {
        let mut names = [""; BUILTIN.len()];
        let mut i = 0;
        while i < BUILTIN.len() {
            names[i] = BUILTIN[i].0;
            i += 1;
        }
        names
    };
    &NAMES
}

fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// Built-in theme names, then user themes (`<config dir>/themes/*.toml`) not shadowing one.
pub fn available(user_dir: Option<&Path>) -> Vec<String> {
    let mut names: Vec<String> = builtin_names().iter().map(|n| n.to_string()).collect();
    let mut user: Vec<String> = user_dir
        .and_then(|dir| fs::read_dir(dir.join("themes")).ok())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .filter_map(|path| path.file_stem()?.to_str().map(str::to_string))
        .filter(|name| !names.contains(name))
        .collect();
    user.sort();
    user.dedup();
    names.append(&mut user);
    names
}

/// A resolved theme: one style per slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    styles: [Style; Slot::COUNT],
    no_color: bool,
    ansi16: bool,
}

impl Default for Theme {
    /// The built-in dark theme, colours on.
    fn default() -> Self {
        load(DEFAULT_THEME, None, false).0
    }
}

impl Theme {
    /// The style of a slot.
    pub fn style(&self, slot: Slot) -> Style {
        self.styles[slot as usize]
    }

    /// Whether colours are off (`NO_COLOR`): styles carry modifiers only.
    pub fn no_color(&self) -> bool {
        self.no_color
    }

    /// The colour for a profile's `color` setting under this theme: None when colours are off
    /// or the text is not a colour; mapped to the nearest ANSI colour in a 16-colour theme.
    pub fn profile_color(&self, color: &str) -> Option<Color> {
        if self.no_color {
            return None;
        }
        let color = parse_color(color).ok()?;
        Some(if self.ansi16 {
            nearest_ansi(color)
        } else {
            color
        })
    }

    fn from_parts(name: &str, parts: &ThemeParts, no_color: bool) -> Theme {
        let mut styles = [Style::default(); Slot::COUNT];
        for slot in Slot::ALL {
            let style = parts.slots[slot as usize].unwrap_or_default();
            styles[slot as usize] = if no_color {
                Style::default().add_modifier(style.add_modifier | slot.monochrome())
            } else {
                style
            };
        }
        Theme {
            name: name.to_string(),
            styles,
            no_color,
            ansi16: parts.ansi16,
        }
    }
}

/// Loads theme `name`: a user file `user_dir/themes/NAME.toml` layered over its base, else the
/// built-in. Never fails: problems come back as warnings and a usable theme.
pub fn load(name: &str, user_dir: Option<&Path>, no_color: bool) -> (Theme, Vec<String>) {
    let mut warnings = Vec::new();
    let name = name.trim();
    let user_file = user_theme_path(name, user_dir);
    let builtin = builtin_parts(name, &mut warnings);

    if let Some(path) = user_file {
        match load_user(&path, builtin.as_ref(), &mut warnings) {
            Ok(parts) => return (Theme::from_parts(name, &parts, no_color), warnings),
            Err(problems) => {
                warnings.extend(problems);
                if let Some(parts) = &builtin {
                    warnings.push(format!("theme '{name}': using the built-in '{name}'"));
                    return (Theme::from_parts(name, parts, no_color), warnings);
                }
                warnings.push(format!("theme '{name}': using '{DEFAULT_THEME}'"));
            }
        }
    } else if let Some(parts) = &builtin {
        return (Theme::from_parts(name, parts, no_color), warnings);
    } else {
        warnings.push(format!(
            "unknown theme '{name}' (available: {}); using '{DEFAULT_THEME}'",
            available(user_dir).join(", ")
        ));
    }
    let parts = builtin_parts(DEFAULT_THEME, &mut warnings).unwrap_or_default();
    (Theme::from_parts(DEFAULT_THEME, &parts, no_color), warnings)
}

/// `user_dir/themes/NAME.toml` if it exists and NAME is a plain file name.
fn user_theme_path(name: &str, user_dir: Option<&Path>) -> Option<PathBuf> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\', ':'])
        && name != "..";
    let path = user_dir?.join("themes").join(format!("{name}.toml"));
    (plain && path.is_file()).then_some(path)
}

/// A built-in theme, parsed; a broken one (caught by tests) becomes a warning.
fn builtin_parts(name: &str, warnings: &mut Vec<String>) -> Option<ThemeParts> {
    let text = builtin_text(name)?;
    let label = format!("themes/{name}.toml (built-in)");
    match parse_theme(&label, text) {
        Ok(parts) => Some(parts),
        Err(problems) => {
            warnings.extend(problems);
            None
        }
    }
}

fn load_user(
    path: &Path,
    same_name: Option<&ThemeParts>,
    warnings: &mut Vec<String>,
) -> Result<ThemeParts, Vec<String>> {
    let label = path.display().to_string();
    let text = fs::read_to_string(path).map_err(|e| vec![format!("{label}: {e}")])?;
    let overlay = parse_theme(&label, &text)?;
    let base = match overlay.inherits.clone() {
        Some((base_name, line)) => match builtin_text(&base_name) {
            Some(_) => builtin_parts(&base_name, warnings),
            None => {
                return Err(vec![format!(
                    "{label} line {line}: inherits: unknown built-in theme '{base_name}' (built-ins: {})",
                    builtin_names().join(", ")
                )]);
            }
        },
        None => same_name
            .cloned()
            .or_else(|| builtin_parts(DEFAULT_THEME, warnings)),
    }
    .unwrap_or_default();
    Ok(base.overlay(&overlay))
}

/// The slots a file defines (None where it is silent) and its palette.
#[derive(Debug, Clone)]
struct ThemeParts {
    slots: [Option<Style>; Slot::COUNT],
    ansi16: bool,
    /// The `inherits` base named by a user file, with its line.
    inherits: Option<(String, usize)>,
}

impl Default for ThemeParts {
    fn default() -> Self {
        ThemeParts {
            slots: [None; Slot::COUNT],
            ansi16: false,
            inherits: None,
        }
    }
}

impl ThemeParts {
    fn overlay(&self, top: &ThemeParts) -> ThemeParts {
        let mut slots = self.slots;
        for (slot, style) in slots.iter_mut().zip(top.slots) {
            if style.is_some() {
                *slot = style;
            }
        }
        ThemeParts {
            slots,
            ansi16: self.ansi16 || top.ansi16,
            inherits: None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    #[serde(default)]
    inherits: Option<Spanned<String>>,
    #[serde(default)]
    palette: Option<Spanned<String>>,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    slots: BTreeMap<String, Spanned<SlotStyle>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SlotStyle {
    fg: Option<RawColor>,
    bg: Option<RawColor>,
    bold: Option<bool>,
    italic: Option<bool>,
    underline: Option<bool>,
    reversed: Option<bool>,
    dim: Option<bool>,
    crossed_out: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawColor {
    Index(i64),
    Text(String),
}

/// Parses a theme file; errors name the file, the line, the slot and the problem.
fn parse_theme(label: &str, text: &str) -> Result<ThemeParts, Vec<String>> {
    let file: ThemeFile = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|span| format!(" line {}", line_of(text, span.start)))
            .unwrap_or_default();
        vec![format!("{label}{at}: {}", e.message().trim())]
    })?;
    let mut problems = Vec::new();
    let mut parts = ThemeParts::default();
    if let Some(palette) = &file.palette {
        match palette.get_ref().as_str() {
            "ansi16" => parts.ansi16 = true,
            "full" => {}
            other => problems.push(format!(
                "{label} line {}: palette: unknown palette '{other}' (expected ansi16 or full)",
                line_of(text, palette.span().start)
            )),
        }
    }
    for (slot_name, spanned) in &file.slots {
        let line = line_of(text, spanned.span().start);
        let Some(slot) = Slot::from_name(slot_name) else {
            problems.push(format!(
                "{label} line {line}: unknown slot '{slot_name}' (slots: {})",
                Slot::ALL.map(Slot::name).join(", ")
            ));
            continue;
        };
        match spanned.get_ref().to_style(parts.ansi16) {
            Ok(style) => parts.slots[slot as usize] = Some(style),
            Err(problem) => problems.push(format!("{label} line {line}: slot '{slot}': {problem}")),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    parts.inherits = file.inherits.map(|i| {
        (
            i.get_ref().trim().to_string(),
            line_of(text, i.span().start),
        )
    });
    Ok(parts)
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(1, |head| head.matches('\n').count() + 1)
}

impl SlotStyle {
    fn to_style(&self, ansi16: bool) -> Result<Style, String> {
        let mut style = Style::default();
        for (field, raw, is_fg) in [("fg", &self.fg, true), ("bg", &self.bg, false)] {
            let Some(raw) = raw else { continue };
            let color = raw.to_color().map_err(|e| format!("{field}: {e}"))?;
            if ansi16 && !is_ansi16(color) {
                return Err(format!(
                    "{field}: {color} is not one of the 16 ANSI colour names (palette = \"ansi16\")"
                ));
            }
            style = if is_fg {
                style.fg(color)
            } else {
                style.bg(color)
            };
        }
        for (flag, modifier) in [
            (self.bold, Modifier::BOLD),
            (self.italic, Modifier::ITALIC),
            (self.underline, Modifier::UNDERLINED),
            (self.reversed, Modifier::REVERSED),
            (self.dim, Modifier::DIM),
            (self.crossed_out, Modifier::CROSSED_OUT),
        ] {
            if flag == Some(true) {
                style = style.add_modifier(modifier);
            }
        }
        Ok(style)
    }
}

impl RawColor {
    fn to_color(&self) -> Result<Color, String> {
        match self {
            RawColor::Index(i) => u8::try_from(*i)
                .map(Color::Indexed)
                .map_err(|_| format!("colour index {i} out of range 0..=255")),
            RawColor::Text(text) => parse_color(text),
        }
    }
}

const ANSI: [(&str, Color); 16] = [
    ("black", Color::Black),
    ("red", Color::Red),
    ("green", Color::Green),
    ("yellow", Color::Yellow),
    ("blue", Color::Blue),
    ("magenta", Color::Magenta),
    ("cyan", Color::Cyan),
    ("gray", Color::Gray),
    ("darkgray", Color::DarkGray),
    ("lightred", Color::LightRed),
    ("lightgreen", Color::LightGreen),
    ("lightyellow", Color::LightYellow),
    ("lightblue", Color::LightBlue),
    ("lightmagenta", Color::LightMagenta),
    ("lightcyan", Color::LightCyan),
    ("white", Color::White),
];

fn is_ansi16(color: Color) -> bool {
    ANSI.iter().any(|(_, c)| *c == color)
}

/// Parses a colour: an ANSI name (case, `-`, `_`, spaces ignored; `grey`, `bright…` accepted),
/// `#rrggbb`, an index `0..=255` or `i0..=i255`, or `reset`/`default`.
pub fn parse_color(text: &str) -> Result<Color, String> {
    let s = text.trim();
    if let Some(hex) = s.strip_prefix('#') {
        let channel = |i: usize| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        };
        if hex.len() == 6 {
            if let (Some(r), Some(g), Some(b)) = (channel(0), channel(2), channel(4)) {
                return Ok(Color::Rgb(r, g, b));
            }
        }
        return Err(format!("bad colour '{text}' (expected #rrggbb)"));
    }
    let key = s
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .collect::<String>()
        .to_ascii_lowercase()
        .replace("grey", "gray");
    let index = key.strip_prefix('i').unwrap_or(&key);
    if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) {
        return index
            .parse::<u8>()
            .map(Color::Indexed)
            .map_err(|_| format!("colour index '{text}' out of range 0..=255"));
    }
    if key == "reset" || key == "default" {
        return Ok(Color::Reset);
    }
    let key = match key.strip_prefix("bright") {
        Some(rest) => format!("light{rest}"),
        None => key,
    };
    ANSI.iter()
        .find(|(name, _)| *name == key)
        .map(|(_, color)| *color)
        .ok_or_else(|| {
            format!(
                "unknown colour '{text}' (expected one of {}, #rrggbb, 0..=255, i0..=i255, reset)",
                ANSI.map(|(name, _)| name).join(", ")
            )
        })
}

/// xterm's default RGB for the 16 ANSI colours, in `ANSI` order.
const ANSI_RGB: [(u8, u8, u8); 16] = [
    (0, 0, 0),
    (205, 0, 0),
    (0, 205, 0),
    (205, 205, 0),
    (0, 0, 238),
    (205, 0, 205),
    (0, 205, 205),
    (229, 229, 229),
    (127, 127, 127),
    (255, 0, 0),
    (0, 255, 0),
    (255, 255, 0),
    (92, 92, 255),
    (255, 0, 255),
    (0, 255, 255),
    (255, 255, 255),
];

/// The ANSI colour nearest an RGB or indexed colour, for 16-colour terminals.
fn nearest_ansi(color: Color) -> Color {
    let (r, g, b) = match color {
        Color::Rgb(r, g, b) => (r, g, b),
        Color::Indexed(i) if i < 16 => return ANSI[usize::from(i)].1,
        Color::Indexed(i) if i >= 232 => {
            let level = 8 + (i - 232) * 10;
            (level, level, level)
        }
        Color::Indexed(i) => {
            let cube = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
            let i = i - 16;
            (cube(i / 36), cube((i / 6) % 6), cube(i % 6))
        }
        other => return other,
    };
    let distance = |(cr, cg, cb): (u8, u8, u8)| {
        let d = |a: u8, b: u8| (i32::from(a) - i32::from(b)).pow(2);
        d(r, cr) + d(g, cg) + d(b, cb)
    };
    ANSI_RGB
        .iter()
        .zip(ANSI)
        .min_by_key(|(rgb, _)| distance(**rgb))
        .map_or(Color::Reset, |(_, (_, color))| color)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("themes")).unwrap();
        for (name, text) in files {
            fs::write(dir.path().join("themes").join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn every_builtin_parses_and_defines_every_slot() {
        for (name, text) in BUILTIN {
            let parts = parse_theme(name, text).unwrap();
            assert!(parts.inherits.is_none(), "{name} must not inherit");
            for slot in Slot::ALL {
                assert!(
                    parts.slots[slot as usize].is_some(),
                    "{name} lacks slot {slot}"
                );
            }
        }
    }

    #[test]
    fn builtins_load_without_warnings() {
        for name in builtin_names() {
            let (theme, warnings) = load(name, None, false);
            assert!(warnings.is_empty(), "{name}: {warnings:?}");
            assert_eq!(theme.name, *name);
        }
        assert_eq!(builtin_names()[0], "dark");
    }

    #[test]
    fn ansi16_uses_only_ansi_names() {
        let text = builtin_text("ansi16").unwrap();
        let file: toml::Table = toml::from_str(text).unwrap();
        let slots = file["slots"].as_table().unwrap();
        for (slot, style) in slots {
            for key in ["fg", "bg"] {
                if let Some(value) = style.get(key) {
                    let name = value
                        .as_str()
                        .unwrap_or_else(|| panic!("{slot}.{key}: not a name"));
                    let color = parse_color(name).unwrap();
                    assert!(is_ansi16(color), "{slot}.{key} = {name}");
                }
            }
        }
        let (theme, _) = load("ansi16", None, false);
        assert_eq!(theme.profile_color("#5f87ff"), Some(Color::LightBlue));
        assert_eq!(theme.profile_color("#d70000"), Some(Color::Red));
    }

    #[test]
    fn selected_missing_and_read_only_stand_out_in_every_builtin() {
        for name in builtin_names() {
            let (theme, _) = load(name, None, false);
            let base = theme.style(Slot::Base);
            for slot in [
                Slot::Selected,
                Slot::ReadOnlyBadge,
                Slot::Missing,
                Slot::Empty,
            ] {
                assert_ne!(theme.style(slot), base, "{name}: {slot} looks like base");
            }
            assert_ne!(
                theme.style(Slot::Missing),
                theme.style(Slot::Empty),
                "{name}"
            );
            let badge = theme.style(Slot::ReadOnlyBadge);
            assert!(
                badge.bg.is_some(),
                "{name}: read-only badge needs a background"
            );
            assert!(badge.add_modifier.contains(Modifier::BOLD), "{name}");
        }
    }

    #[test]
    fn no_color_keeps_only_modifiers_and_key_slots_still_differ() {
        for name in builtin_names() {
            let (theme, _) = load(name, None, true);
            assert!(theme.no_color());
            for slot in Slot::ALL {
                let style = theme.style(slot);
                assert_eq!((style.fg, style.bg), (None, None), "{name}: {slot}");
            }
            let mods = |slot| theme.style(slot).add_modifier;
            assert!(mods(Slot::Selected).contains(Modifier::REVERSED));
            assert!(mods(Slot::ReadOnlyBadge).contains(Modifier::REVERSED | Modifier::BOLD));
            assert!(mods(Slot::Missing).contains(Modifier::DIM | Modifier::ITALIC));
            assert_ne!(mods(Slot::Missing), mods(Slot::Empty));
            assert_ne!(mods(Slot::Selected), mods(Slot::SelectedUnfocused));
            assert_ne!(mods(Slot::Border), mods(Slot::BorderFocused));
            assert_eq!(theme.profile_color("red"), None);
        }
    }

    #[test]
    fn slot_names_round_trip() {
        for slot in Slot::ALL {
            assert_eq!(Slot::from_name(slot.name()), Some(slot));
            assert!(!slot.description().is_empty());
        }
        assert_eq!(Slot::BorderFocused.name(), "border_focused");
        assert_eq!(Slot::from_name("Border-Focused"), Some(Slot::BorderFocused));
        assert_eq!(Slot::from_name("nope"), None);
    }

    #[test]
    fn colours_parse_in_every_notation() {
        assert_eq!(parse_color("LightRed"), Ok(Color::LightRed));
        assert_eq!(parse_color("light-red"), Ok(Color::LightRed));
        assert_eq!(parse_color("dark_grey"), Ok(Color::DarkGray));
        assert_eq!(parse_color("bright blue"), Ok(Color::LightBlue));
        assert_eq!(parse_color("#5F87ff"), Ok(Color::Rgb(0x5f, 0x87, 0xff)));
        assert_eq!(parse_color("i123"), Ok(Color::Indexed(123)));
        assert_eq!(parse_color("200"), Ok(Color::Indexed(200)));
        assert_eq!(parse_color("default"), Ok(Color::Reset));
        assert_eq!(parse_color("reset"), Ok(Color::Reset));
        assert!(parse_color("i256").is_err());
        assert!(parse_color("#12345g").is_err());
        assert!(parse_color("redd")
            .unwrap_err()
            .contains("unknown colour 'redd'"));
    }

    #[test]
    fn numeric_index_in_file() {
        let parts = parse_theme("t", "[slots]\nbase = { fg = 42, bg = \"i7\" }\n").unwrap();
        let style = parts.slots[Slot::Base as usize].unwrap();
        assert_eq!(
            (style.fg, style.bg),
            (Some(Color::Indexed(42)), Some(Color::Indexed(7)))
        );
        let err = parse_theme("t", "[slots]\nbase = { fg = 300 }\n").unwrap_err();
        assert_eq!(
            err,
            ["t line 2: slot 'base': fg: colour index 300 out of range 0..=255"]
        );
    }

    #[test]
    fn bad_values_name_file_line_slot_and_problem() {
        let err = parse_theme("my.toml", "\n[slots]\nborder = { fg = \"redd\" }\n").unwrap_err();
        assert_eq!(err.len(), 1);
        assert!(err[0].starts_with("my.toml line 3: slot 'border': fg: unknown colour 'redd'"));
        let err = parse_theme("my.toml", "[slots]\nbordr = { fg = \"red\" }\n").unwrap_err();
        assert!(
            err[0].starts_with("my.toml line 2: unknown slot 'bordr'"),
            "{err:?}"
        );
        let err = parse_theme("my.toml", "[slots]\nborder = { bolt = true }\n").unwrap_err();
        assert!(err[0].starts_with("my.toml line 2: "), "{err:?}");
        assert!(err[0].contains("bolt"), "{err:?}");
        let err = parse_theme(
            "a16",
            "palette = \"ansi16\"\n[slots]\nbase = { fg = \"#ffffff\" }\n",
        )
        .unwrap_err();
        assert!(
            err[0].contains("not one of the 16 ANSI colour names"),
            "{err:?}"
        );
    }

    #[test]
    fn user_theme_overrides_only_the_slots_it_names() {
        let dir = user_dir(&[("dark.toml", "[slots]\nborder = { fg = \"red\" }\n")]);
        let (theme, warnings) = load("dark", Some(dir.path()), false);
        assert!(warnings.is_empty(), "{warnings:?}");
        let (builtin, _) = load("dark", None, false);
        assert_eq!(theme.style(Slot::Border), Style::default().fg(Color::Red));
        for slot in Slot::ALL.into_iter().filter(|s| *s != Slot::Border) {
            assert_eq!(theme.style(slot), builtin.style(slot), "{slot}");
        }
    }

    #[test]
    fn new_user_theme_layers_over_dark_or_its_inherits() {
        let dir = user_dir(&[
            ("mine.toml", "[slots]\nheader = { fg = \"cyan\" }\n"),
            (
                "pale.toml",
                "inherits = \"light\"\n[slots]\nheader = { fg = \"cyan\" }\n",
            ),
        ]);
        let (dark, _) = load("dark", None, false);
        let (light, _) = load("light", None, false);
        let (mine, w1) = load("mine", Some(dir.path()), false);
        let (pale, w2) = load("pale", Some(dir.path()), false);
        assert!(w1.is_empty() && w2.is_empty(), "{w1:?} {w2:?}");
        assert_eq!(mine.name, "mine");
        assert_eq!(mine.style(Slot::Base), dark.style(Slot::Base));
        assert_eq!(pale.style(Slot::Base), light.style(Slot::Base));
        assert_eq!(pale.style(Slot::Header), Style::default().fg(Color::Cyan));
        let names = available(Some(dir.path()));
        assert_eq!(
            names,
            ["dark", "light", "high-contrast", "ansi16", "mine", "pale"]
        );
    }

    #[test]
    fn bad_user_file_warns_with_file_and_line_and_uses_builtin() {
        let dir = user_dir(&[("light.toml", "[slots]\nborder = { fg = \"nope\" }\n")]);
        let (theme, warnings) = load("light", Some(dir.path()), false);
        let (light, _) = load("light", None, false);
        assert_eq!(theme, light);
        assert!(
            warnings[0].contains("light.toml line 2: slot 'border'"),
            "{warnings:?}"
        );
        let dir = user_dir(&[("x.toml", "[slots\n")]);
        let (theme, warnings) = load("x", Some(dir.path()), false);
        assert_eq!(theme.name, "dark");
        assert!(warnings[0].contains("x.toml line 1"), "{warnings:?}");
        let dir = user_dir(&[("y.toml", "inherits = \"sepia\"\n")]);
        let (_, warnings) = load("y", Some(dir.path()), false);
        assert!(warnings[0].contains("y.toml line 1: inherits: unknown built-in theme 'sepia'"));
    }

    #[test]
    fn unknown_theme_lists_available_and_falls_back_to_dark() {
        let (theme, warnings) = load("sepia", None, false);
        assert_eq!(theme.name, "dark");
        assert_eq!(theme, Theme::default());
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("unknown theme 'sepia'"));
        assert!(warnings[0].contains("dark, light, high-contrast, ansi16"));
        let (theme, _) = load("../etc/passwd", Some(Path::new("/")), false);
        assert_eq!(theme.name, "dark");
    }

    #[test]
    fn profile_colours() {
        let theme = Theme::default();
        assert_eq!(theme.profile_color("red"), Some(Color::Red));
        assert_eq!(
            theme.profile_color("#5f87ff"),
            Some(Color::Rgb(0x5f, 0x87, 0xff))
        );
        assert_eq!(theme.profile_color("bogus"), None);
    }
}
