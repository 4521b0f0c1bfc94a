//! The mutation journal against the emulator: every CLI write journals intent and outcome with
//! its images, `tabletop journal undo` reverts each kind of write, conflicts and crashes are
//! handled, and read-only refuses.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tabletop::azure::{Condition, EdmValue, Entity, TableClient, UpdateMode};
use tabletop::journal::{Entry, Intent, Journal, Outcome, WriteKind, JOURNAL_ENV};

use crate::common;
use crate::support;

/// A table and a journal file of the test's own.
struct Fixture {
    _dir: tempfile::TempDir,
    journal: PathBuf,
    table: String,
    client: TableClient,
}

impl Fixture {
    async fn new(prefix: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let client = common::client();
        let table = common::fresh_table(&client, prefix).await;
        Fixture {
            journal: dir.path().join("journal.jsonl"),
            _dir: dir,
            table,
            client,
        }
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        run_with(&self.journal, args, stdin)
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "tabletop {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs, expects `code`, returns stdout and stderr.
    fn fails(&self, args: &[&str], stdin: Option<&str>, code: i32) -> (String, String) {
        let out = self.run(args, stdin);
        assert_eq!(
            out.status.code(),
            Some(code),
            "tabletop {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    fn entries(&self) -> Vec<Entry> {
        Journal::for_reading(&self.journal).entries().unwrap()
    }

    fn last(&self) -> Entry {
        self.entries().pop().expect("a journal entry")
    }

    fn undo(&self, id: &str) -> String {
        self.ok(&["journal", "undo", id, "--yes"], None)
    }

    async fn current(&self, pk: &str, rk: &str) -> Option<Entity> {
        self.client
            .try_get_entity(&self.table, pk, rk)
            .await
            .unwrap()
    }
}

fn run_with(journal: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tabletop"));
    cmd.args([
        "--connection-string",
        &support::azurite().connection_string(),
    ])
    .args(args)
    .env(JOURNAL_ENV, journal)
    .env_remove("AZURE_STORAGE_CONNECTION_STRING")
    .env("TABLETOP_CONFIG", "/nonexistent/tabletop-test-config.toml")
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run tabletop");
    let mut pipe = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        pipe.write_all(text.as_bytes()).unwrap();
    }
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn entity(pk: &str, rk: &str, props: &[(&str, EdmValue)]) -> Entity {
    props
        .iter()
        .fold(Entity::new(pk, rk), |e, (n, v)| e.with(*n, v.clone()))
}

fn assert_same(expected: &Entity, actual: &Entity) {
    let diff = common::diff(expected, actual);
    assert!(diff.is_empty(), "{diff:#?}");
    assert!(expected.same_content(actual));
}

#[tokio::test]
async fn every_cli_write_journals_its_intent_and_outcome_with_both_images() {
    let f = Fixture::new("jwrite").await;
    let t = f.table.as_str();
    let v1 = entity(
        "p",
        "r",
        &[
            ("A", EdmValue::Int64(9_007_199_254_740_993)),
            ("B", EdmValue::String("0152".into())),
        ],
    );
    f.ok(&["insert", t, &v1.to_json_line()], None);
    let e = f.last();
    assert_eq!(e.intent.operation, WriteKind::Insert);
    assert_eq!(e.intent.before, None);
    assert_same(&v1, e.intent.after.as_ref().unwrap());
    assert_eq!(e.intent.condition, None);
    assert_eq!(e.intent.profile, "command line");
    assert_eq!(e.intent.account, "devstoreaccount1");
    assert_eq!(e.intent.table, f.table);
    let Outcome::Ok { etag: Some(etag1) } = e.outcome.clone() else {
        panic!("{:?}", e.outcome)
    };
    assert_eq!(
        f.current("p", "r").await.unwrap().etag.as_ref(),
        Some(&etag1)
    );

    // Replace with the line from get: conditional on its ETag, before = what was there.
    let line = f.ok(&["get", t, "p", "r"], None);
    let v2_line = line.replace("0152", "0153");
    f.ok(&["replace", t, "-"], Some(&v2_line));
    let e = f.last();
    assert_eq!(e.intent.operation, WriteKind::Replace);
    assert_eq!(e.intent.condition.as_ref(), Some(&etag1));
    assert_same(&v1, e.intent.before.as_ref().unwrap());
    assert_eq!(
        e.intent.before.as_ref().unwrap().etag.as_ref(),
        Some(&etag1)
    );
    let v2 = Entity::from_json(&v2_line).unwrap();
    assert_same(&v2, e.intent.after.as_ref().unwrap());
    let etag2 = e.outcome.etag().unwrap().to_string();
    assert_ne!(etag1, etag2);

    // A merge's after-image is the before-image with the sent properties applied.
    f.ok(
        &[
            "merge",
            t,
            r#"{"PartitionKey":"p","RowKey":"r","C":true}"#,
            "--if-match",
            &etag2,
        ],
        None,
    );
    let e = f.last();
    assert_eq!(e.intent.operation, WriteKind::Merge);
    let expected = v2.clone().with("C", EdmValue::Boolean(true));
    assert_same(&expected, e.intent.after.as_ref().unwrap());
    assert_same(
        &entity("p", "r", &[("C", EdmValue::Boolean(true))]),
        e.intent.sent.as_ref().unwrap(),
    );
    assert_same(&expected, &f.current("p", "r").await.unwrap());

    // A stale replace fails with 412: journaled as failed, exit 4 as before.
    f.fails(&["replace", t, "-"], Some(&line), 4);
    let e = f.last();
    assert_eq!(e.outcome.label(), "failed 412 UpdateConditionNotSatisfied");

    f.ok(
        &["upsert", t, r#"{"PartitionKey":"p","RowKey":"u","N":1}"#],
        None,
    );
    assert_eq!(f.last().intent.operation, WriteKind::UpsertMerge);
    f.ok(
        &[
            "upsert",
            "--replace",
            t,
            r#"{"PartitionKey":"p","RowKey":"u","N":2}"#,
        ],
        None,
    );
    let e = f.last();
    assert_eq!(e.intent.operation, WriteKind::UpsertReplace);
    assert_same(
        &entity("p", "u", &[("N", EdmValue::Int32(1))]),
        e.intent.before.as_ref().unwrap(),
    );

    f.ok(&["delete", t, "p", "r", "--force"], None);
    let e = f.last();
    assert_eq!(e.intent.operation, WriteKind::Delete);
    assert_eq!(e.intent.condition.as_deref(), Some("*"));
    assert_same(&expected, e.intent.before.as_ref().unwrap());
    assert_eq!(e.intent.after, None);
    assert_eq!(e.outcome, Outcome::Ok { etag: None });

    // Two lines per write (intent, then outcome), all in one session per run.
    let text = std::fs::read_to_string(&f.journal).unwrap();
    assert_eq!(text.lines().count(), 2 * f.entries().len());
    assert_eq!(f.entries().len(), 7);
    // Signed with the emulator's key, which must not be in the file (nor any SAS).
    let key = tabletop::azure::connection::DEV_KEY;
    assert!(!text.contains(key) && !text.contains(&key[..16]) && !text.contains("sig="));

    // Listing: newest first, filtered by table, limited; jsonl prints the folded records.
    let list = f.ok(&["journal", "--table", t, "--limit", "3"], None);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 4, "{list}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("OUTCOME"),
        "{list}"
    );
    assert!(
        lines[1].starts_with(f.last().id.as_str()) && lines[1].contains("delete"),
        "{list}"
    );
    assert!(
        lines[2].contains("upsert-replace") && lines[2].contains(" p / u "),
        "{list}"
    );
    let jsonl = f.ok(&["journal", "--format", "jsonl", "--limit", "2"], None);
    let records: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["operation"], "delete");
    assert_eq!(records[0]["outcome"]["result"], "ok");
    assert_eq!(records[0]["before"]["C"], true);
    assert!(f
        .ok(&["journal", "--table", "NoSuchTable"], None)
        .is_empty());

    let id = f.entries()[2].id.clone();
    let shown = f.ok(
        &["journal", "show", &id.as_str()[..id.as_str().len() - 1]],
        None,
    );
    assert!(shown.contains("operation:  merge"), "{shown}");
    assert!(
        shown.contains(r#"sent:       {"PartitionKey":"p","RowKey":"r","C":true}"#),
        "{shown}"
    );
    assert!(
        shown.contains("before:") && shown.contains("0153"),
        "{shown}"
    );
    f.fails(&["journal", "show", "1999"], None, 3);
}

#[tokio::test]
async fn undo_restores_the_before_image_of_a_replace_and_a_merge() {
    let f = Fixture::new("jundo").await;
    let t = f.table.as_str();
    let v1 = entity(
        "p",
        "r",
        &[
            ("Keep", EdmValue::String("one".into())),
            ("Gone", EdmValue::Int64(-5)),
        ],
    );
    f.client.insert(t, &v1).await.unwrap();

    let line = f.ok(&["get", t, "p", "r"], None);
    let replaced = Entity {
        properties: vec![],
        ..Entity::from_json(&line).unwrap()
    }
    .with("Other", EdmValue::Double(0.5));
    f.ok(&["replace", t, &replaced.to_json_line()], None);
    let id = f.last().id;

    // Without --yes: the plan and exit 2, nothing changed.
    let (plan, err) = f.fails(&["journal", "undo", id.as_str()], None, 2);
    assert!(
        plan.contains("would replace the entity with its before-image"),
        "{plan}"
    );
    assert!(err.contains("--yes"), "{err}");
    assert_same(&replaced, &f.current("p", "r").await.unwrap());

    let out = f.undo(id.as_str());
    assert!(out.contains("odata.etag"), "{out}");
    assert_same(&v1, &f.current("p", "r").await.unwrap());
    let undo_entry = f.last();
    assert_eq!(undo_entry.intent.undo_of.as_ref(), Some(&id));
    assert_eq!(undo_entry.intent.operation, WriteKind::Replace);

    // Twice is refused: it was undone already.
    let (_, err) = f.fails(&["journal", "undo", id.as_str(), "--yes"], None, 2);
    assert!(err.contains("already undone"), "{err}");

    // A merge cannot remove a property, but its undo can: the added property is gone after.
    f.ok(
        &[
            "merge",
            t,
            r#"{"PartitionKey":"p","RowKey":"r","Added":"new","Keep":"two"}"#,
            "--force",
        ],
        None,
    );
    let merged = f.current("p", "r").await.unwrap();
    assert_eq!(merged.get("Added"), Some(&EdmValue::String("new".into())));
    f.undo(f.last().id.as_str());
    let now = f.current("p", "r").await.unwrap();
    assert_eq!(now.get("Added"), None);
    assert_same(&v1, &now);
}

#[tokio::test]
async fn undo_of_an_insert_deletes_it_and_undo_of_a_delete_brings_back_every_type_exactly() {
    let f = Fixture::new("jtypes").await;
    let t = f.table.as_str();
    let all = common::every_type("p", "all");
    f.ok(&["insert", t, &all.to_json_line()], None);
    let inserted = f.last().id;

    f.ok(&["delete", t, "p", "all", "--force"], None);
    assert!(f.current("p", "all").await.is_none());
    let deleted = f.last().id;
    let plan = f.fails(&["journal", "undo", deleted.as_str()], None, 2).0;
    assert!(plan.contains("insert the deleted entity again"), "{plan}");
    f.undo(deleted.as_str());
    let back = f.current("p", "all").await.expect("entity back");
    assert_same(&all, &back);

    // The insert's ETag has changed (deleted and re-inserted): its undo is a conflict now.
    let (_, err) = f.fails(&["journal", "undo", inserted.as_str(), "--yes"], None, 4);
    assert!(err.contains("conflict"), "{err}");
    assert!(f.current("p", "all").await.is_some());

    // A fresh insert's undo deletes it.
    f.ok(
        &["insert", t, r#"{"PartitionKey":"p","RowKey":"new","N":1}"#],
        None,
    );
    f.undo(f.last().id.as_str());
    assert!(f.current("p", "new").await.is_none());
    assert_eq!(f.last().intent.operation, WriteKind::Delete);
}

#[tokio::test]
async fn undo_after_someone_else_changed_the_entity_exits_4_and_overwrites_nothing() {
    let f = Fixture::new("jconfl").await;
    let t = f.table.as_str();
    f.ok(
        &["insert", t, r#"{"PartitionKey":"p","RowKey":"r","N":1}"#],
        None,
    );
    f.ok(
        &[
            "merge",
            t,
            r#"{"PartitionKey":"p","RowKey":"r","N":2}"#,
            "--force",
        ],
        None,
    );
    let id = f.last().id;
    // Someone else, outside tabletop's journal.
    let theirs = entity(
        "p",
        "r",
        &[
            ("N", EdmValue::Int32(2)),
            ("Theirs", EdmValue::String("keep me".into())),
        ],
    );
    f.client
        .update(t, &theirs, UpdateMode::Merge, &Condition::Force)
        .await
        .unwrap();

    let (_, err) = f.fails(&["journal", "undo", id.as_str(), "--yes"], None, 4);
    assert!(err.contains("conflict") && err.contains("Theirs"), "{err}");
    assert!(err.contains("keep me"), "{err}");
    assert_same(&theirs, &f.current("p", "r").await.unwrap());
    // The refused undo is journaled as failed, so a later undo is still allowed to try.
    let last = f.last();
    assert_eq!(last.intent.undo_of.as_ref(), Some(&id));
    assert!(matches!(
        last.outcome,
        Outcome::Failed {
            status: Some(412),
            ..
        }
    ));
}

#[tokio::test]
async fn an_intent_without_outcome_is_resolved_by_reading_the_entity() {
    let f = Fixture::new("jcrash").await;
    let t = f.table.as_str();
    let journal = Journal::open(&f.journal).unwrap();
    let before = entity("p", "r", &[("V", EdmValue::Int32(1))]);
    let w = f.client.insert(t, &before).await.unwrap();
    let after = entity("p", "r", &[("V", EdmValue::Int32(2))]);
    let account = common::account();

    // The write happened but the process died before its outcome: undo reads, then reverts.
    let read = f.current("p", "r").await.unwrap();
    let etag1 = w.etag.clone().unwrap();
    let crashed = journal
        .begin(&Intent {
            profile: "command line".into(),
            account: account.name.clone(),
            endpoint: account.endpoint.clone(),
            table: f.table.clone(),
            partition_key: "p".into(),
            row_key: "r".into(),
            operation: WriteKind::Replace,
            condition: Some(etag1.clone()),
            before: Some(read.clone()),
            after: Some(after.clone()),
            sent: None,
            undo_of: None,
        })
        .unwrap();
    f.client
        .update(t, &after, UpdateMode::Replace, &Condition::IfMatch(etag1))
        .await
        .unwrap();
    let listed = f.ok(&["journal"], None);
    assert!(listed.contains("unknown"), "{listed}");
    let plan = f.fails(&["journal", "undo", crashed.as_str()], None, 2).0;
    assert!(plan.contains("outcome is unknown"), "{plan}");
    f.undo(crashed.as_str());
    assert_same(&before, &f.current("p", "r").await.unwrap());

    // The process died before sending: the entity is as before, nothing to undo.
    let read = f.current("p", "r").await.unwrap();
    let never_sent = journal
        .begin(&Intent {
            profile: "command line".into(),
            account: account.name.clone(),
            endpoint: account.endpoint.clone(),
            table: f.table.clone(),
            partition_key: "p".into(),
            row_key: "r".into(),
            operation: WriteKind::Replace,
            condition: read.etag.clone(),
            before: Some(read.clone()),
            after: Some(after.clone()),
            sent: None,
            undo_of: None,
        })
        .unwrap();
    let out = f.run(&["journal", "undo", never_sent.as_str(), "--yes"], None);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing to undo"), "{err}");
    assert_same(&before, &f.current("p", "r").await.unwrap());

    // Neither the before- nor the after-image is there: a conflict, nothing written.
    let third = entity("p", "r", &[("V", EdmValue::Int32(3))]);
    f.client
        .update(t, &third, UpdateMode::Replace, &Condition::Force)
        .await
        .unwrap();
    let err = f
        .fails(&["journal", "undo", never_sent.as_str(), "--yes"], None, 4)
        .1;
    assert!(err.contains("conflict"), "{err}");
    assert_same(&third, &f.current("p", "r").await.unwrap());
}

#[tokio::test]
async fn read_only_refuses_undo_and_another_account_is_refused() {
    let f = Fixture::new("jro").await;
    let t = f.table.as_str();
    f.ok(
        &["insert", t, r#"{"PartitionKey":"p","RowKey":"r","N":1}"#],
        None,
    );
    let id = f.last().id;
    let count = f.entries().len();

    let (_, err) = f.fails(
        &["--read-only", "journal", "undo", id.as_str(), "--yes"],
        None,
        5,
    );
    assert!(err.contains("read-only"), "{err}");
    assert!(f.current("p", "r").await.is_some());
    assert_eq!(f.entries().len(), count);

    // Read-only writes are refused before any journal entry is made.
    f.fails(
        &[
            "--read-only",
            "insert",
            t,
            r#"{"PartitionKey":"p","RowKey":"x"}"#,
        ],
        None,
        5,
    );
    assert_eq!(f.entries().len(), count);

    let other = "DefaultEndpointsProtocol=http;AccountName=otheraccount;AccountKey=c2VjcmV0;TableEndpoint=http://127.0.0.1:9/otheraccount";
    let out = Command::new(env!("CARGO_BIN_EXE_tabletop"))
        .args([
            "--connection-string",
            other,
            "journal",
            "undo",
            id.as_str(),
            "--yes",
        ])
        .env(JOURNAL_ENV, &f.journal)
        .env("TABLETOP_CONFIG", "/nonexistent/tabletop-test-config.toml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("same account") && err.contains("otheraccount"),
        "{err}"
    );
    assert!(f.current("p", "r").await.is_some());
}

#[tokio::test]
async fn a_journal_that_cannot_be_opened_refuses_every_write() {
    let f = Fixture::new("jnone").await;
    let t = f.table.as_str();
    let blocker = f._dir.path().join("a-file");
    std::fs::write(&blocker, "x").unwrap();
    let out = run_with(
        &blocker.join("journal.jsonl"),
        &["insert", t, r#"{"PartitionKey":"p","RowKey":"r"}"#],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("without a journal") && err.contains(&blocker.display().to_string()),
        "{err}"
    );
    assert!(f.current("p", "r").await.is_none());
}
