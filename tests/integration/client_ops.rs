//! The protocol client against the real emulator: tables, types, keys, paging, conditions.

use tabletop::azure::{
    ClientOptions, Condition, EdmValue, Entity, Operation, PartitionRef, QuerySpec, RetryPolicy,
    TableClient, TableError, UpdateMode,
};

use crate::common::{self, client, diff, every_type, fresh_table};

#[tokio::test]
async fn every_edm_type_and_edge_value_round_trips_exactly() {
    let c = client();
    let table = fresh_table(&c, "types").await;
    let sent = every_type("p", "r");
    c.insert(&table, &sent).await.unwrap();

    // A second, independent client reads it back by key and by query.
    let other = client();
    let got = other.get_entity(&table, "p", "r").await.unwrap();
    assert!(
        diff(&sent, &got).is_empty(),
        "get differs: {:#?}",
        diff(&sent, &got)
    );
    let mut s = other.query_stream(&table, QuerySpec::default(), None, None);
    let queried = s.next().await.unwrap().unwrap();
    assert!(
        diff(&sent, &queried).is_empty(),
        "query differs: {:#?}",
        diff(&sent, &queried)
    );
    assert!(
        got.etag.as_deref().is_some_and(|e| e.starts_with("W/")),
        "{:?}",
        got.etag
    );
    assert!(got.timestamp.is_some());

    // The CLI's JSON line is the same data again.
    let line = got.to_json_line();
    let reparsed = Entity::from_json(&line).unwrap();
    assert_eq!(reparsed, got);
}

#[tokio::test]
async fn keys_with_quotes_percent_spaces_and_unicode_work_for_every_operation() {
    let c = client();
    let table = fresh_table(&c, "keys").await;
    for (pk, rk) in [
        ("o'clock", "it''s"),
        ("100%", "50% off"),
        ("with space", "é東京"),
        ("a+b=c&d", "x;y,z(1)"),
    ] {
        let e = Entity::new(pk, rk).with("V", EdmValue::Int32(1));
        let w = c
            .insert(&table, &e)
            .await
            .unwrap_or_else(|err| panic!("insert {pk:?}/{rk:?}: {err}"));
        let got = c
            .get_entity(&table, pk, rk)
            .await
            .unwrap_or_else(|err| panic!("get {pk:?}/{rk:?}: {err}"));
        assert_eq!((got.partition_key.as_str(), got.row_key.as_str()), (pk, rk));
        let changed = e.clone().with("V", EdmValue::Int32(2));
        let w2 = c
            .update(
                &table,
                &changed,
                UpdateMode::Merge,
                &Condition::IfMatch(w.etag.clone().unwrap()),
            )
            .await
            .unwrap_or_else(|err| panic!("merge {pk:?}/{rk:?}: {err}"));
        assert_eq!(
            c.get_entity(&table, pk, rk).await.unwrap().get("V"),
            Some(&EdmValue::Int32(2))
        );
        c.delete_entity(&table, pk, rk, &Condition::IfMatch(w2.etag.unwrap()))
            .await
            .unwrap_or_else(|err| panic!("delete {pk:?}/{rk:?}: {err}"));
        assert!(c.try_get_entity(&table, pk, rk).await.unwrap().is_none());
    }
}

#[tokio::test]
async fn tables_are_listed_across_next_table_name_pages_created_and_deleted() {
    let c = client();
    let names: Vec<String> = (0..5)
        .map(|_| crate::support::unique_table("list"))
        .collect();
    for n in &names {
        c.create_table(n).await.unwrap();
    }
    // Pages of two force the client to follow NextTableName.
    let mut seen = Vec::new();
    let mut next = None;
    let mut pages = 0;
    loop {
        let page = c
            .list_tables_page(None, Some(2), next.as_deref())
            .await
            .unwrap();
        assert!(page.names.len() <= 2);
        seen.extend(page.names);
        pages += 1;
        match page.next_table_name {
            Some(n) => next = Some(n),
            None => break,
        }
    }
    assert!(pages >= 3, "expected several pages, got {pages}");
    for n in &names {
        assert!(seen.contains(n), "{n} missing from the listing");
    }
    assert_eq!(c.list_tables().await.unwrap().len(), seen.len());

    let err = c.create_table(&names[0]).await.unwrap_err();
    assert_eq!(err.code(), Some("TableAlreadyExists"));
    assert!(err.to_string().contains("already exists"), "{err}");
    c.delete_table(&names[0]).await.unwrap();
    assert!(!c.list_tables().await.unwrap().contains(&names[0]));
    let err = c.delete_table(&names[0]).await.unwrap_err();
    assert_eq!(err.status(), Some(404));
}

#[tokio::test]
async fn invalid_names_and_keys_are_refused_before_anything_is_sent() {
    let (c, records) = common::recording_client(common::account(), RetryPolicy::default());
    let err = c.create_table("no-dashes").await.unwrap_err();
    assert!(matches!(err, TableError::Invalid(_)));
    assert!(err.to_string().contains("table name 'no-dashes'"), "{err}");
    let err = c
        .insert("Valid1", &Entity::new("a/b", "r"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("PartitionKey") && err.to_string().contains("'/'"),
        "{err}"
    );
    let err = c
        .insert(
            "Valid1",
            &Entity::new("a", "r").with("bad name", EdmValue::Int32(1)),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("property name 'bad name'"),
        "{err}"
    );
    assert!(records.lock().unwrap().is_empty(), "a request was sent");
}

async fn load(c: &TableClient, table: &str, partitions: usize, per_partition: usize) {
    let mut set = tokio::task::JoinSet::new();
    for p in 0..partitions {
        let c = c.clone();
        let table = table.to_string();
        set.spawn(async move {
            for r in 0..per_partition {
                let e = Entity::new(format!("p{p:02}"), format!("r{r:05}"))
                    .with("N", EdmValue::Int64((p * per_partition + r) as i64));
                c.insert(&table, &e).await.unwrap();
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
}

#[tokio::test]
async fn queries_follow_continuations_page_by_page_and_as_a_stream() {
    let c = client();
    let table = fresh_table(&c, "paging").await;
    load(&c, &table, 5, 500).await; // 2,500 entities

    // Page by page, as the grid does.
    let spec = QuerySpec {
        page_size: Some(1000),
        ..QuerySpec::default()
    };
    let first = c.query_page(&table, &spec, None).await.unwrap();
    assert_eq!(first.entities.len(), 1000);
    let token = first
        .continuation
        .clone()
        .expect("a continuation after a full page");
    let second = c.query_page(&table, &spec, Some(&token)).await.unwrap();
    assert_eq!(second.entities.len(), 1000);
    assert!(
        second.entities[0].partition_key > first.entities[999].partition_key
            || second.entities[0].row_key > first.entities[999].row_key
    );
    // Going back to a saved token gives the same page again.
    let again = c.query_page(&table, &spec, Some(&token)).await.unwrap();
    assert_eq!(again.entities, second.entities);
    let third = c
        .query_page(&table, &spec, second.continuation.as_ref())
        .await
        .unwrap();
    assert_eq!(third.entities.len(), 500);
    assert!(third.continuation.is_none());

    // As a stream: every entity exactly once, in order.
    let mut stream = c.query_stream(
        &table,
        QuerySpec {
            page_size: Some(300),
            ..QuerySpec::default()
        },
        None,
        None,
    );
    let mut keys = Vec::new();
    while let Some(e) = stream.next().await {
        let e = e.unwrap();
        keys.push((e.partition_key, e.row_key));
    }
    assert_eq!(keys.len(), 2500);
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, keys, "not in key order or duplicated");

    // A total limit across pages.
    let mut limited = c.query_stream(
        &table,
        QuerySpec {
            page_size: Some(400),
            ..QuerySpec::default()
        },
        None,
        Some(1234),
    );
    let mut n = 0;
    while let Some(e) = limited.next().await {
        e.unwrap();
        n += 1;
    }
    assert_eq!(n, 1234);

    // Filter and projection.
    let spec = QuerySpec {
        filter: Some("PartitionKey eq 'p03' and N ge 1700L".into()),
        select: Some(vec!["N".into()]),
        page_size: None,
    };
    let page = c.query_page(&table, &spec, None).await.unwrap();
    assert_eq!(page.entities.len(), 300);
    assert!(page
        .entities
        .iter()
        .all(|e| e.partition_key == "p03" && e.properties.len() == 1));
}

#[tokio::test]
async fn writes_are_conditional_on_the_etag() {
    let c = client();
    let table = fresh_table(&c, "cond").await;
    let e = Entity::new("p", "r")
        .with("A", EdmValue::Int32(1))
        .with("B", EdmValue::String("b".into()));
    let first = c.insert(&table, &e).await.unwrap();
    let etag1 = first.etag.clone().unwrap();

    let err = c.insert(&table, &e).await.unwrap_err();
    assert_eq!(err.code(), Some("EntityAlreadyExists"));
    assert!(err.to_string().contains("already exists"), "{err}");

    // Someone else changes it.
    let theirs = c
        .update(
            &table,
            &e.clone().with("A", EdmValue::Int32(2)),
            UpdateMode::Merge,
            &Condition::IfMatch(etag1.clone()),
        )
        .await
        .unwrap();
    // Our stale ETag is refused, never silently overwritten.
    let err = c
        .update(
            &table,
            &e.clone().with("A", EdmValue::Int32(3)),
            UpdateMode::Replace,
            &Condition::IfMatch(etag1.clone()),
        )
        .await
        .unwrap_err();
    assert!(err.is_precondition_failed(), "{err}");
    assert!(err.to_string().contains("changed the entity"), "{err}");
    assert_eq!(
        c.get_entity(&table, "p", "r").await.unwrap().get("A"),
        Some(&EdmValue::Int32(2))
    );

    // Replace removes properties not given; merge keeps them.
    let only_a = Entity::new("p", "r").with("A", EdmValue::Int32(4));
    let replaced = c
        .update(
            &table,
            &only_a,
            UpdateMode::Replace,
            &Condition::IfMatch(theirs.etag.unwrap()),
        )
        .await
        .unwrap();
    let now = c.get_entity(&table, "p", "r").await.unwrap();
    assert_eq!(now.get("B"), None);
    assert_eq!(now.etag, replaced.etag);

    // Force is unconditional.
    c.update(&table, &e, UpdateMode::Replace, &Condition::Force)
        .await
        .unwrap();
    assert_eq!(
        c.get_entity(&table, "p", "r").await.unwrap().get("B"),
        Some(&EdmValue::String("b".into()))
    );

    // Delete with a stale ETag fails; with the current one succeeds.
    let err = c
        .delete_entity(&table, "p", "r", &Condition::IfMatch(etag1))
        .await
        .unwrap_err();
    assert!(err.is_precondition_failed());
    let current = c.get_entity(&table, "p", "r").await.unwrap();
    c.delete_entity(&table, "p", "r", &Condition::IfMatch(current.etag.unwrap()))
        .await
        .unwrap();
    let err = c.get_entity(&table, "p", "r").await.unwrap_err();
    assert!(err.is_not_found());
}

#[tokio::test]
async fn upserts_insert_or_merge_and_insert_or_replace() {
    let c = client();
    let table = fresh_table(&c, "upsert").await;
    let e = Entity::new("p", "r")
        .with("A", EdmValue::Int32(1))
        .with("B", EdmValue::Int32(1));
    c.upsert(&table, &e, UpdateMode::Merge).await.unwrap();
    c.upsert(
        &table,
        &Entity::new("p", "r").with("C", EdmValue::Int32(1)),
        UpdateMode::Merge,
    )
    .await
    .unwrap();
    let got = c.get_entity(&table, "p", "r").await.unwrap();
    assert_eq!(got.properties.len(), 3);
    c.upsert(
        &table,
        &Entity::new("p", "r").with("D", EdmValue::Int32(1)),
        UpdateMode::Replace,
    )
    .await
    .unwrap();
    let got = c.get_entity(&table, "p", "r").await.unwrap();
    assert_eq!(got.properties.len(), 1);
}

#[tokio::test]
async fn read_only_client_refuses_every_write_without_sending() {
    let (c, records) = common::recording_client(common::account(), RetryPolicy::default());
    let ro = TableClient::new(
        common::account(),
        ClientOptions {
            read_only: true,
            telemetry: c.telemetry().clone(),
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let e = Entity::new("p", "r");
    let results = vec![
        ro.create_table("ReadOnlyT").await.map(|_| ()),
        ro.delete_table("ReadOnlyT").await.map(|_| ()),
        ro.insert("ReadOnlyT", &e).await.map(|_| ()),
        ro.update("ReadOnlyT", &e, UpdateMode::Merge, &Condition::Force)
            .await
            .map(|_| ()),
        ro.upsert("ReadOnlyT", &e, UpdateMode::Replace)
            .await
            .map(|_| ()),
        ro.delete_entity("ReadOnlyT", "p", "r", &Condition::Force)
            .await
            .map(|_| ()),
    ];
    for r in results {
        assert!(matches!(r, Err(TableError::ReadOnly { .. })), "{r:?}");
    }
    assert!(
        records.lock().unwrap().is_empty(),
        "a write left the client"
    );
    // Reads still work.
    ro.list_tables().await.unwrap();
}

#[tokio::test]
async fn every_attempt_is_recorded_with_its_partition() {
    let (c, records) = common::recording_client(common::account(), RetryPolicy::default());
    let table = fresh_table(&c, "telemetry").await;
    c.insert(&table, &Entity::new("hot", "1")).await.unwrap();
    c.get_entity(&table, "hot", "1").await.unwrap();
    c.query_page(
        &table,
        &QuerySpec::with_filter("PartitionKey eq 'hot'"),
        None,
    )
    .await
    .unwrap();
    c.query_page(&table, &QuerySpec::default(), None)
        .await
        .unwrap();
    let _ = c.get_entity(&table, "hot", "missing").await.unwrap_err();
    let recs = records.lock().unwrap().clone();
    let ops: Vec<(Operation, PartitionRef, Option<u16>, u32)> = recs
        .iter()
        .map(|r| (r.operation, r.partition.clone(), r.status, r.entity_count))
        .collect();
    assert_eq!(
        ops,
        vec![
            (Operation::CreateTable, PartitionRef::None, Some(204), 0),
            (
                Operation::InsertEntity,
                PartitionRef::Key("hot".into()),
                Some(204),
                1
            ),
            (
                Operation::GetEntity,
                PartitionRef::Key("hot".into()),
                Some(200),
                1
            ),
            (
                Operation::QueryEntities,
                PartitionRef::Key("hot".into()),
                Some(200),
                1
            ),
            (Operation::QueryEntities, PartitionRef::Scan, Some(200), 1),
            (
                Operation::GetEntity,
                PartitionRef::Key("hot".into()),
                Some(404),
                1
            ),
        ]
    );
    assert!(recs
        .iter()
        .all(|r| r.attempt == 1 && &*r.account == "devstoreaccount1"));
    assert_eq!(recs[5].error_code.as_deref(), Some("ResourceNotFound"));
    assert!(recs[1].bytes_sent > 0 && recs[2].bytes_received > 0);
}

#[tokio::test]
async fn shared_key_lite_signing_is_accepted() {
    let account = common::account().with_scheme(tabletop::azure::SigningScheme::SharedKeyLite);
    let c = TableClient::new(account, ClientOptions::default()).unwrap();
    let table = fresh_table(&c, "lite").await;
    c.insert(&table, &Entity::new("p", "r")).await.unwrap();
    assert_eq!(c.get_entity(&table, "p", "r").await.unwrap().row_key, "r");
}

/// An account SAS (PROTOCOL.md §1.8) computed here; the client only appends the token.
fn account_sas(permissions: &str) -> String {
    use tabletop::azure::{auth, connection};
    let key = connection::AccountKey::from_base64(connection::DEV_KEY).unwrap();
    let (ss, srt, st, se, spr, sv) = (
        "t",
        "sco",
        "2020-01-01T00:00:00Z",
        "2099-01-01T00:00:00Z",
        "https,http",
        "2019-02-02",
    );
    let sts = format!("devstoreaccount1\n{permissions}\n{ss}\n{srt}\n{st}\n{se}\n\n{spr}\n{sv}\n");
    let sig = auth::signature(&key, &sts);
    let sig = percent_encoding::utf8_percent_encode(&sig, percent_encoding::NON_ALPHANUMERIC);
    format!("sv={sv}&ss={ss}&srt={srt}&sp={permissions}&st={st}&se={se}&spr={spr}&sig={sig}")
}

#[tokio::test]
async fn a_sas_token_is_appended_to_every_request() {
    let endpoint = crate::support::azurite().table_endpoint();
    let cs = format!(
        "TableEndpoint={endpoint};SharedAccessSignature={}",
        account_sas("rwdlacu")
    );
    let account = tabletop::azure::Account::from_connection_string(&cs).unwrap();
    let c = TableClient::new(account, ClientOptions::default()).unwrap();
    let table = fresh_table(&c, "sas").await;
    c.insert(&table, &Entity::new("p", "r").with("V", EdmValue::Int32(1)))
        .await
        .unwrap();
    let got = c.get_entity(&table, "p", "r").await.unwrap();
    c.delete_entity(&table, "p", "r", &Condition::IfMatch(got.etag.unwrap()))
        .await
        .unwrap();

    // A read-only SAS is refused by the service for writes, and the error shows no signature.
    let cs = format!(
        "TableEndpoint={endpoint};SharedAccessSignature={}",
        account_sas("rl")
    );
    let ro = TableClient::new(
        tabletop::azure::Account::from_connection_string(&cs).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    ro.list_tables().await.unwrap();
    let err = ro
        .insert(&table, &Entity::new("p", "r2"))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(403), "{err}");
    assert!(!err.to_string().contains("sig="), "{err}");
}

#[tokio::test]
async fn batches_apply_atomically_and_name_the_failing_operation() {
    use tabletop::azure::BatchOp;
    let c = client();
    let table = fresh_table(&c, "batch").await;
    let ops: Vec<BatchOp> = (0..100)
        .map(|i| BatchOp::Insert(Entity::new("b", format!("{i:03}")).with("I", EdmValue::Int32(i))))
        .collect();
    let outcomes = c.submit_batch(&table, &ops).await.unwrap();
    assert_eq!(outcomes.len(), 100);
    assert!(outcomes.iter().all(|o| o.etag.is_some()));
    let page = c
        .query_page(&table, &QuerySpec::default(), None)
        .await
        .unwrap();
    assert_eq!(page.entities.len(), 100);

    // The second op collides: nothing of the batch is applied, and the error says which.
    let ops = vec![
        BatchOp::Upsert(Entity::new("b", "new"), UpdateMode::Merge),
        BatchOp::Insert(Entity::new("b", "001")),
        BatchOp::Delete {
            partition_key: "b".into(),
            row_key: "002".into(),
            condition: Condition::Force,
        },
    ];
    let err = c.submit_batch(&table, &ops).await.unwrap_err();
    assert_eq!(err.code(), Some("EntityAlreadyExists"));
    assert!(err.to_string().contains("batch operation 1"), "{err}");
    assert!(c
        .try_get_entity(&table, "b", "new")
        .await
        .unwrap()
        .is_none());
    assert!(c
        .try_get_entity(&table, "b", "002")
        .await
        .unwrap()
        .is_some());

    // Mixed operations in one go.
    let e1 = c.get_entity(&table, "b", "001").await.unwrap();
    let ops = vec![
        BatchOp::Update(
            e1.clone().with("X", EdmValue::Boolean(true)),
            UpdateMode::Merge,
            Condition::IfMatch(e1.etag.clone().unwrap()),
        ),
        BatchOp::Delete {
            partition_key: "b".into(),
            row_key: "002".into(),
            condition: Condition::Force,
        },
        BatchOp::Upsert(Entity::new("b", "zzz"), UpdateMode::Replace),
    ];
    c.submit_batch(&table, &ops).await.unwrap();
    assert_eq!(
        c.get_entity(&table, "b", "001").await.unwrap().get("X"),
        Some(&EdmValue::Boolean(true))
    );
    assert!(c
        .try_get_entity(&table, "b", "002")
        .await
        .unwrap()
        .is_none());
    assert!(c
        .try_get_entity(&table, "b", "zzz")
        .await
        .unwrap()
        .is_some());
}
