//! The `tabletop` binary's scriptable commands against the emulator.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::support;

/// A journal file of this test binary's own, so no test touches the user's journal.
fn test_journal() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir"))
        .path()
}

fn binary() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tabletop"));
    cmd.env(
        tabletop::journal::JOURNAL_ENV,
        test_journal().join("journal.jsonl"),
    );
    cmd
}

fn tabletop(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = binary();
    cmd.args([
        "--connection-string",
        &support::azurite().connection_string(),
    ])
    .args(args)
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

fn ok(args: &[&str], stdin: Option<&str>) -> String {
    let out = tabletop(args, stdin);
    assert!(
        out.status.success(),
        "tabletop {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str], stdin: Option<&str>, code: i32) -> String {
    let out = tabletop(args, stdin);
    assert_eq!(
        out.status.code(),
        Some(code),
        "tabletop {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn a_line_from_get_feeds_replace_unchanged_and_a_stale_one_is_refused() {
    let t = support::unique_table("cli");
    ok(&["tables", "create", &t], None);
    assert!(ok(&["tables"], None).lines().any(|l| l == t));
    ok(
        &[
            "insert",
            &t,
            r#"{"PartitionKey":"p","RowKey":"r","Big@odata.type":"Edm.Int64","Big":"9007199254740993","Code":"0152"}"#,
        ],
        None,
    );

    let line = ok(&["get", &t, "p", "r"], None);
    assert!(
        line.contains(r#""Big@odata.type":"Edm.Int64","Big":"9007199254740993""#),
        "{line}"
    );
    assert!(
        line.contains(r#""Code":"0152""#) && line.contains("odata.etag"),
        "{line}"
    );

    let edited = line.replace("0152", "0153");
    let written = ok(&["replace", &t, "-"], Some(&edited));
    assert!(written.contains("odata.etag"), "{written}");
    // The same stale line again: the ETag changed, so it must be refused, not applied.
    let err = fails(&["replace", &t, "-"], Some(&line), 4);
    assert!(
        err.contains("changed the entity") && err.contains("tabletop get"),
        "{err}"
    );
    assert!(ok(&["get", &t, "p", "r"], None).contains("0153"));

    // Without an ETag, replace and merge refuse and say why; --force goes through.
    let bare = r#"{"PartitionKey":"p","RowKey":"r","Code":"x"}"#;
    let err = fails(&["merge", &t, bare], None, 2);
    assert!(
        err.contains("odata.etag") && err.contains("--force"),
        "{err}"
    );
    ok(&["merge", &t, bare, "--force"], None);
    assert!(ok(&["get", &t, "p", "r"], None).contains(r#""Code":"x""#));

    let err = fails(&["delete", &t, "p", "r"], None, 2);
    assert!(err.contains("--if-match"), "{err}");
    ok(&["delete", &t, "p", "r", "--force"], None);
    fails(&["get", &t, "p", "r"], None, 3);

    let err = fails(&["tables", "delete", &t], None, 2);
    assert!(err.contains("--yes"), "{err}");
    ok(&["tables", "delete", &t, "--yes"], None);
}

#[test]
fn query_prints_jsonl_csv_and_tables_with_top_across_pages() {
    let t = support::unique_table("cliq");
    ok(&["tables", "create", &t], None);
    let lines: String = (0..25)
        .map(|i| format!("{{\"PartitionKey\":\"p\",\"RowKey\":\"{i:02}\",\"N\":{i},\"When@odata.type\":\"Edm.DateTime\",\"When\":\"2024-01-01T00:00:00.1234567Z\"}}\n"))
        .collect();
    ok(&["insert", &t, "-"], Some(&lines));

    let out = ok(&["query", &t, "--top", "12", "--page-size", "5"], None);
    assert_eq!(out.lines().count(), 12);
    let out = ok(&["query", &t, "--filter", "N ge 20", "--select", "N"], None);
    assert_eq!(out.lines().count(), 5);
    assert!(!out.contains("When"), "{out}");

    let csv = ok(&["query", &t, "--format", "csv", "--top", "2"], None);
    let mut rows = csv.lines();
    assert_eq!(
        rows.next(),
        Some("PartitionKey,RowKey,Timestamp,N,N@type,When,When@type")
    );
    assert!(rows
        .next()
        .unwrap()
        .ends_with(",0,Edm.Int32,2024-01-01T00:00:00.1234567Z,Edm.DateTime"));

    let table = ok(&["query", &t, "--format", "table", "--top", "3"], None);
    assert!(
        table.lines().next().unwrap().contains("When:DateTime"),
        "{table}"
    );
    assert_eq!(table.lines().count(), 4);

    let err = fails(&["query", &t, "--filter", "N == 5"], None, 2);
    assert!(err.contains("eq"), "{err}");
    ok(&["tables", "delete", &t, "--yes"], None);
}

#[test]
fn read_only_refuses_writes_and_exits_5() {
    let err = fails(
        &["--read-only", "tables", "create", "NeverCreated"],
        None,
        5,
    );
    assert!(err.contains("read-only"), "{err}");
    assert!(!ok(&["tables"], None).lines().any(|l| l == "NeverCreated"));
}

#[test]
fn bad_connection_strings_name_the_part_and_hide_the_key() {
    let out = binary()
        .args([
            "--connection-string",
            "AccountName=acct;AccountKey=SECRETKEYVALUE!!",
            "tables",
        ])
        .env("TABLETOP_CONFIG", "/nonexistent/tabletop-test-config.toml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("AccountKey") && err.contains("Base64"),
        "{err}"
    );
    assert!(!err.contains("SECRETKEYVALUE"), "{err}");
}

#[test]
fn a_wrong_key_is_reported_without_echoing_it() {
    let wrong = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=d3Jvbmcga2V5IHdyb25nIGtleQ==;TableEndpoint=";
    let cs = format!("{wrong}{}", support::azurite().table_endpoint());
    let out = binary()
        .args(["--connection-string", &cs, "tables"])
        .env("TABLETOP_CONFIG", "/nonexistent/tabletop-test-config.toml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rejected the signature"), "{err}");
    assert!(!err.contains("d3Jvbmcga2V5"), "{err}");
}

#[test]
fn a_rejected_primary_key_says_whether_the_secondary_key_works() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[profiles.rotated]\naccount = \"devstoreaccount1\"\nendpoint = \"{}\"\nkey_env = \"TABLETOP_TEST_OLD_KEY\"\nsecondary_key_env = \"TABLETOP_TEST_NEW_KEY\"\n",
            support::azurite().table_endpoint()
        ),
    )
    .unwrap();
    let out = binary()
        .args([
            "--config",
            config.to_str().unwrap(),
            "--profile",
            "rotated",
            "tables",
        ])
        .env("TABLETOP_TEST_OLD_KEY", "d3Jvbmcga2V5IHdyb25nIGtleQ==")
        .env(
            "TABLETOP_TEST_NEW_KEY",
            tabletop::azure::connection::DEV_KEY,
        )
        .env_remove("AZURE_STORAGE_CONNECTION_STRING")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("secondary key works"), "{err}");
    assert!(!err.contains("Eby8") && !err.contains("d3Jvbmcg"), "{err}");
}
