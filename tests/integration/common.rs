//! Helpers shared by the integration tests: clients on the shared emulator, sample entities.

use std::sync::{Arc, Mutex};

use tabletop::azure::{
    Account, AttemptRecord, ClientOptions, DateTime, EdmValue, Entity, RetryPolicy, TableClient,
    Telemetry,
};

use crate::support;

pub fn account() -> Account {
    Account::from_connection_string(&support::azurite().connection_string())
        .expect("emulator connection string")
}

pub fn client() -> TableClient {
    TableClient::new(account(), ClientOptions::default()).expect("client")
}

/// A client whose attempt records are collected.
pub fn recording_client(
    account: Account,
    retry: RetryPolicy,
) -> (TableClient, Arc<Mutex<Vec<AttemptRecord>>>) {
    let telemetry = Telemetry::new();
    let records = Arc::new(Mutex::new(Vec::new()));
    let sink = records.clone();
    telemetry.subscribe_fn(move |r| sink.lock().unwrap().push(r.clone()));
    let client = TableClient::new(
        account,
        ClientOptions {
            retry,
            telemetry,
            ..ClientOptions::default()
        },
    )
    .expect("client");
    (client, records)
}

pub async fn fresh_table(client: &TableClient, prefix: &str) -> String {
    let name = support::unique_table(prefix);
    client.create_table(&name).await.expect("create table");
    name
}

/// An entity holding every EDM type with its edge values.
pub fn every_type(pk: &str, rk: &str) -> Entity {
    let dt = |s: &str| EdmValue::DateTime(DateTime::parse(s).unwrap());
    Entity::new(pk, rk)
        .with("Str", EdmValue::String("plain".into()))
        .with("StrNumeric", EdmValue::String("0152".into()))
        .with("StrBoolish", EdmValue::String("true".into()))
        .with("StrDecimal", EdmValue::String("1.50".into()))
        .with("StrEmpty", EdmValue::String(String::new()))
        .with(
            "StrUnicode",
            EdmValue::String("zürich ✓ 東京 \"quoted\" \\ back\nline".into()),
        )
        .with("BoolT", EdmValue::Boolean(true))
        .with("BoolF", EdmValue::Boolean(false))
        .with("I32Max", EdmValue::Int32(i32::MAX))
        .with("I32Min", EdmValue::Int32(i32::MIN))
        .with("I32Zero", EdmValue::Int32(0))
        .with("I64Big", EdmValue::Int64(9_007_199_254_740_993))
        .with("I64Max", EdmValue::Int64(i64::MAX))
        .with("I64Min", EdmValue::Int64(i64::MIN))
        .with("I64Small", EdmValue::Int64(7))
        .with("DblIntegral", EdmValue::Double(2.0))
        .with("DblFraction", EdmValue::Double(0.1))
        .with("DblHuge", EdmValue::Double(1e300))
        .with("DblTiny", EdmValue::Double(5e-324))
        .with("DblNeg", EdmValue::Double(-123456.789))
        .with("DblNaN", EdmValue::Double(f64::NAN))
        .with("DblInf", EdmValue::Double(f64::INFINITY))
        .with("DblNegInf", EdmValue::Double(f64::NEG_INFINITY))
        .with("DtTicks", dt("2024-02-29T23:59:59.1234567Z"))
        .with("DtWhole", dt("2024-01-01T00:00:00Z"))
        .with("DtOneTick", dt("2024-01-01T00:00:00.0000001Z"))
        .with("DtMin", dt("1601-01-01T00:00:00Z"))
        .with("DtMax", dt("9999-12-31T23:59:59.9999999Z"))
        .with(
            "Guid",
            EdmValue::Guid(uuid::Uuid::parse_str("4185404a-5818-48c3-b9be-f217df0dba6f").unwrap()),
        )
        .with("GuidNil", EdmValue::Guid(uuid::Uuid::nil()))
        .with("Bin", EdmValue::Binary((0..=255u8).collect()))
        .with("BinOne", EdmValue::Binary(vec![0]))
}

/// Differences between two entities' properties, for readable assertion messages.
pub fn diff(expected: &Entity, actual: &Entity) -> Vec<String> {
    let mut out = Vec::new();
    for p in &expected.properties {
        match actual.get(&p.name) {
            Some(v) if *v == p.value => {}
            other => out.push(format!(
                "{}: expected {:?}, got {:?}",
                p.name, p.value, other
            )),
        }
    }
    for p in &actual.properties {
        if expected.get(&p.name).is_none() {
            out.push(format!("{}: unexpected {:?}", p.name, p.value));
        }
    }
    out
}
