//! The terminal's raw/alternate-screen state and its restoration on every exit path: normal
//! return, error, panic (hook), and signals (handled by the run loop, which then returns).

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{cursor, execute};

/// Whether the terminal is currently in the console's mode (restoration must happen once).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Puts the terminal back: leaves the alternate screen, shows the cursor, ends raw mode.
/// Safe to call more than once and from a panic hook.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        let _ = execute!(
            out,
            crossterm::terminal::EndSynchronizedUpdate,
            DisableMouseCapture,
            DisableBracketedPaste,
            LeaveAlternateScreen,
            cursor::Show
        );
        let _ = terminal::disable_raw_mode();
        let _ = out.flush();
    }
}

/// Holds the terminal in console mode; restores it when dropped.
pub struct TerminalGuard {
    _private: (),
}

impl TerminalGuard {
    pub fn enter() -> io::Result<TerminalGuard> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = io::stdout();
        if let Err(e) = execute!(
            out,
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableBracketedPaste,
            cursor::Hide
        ) {
            restore();
            return Err(e);
        }
        Ok(TerminalGuard { _private: () })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Restores the terminal before the default hook prints the panic, so the message is readable
/// and the shell is usable. Installed once; chains to the previous hook.
fn install_panic_hook() {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
}

/// Writes an OSC 52 clipboard sequence (works over SSH in most terminals).
pub fn copy_osc52(text: &str) -> io::Result<()> {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    let mut out = io::stdout();
    write!(out, "\x1b]52;c;{encoded}\x07")?;
    out.flush()
}

/// Leaves the console's mode, runs `$VISUAL`/`$EDITOR` (else `vi`) on a temporary file holding
/// `text`, re-enters, and returns the edited text.
pub fn edit_externally(text: &str) -> Result<String, String> {
    let dir = std::env::temp_dir();
    let path = dir.join(format!(
        "tabletop-edit-{}-{}.json",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let editor = std::env::var("VISUAL")
        .ok()
        .or_else(|| std::env::var("EDITOR").ok())
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| "vi".into());
    let was_active = ACTIVE.load(Ordering::SeqCst);
    restore();
    // The editor command may carry arguments ("code --wait"): let the shell split it.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("tabletop-editor")
        .arg(&path)
        .status();
    if was_active {
        let _ = reenter();
    }
    let result = match status {
        Ok(s) if s.success() => std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display())),
        Ok(s) => Err(format!("{editor} exited with {s}; nothing applied")),
        Err(e) => Err(format!("cannot run {editor}: {e}")),
    };
    let _ = std::fs::remove_file(&path);
    result
}

fn reenter() -> io::Result<()> {
    terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    execute!(
        io::stdout(),
        EnterAlternateScreen,
        EnableMouseCapture,
        EnableBracketedPaste,
        cursor::Hide
    )
}
