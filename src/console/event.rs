//! What flows into `App::update` (terminal input, job results, ticks) and what flows out of it
//! (commands the run loop turns into tokio jobs or terminal writes).

use crossterm::event::{KeyEvent, MouseEvent};

use std::sync::Arc;

use super::editor::WriteOp;
use crate::azure::{Continuation, Entity, EntityPage, QuerySpec, TableClient, TablePage};
use crate::journal::Journal;

/// Identifies one background job; a result whose id is no longer awaited is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

#[derive(Debug)]
pub enum Event {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize(u16, u16),
    /// Pasted text (bracketed paste) goes to whatever input is open.
    Paste(String),
    Job(JobId, JobOutput),
    /// The spinner's clock; only sent while work is pending.
    Tick,
}

#[derive(Debug)]
pub enum JobOutput {
    Tables(Result<TablePage, String>),
    /// A page of entities; `scanned` counts the empty pages followed before it.
    Page {
        result: Result<EntityPage, String>,
        scanned: u32,
    },
    /// An empty page with a continuation was skipped (the "scanned, no match yet" count).
    Scanned(u32),
    Entity(Result<Entity, String>),
    Done(Result<String, String>),
    /// A write (editor save, delete, undo) finished.
    Written(Result<WriteDone, WriteFailure>),
    /// Text back from `$EDITOR`.
    Edited(Result<String, String>),
    /// A stress test's progress (the job goes on).
    Stress(crate::stress::StressEvent),
    /// `:undo` met a change made since: the three versions for the conflict view.
    UndoConflict {
        table: String,
        conflict: Box<crate::journal::UndoConflict>,
    },
    Cancelled,
}

impl JobOutput {
    /// Progress of a job that goes on (its final result comes later).
    pub fn is_progress(&self) -> bool {
        matches!(self, JobOutput::Scanned(_) | JobOutput::Stress(_))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteDone {
    pub etag: Option<String>,
    /// "probably applied by an earlier attempt", and the like.
    pub note: Option<String>,
    /// The journal entry of the write.
    pub journal_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFailure {
    pub status: Option<u16>,
    pub code: Option<String>,
    pub message: String,
}

impl WriteFailure {
    pub fn is_conflict(&self) -> bool {
        matches!(self.status, Some(412) | Some(404))
    }
}

/// Work the run loop performs for the app.
#[derive(Debug)]
pub enum Command {
    ListTables {
        job: JobId,
        client: TableClient,
        next: Option<String>,
    },
    QueryPage {
        job: JobId,
        client: TableClient,
        table: String,
        spec: QuerySpec,
        from: Option<Continuation>,
    },
    GetEntity {
        job: JobId,
        client: TableClient,
        table: String,
        partition_key: String,
        row_key: String,
    },
    CreateTable {
        job: JobId,
        client: TableClient,
        name: String,
    },
    DeleteTable {
        job: JobId,
        client: TableClient,
        name: String,
    },
    /// A write through the journal.
    Write {
        job: JobId,
        journal: Arc<Journal>,
        client: TableClient,
        profile: String,
        table: String,
        op: WriteOp,
    },
    /// Revert this session's last change, with the client of the profile that made it.
    Undo {
        job: JobId,
        journal: Arc<Journal>,
        clients: Vec<(String, TableClient)>,
    },
    /// Suspend the console and edit text in `$EDITOR`.
    ExternalEdit {
        job: JobId,
        text: String,
    },
    /// The seeds' partition stress test on a throwaway table of this account.
    Stress {
        job: JobId,
        client: TableClient,
        config: crate::stress::StressConfig,
    },
    /// Write the dashboard's view to a file in the working directory.
    Export {
        job: JobId,
        file_name: String,
        contents: String,
    },
    Cancel(JobId),
    /// Put text on the clipboard through OSC 52 (works over SSH).
    Copy(String),
}
