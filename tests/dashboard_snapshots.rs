//! The dashboard as drawn from fixture traffic: a hot partition throttled at its limit, an
//! append-only writer, scans and a quiet tenant; plus the empty state and the keys.

#[path = "console_common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tabletop::azure::{AttemptRecord, Operation, PartitionRef};
use tabletop::config::Targets;
use tabletop::console::dashboard::{Dashboard, DashboardAction};
use tabletop::metrics::{Hub, RankBy};

const NOW: u64 = 1_790_000_000;

fn at(sec: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(sec)
}

fn rec(sec: u64, table: &str, pk: Option<&str>, op: Operation, status: u16) -> AttemptRecord {
    AttemptRecord {
        time: at(sec),
        account: Arc::from("devstoreaccount1"),
        table: Some(Arc::from(table)),
        operation: op,
        partition: pk.map_or(PartitionRef::Scan, |k| PartitionRef::Key(k.to_string())),
        entity_count: 1,
        status: Some(status),
        error_code: (status == 503).then(|| "ServerBusy".to_string()),
        attempt: 1,
        latency: Duration::from_millis(4 + sec % 7),
        bytes_sent: 200,
        bytes_received: 100,
        timed_out: false,
    }
}

fn fixture_hub() -> Arc<Hub> {
    let targets = Targets {
        partition_entities_per_s: 100,
        account_entities_per_s: 2_000,
    };
    let hub = Arc::new(Hub::new(targets, || at(NOW + 1)));
    for s in 0..60 {
        let sec = NOW - 59 + s;
        for _ in 0..98 {
            hub.record(&rec(
                sec,
                "AppTraffic",
                Some("tenant-hot"),
                Operation::InsertOrReplace,
                204,
            ));
        }
        for _ in 0..40 {
            hub.record(&rec(
                sec,
                "AppTraffic",
                Some("tenant-hot"),
                Operation::InsertOrReplace,
                503,
            ));
        }
        for k in 0..25 {
            hub.record(&rec(
                sec,
                "AppEvents",
                Some(&format!("log-{sec}-{k:02}")),
                Operation::InsertEntity,
                204,
            ));
        }
        hub.record(&rec(
            sec,
            "AppTraffic",
            Some(&format!("tenant-{:03}", s % 7)),
            Operation::InsertOrMerge,
            204,
        ));
        if s % 5 == 0 {
            let mut scan = rec(sec, "AppTraffic", None, Operation::QueryEntities, 200);
            scan.entity_count = 100;
            hub.record(&scan);
        }
    }
    hub
}

fn dashboard(hub: Arc<Hub>) -> Dashboard {
    let mut d = Dashboard::new(hub.clone(), "fixture traffic");
    d.snapshot = Some(hub.snapshot_by(Duration::from_secs(60), at(NOW), RankBy::Entities));
    d
}

fn render(d: &Dashboard, w: u16, h: u16) -> ratatui::Terminal<ratatui::backend::TestBackend> {
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    let theme = tabletop::console::theme::load("dark", None, false).0;
    t.draw(|f| tabletop::console::dashboard::draw(f, &theme, d, f.area(), true))
        .unwrap();
    t
}

#[test]
fn the_dashboard_shows_the_account_the_top_partitions_and_the_seeds_warnings() {
    let d = dashboard(fixture_hub());
    for (w, h) in [(80, 24), (160, 48)] {
        insta::assert_snapshot!(
            format!("dashboard_traffic_{w}x{h}"),
            render(&d, w, h).backend()
        );
    }
    let snap = d.snapshot.as_ref().unwrap();
    assert_eq!(snap.partitions[0].partition_key, "tenant-hot");
    let kinds: Vec<_> = snap
        .warnings
        .iter()
        .map(|w| format!("{:?}", w.kind))
        .collect();
    for expected in ["HotPartition", "AppendOnly", "TableScan"] {
        assert!(
            kinds.iter().any(|k| k == expected),
            "{expected} missing from {kinds:?}"
        );
    }
}

#[test]
fn the_dashboard_without_traffic_says_where_traffic_comes_from() {
    let hub = Arc::new(Hub::new(Targets::default(), || at(NOW)));
    let d = dashboard(hub);
    insta::assert_snapshot!("dashboard_empty_80x24", render(&d, 80, 24).backend());
}

#[test]
fn sort_pause_window_and_export_keys() {
    let mut d = dashboard(fixture_hub());
    let key = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
    d.handle_key(&key('s'));
    assert_eq!(d.rank_by, RankBy::Throttled);
    d.handle_key(&key('w'));
    assert_eq!(d.window, Duration::from_secs(300));
    assert!(matches!(
        d.handle_key(&key(' ')),
        DashboardAction::Message(_)
    ));
    assert!(d.paused);
    let frozen = d.snapshot.clone();
    d.refresh();
    assert_eq!(d.snapshot, frozen, "a paused dashboard keeps its view");
    match d.handle_key(&key('X')) {
        DashboardAction::Export {
            file_name,
            contents,
        } => {
            assert!(file_name.ends_with(".csv"));
            assert!(contents.starts_with("kind,"), "{}", &contents[..40]);
        }
        other => panic!("{other:?}"),
    }
    match d.handle_key(&key('x')) {
        DashboardAction::Export {
            file_name,
            contents,
        } => {
            assert!(file_name.ends_with(".json"));
            assert!(contents.contains("\"partitions\""));
        }
        other => panic!("{other:?}"),
    }
}
