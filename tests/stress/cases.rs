//! The partition stress test through the throttling proxy (`--throttle 500`) in front of
//! Azurite: the engine finds a knee near 500 entities/s, throttling rises past it, the table is
//! removed after a full run and after a cancel; and `tabletop stress` does the same from the CLI.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tabletop::azure::{Account, ClientOptions, TableClient, Telemetry};
use tabletop::proxy::{Proxy, ProxyConfig};
use tabletop::stress::{self, StopReason, StressConfig, StressEvent};
use tokio_util::sync::CancellationToken;

use crate::support;

const RATE: f64 = 500.0;

/// The runs take turns: on two cores, one would slow the other's writers.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn throttling_proxy() -> Proxy {
    Proxy::start(
        ProxyConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: format!("http://127.0.0.1:{}", support::azurite().port()),
            throttle: Some(RATE),
            account: None,
        },
        Telemetry::new(),
    )
    .await
    .expect("proxy starts")
}

fn client_through(proxy: &Proxy) -> TableClient {
    TableClient::new(
        Account::development_at(&proxy.table_endpoint()),
        ClientOptions::default(),
    )
    .expect("client")
}

async fn tables_with(client: &TableClient, prefix: &str) -> Vec<String> {
    client
        .list_tables()
        .await
        .expect("list tables")
        .into_iter()
        .filter(|t| t.starts_with(prefix))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_knee_is_found_near_the_throttle_and_the_table_removed() {
    let _turn = crate::ONE_AT_A_TIME.lock().await;
    let _turn = HEAVY.lock().await;
    let proxy = throttling_proxy().await;
    let client = client_through(&proxy);
    let prefix = "stressknee";
    let config = StressConfig {
        steps: vec![1, 2, 4, 8, 16, 32, 64],
        step_duration: Duration::from_secs(3),
        max_requests: 100_000,
        max_duration: Duration::from_secs(30),
        // Small entities keep Azurite and the debug-built proxy well above 500/s on two cores.
        entity_bytes: 128,
        table_prefix: prefix.into(),
        ..StressConfig::default()
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let report = stress::run(&client, config, tx, CancellationToken::new())
        .await
        .expect("stress runs");
    eprintln!("{report}");

    let knee = report.knee.clone().expect("a knee");
    let error = (knee.entities_per_s - RATE).abs() / RATE;
    assert!(
        error <= 0.15,
        "knee {:.0}/s is {:.0} % from {RATE}:\n{report}",
        knee.entities_per_s,
        error * 100.0
    );
    // Past the knee throttling rises over the threshold. That needs a machine that can offer
    // more than 500 writes/s through the debug-built proxy; say so plainly when it could not.
    let offered = report
        .steps
        .iter()
        .map(|s| s.attempts_per_s)
        .fold(0.0, f64::max);
    assert!(
        knee.limited,
        "no step went over the threshold; the most this machine offered was {offered:.0} requests/s \
         against a {RATE}/s throttle (too busy to saturate it?):\n{report}"
    );
    let at_knee = report
        .steps
        .iter()
        .find(|s| s.concurrency == knee.concurrency)
        .unwrap();
    assert!(at_knee.throttled_pct <= report.threshold_pct);
    let worst = report
        .steps
        .iter()
        .filter(|s| s.concurrency > knee.concurrency)
        .map(|s| s.throttled_pct)
        .fold(0.0, f64::max);
    assert!(worst > report.threshold_pct, "{report}");
    assert!(
        matches!(
            report.stopped,
            StopReason::OverThreshold | StopReason::AllSteps
        ),
        "{report}"
    );
    assert!(report.to_string().contains("knee: ~"));
    assert_eq!(report.cleanup_error, None);
    assert!(tables_with(&client, &report.table).await.is_empty());

    // Events: started, progress about four times a second, one per step, finished.
    let mut progress = 0;
    let mut steps = 0;
    let mut finished = false;
    while let Ok(e) = rx.try_recv() {
        match e {
            StressEvent::Progress(_) => progress += 1,
            StressEvent::Step(_) => steps += 1,
            StressEvent::Finished(r) => finished = r == report,
            _ => {}
        }
    }
    assert_eq!(steps, report.steps.len());
    assert!(
        progress >= report.steps.len() * 6,
        "{progress} progress events"
    );
    assert!(finished);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_removes_its_table() {
    let _turn = crate::ONE_AT_A_TIME.lock().await;
    let _turn = HEAVY.lock().await;
    let proxy = throttling_proxy().await;
    let client = client_through(&proxy);
    let config = StressConfig {
        steps: vec![4, 8],
        step_duration: Duration::from_secs(20),
        table_prefix: "stresscancel".into(),
        ..StressConfig::default()
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let client = client.clone();
        let cancel = cancel.clone();
        async move { stress::run(&client, config, tx, cancel).await }
    });
    // Cancel once the first step is under way and its table exists.
    let table = loop {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Some(StressEvent::Started { table, .. })) => break table,
            Ok(Some(_)) => {}
            other => panic!("no start: {other:?}"),
        }
    };
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(tables_with(&client, &table).await, vec![table.clone()]);
    let cancelled_at = Instant::now();
    cancel.cancel();
    let report = run.await.unwrap().expect("a cancelled run still reports");
    assert!(cancelled_at.elapsed() < Duration::from_secs(3));
    assert_eq!(report.stopped, StopReason::Cancelled);
    assert!(!report.steps[0].complete);
    assert!(report.knee.is_none());
    assert_eq!(report.cleanup_error, None);
    assert!(tables_with(&client, &table).await.is_empty());
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_refuses_before_creating_anything() {
    let _turn = crate::ONE_AT_A_TIME.lock().await;
    let client = TableClient::new(
        Account::from_connection_string(&support::azurite().connection_string()).unwrap(),
        ClientOptions {
            read_only: true,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let config = StressConfig {
        table_prefix: "stressreadonly".into(),
        ..StressConfig::default()
    };
    let err = stress::run(&client, config, tx, CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, stress::StressError::ReadOnly), "{err}");
    assert!(tables_with(&client, "stressreadonly").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_prints_each_step_and_the_knee() {
    let _turn = crate::ONE_AT_A_TIME.lock().await;
    let _turn = HEAVY.lock().await;
    let proxy = throttling_proxy().await;
    let cs = format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={};TableEndpoint={}",
        tabletop::azure::connection::DEV_KEY,
        proxy.table_endpoint()
    );
    let child = Command::new(env!("CARGO_BIN_EXE_tabletop"))
        .args([
            "--connection-string",
            &cs,
            "stress",
            // The same steps as the engine test: coarser steps make the knee estimate coarse.
            "--steps",
            "1,2,4,8,16,32,64",
            "--step-secs",
            "3",
            "--max-requests",
            "50000",
            "--entity-bytes",
            "128",
        ])
        .env_remove("AZURE_STORAGE_CONNECTION_STRING")
        .env("TABLETOP_CONFIG", "/nonexistent/tabletop-test-config.toml")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tabletop");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("concurrency  ok entities/s"), "{stdout}");
    let knee = stdout
        .lines()
        .find(|l| l.starts_with("knee: ~"))
        .unwrap_or_else(|| panic!("no knee line:\n{stdout}"));
    let rate: f64 = knee["knee: ~".len()..]
        .split(' ')
        .next()
        .unwrap()
        .replace(',', "")
        .parse()
        .unwrap();
    assert!((rate - RATE).abs() / RATE <= 0.15, "{knee}");
    assert!(stdout.contains("table removed"), "{stdout}");
    let table = stdout
        .lines()
        .find_map(|l| l.strip_prefix("partition stress on "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no table name:\n{stdout}"))
        .to_string();
    let client = client_through(&proxy);
    assert!(tables_with(&client, &table).await.is_empty());
    proxy.stop().await;
}
