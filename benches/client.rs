//! Protocol client benchmark against a real Azurite (issue: scan 20,000 ~1 KiB entities, point
//! read 5,000 at concurrency 16), compared with a near-zero-cost client that signs and sends the
//! same requests but never parses a body: its throughput is the emulator's own limit.
//!
//! Run: `cargo bench --bench client` (ENTITIES=… GETS=… ROUNDS=… to change the sizes).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tabletop::azure::{
    auth, edm, Account, ClientOptions, EdmValue, Entity, QuerySpec, SigningScheme, TableClient,
};
use tabletop::emulator::Emulator;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// User + system CPU time of this process.
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn entity(i: usize) -> Entity {
    // ~1 KiB on the wire: a few typed columns and a 900-character payload.
    Entity::new(format!("p{:03}", i % 100), format!("r{i:08}"))
        .with("Amount", EdmValue::Int64(i as i64 * 1_000_003))
        .with("Ratio", EdmValue::Double(i as f64 / 7.0))
        .with(
            "When",
            EdmValue::DateTime(edm::DateTime::from_ticks(
                638_000_000_000_000_000 + i as i64,
            )),
        )
        .with("Active", EdmValue::Boolean(i % 2 == 0))
        .with("Payload", EdmValue::String("x".repeat(900)))
}

/// The same signed GET the client sends, with no parsing beyond headers.
struct RawClient {
    http: reqwest::Client,
    account: Account,
}

impl RawClient {
    fn request(&self, path_and_query: &str) -> reqwest::RequestBuilder {
        let url = reqwest::Url::parse(&format!("{}{}", self.account.endpoint, path_and_query))
            .expect("url");
        let date = edm::rfc1123(edm::DateTime::now().unix_seconds());
        let tabletop::azure::connection::Credential::SharedKey { key, .. } =
            &self.account.credential
        else {
            panic!("bench needs a shared key");
        };
        let resource = auth::canonicalized_resource(&self.account.name, url.path(), url.query());
        let authz = auth::authorization(
            SigningScheme::SharedKey,
            &self.account.name,
            key,
            "GET",
            "",
            &date,
            &resource,
        );
        self.http
            .get(url)
            .header("x-ms-date", date)
            .header("x-ms-version", "2019-02-02")
            .header("Accept", "application/json;odata=minimalmetadata")
            .header("DataServiceVersion", "3.0;NetFx")
            .header("Authorization", authz)
    }

    async fn scan(&self, table: &str) -> usize {
        let mut bytes = 0;
        let mut token: Option<(String, Option<String>)> = None;
        loop {
            let mut path = format!("/{table}()?$top=1000");
            if let Some((pk, rk)) = &token {
                path.push_str(&format!("&NextPartitionKey={}", urlencode(pk)));
                if let Some(rk) = rk {
                    path.push_str(&format!("&NextRowKey={}", urlencode(rk)));
                }
            }
            let resp = self.request(&path).send().await.expect("raw scan");
            let h = |n: &str| {
                resp.headers()
                    .get(n)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let next = h("x-ms-continuation-nextpartitionkey")
                .map(|pk| (pk, h("x-ms-continuation-nextrowkey")));
            bytes += resp.bytes().await.expect("body").len();
            match next {
                Some(t) => token = Some(t),
                None => return bytes,
            }
        }
    }
}

fn urlencode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

struct Measure {
    wall: Duration,
    cpu: Duration,
}

async fn measure<F: std::future::Future<Output = ()>>(f: F) -> Measure {
    let (c0, t0) = (cpu_time(), Instant::now());
    f.await;
    Measure {
        wall: t0.elapsed(),
        cpu: cpu_time() - c0,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let entities = env_usize("ENTITIES", 20_000);
    let gets = env_usize("GETS", 5_000);
    let rounds = env_usize("ROUNDS", 5);
    let concurrency = 16;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let emulator = Emulator::start(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{e}"));
    let account = Account::from_connection_string(&emulator.connection_string()).expect("account");
    let client = TableClient::new(account.clone(), ClientOptions::default()).expect("client");
    let raw = RawClient {
        http: reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(4))
            .build()
            .expect("http"),
        account,
    };
    let table = "BenchScan";

    runtime.block_on(async {
        client.create_table(table).await.expect("create");
        let t0 = Instant::now();
        let next = Arc::new(AtomicUsize::new(0));
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let (c, next) = (client.clone(), next.clone());
            set.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= entities {
                        break;
                    }
                    c.insert(table, &entity(i)).await.expect("insert");
                }
            });
        }
        while set.join_next().await.is_some() {}
        println!("loaded {entities} entities (~1 KiB each) in {:.1} s", t0.elapsed().as_secs_f64());

        let sample = entity(1).to_request_json().len();
        println!("entity body size: {sample} bytes");

        let (mut ours_rate, mut ours_cpu, mut base_rate, mut base_cpu) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            let mut seen = 0;
            let m = measure(async {
                let mut s = client.query_stream(table, QuerySpec { page_size: Some(1000), ..QuerySpec::default() }, None, None);
                while let Some(p) = s.next_page().await {
                    seen += p.expect("page").entities.len();
                }
            })
            .await;
            assert_eq!(seen, entities);
            ours_rate.push(entities as f64 / m.wall.as_secs_f64());
            ours_cpu.push(m.cpu.as_secs_f64() * 1e6 / entities as f64);
            let m = measure(async {
                raw.scan(table).await;
            })
            .await;
            base_rate.push(entities as f64 / m.wall.as_secs_f64());
            base_cpu.push(m.cpu.as_secs_f64() * 1e6 / entities as f64);
        }
        let (o, b) = (median(ours_rate), median(base_rate));
        println!(
            "scan  tabletop: {o:>8.0} entities/s, client CPU {:.2} µs/entity | no-parse baseline: {b:>8.0} entities/s, {:.2} µs/entity | ratio {:.1} %",
            median(ours_cpu),
            median(base_cpu),
            100.0 * o / b
        );

        let (mut ours_gets, mut base_gets, mut get_cpu, mut base_get_cpu) = (vec![], vec![], vec![], vec![]);
        for _ in 0..rounds {
            let m = measure(point_reads(gets, concurrency, entities, {
                let c = client.clone();
                move |i| {
                    let c = c.clone();
                    async move {
                        let e = entity(i);
                        c.get_entity(table, &e.partition_key, &e.row_key).await.expect("get");
                    }
                }
            }))
            .await;
            ours_gets.push(gets as f64 / m.wall.as_secs_f64());
            get_cpu.push(m.cpu.as_secs_f64() * 1e6 / gets as f64);
            let raw = Arc::new(RawClient {
                http: raw.http.clone(),
                account: raw.account.clone(),
            });
            let m = measure(point_reads(gets, concurrency, entities, move |i| {
                let raw = raw.clone();
                async move {
                    let e = entity(i);
                    let path = tabletop::azure::client::entity_path(table, &e.partition_key, &e.row_key);
                    let r = raw.request(&path).send().await.expect("raw get");
                    assert!(r.status().is_success());
                    r.bytes().await.expect("body");
                }
            }))
            .await;
            base_gets.push(gets as f64 / m.wall.as_secs_f64());
            base_get_cpu.push(m.cpu.as_secs_f64() * 1e6 / gets as f64);
        }
        let (o, b) = (median(ours_gets), median(base_gets));
        println!(
            "gets  tabletop: {o:>8.0} ops/s (concurrency {concurrency}), client CPU {:.1} µs/op | no-parse baseline: {b:>8.0} ops/s, {:.1} µs/op | ratio {:.1} %",
            median(get_cpu),
            median(base_get_cpu),
            100.0 * o / b
        );
    });
    emulator.stop();
}

async fn point_reads<F, Fut>(gets: usize, concurrency: usize, entities: usize, op: F)
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (next, op) = (next.clone(), op.clone());
        set.spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= gets {
                    break;
                }
                // Spread reads over the table deterministically.
                op((n * 7919) % entities).await;
            }
        });
    }
    while set.join_next().await.is_some() {}
}
