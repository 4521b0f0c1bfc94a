//! Errors of the protocol client: the service's own (status, code, message, request id, with a
//! plain-language sentence), client-side validation, transport, and refused writes.

use std::fmt;

use super::connection::ConnectionError;

/// An error response from the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceError {
    pub status: u16,
    /// `x-ms-error-code` (or the code in the body), e.g. `UpdateConditionNotSatisfied`.
    pub code: Option<String>,
    /// The service's message, first line only (the rest is request id and time), secrets removed.
    pub message: String,
    pub request_id: Option<String>,
}

impl ServiceError {
    pub fn code(&self) -> &str {
        self.code.as_deref().unwrap_or("")
    }

    /// What happened, in words a user acts on.
    pub fn plain(&self) -> String {
        let sentence = match self.code() {
            "EntityAlreadyExists" => "An entity with this PartitionKey and RowKey already exists.",
            "ResourceNotFound" | "EntityNotFound" => "The entity (or table) does not exist.",
            "TableNotFound" => "The table does not exist.",
            "TableAlreadyExists" => "A table with this name already exists.",
            "TableBeingDeleted" => "The table is being deleted; a table of the same name can be created again after about 40 seconds.",
            "UpdateConditionNotSatisfied" | "ConditionNotMet" => {
                "Someone changed the entity since you read it (its ETag no longer matches). Read it again and re-apply your change."
            }
            "AuthenticationFailed" | "AuthorizationFailure" => {
                "The service rejected the signature: check the account key (rotated?) and this machine's clock."
            }
            "AuthorizationPermissionMismatch" | "AuthorizationResourceTypeMismatch" | "AuthorizationServiceMismatch" => {
                "The SAS token does not allow this operation."
            }
            "InvalidInput" => "The service rejected the request as invalid input (a bad filter, key or value).",
            "OutOfRangeInput" => "A name or value is out of the allowed range.",
            "InvalidResourceName" => "The table name is invalid (3–63 letters and digits, starting with a letter).",
            "PropertyValueTooLarge" => "A property value is too large (strings and binaries are limited to 64 KiB).",
            "EntityTooLarge" => "The entity is larger than 1 MiB.",
            "TooManyProperties" => "The entity has more than 252 custom properties.",
            "PropertyNameInvalid" => "A property name is invalid.",
            "PropertyNameTooLong" => "A property name is longer than 255 characters.",
            "PropertiesNeedValue" => "PartitionKey and RowKey must both be given.",
            "DuplicatePropertiesSpecified" => "A property is given twice.",
            "InvalidValueType" => "A value does not match its declared type.",
            "ServerBusy" => "The service is throttling: the partition or account is over its target. Retries back off; spread load across partitions.",
            "OperationTimedOut" => "The operation timed out on the server (often a sign of throttling); a write may still have happened.",
            "InternalError" => "The service had an internal error.",
            "RequestBodyTooLarge" => "The request body is larger than 4 MiB.",
            "AtomFormatNotSupported" | "JsonFormatNotSupported" => "The service refused the payload format.",
            "InvalidHeaderValue" => "The service rejected a header (the emulator may be older than this API version).",
            _ => match self.status {
                400 => "The service rejected the request as bad.",
                403 => "Access denied.",
                404 => "Not found.",
                409 => "Conflict with the current state.",
                412 => "A condition (ETag) was not met.",
                429 => "Too many requests: the service is throttling.",
                500..=599 => "The service had an error.",
                _ => "The request failed.",
            },
        };
        sentence.to_string()
    }

    pub fn is_not_found(&self) -> bool {
        self.status == 404
    }

    pub fn is_precondition_failed(&self) -> bool {
        self.status == 412
    }

    pub fn is_conflict(&self) -> bool {
        self.status == 409
    }

    pub fn is_auth_failure(&self) -> bool {
        self.status == 403 && matches!(self.code(), "AuthenticationFailed" | "AuthorizationFailure")
    }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (HTTP {}", self.plain(), self.status)?;
        if let Some(code) = &self.code {
            write!(f, " {code}")?;
        }
        if !self.message.is_empty() && !self.plain().starts_with(self.message.trim_end_matches('.'))
        {
            write!(f, ": {}", self.message)?;
        }
        if let Some(id) = &self.request_id {
            write!(f, "; request id {id}")?;
        }
        f.write_str(")")
    }
}

/// A value that breaks one of the service's rules, caught before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct ValidationError {
    /// What was checked, e.g. `RowKey`, `property 'Amount'`, `table name 'a'`.
    pub field: String,
    /// The rule it broke.
    pub rule: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, rule: impl Into<String>) -> ValidationError {
        ValidationError {
            field: field.into(),
            rule: rule.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("{0}")]
    Service(ServiceError),
    #[error("invalid input: {0}")]
    Invalid(#[from] ValidationError),
    #[error("{0}")]
    Connection(#[from] ConnectionError),
    /// The request never got an answer: connection refused or reset, DNS, TLS, or a timeout.
    #[error("{message}")]
    Transport { message: String, timed_out: bool },
    #[error(
        "read-only: {operation} refused before sending (the profile or --read-only forbids writes)"
    )]
    ReadOnly { operation: &'static str },
    /// A write that would be unconditional without an explicit force.
    #[error("{0}")]
    NeedsCondition(String),
    #[error("unexpected response from the service: {0}")]
    Protocol(String),
    #[error("cancelled")]
    Cancelled,
}

impl TableError {
    pub fn service(&self) -> Option<&ServiceError> {
        match self {
            TableError::Service(e) => Some(e),
            _ => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        self.service().map(|e| e.status)
    }

    pub fn code(&self) -> Option<&str> {
        self.service().and_then(|e| e.code.as_deref())
    }

    pub fn is_not_found(&self) -> bool {
        self.service().is_some_and(ServiceError::is_not_found)
    }

    pub fn is_precondition_failed(&self) -> bool {
        self.service()
            .is_some_and(ServiceError::is_precondition_failed)
    }
}

pub type Result<T, E = TableError> = std::result::Result<T, E>;

/// Builds a ServiceError from a response's status, headers and body (JSON or XML forms).
pub fn decode_service_error(
    status: u16,
    header_code: Option<String>,
    request_id: Option<String>,
    body: &[u8],
) -> ServiceError {
    let text = String::from_utf8_lossy(body);
    let (body_code, body_message) = parse_error_body(&text);
    let code = header_code.or(body_code).filter(|c| !c.is_empty());
    let mut message = body_message.unwrap_or_default();
    // The first line is the sentence; the rest repeats the request id and time.
    if let Some(first) = message.lines().next() {
        message = first.trim().to_string();
    }
    // Auth failures quote the computed signature back; it must not reach a screen or log.
    if matches!(
        code.as_deref(),
        Some("AuthenticationFailed") | Some("AuthorizationFailure")
    ) {
        message.clear();
    }
    ServiceError {
        status,
        code,
        message: super::connection::redact_sas(&message),
        request_id,
    }
}

fn parse_error_body(text: &str) -> (Option<String>, Option<String>) {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let err = v.get("odata.error").or_else(|| v.get("error"));
        if let Some(err) = err {
            let code = err.get("code").and_then(|c| c.as_str()).map(str::to_string);
            let msg = err
                .get("message")
                .and_then(|m| m.get("value").or(Some(m)))
                .and_then(|m| m.as_str())
                .map(str::to_string);
            return (code, msg);
        }
    }
    let tag = |name: &str| -> Option<String> {
        let start = text.find(&format!("<{name}"))?;
        let after = &text[start..];
        let open_end = after.find('>')? + 1;
        let close = after.find(&format!("</{name}>"))?;
        (close >= open_end).then(|| after[open_end..close].trim().to_string())
    };
    let code = tag("Code").or_else(|| tag("code"));
    let msg = tag("Message").or_else(|| tag("message"));
    (code, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_error_body_gives_code_and_first_line() {
        let body = br#"{"odata.error":{"code":"EntityAlreadyExists","message":{"lang":"en-US","value":"The specified entity already exists.\nRequestId:abc\nTime:2024"}}}"#;
        let e = decode_service_error(409, None, Some("rid-1".into()), body);
        assert_eq!(e.code(), "EntityAlreadyExists");
        assert_eq!(e.message, "The specified entity already exists.");
        let shown = e.to_string();
        assert!(
            shown.contains("already exists") && shown.contains("409") && shown.contains("rid-1"),
            "{shown}"
        );
    }

    #[test]
    fn xml_error_body_and_header_code_are_understood() {
        let body = b"<?xml version=\"1.0\"?><Error><Code>AuthorizationFailure</Code><Message>Server failed to authenticate the request. The MAC signature found in the HTTP request 'c2lnbmF0dXJl' is not the same</Message></Error>";
        let e = decode_service_error(403, Some("AuthorizationFailure".into()), None, body);
        assert!(e.is_auth_failure());
        assert!(
            !e.to_string().contains("c2lnbmF0dXJl"),
            "signature leaked: {e}"
        );
    }

    #[test]
    fn empty_body_falls_back_to_the_status() {
        let e = decode_service_error(400, None, None, b"");
        assert!(e.to_string().contains("HTTP 400"));
    }

    #[test]
    fn precondition_failure_says_what_to_do() {
        let e = decode_service_error(412, Some("UpdateConditionNotSatisfied".into()), None, b"");
        assert!(e.plain().contains("Read it again"));
    }
}
