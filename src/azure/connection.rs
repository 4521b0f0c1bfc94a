//! Connection strings and credentials: every form the Azure tools print, parsed into an
//! endpoint plus a credential, with errors that name the offending part and never the secret.

use std::fmt;

use base64::Engine as _;

/// The emulator's well-known account (public, documented by Microsoft).
pub const DEV_ACCOUNT: &str = "devstoreaccount1";
/// The emulator's well-known key (public, documented by Microsoft).
pub const DEV_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
pub const DEV_TABLE_ENDPOINT: &str = "http://127.0.0.1:10002/devstoreaccount1";

/// Which Shared Key flavour signs requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SigningScheme {
    #[default]
    SharedKey,
    SharedKeyLite,
}

/// An account key: the decoded bytes; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AccountKey(Vec<u8>);

impl AccountKey {
    pub fn from_base64(text: &str) -> Result<AccountKey, ConnectionError> {
        base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map(AccountKey)
            .map_err(|_| {
                ConnectionError::new(
                    "AccountKey",
                    "is not valid Base64 (copy the key again from the portal; it ends with '==')",
                )
            })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccountKey(<redacted>)")
    }
}

/// A SAS token (query string without the leading `?`); Debug hides the signature.
#[derive(Clone, PartialEq, Eq)]
pub struct SasToken(String);

impl SasToken {
    pub fn new(token: &str) -> Result<SasToken, ConnectionError> {
        let token = token.trim().trim_start_matches('?');
        if token.is_empty() {
            return Err(ConnectionError::new("SharedAccessSignature", "is empty"));
        }
        if !token.split('&').any(|kv| kv.starts_with("sig=")) {
            return Err(ConnectionError::new(
                "SharedAccessSignature",
                "has no sig= parameter (paste the whole token, e.g. sv=…&sig=…)",
            ));
        }
        Ok(SasToken(token.to_string()))
    }

    pub fn query(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SasToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SasToken({})", redact_sas(&self.0))
    }
}

/// Replaces the value of every `sig=` parameter in a query-like string.
pub fn redact_sas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("sig=") {
        let at_boundary = i == 0 || matches!(rest.as_bytes()[i - 1], b'&' | b'?' | b';' | b' ');
        out.push_str(&rest[..i + 4]);
        rest = &rest[i + 4..];
        if at_boundary {
            let end = rest.find(['&', ';', ' ', '"', '\'']).unwrap_or(rest.len());
            out.push_str("<redacted>");
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    SharedKey {
        key: AccountKey,
        scheme: SigningScheme,
    },
    Sas(SasToken),
}

/// Where requests go and how they are signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// Account name used in signatures (the primary name).
    pub name: String,
    /// The table endpoint without a trailing slash, e.g. `https://acct.table.core.windows.net`
    /// or `http://127.0.0.1:10002/devstoreaccount1`.
    pub endpoint: String,
    pub secondary_endpoint: Option<String>,
    pub credential: Credential,
    /// Cosmos DB for Table: merge is sent as POST + `X-HTTP-Method: MERGE`.
    pub cosmos: bool,
}

impl Account {
    /// The local emulator with its well-known account.
    pub fn development() -> Account {
        Account::development_at(DEV_TABLE_ENDPOINT)
    }

    pub fn development_at(endpoint: &str) -> Account {
        Account {
            name: DEV_ACCOUNT.to_string(),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            secondary_endpoint: None,
            credential: Credential::SharedKey {
                key: AccountKey(
                    base64::engine::general_purpose::STANDARD
                        .decode(DEV_KEY)
                        .unwrap_or_default(),
                ),
                scheme: SigningScheme::SharedKey,
            },
            cosmos: false,
        }
    }

    /// Parses a connection string (keys case-insensitive, pairs split at the first `=`).
    pub fn from_connection_string(cs: &str) -> Result<Account, ConnectionError> {
        let mut fields = Fields::default();
        for (n, segment) in cs.split(';').enumerate() {
            let segment = segment.trim();
            if segment.is_empty() {
                continue;
            }
            let Some((key, value)) = segment.split_once('=') else {
                return Err(ConnectionError::new(
                    &format!("part {}", n + 1),
                    "is not Key=Value (parts are separated by ';')",
                ));
            };
            let key = key.trim();
            let value = value.trim().to_string();
            let slot = match key.to_ascii_lowercase().as_str() {
                "defaultendpointsprotocol" => &mut fields.protocol,
                "accountname" => &mut fields.account_name,
                "accountkey" => &mut fields.account_key,
                "endpointsuffix" => &mut fields.endpoint_suffix,
                "tableendpoint" => &mut fields.table_endpoint,
                "tablesecondaryendpoint" => &mut fields.table_secondary,
                "sharedaccesssignature" => &mut fields.sas,
                "usedevelopmentstorage" => &mut fields.use_dev,
                "developmentstorageproxyuri" => &mut fields.dev_proxy,
                // Other services' settings in a full storage connection string do not concern tables.
                "blobendpoint" | "queueendpoint" | "fileendpoint" | "blobsecondaryendpoint"
                | "queuesecondaryendpoint" | "filesecondaryendpoint" => continue,
                _ => {
                    return Err(ConnectionError::new(
                        key,
                        "is not a connection-string setting (expected AccountName, AccountKey, TableEndpoint, \
                         DefaultEndpointsProtocol, EndpointSuffix, SharedAccessSignature or UseDevelopmentStorage)",
                    ))
                }
            };
            if slot.is_some() {
                return Err(ConnectionError::new(key, "is given twice"));
            }
            *slot = Some(value);
        }
        fields.into_account()
    }

    /// The account for `AZURE_STORAGE_CONNECTION_STRING`, if set.
    pub fn from_env() -> Option<Result<Account, ConnectionError>> {
        std::env::var("AZURE_STORAGE_CONNECTION_STRING")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .map(|s| Account::from_connection_string(&s))
    }

    /// Same endpoint, another key (a profile's secondary key).
    pub fn with_key(&self, key: AccountKey) -> Account {
        let scheme = match &self.credential {
            Credential::SharedKey { scheme, .. } => *scheme,
            Credential::Sas(_) => SigningScheme::SharedKey,
        };
        Account {
            credential: Credential::SharedKey { key, scheme },
            ..self.clone()
        }
    }

    pub fn with_scheme(mut self, scheme: SigningScheme) -> Account {
        if let Credential::SharedKey { scheme: s, .. } = &mut self.credential {
            *s = scheme;
        }
        self
    }

    /// A label that is safe to show: account and endpoint, no secret.
    pub fn describe(&self) -> String {
        format!("{} at {}", self.name, self.endpoint)
    }

    pub fn is_emulator(&self) -> bool {
        self.name == DEV_ACCOUNT && is_local_host(host_of(&self.endpoint).unwrap_or(""))
    }
}

#[derive(Default)]
struct Fields {
    protocol: Option<String>,
    account_name: Option<String>,
    account_key: Option<String>,
    endpoint_suffix: Option<String>,
    table_endpoint: Option<String>,
    table_secondary: Option<String>,
    sas: Option<String>,
    use_dev: Option<String>,
    dev_proxy: Option<String>,
}

impl Fields {
    fn into_account(self) -> Result<Account, ConnectionError> {
        if let Some(v) = &self.use_dev {
            if !v.eq_ignore_ascii_case("true") {
                return Err(ConnectionError::new(
                    "UseDevelopmentStorage",
                    "must be 'true' when present",
                ));
            }
            if self.dev_proxy.is_some() {
                return Err(ConnectionError::new(
                    "DevelopmentStorageProxyUri",
                    "is not supported",
                ));
            }
            return Ok(Account::development());
        }
        if self.dev_proxy.is_some() {
            return Err(ConnectionError::new(
                "DevelopmentStorageProxyUri",
                "is only meaningful with UseDevelopmentStorage=true",
            ));
        }
        let protocol = match self
            .protocol
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("https") => "https",
            Some("http") => "http",
            Some(_) => {
                return Err(ConnectionError::new(
                    "DefaultEndpointsProtocol",
                    "must be http or https",
                ))
            }
        };
        let endpoint = match (&self.table_endpoint, &self.account_name) {
            (Some(e), _) => normalise_endpoint(e, "TableEndpoint")?,
            (None, Some(name)) => {
                let suffix = self.endpoint_suffix.as_deref().unwrap_or("core.windows.net");
                if suffix.is_empty() || suffix.contains('/') {
                    return Err(ConnectionError::new("EndpointSuffix", "must be a DNS suffix like core.windows.net"));
                }
                format!("{protocol}://{name}.table.{suffix}")
            }
            (None, None) => {
                return Err(ConnectionError::new(
                    "AccountName",
                    "is missing (give AccountName with AccountKey, or TableEndpoint with SharedAccessSignature)",
                ))
            }
        };
        let secondary_endpoint = self
            .table_secondary
            .as_deref()
            .map(|e| normalise_endpoint(e, "TableSecondaryEndpoint"))
            .transpose()?;
        let name = match &self.account_name {
            Some(n) => n.clone(),
            None => account_from_endpoint(&endpoint).ok_or_else(|| {
                ConnectionError::new(
                    "TableEndpoint",
                    "does not reveal the account name; add AccountName=",
                )
            })?,
        };
        if name.is_empty() {
            return Err(ConnectionError::new("AccountName", "is empty"));
        }
        let credential = match (&self.account_key, &self.sas) {
            (Some(_), Some(_)) => {
                return Err(ConnectionError::new(
                    "SharedAccessSignature",
                    "cannot be combined with AccountKey (use one credential)",
                ))
            }
            (Some(key), None) => Credential::SharedKey {
                key: AccountKey::from_base64(key)?,
                scheme: SigningScheme::SharedKey,
            },
            (None, Some(sas)) => Credential::Sas(SasToken::new(sas)?),
            (None, None) => {
                return Err(ConnectionError::new(
                    "AccountKey",
                    "is missing (give AccountKey or SharedAccessSignature)",
                ))
            }
        };
        let cosmos = is_cosmos_endpoint(&endpoint);
        Ok(Account {
            name,
            endpoint,
            secondary_endpoint,
            credential,
            cosmos,
        })
    }
}

fn normalise_endpoint(e: &str, field: &str) -> Result<String, ConnectionError> {
    let e = e.trim().trim_end_matches('/');
    let Some(rest) = e
        .strip_prefix("https://")
        .or_else(|| e.strip_prefix("http://"))
    else {
        return Err(ConnectionError::new(
            field,
            "must start with https:// or http://",
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(ConnectionError::new(field, "has no host"));
    }
    if e.contains('?') || e.contains('#') {
        return Err(ConnectionError::new(
            field,
            "must not contain a query string (put a SAS token in SharedAccessSignature=)",
        ));
    }
    Ok(e.to_string())
}

fn host_of(endpoint: &str) -> Option<&str> {
    let rest = endpoint.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    Some(host)
}

fn is_local_host(host: &str) -> bool {
    host == "localhost"
        || host == "host.docker.internal"
        || host.parse::<std::net::IpAddr>().is_ok()
}

/// Path-style endpoints (IP, localhost) carry the account as the first path segment;
/// host-style ones as the first DNS label.
fn account_from_endpoint(endpoint: &str) -> Option<String> {
    let host = host_of(endpoint)?;
    if is_local_host(host) {
        let rest = endpoint.split_once("://")?.1;
        let segment = rest.split('/').nth(1)?;
        (!segment.is_empty()).then(|| segment.to_string())
    } else {
        let label = host.split('.').next()?;
        (!label.is_empty()).then(|| label.trim_end_matches("-secondary").to_string())
    }
}

fn is_cosmos_endpoint(endpoint: &str) -> bool {
    host_of(endpoint).is_some_and(|h| {
        let h = h.to_ascii_lowercase();
        h.contains(".table.cosmos.") || h.contains(".table.cosmosdb.")
    })
}

/// A bad connection string: which part, and what rule it broke. Never holds a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("connection string: {part} {rule}")]
pub struct ConnectionError {
    pub part: String,
    pub rule: String,
}

impl ConnectionError {
    fn new(part: &str, rule: &str) -> ConnectionError {
        ConnectionError {
            part: part.to_string(),
            rule: rule.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    #[test]
    fn development_storage_shorthand_targets_local_azurite() {
        let a = Account::from_connection_string("UseDevelopmentStorage=true").unwrap();
        assert_eq!(a.name, "devstoreaccount1");
        assert_eq!(a.endpoint, "http://127.0.0.1:10002/devstoreaccount1");
        assert!(a.is_emulator());
    }

    #[test]
    fn account_key_form_builds_the_default_endpoint() {
        let a = Account::from_connection_string(&format!(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};EndpointSuffix=core.chinacloudapi.cn"
        ))
        .unwrap();
        assert_eq!(a.endpoint, "https://acct.table.core.chinacloudapi.cn");
        let a =
            Account::from_connection_string(&format!("accountname=acct;accountkey={KEY}")).unwrap();
        assert_eq!(a.endpoint, "https://acct.table.core.windows.net");
        assert!(!a.cosmos);
    }

    #[test]
    fn explicit_table_endpoint_wins_and_loses_its_trailing_slash() {
        let a = Account::from_connection_string(&format!(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};TableEndpoint=https://acct.table.cosmos.azure.com:443/;"
        ))
        .unwrap();
        assert_eq!(a.endpoint, "https://acct.table.cosmos.azure.com:443");
        assert!(a.cosmos);
    }

    #[test]
    fn sas_with_endpoint_derives_the_account_name() {
        let a = Account::from_connection_string("TableEndpoint=https://myacct.table.core.windows.net/;SharedAccessSignature=sv=2019-02-02&tn=t&sp=r&sig=abc%2Bdef")
            .unwrap();
        assert_eq!(a.name, "myacct");
        assert!(matches!(a.credential, Credential::Sas(_)));
        let a = Account::from_connection_string("TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;SharedAccessSignature=?sv=x&sig=y").unwrap();
        assert_eq!(a.name, "devstoreaccount1");
    }

    #[test]
    fn path_style_localhost_endpoint_takes_the_account_from_the_path() {
        let a = Account::from_connection_string(&format!(
            "TableEndpoint=http://localhost:10002/devstoreaccount1;AccountKey={KEY}"
        ))
        .unwrap();
        assert_eq!(a.name, "devstoreaccount1");
    }

    #[test]
    fn errors_name_the_part_and_never_the_key() {
        let err =
            Account::from_connection_string("AccountName=a;AccountKey=not base64!!").unwrap_err();
        assert_eq!(err.part, "AccountKey");
        assert!(!err.to_string().contains("not base64"), "{err}");
        let err =
            Account::from_connection_string(&format!("AccountName=a;AcountKey={KEY}")).unwrap_err();
        assert_eq!(err.part, "AcountKey");
        assert!(!err.to_string().contains(KEY));
        let err = Account::from_connection_string("AccountName=a").unwrap_err();
        assert_eq!(err.part, "AccountKey");
        let err = Account::from_connection_string("garbage").unwrap_err();
        assert!(err.to_string().contains("part 1"), "{err}");
        let err = Account::from_connection_string(&format!(
            "AccountName=a;AccountKey={KEY};TableEndpoint=ftp://x"
        ))
        .unwrap_err();
        assert_eq!(err.part, "TableEndpoint");
        let err = Account::from_connection_string(&format!(
            "DefaultEndpointsProtocol=gopher;AccountName=a;AccountKey={KEY}"
        ))
        .unwrap_err();
        assert_eq!(err.part, "DefaultEndpointsProtocol");
        let err = Account::from_connection_string(
            "TableEndpoint=https://a.table.core.windows.net;SharedAccessSignature=sv=1",
        )
        .unwrap_err();
        assert!(err.to_string().contains("sig="));
    }

    #[test]
    fn debug_output_hides_keys_and_signatures() {
        let a =
            Account::from_connection_string(&format!("AccountName=a;AccountKey={KEY}")).unwrap();
        assert!(!format!("{a:?}").contains("Eby8"));
        let a = Account::from_connection_string("TableEndpoint=https://a.table.core.windows.net;SharedAccessSignature=sv=1&sig=SECRETSIG").unwrap();
        assert!(!format!("{a:?}").contains("SECRETSIG"));
    }

    #[test]
    fn redact_sas_hides_every_signature() {
        assert_eq!(
            redact_sas("http://x/t()?sv=1&sig=abc%2B&se=2"),
            "http://x/t()?sv=1&sig=<redacted>&se=2"
        );
        assert_eq!(redact_sas("design=1"), "design=1");
    }
}
