//! A one-line text input (command line, filter bar, search, confirmations).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Input {
    text: String,
    /// Cursor position in chars.
    cursor: usize,
}

/// What a key did to an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputResult {
    Changed,
    Unchanged,
    Submit,
    Cancel,
    /// Tab / shift-tab: move between fields.
    Next,
    Prev,
}

impl Input {
    pub fn new(text: impl Into<String>) -> Input {
        let text = text.into();
        let cursor = text.chars().count();
        Input { text, cursor }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn set(&mut self, text: impl Into<String>) {
        *self = Input::new(text);
    }

    fn byte_index(&self, char_index: usize) -> usize {
        self.text
            .char_indices()
            .nth(char_index)
            .map_or(self.text.len(), |(i, _)| i)
    }

    pub fn insert_str(&mut self, s: &str) {
        for c in s.chars().filter(|c| !c.is_control()) {
            let at = self.byte_index(self.cursor);
            self.text.insert(at, c);
            self.cursor += 1;
        }
    }

    /// A line break inside a value (multi-line strings).
    pub fn insert_newline(&mut self) {
        let at = self.byte_index(self.cursor);
        self.text.insert(at, '\n');
        self.cursor += 1;
    }

    pub fn handle(&mut self, key: &KeyEvent) -> InputResult {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Enter => InputResult::Submit,
            KeyCode::Esc => InputResult::Cancel,
            KeyCode::Tab => InputResult::Next,
            KeyCode::BackTab => InputResult::Prev,
            KeyCode::Char('c') if ctrl => InputResult::Cancel,
            KeyCode::Char('u') if ctrl => {
                let at = self.byte_index(self.cursor);
                self.text.replace_range(..at, "");
                self.cursor = 0;
                InputResult::Changed
            }
            KeyCode::Char('a') if ctrl => {
                self.cursor = 0;
                InputResult::Changed
            }
            KeyCode::Char('e') if ctrl => {
                self.cursor = self.text.chars().count();
                InputResult::Changed
            }
            KeyCode::Char('w') if ctrl => {
                let chars: Vec<char> = self.text.chars().collect();
                let mut start = self.cursor;
                while start > 0 && chars[start - 1] == ' ' {
                    start -= 1;
                }
                while start > 0 && chars[start - 1] != ' ' {
                    start -= 1;
                }
                let (a, b) = (self.byte_index(start), self.byte_index(self.cursor));
                self.text.replace_range(a..b, "");
                self.cursor = start;
                InputResult::Changed
            }
            KeyCode::Char(c) if !ctrl => {
                self.insert_str(&c.to_string());
                InputResult::Changed
            }
            KeyCode::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                let at = self.byte_index(self.cursor);
                self.text.remove(at);
                InputResult::Changed
            }
            KeyCode::Delete if self.cursor < self.text.chars().count() => {
                let at = self.byte_index(self.cursor);
                self.text.remove(at);
                InputResult::Changed
            }
            KeyCode::Left if self.cursor > 0 => {
                self.cursor -= 1;
                InputResult::Changed
            }
            KeyCode::Right if self.cursor < self.text.chars().count() => {
                self.cursor += 1;
                InputResult::Changed
            }
            KeyCode::Home => {
                self.cursor = 0;
                InputResult::Changed
            }
            KeyCode::End => {
                self.cursor = self.text.chars().count();
                InputResult::Changed
            }
            _ => InputResult::Unchanged,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn typing_editing_and_unicode() {
        let mut i = Input::default();
        for c in "héllo".chars() {
            i.handle(&key(KeyCode::Char(c)));
        }
        i.handle(&key(KeyCode::Left));
        i.handle(&key(KeyCode::Backspace));
        assert_eq!(i.text(), "hélo");
        i.handle(&key(KeyCode::Home));
        i.handle(&key(KeyCode::Delete));
        assert_eq!(i.text(), "élo");
        assert_eq!(i.handle(&key(KeyCode::Enter)), InputResult::Submit);
        let mut w = Input::new("one two three");
        w.handle(&KeyEvent::new(KeyCode::Char('w'), KeyModifiers::CONTROL));
        assert_eq!(w.text(), "one two ");
    }
}
