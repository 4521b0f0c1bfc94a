//! `tabletop demo`'s data side: starting the per-user Azurite and filling it with deterministic,
//! production-looking sample tables modelled on the seeds (Movies by category, the marathon's
//! two-rows-per-runner registrations, component logs with reverse-tick keys), plus the key
//! builders those tables use.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::azure::{
    Account, BatchOp, ClientOptions, DateTime, EdmValue, Entity, TableClient, TableError,
    ValidationError,
};
use crate::emulator::{self, Emulator, EmulatorError};

/// The sample tables, in load order.
pub const SAMPLE_TABLES: &[&str] = &[
    "Movies",
    "Marathon",
    "ComponentLogs",
    "DeviceTelemetry",
    "Empty",
];

/// Inserts in flight at once: enough to keep Azurite busy (~2,000 inserts/s) without queueing.
const IN_FLIGHT: usize = 16;
/// Minimum gap between two progress lines for the same table.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// Every generator derives its stream from this, so every load writes the same data.
const SEED: u64 = 0x7AB1_E70B;
/// `DateTime.MaxValue.Ticks` in .NET (9999-12-31T23:59:59.9999999Z), the base of reverse ticks.
pub const MAX_TICKS: i64 = 3_155_378_975_999_999_999;
const TICKS_PER_SECOND: i64 = 10_000_000;
/// 2026-03-02T00:00:00Z: the log window ends here (fixed, not "now", so loads are identical).
const LOG_WINDOW_END_UNIX: i64 = 1_772_409_600;
/// 2025-11-01T00:00:00Z: marathon registration opens.
const REGISTRATION_OPENS_UNIX: i64 = 1_761_955_200;
const MARATHON_FULL: &str = "2026 City Marathon__Full";
const MARATHON_HALF: &str = "2026 City Marathon__Half";
const COMPONENT_LOG_COUNT: usize = 5_400;

/// A running demo emulator, already holding the sample data.
#[derive(Debug)]
pub struct DemoEnv {
    pub emulator: Emulator,
    pub connection_string: String,
}

/// What a load did: tables created and filled (name, entity count), and tables left alone
/// because they already existed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampleSummary {
    pub tables: Vec<(String, usize)>,
    pub skipped: Vec<String>,
}

/// One sample table and its rows, before loading.
#[derive(Clone, Debug)]
pub struct SampleTable {
    pub name: &'static str,
    pub entities: Vec<Entity>,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot find a per-user cache directory for the demo emulator (is HOME set?)")]
    NoInstallDir,
    #[error("cannot start the demo emulator: {0}")]
    Emulator(#[source] EmulatorError),
    #[error("the demo emulator's connection string is invalid: {0}")]
    Client(#[source] TableError),
    #[error("sample table prefix '{prefix}': {source}")]
    BadPrefix {
        prefix: String,
        #[source]
        source: ValidationError,
    },
    #[error("loading sample table {table}: {step}: {source}")]
    Table {
        table: String,
        step: String,
        #[source]
        source: TableError,
    },
    #[error("loading sample table {table}: an insert task failed: {message}")]
    Task { table: String, message: String },
}

/// Starts Azurite from the per-user install dir (installing the pinned version with npm when it
/// is not there: `emulator::user_install_dir()`), and loads the sample data. `progress`
/// receives short human lines which the caller prints on stderr before the console opens.
pub async fn prepare(progress: &mut (dyn FnMut(&str) + Send)) -> Result<DemoEnv, DemoError> {
    let dir = emulator::user_install_dir().ok_or(DemoError::NoInstallDir)?;
    if emulator::is_installed(&dir) {
        progress("starting the Azurite emulator…");
    } else {
        progress("installing the Azurite emulator (first run, ~30 s)…");
    }
    // Installing and waiting for readiness block for seconds; keep the runtime's threads free.
    let emulator = tokio::task::spawn_blocking(move || Emulator::start(&dir))
        .await
        .map_err(|e| {
            DemoError::Emulator(EmulatorError::Io {
                what: "the emulator start-up task failed".into(),
                source: std::io::Error::other(e.to_string()),
            })
        })?
        .map_err(DemoError::Emulator)?;
    let connection_string = emulator.connection_string();
    let account = Account::from_connection_string(&connection_string)
        .map_err(|e| DemoError::Client(e.into()))?;
    let client = TableClient::new(account, ClientOptions::default()).map_err(DemoError::Client)?;
    let started = Instant::now();
    let summary = load_sample_data(&client, progress).await?;
    let total: usize = summary.tables.iter().map(|(_, n)| n).sum();
    progress(&format!(
        "sample data ready: {} tables, {total} entities in {:.1} s",
        summary.tables.len(),
        started.elapsed().as_secs_f64()
    ));
    Ok(DemoEnv {
        emulator,
        connection_string,
    })
}

/// Creates and fills the sample tables through `client` (usable against any account).
pub async fn load_sample_data(
    client: &TableClient,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<SampleSummary, DemoError> {
    load_sample_data_with_prefix(client, "", progress).await
}

/// As `load_sample_data`, with every table name prefixed (tests share one emulator). A table
/// that already exists is skipped with a progress note, never touched.
pub async fn load_sample_data_with_prefix(
    client: &TableClient,
    prefix: &str,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<SampleSummary, DemoError> {
    // Check every name first so a bad prefix fails before anything is created.
    for name in SAMPLE_TABLES {
        crate::azure::validate::table_name(&format!("{prefix}{name}")).map_err(|source| {
            DemoError::BadPrefix {
                prefix: prefix.to_string(),
                source,
            }
        })?;
    }
    let mut summary = SampleSummary::default();
    for table in sample_tables() {
        let name = format!("{prefix}{}", table.name);
        match client.create_table(&name).await {
            Ok(()) => {}
            Err(e) if e.code() == Some("TableAlreadyExists") => {
                progress(&format!("{name} already exists; leaving it as it is"));
                summary.skipped.push(name);
                continue;
            }
            Err(source) => {
                return Err(DemoError::Table {
                    table: name,
                    step: "creating the table".into(),
                    source,
                })
            }
        }
        let count = table.entities.len();
        insert_all(client, &name, table.entities, progress).await?;
        summary.tables.push((name, count));
    }
    Ok(summary)
}

/// Inserts in batches of up to 100 per partition (entity group transactions), `IN_FLIGHT`
/// batches at a time; the first failure stops the load.
async fn insert_all(
    client: &TableClient,
    table: &str,
    entities: Vec<Entity>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<(), DemoError> {
    let total = entities.len();
    if total == 0 {
        progress(&format!("created {table} (no entities)"));
        return Ok(());
    }
    let mut by_partition: std::collections::BTreeMap<String, Vec<BatchOp>> =
        std::collections::BTreeMap::new();
    for e in entities {
        by_partition
            .entry(e.partition_key.clone())
            .or_default()
            .push(BatchOp::Insert(e));
    }
    let mut chunks: Vec<Vec<BatchOp>> = Vec::new();
    for (_, mut ops) in by_partition {
        while !ops.is_empty() {
            let rest = ops.split_off(ops.len().min(crate::azure::batch::MAX_BATCH_OPERATIONS));
            chunks.push(std::mem::replace(&mut ops, rest));
        }
    }
    let mut pending = chunks.into_iter();
    let mut running = JoinSet::new();
    let mut done = 0usize;
    let mut last_report = Instant::now();
    loop {
        while running.len() < IN_FLIGHT {
            let Some(chunk) = pending.next() else { break };
            let client = client.clone();
            let table = table.to_string();
            running.spawn(async move {
                let n = chunk.len();
                match client.submit_batch(&table, &chunk).await {
                    Ok(_) => Ok(n),
                    Err(e) => Err((chunk[0].keys().0.to_string(), n, e)),
                }
            });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        match joined {
            Ok(Ok(n)) => done += n,
            Ok(Err((pk, n, source))) => {
                return Err(DemoError::Table {
                    table: table.to_string(),
                    step: format!("inserting a batch of {n} into partition '{pk}'"),
                    source,
                })
            }
            Err(e) => {
                return Err(DemoError::Task {
                    table: table.to_string(),
                    message: e.to_string(),
                })
            }
        }
        if last_report.elapsed() >= PROGRESS_EVERY && done < total {
            progress(&format!("loading {table} {done}/{total}"));
            last_report = Instant::now();
        }
    }
    progress(&format!("loading {table} {done}/{total}"));
    Ok(())
}

/// Every sample table with its rows, in `SAMPLE_TABLES` order; pure and deterministic.
pub fn sample_tables() -> Vec<SampleTable> {
    vec![
        SampleTable {
            name: "Movies",
            entities: movies(),
        },
        SampleTable {
            name: "Marathon",
            entities: marathon(),
        },
        SampleTable {
            name: "ComponentLogs",
            entities: component_logs(),
        },
        SampleTable {
            name: "DeviceTelemetry",
            entities: device_telemetry(),
        },
        SampleTable {
            name: "Empty",
            entities: Vec::new(),
        },
    ]
}

// ---- key builders ---------------------------------------------------------------------------

/// `{MAX_TICKS - ticks:019}_{9999 - seq:04}`: an ascending scan returns the newest entry first.
pub fn log_row_key(at: DateTime, seq: u32) -> String {
    let reverse = MAX_TICKS.saturating_sub(at.ticks()).max(0);
    format!("{reverse:019}_{:04}", 9_999 - seq % 10_000)
}

/// `ComponentName;InstanceId;Bucket`, the seeds' third partitioning option.
pub fn log_partition_key(component: &str, instance: u32, bucket: u32) -> String {
    format!("{component};i-{instance:02};{bucket:02}")
}

/// The seeds' bib-lookup row: `BIB:01234__John__M__55`.
pub fn marathon_bib_key(bib: u32, first_name: &str, gender: &str, age: i32) -> String {
    format!("BIB:{bib:05}__{first_name}__{gender}__{age}")
}

/// The seeds' age-lookup row: `AGE:055__1234__John__M`.
pub fn marathon_age_key(bib: u32, first_name: &str, gender: &str, age: i32) -> String {
    format!("AGE:{age:03}__{bib}__{first_name}__{gender}")
}

// ---- generators -----------------------------------------------------------------------------

fn rng_for(table: &str) -> fastrand::Rng {
    // Each table gets its own stream so changing one generator leaves the others' data alone.
    let salt = table
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    fastrand::Rng::with_seed(SEED ^ salt)
}

fn pick<'a>(rng: &mut fastrand::Rng, items: &[&'a str]) -> &'a str {
    items
        .get(rng.usize(..items.len().max(1)))
        .copied()
        .unwrap_or("")
}

fn guid(rng: &mut fastrand::Rng) -> EdmValue {
    EdmValue::Guid(uuid::Builder::from_random_bytes(rng.u128(..).to_le_bytes()).into_uuid())
}

fn from_unix(seconds: i64, sub_ticks: i64) -> DateTime {
    DateTime::from_unix_nanos(i128::from(seconds) * 1_000_000_000 + i128::from(sub_ticks) * 100)
}

/// Seconds from 1970-01-01 to January 1st of `year` (proleptic Gregorian).
fn year_start_unix(year: i64) -> i64 {
    let leaps_before = |y: i64| (y - 1) / 4 - (y - 1) / 100 + (y - 1) / 400;
    (365 * (year - 1970) + leaps_before(year) - leaps_before(1970)) * 86_400
}

/// A random instant with a full 7-digit fraction, as a .NET `DateTime.UtcNow` would write it.
fn instant_between(rng: &mut fastrand::Rng, from_unix_s: i64, to_unix_s: i64) -> DateTime {
    from_unix(
        rng.i64(from_unix_s..to_unix_s.max(from_unix_s + 1)),
        rng.i64(1..TICKS_PER_SECOND),
    )
}

const CATEGORIES: &[&str] = &[
    "Action",
    "Animation",
    "Comedy",
    "Documentary",
    "Drama",
    "Horror",
    "Romance",
    "SciFi",
    "Thriller",
];

const ADJECTIVES: &[&str] = &[
    "Silent", "Crimson", "Broken", "Last", "Hidden", "Electric", "Golden", "Midnight", "Frozen",
    "Savage", "Distant", "Burning", "Quiet", "Wild", "Hollow", "Iron", "Velvet", "Paper", "Glass",
    "Neon", "Lonely", "Restless", "Secret", "Northern",
];

const NOUNS: &[&str] = &[
    "Harbor",
    "Kingdom",
    "Protocol",
    "River",
    "Signal",
    "Orchard",
    "Horizon",
    "Frontier",
    "Witness",
    "Empire",
    "Garden",
    "Circuit",
    "Lantern",
    "Summer",
    "Mirror",
    "Voyage",
    "Engine",
    "Compass",
    "Tide",
    "Echo",
    "Lighthouse",
    "Parade",
    "Winter",
    "Alibi",
];

const PLACES: &[&str] = &[
    "Lisbon",
    "Tangier",
    "Oslo",
    "Nairobi",
    "Kyoto",
    "Montevideo",
    "Reykjavík",
    "Kraków",
    "Brooklyn",
    "Marseille",
];

const FIRST_NAMES_M: &[&str] = &[
    "John", "José", "Liam", "Søren", "Mateo", "Kenji", "Omar", "Lukas", "Arjun", "Noah", "Pieter",
    "Tomás", "Wei", "Dmitri", "Kwame", "Olivier",
];

const FIRST_NAMES_F: &[&str] = &[
    "Maria", "Zoë", "Aisha", "Hannah", "Chloé", "Ngọc", "Sofia", "Ingrid", "Priya", "Yuki",
    "Amara", "Elena", "Fatima", "Grace", "Lucía", "Mei",
];

const LAST_NAMES: &[&str] = &[
    "Smith",
    "García",
    "Okafor",
    "Jensen",
    "Nakamura",
    "Novak",
    "O'Connor",
    "Müller",
    "Silva",
    "Kowalski",
    "Haddad",
    "Nguyen",
    "Patel",
    "Rossi",
    "van der Berg",
    "Andersson",
];

const TAGLINES: &[&str] = &[
    "Some doors should stay closed.",
    "The truth was never the point.",
    "One summer changed everything.",
    "Nobody walks away clean.",
    "Based on a true story. Mostly.",
    "The last signal before the silence.",
    "Every empire falls from within.",
    "Love is a long-distance sport.",
    "They came for the gold. They stayed for the revenge.",
    "You can't outrun the tide.",
];

/// Hand-written rows that exercise the console: awkward keys, missing and odd values.
/// (category, title, year, rating, tagline) — `None` means the property is absent.
type Special = (
    &'static str,
    &'static str,
    i32,
    Option<f64>,
    Option<&'static str>,
);

const SPECIAL_MOVIES: &[Special] = &[
    // The seeds' own examples.
    ("Action", "Cop Out", 2010, Some(4.5), None),
    (
        "Action",
        "White Water Rapids Survival",
        2011,
        Some(3.0),
        Some("The river decides."),
    ),
    // Apostrophes must be doubled in keys and filters.
    (
        "Drama",
        "The Keeper's Daughter",
        2019,
        Some(4.0),
        Some("She kept the light burning for thirty years."),
    ),
    (
        "Comedy",
        "O'Brien's Last Stand, Part 2",
        2016,
        Some(2.5),
        Some(""),
    ),
    // '%' in a key is percent-encoded in paths and needs care.
    (
        "Comedy",
        "99% Chance of Rain",
        2021,
        Some(3.5),
        Some("Bring an umbrella."),
    ),
    // Spaces and commas.
    (
        "Documentary",
        "Salt, Sand, and Silicon",
        2023,
        Some(4.2),
        Some("How a beach became a chip."),
    ),
    // Non-ASCII.
    (
        "Drama",
        "Café Müller",
        2008,
        Some(3.8),
        Some("Ein Abend, der alles änderte."),
    ),
    (
        "Animation",
        "東京の猫 (Tokyo Cats)",
        2018,
        Some(4.6),
        Some("九つの命、一つの街。"),
    ),
    ("SciFi", "Ω-Point", 2024, Some(3.9), None),
    // A multi-line tagline.
    (
        "Thriller",
        "The Lighthouse at Kerrow",
        2022,
        Some(4.1),
        Some("Three strangers.\nOne lighthouse.\nNo way back."),
    ),
    // Not released yet: no rating (NaN), no box office.
    (
        "SciFi",
        "Orbit Decay",
        2026,
        Some(f64::NAN),
        Some("Coming soon."),
    ),
    ("Horror", "Hollow Pines", 2026, Some(f64::NAN), None),
];

const MOVIES_PER_CATEGORY: usize = 32;

fn movies() -> Vec<Entity> {
    let mut rng = rng_for("Movies");
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut out = Vec::new();
    for &(category, title, year, rating, tagline) in SPECIAL_MOVIES {
        seen.insert((category.to_string(), title.to_string()));
        let mut e = movie(&mut rng, category, title, year, false);
        match rating {
            Some(r) => e.set("Rating", EdmValue::Double(r)),
            None => {
                e.remove("Rating");
            }
        }
        match tagline {
            Some(t) => e.set("Tagline", EdmValue::String(t.to_string())),
            None => {
                e.remove("Tagline");
            }
        }
        if year >= 2026 {
            e.remove("BoxOffice");
        }
        out.push(e);
    }
    for category in CATEGORIES {
        let mut made = out.iter().filter(|e| e.partition_key == *category).count();
        while made < MOVIES_PER_CATEGORY {
            let title = movie_title(&mut rng, category);
            if !seen.insert((category.to_string(), title.clone())) {
                continue;
            }
            let year = rng.i32(1972..2026);
            out.push(movie(&mut rng, category, &title, year, false));
            made += 1;
            // Some hits get a sequel a few years later.
            if made < MOVIES_PER_CATEGORY && rng.u8(..100) < 15 && year < 2023 {
                let sequel = if rng.bool() {
                    format!("{title} 2")
                } else {
                    format!(
                        "{title} II: {} {}",
                        pick(&mut rng, ADJECTIVES),
                        pick(&mut rng, NOUNS)
                    )
                };
                if seen.insert((category.to_string(), sequel.clone())) {
                    let sequel_year = (year + rng.i32(2..5)).min(2025);
                    out.push(movie(&mut rng, category, &sequel, sequel_year, true));
                    made += 1;
                }
            }
        }
    }
    out
}

fn movie_title(rng: &mut fastrand::Rng, category: &str) -> String {
    let adj = pick(rng, ADJECTIVES);
    let noun = pick(rng, NOUNS);
    match (category, rng.u8(..5)) {
        ("Documentary", 0 | 1) => format!("Inside the {noun}"),
        ("Documentary", _) => format!("{} {noun}s of {}", adj, pick(rng, PLACES)),
        (_, 0) => format!("The {adj} {noun}"),
        (_, 1) => format!("{adj} {noun}"),
        (_, 2) => format!("A {noun} in {}", pick(rng, PLACES)),
        (_, 3) => format!("{noun} of the {adj} {}", pick(rng, NOUNS)),
        _ => format!("{}'s {noun}", pick(rng, FIRST_NAMES_F)),
    }
}

fn movie(rng: &mut fastrand::Rng, category: &str, title: &str, year: i32, sequel: bool) -> Entity {
    let released = instant_between(
        rng,
        year_start_unix(i64::from(year)),
        year_start_unix(i64::from(year) + 1),
    );
    let rating = f64::from(rng.u8(10..=50)) / 10.0;
    // Documentaries earn thousands to millions; blockbusters pass Int32's range.
    let box_office: i64 = match category {
        "Documentary" => rng.i64(40_000..25_000_000),
        "Action" | "SciFi" | "Animation" => rng.i64(8_000_000..2_900_000_000),
        _ => rng.i64(500_000..900_000_000),
    };
    let first_names = if rng.bool() {
        FIRST_NAMES_M
    } else {
        FIRST_NAMES_F
    };
    let director = format!("{} {}", pick(rng, first_names), pick(rng, LAST_NAMES));
    let mut e = Entity::new(category, title)
        .with("Year", EdmValue::Int32(year))
        .with("Rating", EdmValue::Double(rating))
        .with("BoxOffice", EdmValue::Int64(box_office))
        .with("Released", EdmValue::DateTime(released))
        .with("Director", EdmValue::String(director))
        .with("RuntimeMinutes", EdmValue::Int32(rng.i32(78..172)))
        .with("CatalogId", guid(rng))
        // A 64-bit perceptual hash of the master copy: any i64, so usually beyond 2^53.
        .with("Fingerprint", EdmValue::Int64(rng.i64(..)))
        .with("Sequel", EdmValue::Boolean(sequel));
    if rng.u8(..100) < 85 {
        e.set("Tagline", EdmValue::String(pick(rng, TAGLINES).to_string()));
    }
    if rng.u8(..100) < 80 {
        e.set("Poster", EdmValue::Binary(poster_thumbnail(rng)));
    }
    e
}

/// A PNG signature and header followed by a few dozen bytes: what a tiny thumbnail looks like.
fn poster_thumbnail(rng: &mut fastrand::Rng) -> Vec<u8> {
    let mut bytes = vec![
        0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n', 0, 0, 0, 13, b'I', b'H', b'D', b'R', 0,
        0, 0, 16, 0, 0, 0, 24, 8, 2, 0, 0, 0,
    ];
    let extra = rng.usize(24..72);
    bytes.extend((0..extra).map(|_| rng.u8(..)));
    bytes
}

fn marathon() -> Vec<Entity> {
    let mut rng = rng_for("Marathon");
    let mut out = Vec::new();
    let mut bibs_used = HashSet::new();
    for (partition, runners, bib_range) in [
        (MARATHON_FULL, 180, 101..10_000u32),
        (MARATHON_HALF, 140, 20_001..30_000u32),
    ] {
        for _ in 0..runners {
            let bib = loop {
                let b = rng.u32(bib_range.clone());
                if bibs_used.insert(b) {
                    break b;
                }
            };
            let gender = match rng.u8(..100) {
                0..=47 => "M",
                48..=96 => "F",
                _ => "X",
            };
            let first = match gender {
                "M" => pick(&mut rng, FIRST_NAMES_M),
                "F" => pick(&mut rng, FIRST_NAMES_F),
                _ => {
                    let names = if rng.bool() {
                        FIRST_NAMES_M
                    } else {
                        FIRST_NAMES_F
                    };
                    pick(&mut rng, names)
                }
            };
            let last = pick(&mut rng, LAST_NAMES);
            let age = rng.i32(18..78);
            let registered = instant_between(
                &mut rng,
                REGISTRATION_OPENS_UNIX,
                REGISTRATION_OPENS_UNIX + 120 * 86_400,
            );
            let mut props = vec![
                ("Name", EdmValue::String(format!("{first} {last}"))),
                ("Gender", EdmValue::String(gender.to_string())),
                ("Age", EdmValue::Int32(age)),
                // A number-looking string: the leading zero must survive every round trip.
                ("Bib", EdmValue::String(format!("{bib:05}"))),
                ("Registered", EdmValue::DateTime(registered)),
                ("Paid", EdmValue::Boolean(rng.u8(..100) < 88)),
            ];
            if rng.u8(..100) < 30 {
                let club = pick(
                    &mut rng,
                    &[
                        "Harbor Striders",
                        "Northside Runners",
                        "Les Foulées",
                        "Club Atlético Sur",
                    ],
                );
                props.push(("Club", EdmValue::String(club.to_string())));
            }
            for row_key in [
                marathon_bib_key(bib, first, gender, age),
                marathon_age_key(bib, first, gender, age),
            ] {
                let mut e = Entity::new(partition, row_key);
                for (name, value) in &props {
                    e.set(*name, value.clone());
                }
                out.push(e);
            }
        }
    }
    out
}

/// (level, message template, has a duration); `{n}`, `{id}` and `{ms}` are filled in.
type LogTemplate = (&'static str, &'static str, bool);

const COMPONENTS: &[(&str, u32, u32, &[LogTemplate])] = &[
    // (name, instances, weight, templates)
    (
        "Billing",
        3,
        18,
        &[
            (
                "Information",
                "invoice INV-{id} finalized for tenant t-{n}",
                true,
            ),
            ("Information", "charge ch_{id} captured", true),
            (
                "Warning",
                "payment provider answered 503 ServerBusy; retrying (attempt {n}/5)",
                true,
            ),
            ("Error", "charge ch_{id} declined: card_expired", false),
        ],
    ),
    (
        "Checkout",
        4,
        30,
        &[
            ("Information", "cart {id} checked out with {n} items", true),
            ("Verbose", "price cache hit for sku-{n}", false),
            (
                "Warning",
                "inventory reservation for sku-{n} took longer than 2 s",
                true,
            ),
            (
                "Error",
                "order {id} failed: inventory service timed out",
                true,
            ),
        ],
    ),
    (
        "Search",
        3,
        22,
        &[
            ("Verbose", "query served from cache", true),
            (
                "Information",
                "reindex batch {n} committed: {id} documents",
                true,
            ),
            ("Warning", "slow query on shard {n}", true),
        ],
    ),
    (
        "Identity",
        2,
        14,
        &[
            ("Information", "token issued for client app-{n}", true),
            (
                "Warning",
                "sign-in failed for user u-{id}: invalid_grant",
                false,
            ),
            (
                "Critical",
                "signing key rotation failed; still serving key {n}",
                false,
            ),
        ],
    ),
    (
        "ReportingRole",
        2,
        6,
        &[
            (
                "Information",
                "daily report R-{id} rendered ({n} pages)",
                true,
            ),
            ("Error", "report R-{id} aborted: query exceeded 30 s", true),
        ],
    ),
    (
        "Ingest",
        3,
        10,
        &[
            ("Verbose", "checkpoint written at offset {id}", false),
            ("Information", "partition {n} lag is {id} events", false),
            (
                "Warning",
                "partition {n} rebalanced to this instance",
                false,
            ),
        ],
    ),
];

const BUCKETS: u32 = 8;

fn component_logs() -> Vec<Entity> {
    let mut rng = rng_for("ComponentLogs");
    let total_weight: u32 = COMPONENTS.iter().map(|c| c.2).sum();
    // Six hours of logs ending at the window end; each entry a little after the last.
    let mut ticks = from_unix(LOG_WINDOW_END_UNIX - 6 * 3600, 0).ticks();
    let step_max = 6 * 3600 * TICKS_PER_SECOND / COMPONENT_LOG_COUNT as i64 * 2;
    let mut seqs: HashMap<String, u32> = HashMap::new();
    let mut out = Vec::with_capacity(COMPONENT_LOG_COUNT);
    for _ in 0..COMPONENT_LOG_COUNT {
        ticks += rng.i64(1..step_max);
        let at = DateTime::from_ticks(ticks);
        let mut roll = rng.u32(..total_weight.max(1));
        let mut chosen = COMPONENTS[0];
        for c in COMPONENTS {
            if roll < c.2 {
                chosen = *c;
                break;
            }
            roll -= c.2;
        }
        let (component, instances, _, templates) = chosen;
        let partition =
            log_partition_key(component, rng.u32(1..=instances.max(1)), rng.u32(..BUCKETS));
        let seq = seqs.entry(partition.clone()).or_insert(0);
        *seq += 1;
        let row_key = log_row_key(at, *seq);
        let (level, template, timed) = templates
            .get(rng.usize(..templates.len().max(1)))
            .copied()
            .unwrap_or(("Information", "", false));
        let message = template
            .replace("{n}", &rng.u32(1..40).to_string())
            .replace("{id}", &rng.u32(10_000..99_999).to_string());
        let mut e = Entity::new(partition, row_key)
            .with("Level", EdmValue::String(level.to_string()))
            .with("Message", EdmValue::String(message))
            .with("At", EdmValue::DateTime(at))
            .with("TraceId", guid(&mut rng));
        if timed {
            let ms = match level {
                "Warning" | "Error" => 1_000.0 + rng.f64() * 29_000.0,
                _ => rng.f64() * rng.f64() * 400.0,
            };
            // Milliseconds with microsecond precision, as a Stopwatch would report them.
            e.set(
                "DurationMs",
                EdmValue::Double((ms * 1000.0).round() / 1000.0),
            );
        }
        if matches!(level, "Warning" | "Error" | "Critical") || rng.u8(..100) < 20 {
            let payload = format!(
                "{{\"tenant\":\"t-{:04}\",\"region\":\"{}\",\"attempt\":{}}}",
                rng.u32(1..2000),
                pick(&mut rng, &["westeurope", "northeurope", "eastus2"]),
                rng.u32(1..4)
            );
            e.set("Payload", EdmValue::Binary(payload.into_bytes()));
        }
        if matches!(level, "Error" | "Critical") {
            e.set(
                "Exception",
                EdmValue::String(format!(
                    "System.TimeoutException: The operation has timed out.\n   at {component}.Worker.ProcessAsync(Message message)\n   at {component}.Host.RunAsync(CancellationToken token)"
                )),
            );
        }
        out.push(e);
    }
    out
}

/// Sites and their device counts; wide rows for horizontal scrolling.
const SITES: &[(&str, u32)] = &[
    ("plant-rotterdam", 48),
    ("plant-porto", 36),
    ("plant-gdańsk", 28),
];

fn device_telemetry() -> Vec<Entity> {
    let mut rng = rng_for("DeviceTelemetry");
    let seen_at = from_unix(LOG_WINDOW_END_UNIX, 0).ticks();
    let mut out = Vec::new();
    for &(site, devices) in SITES {
        let (lat, lon) = match site {
            "plant-rotterdam" => (51.9225, 4.47917),
            "plant-porto" => (41.1579, -8.6291),
            _ => (54.352, 18.6466),
        };
        for n in 1..=devices {
            let kind = pick(&mut rng, &["pump", "compressor", "chiller"]);
            // Older models report 8 channels, newer 12: the grid shows the gaps.
            let (model, channels) = if rng.u8(..100) < 40 {
                ("FX-800", 8)
            } else {
                ("FX-1200", 12)
            };
            let online = rng.u8(..100) < 92;
            let last_seen =
                seen_at - rng.i64(0..if online { 600 } else { 86_400 * 3 }) * TICKS_PER_SECOND;
            let mut e = Entity::new(site, format!("{kind}-{n:04}"))
                .with("Model", EdmValue::String(model.to_string()))
                .with(
                    "Firmware",
                    EdmValue::String(format!("4.{}.{}", rng.u8(0..6), rng.u8(0..20))),
                )
                .with(
                    "SerialNumber",
                    EdmValue::String(format!("{:08}", rng.u32(..100_000_000))),
                )
                .with(
                    "InstalledOn",
                    EdmValue::DateTime(instant_between(
                        &mut rng,
                        year_start_unix(2019),
                        year_start_unix(2025),
                    )),
                )
                .with(
                    "LastSeen",
                    EdmValue::DateTime(DateTime::from_ticks(
                        last_seen - rng.i64(0..TICKS_PER_SECOND),
                    )),
                )
                .with("Online", EdmValue::Boolean(online))
                .with(
                    "Latitude",
                    EdmValue::Double(lat + (rng.f64() - 0.5) / 100.0),
                )
                .with(
                    "Longitude",
                    EdmValue::Double(lon + (rng.f64() - 0.5) / 100.0),
                )
                .with(
                    "UptimeSeconds",
                    EdmValue::Int64(rng.i64(3_600..120_000_000)),
                )
                .with("FirmwareImage", guid(&mut rng));
            for ch in 1..=channels {
                let alarm = rng.u8(..100) < 3;
                e.set(
                    format!("Ch{ch:02}TempC"),
                    EdmValue::Double((200.0 + rng.f64() * 600.0).round() / 10.0),
                );
                e.set(
                    format!("Ch{ch:02}VibrationMmS"),
                    EdmValue::Double((rng.f64() * if alarm { 180.0 } else { 45.0 }).round() / 10.0),
                );
                e.set(
                    format!("Ch{ch:02}PressureBar"),
                    EdmValue::Double((10.0 + rng.f64() * 150.0).round() / 10.0),
                );
                e.set(format!("Ch{ch:02}Alarm"), EdmValue::Boolean(alarm));
            }
            out.push(e);
        }
    }
    out
}

/// The partition limit the demo's proxy simulates: low enough that a laptop's emulator shows
/// throttling and a hot partition without being saturated.
pub const DEMO_THROTTLE: f64 = 100.0;
/// The table the synthetic application writes.
pub const TRAFFIC_TABLE: &str = "AppTraffic";
/// The table its append-only logger writes (its own table, so the key order is its own).
pub const EVENTS_TABLE: &str = "AppEvents";

/// A synthetic application, sent through the throttling proxy at `endpoint` until `cancel`:
/// one hot partition (more than its limit: 503s and retries), an append-only writer (keys that
/// only grow), a well-spread writer, and an occasional full-table scan. Bounded in rate.
pub async fn synthetic_traffic(
    endpoint: String,
    cancel: tokio_util::sync::CancellationToken,
) -> Result<(), DemoError> {
    // Retries with a short backoff, as a well-behaved application would.
    let retry = crate::azure::RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(50),
        min_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(400),
        attempt_timeout: Duration::from_secs(10),
    };
    let client = TableClient::new(
        Account::development_at(&endpoint),
        ClientOptions {
            retry,
            ..ClientOptions::default()
        },
    )
    .map_err(DemoError::Client)?;
    for table in [TRAFFIC_TABLE, EVENTS_TABLE] {
        match client.create_table(table).await {
            Ok(()) => {}
            Err(e) if e.code() == Some("TableAlreadyExists") => {}
            Err(e) => {
                return Err(DemoError::Table {
                    table: table.into(),
                    step: "creating the synthetic application's table".into(),
                    source: e,
                })
            }
        }
    }
    let mut tasks = JoinSet::new();
    // The hot tenant: six writers with no pacing, so the proxy's limit throttles them.
    for w in 0..6u32 {
        let (c, cancel) = (client.clone(), cancel.clone());
        tasks.spawn(async move {
            let mut n = 0u64;
            while !cancel.is_cancelled() {
                n += 1;
                let e = Entity::new("tenant-hot", format!("w{w}-{:06}", n % 5_000))
                    .with("Seq", EdmValue::Int64(n as i64));
                if c.upsert(TRAFFIC_TABLE, &e, crate::azure::UpdateMode::Replace)
                    .await
                    .is_err()
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
    }
    // Append-only: the PartitionKey is a timestamp, so every insert goes to the last range.
    {
        let (c, cancel) = (client.clone(), cancel.clone());
        tasks.spawn(async move {
            let mut n = 0u64;
            while !cancel.is_cancelled() {
                n += 1;
                let pk = format!("log-{}", DateTime::now());
                let e = Entity::new(pk, format!("{n:08}"))
                    .with("Message", EdmValue::String("user signed in".into()));
                let _ = c.insert(EVENTS_TABLE, &e).await;
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        });
    }
    // Well spread: random tenants, paced.
    {
        let (c, cancel) = (client.clone(), cancel.clone());
        tasks.spawn(async move {
            let mut rng = fastrand::Rng::with_seed(SEED);
            while !cancel.is_cancelled() {
                let e = Entity::new(
                    format!("tenant-{:03}", rng.u32(..200)),
                    format!("{:06}", rng.u32(..1_000)),
                )
                .with("Amount", EdmValue::Double(rng.f64() * 100.0));
                let _ = c
                    .upsert(TRAFFIC_TABLE, &e, crate::azure::UpdateMode::Merge)
                    .await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
    }
    // A report that scans the whole table every few seconds.
    {
        let (c, cancel) = (client.clone(), cancel.clone());
        tasks.spawn(async move {
            while !cancel.is_cancelled() {
                let spec = crate::azure::QuerySpec {
                    page_size: Some(100),
                    ..crate::azure::QuerySpec::default()
                };
                let _ = c.query_page(TRAFFIC_TABLE, &spec, None).await;
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
            }
        });
    }
    cancel.cancelled().await;
    tasks.abort_all();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime {
        DateTime::parse(s).unwrap()
    }

    #[test]
    fn reverse_ticks_sort_newest_first() {
        let times = [
            at("2026-03-01T23:59:59.9999999Z"),
            at("2026-03-02T00:00:00.0000000Z"),
            at("2026-03-02T00:00:00.0000001Z"),
            at("2031-01-01T00:00:00Z"),
        ];
        let keys: Vec<String> = times.iter().map(|t| log_row_key(*t, 1)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        let reversed: Vec<String> = keys.iter().rev().cloned().collect();
        assert_eq!(sorted, reversed, "later instants must sort first");
        assert!(keys.iter().all(|k| k.len() == 19 + 1 + 4), "{keys:?}");
        // Within one tick, the later sequence number sorts first.
        assert!(log_row_key(times[0], 2) < log_row_key(times[0], 1));
        assert_eq!(
            log_row_key(DateTime::from_ticks(MAX_TICKS), 0),
            "0000000000000000000_9999"
        );
        assert_eq!(log_row_key(DateTime::MIN, 0), "3155378975999999999_9999");
    }

    #[test]
    fn max_ticks_is_dotnet_max_value() {
        assert_eq!(
            DateTime::from_ticks(MAX_TICKS).to_string(),
            "9999-12-31T23:59:59.9999999Z"
        );
    }

    #[test]
    fn marathon_keys_match_the_seed_format() {
        assert_eq!(
            marathon_bib_key(1234, "John", "M", 55),
            "BIB:01234__John__M__55"
        );
        assert_eq!(
            marathon_age_key(1234, "John", "M", 55),
            "AGE:055__1234__John__M"
        );
        assert_eq!(marathon_bib_key(123, "Zoë", "F", 9), "BIB:00123__Zoë__F__9");
        assert_eq!(marathon_age_key(123, "Zoë", "F", 9), "AGE:009__123__Zoë__F");
    }

    #[test]
    fn log_partition_key_matches_the_seed_layout() {
        assert_eq!(log_partition_key("Billing", 3, 7), "Billing;i-03;07");
    }

    #[test]
    fn fixed_instants_are_what_the_comments_say() {
        assert_eq!(
            from_unix(LOG_WINDOW_END_UNIX, 0).to_string(),
            "2026-03-02T00:00:00.0000000Z"
        );
        assert_eq!(
            from_unix(REGISTRATION_OPENS_UNIX, 0).to_string(),
            "2025-11-01T00:00:00.0000000Z"
        );
        for year in [1970, 1972, 2000, 2024, 2026, 2100] {
            assert_eq!(
                from_unix(year_start_unix(year), 0).to_string(),
                format!("{year}-01-01T00:00:00.0000000Z")
            );
        }
    }

    #[test]
    fn generation_is_deterministic() {
        let a = sample_tables();
        let b = sample_tables();
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.name, y.name);
            assert_eq!(x.entities.len(), y.entities.len());
            assert!(x
                .entities
                .iter()
                .zip(&y.entities)
                .all(|(p, q)| p.same_content(q)));
        }
    }

    #[test]
    fn every_sample_entity_is_valid_and_keys_are_unique() {
        let tables = sample_tables();
        assert_eq!(
            tables.iter().map(|t| t.name).collect::<Vec<_>>(),
            SAMPLE_TABLES
        );
        for t in &tables {
            crate::azure::validate::table_name(t.name).unwrap();
            let mut keys = HashSet::new();
            for e in &t.entities {
                crate::azure::validate::entity(e)
                    .unwrap_or_else(|err| panic!("{}: {e:?}: {err}", t.name));
                assert!(
                    keys.insert((e.partition_key.clone(), e.row_key.clone())),
                    "duplicate key in {}: {}/{}",
                    t.name,
                    e.partition_key,
                    e.row_key
                );
            }
        }
    }

    #[test]
    fn sample_tables_have_their_promised_shapes() {
        let tables = sample_tables();
        let get = |name: &str| &tables.iter().find(|t| t.name == name).unwrap().entities;
        let movies = get("Movies");
        assert!(movies.len() >= 250, "{}", movies.len());
        let types: HashSet<_> = movies
            .iter()
            .flat_map(|e| e.properties.iter().map(|p| p.value.edm_type()))
            .collect();
        assert_eq!(types.len(), 8, "{types:?}");
        assert!(movies.iter().any(|e| e.row_key.contains('\'')));
        assert!(movies.iter().any(|e| e.row_key.contains('%')));
        assert!(movies.iter().any(|e| !e.row_key.is_ascii()));
        assert!(movies
            .iter()
            .any(|e| e.get("Tagline") == Some(&EdmValue::String(String::new()))));
        assert!(movies.iter().any(|e| e.get("Tagline").is_none()));
        assert!(movies.iter().any(|e| matches!(
            e.get("Tagline"),
            Some(EdmValue::String(s)) if s.contains('\n')
        )));
        assert!(movies.iter().any(|e| matches!(
            e.get("Fingerprint"),
            Some(EdmValue::Int64(v)) if v.unsigned_abs() > 1 << 53
        )));
        assert!(movies.iter().any(|e| matches!(
            e.get("BoxOffice"),
            Some(EdmValue::Int64(v)) if *v > i64::from(i32::MAX)
        )));
        assert!(movies.iter().any(|e| matches!(
            e.get("Rating"),
            Some(EdmValue::Double(v)) if v.is_nan()
        )));
        let marathon = get("Marathon");
        assert_eq!(
            marathon
                .iter()
                .filter(|e| e.row_key.starts_with("BIB:"))
                .count(),
            marathon
                .iter()
                .filter(|e| e.row_key.starts_with("AGE:"))
                .count()
        );
        assert!(marathon
            .iter()
            .all(|e| matches!(e.get("Bib"), Some(EdmValue::String(s)) if s.len() == 5)));
        assert!(get("ComponentLogs").len() >= 5_000);
        let widest = get("DeviceTelemetry")
            .iter()
            .map(|e| e.properties.len())
            .max()
            .unwrap();
        assert!(widest >= 55, "{widest}");
        assert!(get("Empty").is_empty());
    }
}
