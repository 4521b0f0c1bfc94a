//! Attribution of proxied requests: which operation, table and partition each request (or each
//! operation of a `$batch`) touched, read from the URL, the `$filter`, the insert body and the
//! multipart batch body; and the entity count of a query response.

use percent_encoding::percent_decode_str;
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

use crate::azure::batch;
use crate::azure::filter;
use crate::azure::telemetry::{Operation, PartitionRef};

/// One operation as the proxy understood it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributed {
    pub table: Option<String>,
    pub operation: Operation,
    pub partition: PartitionRef,
    /// Entities the operation carries (1 for point operations); queries are counted later from
    /// the response.
    pub entity_count: u32,
}

impl Attributed {
    fn new(table: Option<String>, operation: Operation, partition: PartitionRef) -> Self {
        let entity_count = match operation {
            Operation::ListTables
            | Operation::CreateTable
            | Operation::DeleteTable
            | Operation::QueryEntities
            | Operation::Batch => 0,
            _ => 1,
        };
        Attributed {
            table,
            operation,
            partition,
            entity_count,
        }
    }
}

/// What a request is, before the response is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Classified {
    /// A single operation (everything except `$batch`).
    Single(Attributed),
    /// The operations of a `$batch`, in order.
    Batch(Vec<Attributed>),
    /// Not a Table operation the proxy knows (service properties, ACLs, …): forwarded, unrecorded.
    Unknown,
}

/// The request facts attribution needs; `headers` are looked up case-insensitively.
pub struct RequestView<'a> {
    pub method: &'a str,
    /// The resource path after the account segment (path-style) as sent, still percent-encoded,
    /// e.g. `/t1(PartitionKey='a',RowKey='b')`.
    pub resource: &'a str,
    pub query: Option<&'a str>,
    pub if_match: bool,
    /// `X-HTTP-Method` (Cosmos-style merge tunnelled through POST).
    pub x_http_method: Option<&'a str>,
    pub body: &'a [u8],
}

/// Classifies a request. `prefix` is the account path segment (`/devstoreaccount1`) or empty;
/// batch sub-requests use absolute URLs with that same prefix.
pub fn classify(req: &RequestView<'_>, prefix: &str) -> Classified {
    let method = effective_method(req.method, req.x_http_method);
    let decoded = percent_decode_str(req.resource.trim_start_matches('/')).decode_utf8_lossy();
    let resource = decoded.as_ref();
    if resource == "$batch" {
        return if method == "POST" {
            Classified::Batch(batch_operations(req.body, prefix))
        } else {
            Classified::Unknown
        };
    }
    match resolve(resource) {
        Some(Target::Tables { table }) => {
            let op = match method {
                "GET" => Operation::ListTables,
                "POST" => Operation::CreateTable,
                "DELETE" if table.is_some() => Operation::DeleteTable,
                _ => return Classified::Unknown,
            };
            let table = match op {
                Operation::CreateTable => create_table_name(req.body),
                _ => table,
            };
            Classified::Single(Attributed::new(table, op, PartitionRef::None))
        }
        Some(Target::Collection { table }) => match method {
            "GET" if req.query.is_some_and(has_comp) => Classified::Unknown,
            "GET" => Classified::Single(Attributed::new(
                Some(table),
                Operation::QueryEntities,
                query_partition(req.query),
            )),
            "POST" => Classified::Single(Attributed::new(
                Some(table),
                Operation::InsertEntity,
                body_partition(req.body),
            )),
            _ => Classified::Unknown,
        },
        Some(Target::Entity { table, partition }) => match entity_operation(method, req.if_match) {
            Some(op) => Classified::Single(Attributed::new(
                Some(table),
                op,
                PartitionRef::Key(partition),
            )),
            None => Classified::Unknown,
        },
        None => Classified::Unknown,
    }
}

/// POST with `X-HTTP-Method: MERGE` (or another verb) means that verb.
fn effective_method<'a>(method: &'a str, x_http_method: Option<&'a str>) -> &'a str {
    match x_http_method {
        Some(x) if method.eq_ignore_ascii_case("POST") && !x.trim().is_empty() => x.trim(),
        _ => method,
    }
}

fn entity_operation(method: &str, if_match: bool) -> Option<Operation> {
    Some(match (method.to_ascii_uppercase().as_str(), if_match) {
        ("GET", _) => Operation::GetEntity,
        ("PUT", true) => Operation::UpdateEntity,
        ("PUT", false) => Operation::InsertOrReplace,
        ("MERGE" | "PATCH", true) => Operation::MergeEntity,
        ("MERGE" | "PATCH", false) => Operation::InsertOrMerge,
        ("DELETE", _) => Operation::DeleteEntity,
        _ => return None,
    })
}

fn has_comp(query: &str) -> bool {
    query.split('&').any(|p| p.starts_with("comp="))
}

/// What a (decoded) resource path names.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// `Tables` or `Tables('t1')`.
    Tables { table: Option<String> },
    /// `t1` or `t1()`.
    Collection { table: String },
    /// `t1(PartitionKey='…',RowKey='…')`.
    Entity { table: String, partition: String },
}

/// Parses a decoded resource path (no leading `/`, no query).
fn resolve(resource: &str) -> Option<Target> {
    let resource = resource.trim_end_matches('/');
    if resource.is_empty() || resource.contains('/') {
        return None;
    }
    let (name, args) = match resource.split_once('(') {
        None => (resource, None),
        Some((name, rest)) => (name, Some(rest.strip_suffix(')')?)),
    };
    if name.eq_ignore_ascii_case("Tables") {
        let table = match args {
            None => None,
            Some(a) if a.trim().is_empty() => None,
            Some(a) => Some(quoted(a.trim())?.0),
        };
        return Some(Target::Tables { table });
    }
    let table = name.to_string();
    match args {
        None => Some(Target::Collection { table }),
        Some(a) if a.trim().is_empty() => Some(Target::Collection { table }),
        Some(a) => {
            let (pk, _rk) = entity_keys(a)?;
            Some(Target::Entity {
                table,
                partition: pk,
            })
        }
    }
}

/// `PartitionKey='…',RowKey='…'` (either order, optional spaces) → (pk, rk) with `''` undone.
pub fn entity_keys(args: &str) -> Option<(String, String)> {
    let mut pk = None;
    let mut rk = None;
    let mut rest = args.trim_start();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let (value, after) = quoted(after.trim_start())?;
        match name.trim() {
            "PartitionKey" => pk = Some(value),
            "RowKey" => rk = Some(value),
            _ => return None,
        }
        rest = after.trim_start();
        if let Some(next) = rest.strip_prefix(',') {
            rest = next.trim_start();
        } else if !rest.is_empty() {
            return None;
        }
    }
    Some((pk?, rk?))
}

/// A leading `'…'` literal with `''` as an embedded quote → (value, rest after the literal).
fn quoted(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('\'')?;
    let mut value = String::new();
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\'' {
            if chars.peek().is_some_and(|&(_, n)| n == '\'') {
                chars.next();
                value.push('\'');
            } else {
                return Some((value, &body[i + 1..]));
            }
        } else {
            value.push(c);
        }
    }
    None
}

/// The partition a query reads: the `PartitionKey eq` term of `$filter`, else a scan.
pub fn query_partition(query: Option<&str>) -> PartitionRef {
    let Some(raw) = query.and_then(|q| query_param(q, "$filter")) else {
        return PartitionRef::Scan;
    };
    // RFC 3986 first (`+` is a plus); some clients form-encode spaces as `+`, so retry that way.
    let strict = percent_decode_str(raw).decode_utf8_lossy();
    let parsed = filter::parse(&strict).ok().or_else(|| {
        raw.contains('+')
            .then(|| {
                percent_decode_str(&raw.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .and_then(|f| filter::parse(&f).ok())
    });
    match parsed.as_ref().and_then(filter::single_partition) {
        Some(pk) => PartitionRef::Key(pk.to_string()),
        None => PartitionRef::Scan,
    }
}

/// The raw (still encoded) value of a query parameter; `$` may arrive as `%24`.
fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode_str(k).decode_utf8_lossy() == name).then_some(v)
    })
}

#[derive(Deserialize)]
struct KeysOnly {
    #[serde(rename = "PartitionKey")]
    partition_key: Option<String>,
}

#[derive(Deserialize)]
struct TableNameOnly {
    #[serde(rename = "TableName")]
    table_name: Option<String>,
}

/// An insert's partition, from its JSON body.
pub fn body_partition(body: &[u8]) -> PartitionRef {
    match serde_json::from_slice::<KeysOnly>(body) {
        Ok(KeysOnly {
            partition_key: Some(pk),
        }) => PartitionRef::Key(pk),
        _ => PartitionRef::None,
    }
}

fn create_table_name(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<TableNameOnly>(body)
        .ok()
        .and_then(|t| t.table_name)
}

/// The operations of a `$batch` body, in order (PROTOCOL.md §5.2): each part's request line
/// `VERB absolute-URL HTTP/1.1`, its headers, then its JSON body.
pub fn batch_operations(body: &[u8], prefix: &str) -> Vec<Attributed> {
    let text = String::from_utf8_lossy(body);
    let mut ops = Vec::new();
    let mut lines = text
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .peekable();
    while let Some(line) = lines.next() {
        let Some((method, url)) = sub_request_line(line) else {
            continue;
        };
        let mut if_match = false;
        let mut x_http_method = None;
        for header in lines.by_ref() {
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let name = name.trim();
                if name.eq_ignore_ascii_case("If-Match") {
                    if_match = true;
                } else if name.eq_ignore_ascii_case("X-HTTP-Method") {
                    x_http_method = Some(value.trim().to_string());
                }
            }
        }
        let mut payload = String::new();
        while let Some(l) = lines.peek() {
            if l.starts_with("--") || sub_request_line(l).is_some() {
                break;
            }
            payload.push_str(l);
            lines.next();
        }
        let (path, query) = split_url(url);
        let resource = path.strip_prefix(prefix).unwrap_or(path);
        let view = RequestView {
            method,
            resource,
            query,
            if_match,
            x_http_method: x_http_method.as_deref(),
            body: payload.as_bytes(),
        };
        if let Classified::Single(mut op) = classify(&view, prefix) {
            op.entity_count = 1;
            ops.push(op);
        }
    }
    ops
}

fn sub_request_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_suffix(" HTTP/1.1")?;
    let (method, url) = rest.split_once(' ')?;
    let known = ["GET", "POST", "PUT", "MERGE", "PATCH", "DELETE"];
    (known.contains(&method) && url.contains("://")).then_some((method, url.trim()))
}

/// `scheme://authority/path?query` → (path, query).
fn split_url(url: &str) -> (&str, Option<&str>) {
    let after_scheme = url.split_once("://").map_or(url, |(_, r)| r);
    let path_and_query = after_scheme.find('/').map_or("/", |at| &after_scheme[at..]);
    match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    }
}

/// The outcome of each batch operation: (status, error code) per index. A failed changeset
/// answers only for the failing operation; nothing was applied, so every operation gets that
/// status and only the failing one gets the error code.
pub fn batch_outcomes(
    ops: usize,
    status: u16,
    error_code: Option<&str>,
    response: &[u8],
) -> Vec<(u16, Option<String>)> {
    if status != 202 {
        return vec![(status, error_code.map(str::to_string)); ops];
    }
    let subs = batch::parse_response(&String::from_utf8_lossy(response));
    if let Some(failed) = subs.iter().find(|s| s.status >= 400) {
        let (index, err) = batch::failure(failed);
        return (0..ops)
            .map(|i| (failed.status, (i == index).then(|| err.code().to_string())))
            .collect();
    }
    (0..ops)
        .map(|i| (subs.get(i).map_or(status, |s| s.status), None))
        .collect()
}

/// Number of entities in a query response (`{"value":[…]}`), without building them.
pub fn count_entities(body: &[u8]) -> Option<u32> {
    #[derive(Deserialize)]
    struct Page {
        value: Counted,
    }
    struct Counted(u32);
    impl<'de> Deserialize<'de> for Counted {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Counted;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an array")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Counted, A::Error> {
                    let mut n = 0u32;
                    while seq.next_element::<IgnoredAny>()?.is_some() {
                        n = n.saturating_add(1);
                    }
                    Ok(Counted(n))
                }
            }
            d.deserialize_seq(V)
        }
    }
    serde_json::from_slice::<Page>(body).ok().map(|p| p.value.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(method: &'a str, resource: &'a str, query: Option<&'a str>) -> RequestView<'a> {
        RequestView {
            method,
            resource,
            query,
            if_match: false,
            x_http_method: None,
            body: b"",
        }
    }

    fn single(c: Classified) -> Attributed {
        match c {
            Classified::Single(a) => a,
            other => panic!("expected one operation, got {other:?}"),
        }
    }

    #[test]
    fn entity_urls_decode_keys_with_quotes_spaces_and_unicode() {
        let cases = [
            (
                "/t1(PartitionKey='p%27%271%20x',RowKey='r1%20%C3%A9')",
                "p'1 x",
            ),
            ("/t1(PartitionKey='o''clock',RowKey='r')", "o'clock"),
            ("/t1(PartitionKey='a%2Cb%29',RowKey='r')", "a,b)"),
            ("/t1(PartitionKey='%E6%9D%B1%E4%BA%AC',RowKey='x')", "東京"),
            ("/t1(PartitionKey='zürich ✓',RowKey='x')", "zürich ✓"),
            ("/t1(PartitionKey='',RowKey='')", ""),
            ("/t1(PartitionKey='has space', RowKey='r')", "has space"),
            ("/t1(RowKey='r',PartitionKey='rev')", "rev"),
            (
                "/t1(PartitionKey='x'',RowKey=''y',RowKey='r')",
                "x',RowKey='y",
            ),
            (
                "/t1%28PartitionKey%3D%27enc%27%2CRowKey%3D%27r%27%29",
                "enc",
            ),
        ];
        for (path, pk) in cases {
            let a = single(classify(&view("GET", path, None), ""));
            assert_eq!(a.operation, Operation::GetEntity, "{path}");
            assert_eq!(a.partition, PartitionRef::Key(pk.into()), "{path}");
            assert_eq!(a.table.as_deref(), Some("t1"));
            assert_eq!(a.entity_count, 1);
        }
    }

    #[test]
    fn malformed_entity_urls_are_not_attributed() {
        for path in [
            "/t1(PartitionKey='a',RowKey='b'",
            "/t1(PartitionKey='a)",
            "/t1(PartitionKey='a')",
            "/t1(Foo='a',RowKey='b')",
            "/t1(PartitionKey='a' RowKey='b')",
            "/a/b/c",
        ] {
            assert_eq!(
                classify(&view("GET", path, None), ""),
                Classified::Unknown,
                "{path}"
            );
        }
    }

    #[test]
    fn operations_follow_method_and_if_match() {
        let path = "/t(PartitionKey='p',RowKey='r')";
        let op = |method: &str, if_match: bool, x: Option<&str>| {
            let v = RequestView {
                if_match,
                x_http_method: x,
                ..view(method, path, None)
            };
            single(classify(&v, "")).operation
        };
        assert_eq!(op("PUT", true, None), Operation::UpdateEntity);
        assert_eq!(op("PUT", false, None), Operation::InsertOrReplace);
        assert_eq!(op("MERGE", true, None), Operation::MergeEntity);
        assert_eq!(op("PATCH", false, None), Operation::InsertOrMerge);
        assert_eq!(op("POST", true, Some("MERGE")), Operation::MergeEntity);
        assert_eq!(op("POST", false, Some("MERGE")), Operation::InsertOrMerge);
        assert_eq!(op("DELETE", true, None), Operation::DeleteEntity);
    }

    #[test]
    fn queries_take_the_partition_from_the_filter() {
        let q = |query: Option<&str>| single(classify(&view("GET", "/t()", query), ""));
        let a = q(Some("$filter=PartitionKey%20eq%20%27o%27%27k%20%C3%A9%27%20and%20RowKey%20ge%20%271%27&$top=5"));
        assert_eq!(a.operation, Operation::QueryEntities);
        assert_eq!(a.partition, PartitionRef::Key("o'k é".into()));
        assert_eq!(a.entity_count, 0);
        let a = q(Some("%24filter=PartitionKey+eq+%27a+b%27"));
        assert_eq!(a.partition, PartitionRef::Key("a b".into()));
        let a = q(Some("$filter=PartitionKey%20eq%20%27a+b%27"));
        assert_eq!(a.partition, PartitionRef::Key("a+b".into()));
        assert_eq!(
            q(Some("$filter=RowKey%20eq%20%271%27")).partition,
            PartitionRef::Scan
        );
        assert_eq!(
            q(Some(
                "$filter=PartitionKey%20eq%20%27a%27%20or%20PartitionKey%20eq%20%27b%27"
            ))
            .partition,
            PartitionRef::Scan
        );
        assert_eq!(
            q(Some("$filter=not%20valid(")).partition,
            PartitionRef::Scan
        );
        assert_eq!(q(None).partition, PartitionRef::Scan);
        let a = single(classify(
            &view("GET", "/t", Some("$filter=PartitionKey%20eq%20%27x%27")),
            "",
        ));
        assert_eq!(a.operation, Operation::QueryEntities);
        assert_eq!(a.partition, PartitionRef::Key("x".into()));
    }

    #[test]
    fn inserts_take_the_partition_from_the_body() {
        let v = RequestView {
            body: br#"{"RowKey":"1","PartitionKey":"o'k \u00e9 \"q\"","N":{"x":1}}"#,
            ..view("POST", "/orders", None)
        };
        let a = single(classify(&v, ""));
        assert_eq!(a.operation, Operation::InsertEntity);
        assert_eq!(a.partition, PartitionRef::Key("o'k é \"q\"".into()));
        assert_eq!(a.table.as_deref(), Some("orders"));
        let v = RequestView {
            body: b"not json",
            ..view("POST", "/orders", None)
        };
        assert_eq!(single(classify(&v, "")).partition, PartitionRef::None);
    }

    #[test]
    fn table_operations_have_no_partition() {
        let a = single(classify(&view("GET", "/Tables", Some("$top=1")), ""));
        assert_eq!(
            (a.operation, a.partition),
            (Operation::ListTables, PartitionRef::None)
        );
        let v = RequestView {
            body: br#"{"TableName":"Orders"}"#,
            ..view("POST", "/Tables", None)
        };
        let a = single(classify(&v, ""));
        assert_eq!(a.operation, Operation::CreateTable);
        assert_eq!(a.table.as_deref(), Some("Orders"));
        let a = single(classify(&view("DELETE", "/Tables('Orders')", None), ""));
        assert_eq!(a.operation, Operation::DeleteTable);
        assert_eq!(a.table.as_deref(), Some("Orders"));
        assert_eq!(
            classify(&view("GET", "/t1", Some("comp=acl")), ""),
            Classified::Unknown
        );
        assert_eq!(classify(&view("GET", "/", None), ""), Classified::Unknown);
    }

    const BATCH: &str = "--batch_1\r\nContent-Type: multipart/mixed; boundary=changeset_1\r\n\r\n\
--changeset_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
POST http://127.0.0.1:9/devstoreaccount1/t1 HTTP/1.1\r\nContent-Type: application/json\r\nPrefer: return-no-content\r\n\r\n\
{\"PartitionKey\":\"p q\",\"RowKey\":\"1\",\"V\":1}\r\n\
--changeset_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
MERGE http://127.0.0.1:9/devstoreaccount1/t1(PartitionKey='p%20q',RowKey='2') HTTP/1.1\r\nIf-Match: *\r\nContent-Type: application/json\r\n\r\n\
{\"PartitionKey\":\"p q\",\"RowKey\":\"2\"}\r\n\
--changeset_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
POST http://127.0.0.1:9/devstoreaccount1/t1(PartitionKey='p%20q',RowKey='3') HTTP/1.1\r\nX-HTTP-Method: MERGE\r\n\r\n\
{\"PartitionKey\":\"p q\",\"RowKey\":\"3\"}\r\n\
--changeset_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
DELETE http://127.0.0.1:9/devstoreaccount1/t1(PartitionKey='p%20q',RowKey='4') HTTP/1.1\r\nIf-Match: *\r\n\r\n\
--changeset_1--\r\n--batch_1--\r\n";

    #[test]
    fn batches_yield_one_operation_per_part() {
        let v = RequestView {
            body: BATCH.as_bytes(),
            ..view("POST", "/$batch", None)
        };
        let Classified::Batch(ops) = classify(&v, "/devstoreaccount1") else {
            panic!("not a batch");
        };
        let kinds: Vec<_> = ops.iter().map(|o| o.operation).collect();
        assert_eq!(
            kinds,
            [
                Operation::InsertEntity,
                Operation::MergeEntity,
                Operation::InsertOrMerge,
                Operation::DeleteEntity
            ]
        );
        for o in &ops {
            assert_eq!(o.partition, PartitionRef::Key("p q".into()));
            assert_eq!(o.table.as_deref(), Some("t1"));
            assert_eq!(o.entity_count, 1);
        }
        // Host-style endpoints have no account segment in the sub-request paths.
        let host_style = BATCH.replace("/devstoreaccount1", "");
        assert_eq!(batch_operations(host_style.as_bytes(), "").len(), 4);
    }

    #[test]
    fn batch_failures_mark_every_operation_and_code_the_failing_one() {
        let failed = "--b\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n\r\n{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\",\"value\":\"1:The specified entity already exists.\\nRequestId:x\"}}}\r\n--b--\r\n";
        let out = batch_outcomes(3, 202, None, failed.as_bytes());
        assert_eq!(
            out,
            [
                (409, None),
                (409, Some("EntityAlreadyExists".into())),
                (409, None)
            ]
        );
        let ok = "--b\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n\r\n--b\r\n\r\nHTTP/1.1 201 Created\r\n\r\n{}\r\n--b--\r\n";
        assert_eq!(
            batch_outcomes(2, 202, None, ok.as_bytes()),
            [(204, None), (201, None)]
        );
        assert_eq!(
            batch_outcomes(2, 503, Some("ServerBusy"), b""),
            [
                (503, Some("ServerBusy".into())),
                (503, Some("ServerBusy".into()))
            ]
        );
    }

    #[test]
    fn query_responses_are_counted() {
        let body = br#"{"odata.metadata":"x","value":[{"PartitionKey":"a","V":[1,{"w":2}]},{},{"s":"]"}]}"#;
        assert_eq!(count_entities(body), Some(3));
        assert_eq!(count_entities(br#"{"value":[]}"#), Some(0));
        assert_eq!(count_entities(b"<xml/>"), None);
    }
}
