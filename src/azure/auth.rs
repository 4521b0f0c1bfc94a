//! Shared Key and Shared Key Lite signatures for the Table service (PROTOCOL.md §1.3–1.6).

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::connection::{AccountKey, SigningScheme};

/// `/{account}{encoded path}[?comp=…]`: the path exactly as sent on the wire.
pub fn canonicalized_resource(account: &str, encoded_path: &str, query: Option<&str>) -> String {
    let mut out = format!("/{account}{encoded_path}");
    if let Some(comp) = query.and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("comp="))) {
        out.push_str("?comp=");
        out.push_str(comp);
    }
    out
}

pub fn string_to_sign(
    scheme: SigningScheme,
    verb: &str,
    content_type: &str,
    date: &str,
    canonicalized_resource: &str,
) -> String {
    match scheme {
        // Content-MD5 is never sent, so its line stays empty.
        SigningScheme::SharedKey => {
            format!("{verb}\n\n{content_type}\n{date}\n{canonicalized_resource}")
        }
        SigningScheme::SharedKeyLite => format!("{date}\n{canonicalized_resource}"),
    }
}

pub fn signature(key: &AccountKey, string_to_sign: &str) -> String {
    // HMAC accepts keys of any length, so construction cannot fail.
    let mut mac = match Hmac::<Sha256>::new_from_slice(key.bytes()) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(string_to_sign.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// The `Authorization` header value.
pub fn authorization(
    scheme: SigningScheme,
    account: &str,
    key: &AccountKey,
    verb: &str,
    content_type: &str,
    date: &str,
    canonicalized_resource: &str,
) -> String {
    let sts = string_to_sign(scheme, verb, content_type, date, canonicalized_resource);
    let label = match scheme {
        SigningScheme::SharedKey => "SharedKey",
        SigningScheme::SharedKeyLite => "SharedKeyLite",
    };
    format!("{label} {account}:{}", signature(key, &sts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::connection::DEV_KEY;

    const DATE: &str = "Mon, 01 Jan 2024 00:00:00 GMT";

    fn key() -> AccountKey {
        AccountKey::from_base64(DEV_KEY).unwrap()
    }

    #[test]
    fn shared_key_get_vector() {
        let res = canonicalized_resource(
            "devstoreaccount1",
            "/devstoreaccount1/mytable()",
            Some("$filter=x"),
        );
        assert_eq!(res, "/devstoreaccount1/devstoreaccount1/mytable()");
        let sts = string_to_sign(SigningScheme::SharedKey, "GET", "", DATE, &res);
        assert_eq!(
            sts,
            "GET\n\n\nMon, 01 Jan 2024 00:00:00 GMT\n/devstoreaccount1/devstoreaccount1/mytable()"
        );
        assert_eq!(
            signature(&key(), &sts),
            "mkOOxoNrAZNHja5Wu57H9Vs4fxh2RZTy7Jmvcw9G9f4="
        );
    }

    #[test]
    fn shared_key_post_vector() {
        let res = canonicalized_resource("devstoreaccount1", "/devstoreaccount1/mytable", None);
        let sts = string_to_sign(
            SigningScheme::SharedKey,
            "POST",
            "application/json",
            DATE,
            &res,
        );
        assert_eq!(
            signature(&key(), &sts),
            "7Yhnlsng3syaRPfj2ayn/5qq4m3n8VzeRdyCJyDK4Jw="
        );
    }

    #[test]
    fn shared_key_lite_vector() {
        let res = canonicalized_resource("devstoreaccount1", "/devstoreaccount1/Tables", None);
        let auth = authorization(
            SigningScheme::SharedKeyLite,
            "devstoreaccount1",
            &key(),
            "POST",
            "application/json",
            DATE,
            &res,
        );
        assert_eq!(
            auth,
            "SharedKeyLite devstoreaccount1:13UOPPE/P1+LLsRFYJCHphuPCEQ21EO/4WbbW+OXG4U="
        );
    }

    #[test]
    fn comp_parameter_is_the_only_query_part_signed() {
        let res = canonicalized_resource(
            "devstoreaccount1",
            "/",
            Some("restype=service&comp=properties"),
        );
        assert_eq!(res, "/devstoreaccount1/?comp=properties");
        let sts = string_to_sign(SigningScheme::SharedKey, "GET", "", DATE, &res);
        assert_eq!(
            signature(&key(), &sts),
            "t3bRRzkMy37DyPIM6TRZOVlIonBskQbhEjfHPF9rUcE="
        );
    }
}
