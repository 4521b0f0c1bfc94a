//! Background jobs: each command becomes a tokio task with a cancellation token that reports
//! back on the event channel. `App::update` never awaits; only these tasks touch the network.

use std::collections::HashMap;

use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::editor::WriteOp;
use super::event::{Command, Event, JobId, JobOutput, WriteDone, WriteFailure};
use crate::azure::{TableClient, TableError};
use crate::journal::{journaled_write, session_id, undo, Journal, UndoError, UndoOutcome};

/// Empty pages followed in a row before the job reports progress and keeps going.
const MAX_EMPTY_PAGES: u32 = 10_000;

pub struct Jobs {
    tx: UnboundedSender<Event>,
    running: HashMap<JobId, CancellationToken>,
}

impl Jobs {
    pub fn new(tx: UnboundedSender<Event>) -> Jobs {
        Jobs {
            tx,
            running: HashMap::new(),
        }
    }

    /// Forgets finished jobs (their results arrived).
    pub fn finished(&mut self, id: JobId) {
        self.running.remove(&id);
    }

    pub fn in_flight(&self) -> usize {
        self.running.len()
    }

    pub fn cancel_all(&mut self) {
        for (_, token) in self.running.drain() {
            token.cancel();
        }
    }

    /// Starts the work of a command. Copy is not a job; the run loop handles it.
    pub fn spawn(&mut self, command: Command) {
        let tx = self.tx.clone();
        let token = CancellationToken::new();
        if let Command::Stress {
            job,
            client,
            config,
        } = command
        {
            // Cancelling a stress test must let it remove its table, so it gets the token
            // instead of being dropped.
            self.running.insert(job, token.clone());
            tokio::spawn(async move {
                let (events, mut rx) = tokio::sync::mpsc::unbounded_channel();
                let forward_tx = tx.clone();
                let forward = tokio::spawn(async move {
                    while let Some(ev) = rx.recv().await {
                        let _ = forward_tx.send(Event::Job(job, JobOutput::Stress(ev)));
                    }
                });
                let result = crate::stress::run(&client, config, events, token).await;
                let _ = forward.await;
                let _ = tx.send(Event::Job(
                    job,
                    JobOutput::Done(result.map(|r| r.knee_line()).map_err(|e| e.to_string())),
                ));
            });
            return;
        }
        let (id, work): (
            JobId,
            std::pin::Pin<Box<dyn std::future::Future<Output = JobOutput> + Send>>,
        ) = match command {
            Command::Cancel(id) => {
                if let Some(t) = self.running.remove(&id) {
                    t.cancel();
                }
                return;
            }
            // Copy and $EDITOR belong to the run loop; a stress test was started above.
            Command::Copy(_) | Command::ExternalEdit { .. } | Command::Stress { .. } => return,
            Command::Write {
                job,
                journal,
                client,
                profile,
                table,
                op,
            } => (
                job,
                Box::pin(async move {
                    JobOutput::Written(write(&journal, &client, &profile, &table, op).await)
                }),
            ),
            Command::Undo {
                job,
                journal,
                clients,
            } => (
                job,
                Box::pin(async move { undo_last(&journal, &clients).await }),
            ),
            Command::Export {
                job,
                file_name,
                contents,
            } => (
                job,
                Box::pin(async move {
                    let path = std::env::current_dir()
                        .map(|d| d.join(&file_name))
                        .unwrap_or_else(|_| file_name.clone().into());
                    JobOutput::Done(match tokio::fs::write(&path, contents).await {
                        Ok(()) => Ok(format!("exported the dashboard to {}", path.display())),
                        Err(e) => Err(format!("cannot write {}: {e}", path.display())),
                    })
                }),
            ),
            Command::ListTables { job, client, next } => (
                job,
                Box::pin(async move {
                    JobOutput::Tables(
                        client
                            .list_tables_page(None, None, next.as_deref())
                            .await
                            .map_err(|e| e.to_string()),
                    )
                }),
            ),
            Command::QueryPage {
                job,
                client,
                table,
                spec,
                from,
            } => {
                let progress = tx.clone();
                (
                    job,
                    Box::pin(async move {
                        // A page may come back empty with a token (a partition boundary or the
                        // server's 5 s budget): follow it so the user sees rows, not a blank page.
                        let mut from = from;
                        let mut scanned = 0;
                        loop {
                            match client.query_page(&table, &spec, from.as_ref()).await {
                                Ok(page)
                                    if page.entities.is_empty()
                                        && page.continuation.is_some()
                                        && scanned < MAX_EMPTY_PAGES =>
                                {
                                    scanned += 1;
                                    from = page.continuation;
                                    let _ =
                                        progress.send(Event::Job(job, JobOutput::Scanned(scanned)));
                                }
                                result => {
                                    return JobOutput::Page {
                                        result: result.map_err(|e| e.to_string()),
                                        scanned,
                                    }
                                }
                            }
                        }
                    }),
                )
            }
            Command::GetEntity {
                job,
                client,
                table,
                partition_key,
                row_key,
            } => (
                job,
                Box::pin(async move {
                    JobOutput::Entity(
                        client
                            .get_entity(&table, &partition_key, &row_key)
                            .await
                            .map_err(|e| e.to_string()),
                    )
                }),
            ),
            Command::CreateTable { job, client, name } => (
                job,
                Box::pin(async move {
                    JobOutput::Done(
                        client
                            .create_table(&name)
                            .await
                            .map(|_| format!("created table {name}"))
                            .map_err(|e| e.to_string()),
                    )
                }),
            ),
            Command::DeleteTable { job, client, name } => (
                job,
                Box::pin(async move {
                    JobOutput::Done(
                        client
                            .delete_table(&name)
                            .await
                            .map(|_| format!("deleted table {name}"))
                            .map_err(|e| e.to_string()),
                    )
                }),
            ),
        };
        self.running.insert(id, token.clone());
        tokio::spawn(async move {
            let output = tokio::select! {
                _ = token.cancelled() => JobOutput::Cancelled,
                out = work => out,
            };
            let _ = tx.send(Event::Job(id, output));
        });
    }
}

/// Sends one write through the journal (intent before, outcome after) and describes the
/// outcome for the app.
pub async fn write(
    journal: &Journal,
    client: &TableClient,
    profile: &str,
    table: &str,
    op: WriteOp,
) -> Result<WriteDone, WriteFailure> {
    match journaled_write(journal, client, profile, table, op).await {
        Ok((o, id)) => Ok(WriteDone {
            etag: o.etag.clone(),
            note: o.note().map(str::to_string),
            journal_id: Some(id.to_string()),
        }),
        Err(e) => Err(match e.table_error() {
            Some(t) => failure(t),
            None => WriteFailure {
                status: None,
                code: None,
                message: e.to_string(),
            },
        }),
    }
}

pub fn failure(e: &TableError) -> WriteFailure {
    WriteFailure {
        status: e.status(),
        code: e.code().map(str::to_string),
        message: e.to_string(),
    }
}

/// Reverts the last undoable change of this session.
async fn undo_last(journal: &Journal, clients: &[(String, TableClient)]) -> JobOutput {
    let entry = match journal.last_undoable(session_id()) {
        Ok(Some(e)) => e,
        Ok(None) => {
            return JobOutput::Done(Err(
                "nothing to undo: no change made in this session is left to revert".into(),
            ))
        }
        Err(e) => return JobOutput::Done(Err(e.to_string())),
    };
    let intent = &entry.intent;
    // The profile that made the change, else any client of the same account.
    let client = clients
        .iter()
        .find(|(name, _)| *name == intent.profile)
        .or_else(|| {
            clients
                .iter()
                .find(|(_, c)| c.account().name == intent.account)
        })
        .map(|(_, c)| c);
    let Some(client) = client else {
        return JobOutput::Done(Err(format!(
            "cannot undo: no connection to account {} (profile {})",
            intent.account, intent.profile
        )));
    };
    match undo(journal, client, &entry).await {
        Ok(UndoOutcome::Reverted { action, .. }) => JobOutput::Done(Ok(format!(
            "undone: {} {} / {} in {} ({})",
            intent.operation.name(),
            intent.partition_key,
            intent.row_key,
            intent.table,
            action.describe()
        ))),
        Ok(UndoOutcome::NothingToUndo { reason }) => {
            JobOutput::Done(Ok(format!("nothing to undo: {reason}")))
        }
        Err(UndoError::Conflict(conflict)) => JobOutput::UndoConflict {
            table: intent.table.clone(),
            conflict,
        },
        Err(e) => JobOutput::Done(Err(format!("undo failed: {e}"))),
    }
}
