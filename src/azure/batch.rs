//! Entity group transactions (`$batch`, PROTOCOL.md §5): up to 100 writes to one partition,
//! applied atomically, as one multipart request.

use super::client::{entity_path, Condition, UpdateMode};
use super::edm::Entity;
use super::error::{ServiceError, ValidationError};
use super::validate;

pub const MAX_BATCH_OPERATIONS: usize = 100;
/// The service refuses bodies of 4 MiB or more.
pub const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// One write in a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchOp {
    Insert(Entity),
    Update(Entity, UpdateMode, Condition),
    Upsert(Entity, UpdateMode),
    Delete {
        partition_key: String,
        row_key: String,
        condition: Condition,
    },
}

impl BatchOp {
    pub fn keys(&self) -> (&str, &str) {
        match self {
            BatchOp::Insert(e) | BatchOp::Update(e, ..) | BatchOp::Upsert(e, _) => {
                (&e.partition_key, &e.row_key)
            }
            BatchOp::Delete {
                partition_key,
                row_key,
                ..
            } => (partition_key, row_key),
        }
    }

    fn entity(&self) -> Option<&Entity> {
        match self {
            BatchOp::Insert(e) | BatchOp::Update(e, ..) | BatchOp::Upsert(e, _) => Some(e),
            BatchOp::Delete { .. } => None,
        }
    }
}

/// Checks the service's batch rules before anything is sent.
pub fn validate_ops(ops: &[BatchOp]) -> Result<(), ValidationError> {
    if ops.is_empty() {
        return Err(ValidationError::new("batch", "has no operations"));
    }
    if ops.len() > MAX_BATCH_OPERATIONS {
        return Err(ValidationError::new(
            "batch",
            format!(
                "has {} operations; the limit is {MAX_BATCH_OPERATIONS}",
                ops.len()
            ),
        ));
    }
    let pk = ops[0].keys().0;
    for (i, op) in ops.iter().enumerate() {
        let (p, r) = op.keys();
        if p != pk {
            return Err(ValidationError::new(
                format!("batch operation {i}"),
                format!("has PartitionKey '{p}' but the batch is for '{pk}': a batch writes one partition"),
            ));
        }
        if ops[..i].iter().any(|o| o.keys().1 == r) {
            return Err(ValidationError::new(
                format!("batch operation {i}"),
                format!("repeats RowKey '{r}': one operation per entity"),
            ));
        }
        match op.entity() {
            Some(e) => validate::entity(e)?,
            None => {
                validate::key("PartitionKey", p)?;
                validate::key("RowKey", r)?;
            }
        }
    }
    Ok(())
}

/// The multipart body and its boundary.
pub fn build_body(
    endpoint: &str,
    table: &str,
    ops: &[BatchOp],
    boundary_id: &str,
    cosmos: bool,
) -> (String, String) {
    let batch = format!("batch_{boundary_id}");
    let changeset = format!("changeset_{boundary_id}");
    let mut body = String::with_capacity(ops.len() * 512);
    body.push_str(&format!(
        "--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
    ));
    for op in ops {
        body.push_str(&format!(
            "--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        ));
        let (pk, rk) = op.keys();
        let path = entity_path(table, pk, rk);
        let (line, if_match, payload) = match op {
            BatchOp::Insert(e) => (
                format!("POST {endpoint}/{table} HTTP/1.1"),
                None,
                Some(e.to_request_json()),
            ),
            BatchOp::Update(e, mode, cond) => (
                format!("{} {endpoint}{path} HTTP/1.1", verb(*mode, cosmos)),
                Some(match cond {
                    Condition::IfMatch(t) => t.clone(),
                    Condition::Force => "*".into(),
                }),
                Some(e.to_request_json()),
            ),
            BatchOp::Upsert(e, mode) => (
                format!("{} {endpoint}{path} HTTP/1.1", verb(*mode, cosmos)),
                None,
                Some(e.to_request_json()),
            ),
            BatchOp::Delete { condition, .. } => (
                format!("DELETE {endpoint}{path} HTTP/1.1"),
                Some(match condition {
                    Condition::IfMatch(t) => t.clone(),
                    Condition::Force => "*".into(),
                }),
                None,
            ),
        };
        body.push_str(&line);
        body.push_str(
            "\r\nAccept: application/json;odata=minimalmetadata\r\nDataServiceVersion: 3.0;\r\n",
        );
        if cosmos
            && matches!(
                op,
                BatchOp::Update(_, UpdateMode::Merge, _) | BatchOp::Upsert(_, UpdateMode::Merge)
            )
        {
            body.push_str("X-HTTP-Method: MERGE\r\n");
        }
        if matches!(op, BatchOp::Insert(_)) {
            body.push_str("Prefer: return-no-content\r\n");
        }
        if let Some(m) = if_match {
            body.push_str(&format!("If-Match: {m}\r\n"));
        }
        match payload {
            Some(p) => body.push_str(&format!("Content-Type: application/json\r\n\r\n{p}\r\n")),
            None => body.push_str("\r\n"),
        }
    }
    body.push_str(&format!("--{changeset}--\r\n--{batch}--\r\n"));
    (format!("multipart/mixed; boundary={batch}"), body)
}

fn verb(mode: UpdateMode, cosmos: bool) -> &'static str {
    match (mode, cosmos) {
        (UpdateMode::Replace, _) => "PUT",
        (UpdateMode::Merge, true) => "POST",
        (UpdateMode::Merge, false) => "MERGE",
    }
}

/// One sub-response: status, ETag, and the body (for errors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubResponse {
    pub status: u16,
    pub etag: Option<String>,
    pub body: String,
}

/// Splits a batch response into its sub-responses, in order (boundaries are not needed: each
/// part starts with an HTTP status line).
pub fn parse_response(body: &str) -> Vec<SubResponse> {
    let mut out = Vec::new();
    let mut current: Option<SubResponse> = None;
    let mut in_body = false;
    for line in body.split('\n').map(|l| l.trim_end_matches('\r')) {
        if let Some(rest) = line.strip_prefix("HTTP/1.1 ") {
            if let Some(done) = current.take() {
                out.push(done);
            }
            let status = rest
                .split(' ')
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            current = Some(SubResponse {
                status,
                etag: None,
                body: String::new(),
            });
            in_body = false;
            continue;
        }
        let Some(c) = current.as_mut() else { continue };
        if line.starts_with("--") {
            in_body = false;
            continue;
        }
        if in_body {
            c.body.push_str(line);
        } else if line.is_empty() {
            in_body = true;
        } else if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("etag") {
                c.etag = Some(value.trim().to_string());
            }
        }
    }
    if let Some(done) = current {
        out.push(done);
    }
    out
}

/// The failing operation of a failed batch: its index (from the message prefix `N:`) and error.
pub fn failure(sub: &SubResponse) -> (usize, ServiceError) {
    let mut err = super::error::decode_service_error(sub.status, None, None, sub.body.as_bytes());
    let (index, rest) = match err.message.split_once(':') {
        Some((n, rest)) if n.trim().parse::<usize>().is_ok() => {
            (n.trim().parse().unwrap_or(0), rest.trim().to_string())
        }
        _ => (0, err.message.clone()),
    };
    err.message = format!("batch operation {index}: {rest}");
    (index, err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::EdmValue;

    #[test]
    fn batches_must_target_one_partition_and_distinct_rows() {
        let ops = vec![
            BatchOp::Insert(Entity::new("a", "1")),
            BatchOp::Insert(Entity::new("b", "2")),
        ];
        assert!(validate_ops(&ops)
            .unwrap_err()
            .rule
            .contains("one partition"));
        let ops = vec![
            BatchOp::Insert(Entity::new("a", "1")),
            BatchOp::Upsert(Entity::new("a", "1"), UpdateMode::Merge),
        ];
        assert!(validate_ops(&ops).unwrap_err().rule.contains("RowKey '1'"));
        let ops: Vec<_> = (0..101)
            .map(|i| BatchOp::Insert(Entity::new("a", i.to_string())))
            .collect();
        assert!(validate_ops(&ops).unwrap_err().rule.contains("100"));
    }

    #[test]
    fn body_has_one_part_per_operation_with_crlf() {
        let ops = vec![
            BatchOp::Insert(Entity::new("p", "1").with("V", EdmValue::Int32(1))),
            BatchOp::Update(Entity::new("p", "2"), UpdateMode::Merge, Condition::Force),
            BatchOp::Delete {
                partition_key: "p".into(),
                row_key: "3".into(),
                condition: Condition::IfMatch("W/\"x\"".into()),
            },
        ];
        let (ct, body) = build_body("http://h/acct", "t", &ops, "id", false);
        assert_eq!(ct, "multipart/mixed; boundary=batch_id");
        assert_eq!(body.matches("Content-Type: application/http").count(), 3);
        assert!(body.contains("POST http://h/acct/t HTTP/1.1\r\n"));
        assert!(body.contains("MERGE http://h/acct/t(PartitionKey='p',RowKey='2') HTTP/1.1\r\n"));
        assert!(body.contains("If-Match: W/\"x\"\r\n"));
        assert!(body.ends_with("--changeset_id--\r\n--batch_id--\r\n"));
    }

    #[test]
    fn responses_split_by_status_line_and_failures_carry_the_index() {
        let ok = "--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_1\r\n\r\n--changesetresponse_1\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 204 No Content\r\nETag: W/\"a\"\r\n\r\n\r\n--changesetresponse_1\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 204 No Content\r\nETag: W/\"b\"\r\n\r\n\r\n--changesetresponse_1--\r\n--batchresponse_1--\r\n";
        let subs = parse_response(ok);
        assert_eq!(subs.len(), 2);
        assert_eq!(subs[1].etag.as_deref(), Some("W/\"b\""));
        let bad = "--b\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n\r\n{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\",\"value\":\"1:The specified entity already exists.\\nRequestId:x\"}}}\r\n--b--\r\n";
        let subs = parse_response(bad);
        let (index, err) = failure(&subs[0]);
        assert_eq!(index, 1);
        assert_eq!(err.code(), "EntityAlreadyExists");
        assert!(
            err.message.starts_with("batch operation 1:"),
            "{}",
            err.message
        );
    }
}
