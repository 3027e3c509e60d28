//! TLS configuration from Kafka's `ssl.*` settings (docs/security.md, "TLS"), and the certificate
//! facts the node needs: the subject distinguished name as Kafka prints it (the input of
//! `ssl.principal.mapping.rules`) and the expiry.
//!
//! The settings are plain Rust values; the node's `server.properties` parser fills them in.
//! Only PEM stores are read (`ssl.keystore.type=PEM`, `ssl.truststore.type=PEM`): the keystore
//! file holds the private key and the certificate chain (leaf first), the truststore file the CA
//! certificates. The crypto provider is rustls's `ring` provider, passed to every config builder:
//! nothing depends on a process-wide default.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};
use thiserror::Error;
use x509_parser::asn1_rs::{Any, Tag, ToDer};
use x509_parser::prelude::{FromDer, X509Certificate};

/// Kafka's `ssl.client.auth`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client must present a certificate the truststore verifies.
    Required,
    /// A client may present one; if it does, it must verify.
    Requested,
    /// Client certificates are not asked for (Kafka's default).
    #[default]
    None,
}

impl ClientAuth {
    /// `required`, `requested` or `none`, as Kafka spells them (case-insensitive).
    pub fn parse(value: &str) -> Result<Self, TlsConfigError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "required" => Ok(Self::Required),
            "requested" => Ok(Self::Requested),
            "none" | "" => Ok(Self::None),
            other => Err(TlsConfigError::UnknownClientAuth(other.to_string())),
        }
    }
}

/// One entry of Kafka's `ssl.enabled.protocols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

impl TlsVersion {
    /// `TLSv1.2` or `TLSv1.3` (case-insensitive). Older versions are refused: rustls has none.
    pub fn parse(value: &str) -> Result<Self, TlsConfigError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "tlsv1.2" => Ok(Self::Tls12),
            "tlsv1.3" => Ok(Self::Tls13),
            other => Err(TlsConfigError::UnknownProtocol(other.to_string())),
        }
    }

    fn rustls(self) -> &'static SupportedProtocolVersion {
        match self {
            Self::Tls12 => &rustls::version::TLS12,
            Self::Tls13 => &rustls::version::TLS13,
        }
    }
}

/// The `ssl.*` settings the builders take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// `ssl.keystore.location` (PEM): the private key and the certificate chain, leaf first.
    /// Required for a server; for a client, the certificate it presents when asked.
    pub keystore_location: Option<PathBuf>,
    /// `ssl.truststore.location` (PEM): the CA certificates peers are verified against.
    /// Required for a client, and for a server whose `client_auth` is not `None`.
    pub truststore_location: Option<PathBuf>,
    /// `ssl.client.auth` (servers only).
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`; empty means TLS 1.2 and 1.3.
    pub enabled_protocols: Vec<TlsVersion>,
    /// `ssl.cipher.suites` by their IANA names (`TLS_AES_128_GCM_SHA256`,
    /// `TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`, ...), preferred first; empty means all of the
    /// provider's, the AES-256 ones last.
    pub cipher_suites: Vec<String>,
}

#[derive(Debug, Error)]
pub enum TlsConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {what}: {source}")]
    Pem {
        path: PathBuf,
        what: &'static str,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path} holds no {what}")]
    Missing { path: PathBuf, what: &'static str },
    #[error("{path}: certificate {index} is not a usable CA certificate: {source}")]
    BadCa {
        path: PathBuf,
        index: usize,
        source: rustls::Error,
    },
    #[error("{path}: the key and certificate chain were refused: {source}")]
    BadKeystore {
        path: PathBuf,
        source: rustls::Error,
    },
    #[error("{0} is required here")]
    Required(&'static str),
    #[error("unknown ssl.client.auth {0:?} (required, requested or none)")]
    UnknownClientAuth(String),
    #[error("unknown TLS protocol {0:?} (TLSv1.2 or TLSv1.3)")]
    UnknownProtocol(String),
    #[error("unknown or unsupported cipher suite {0:?}")]
    UnknownCipherSuite(String),
    #[error("no cipher suite left for the enabled protocols")]
    NoCipherSuites,
    #[error("building the verifier: {0}")]
    Verifier(String),
    #[error("TLS configuration refused: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("unparsable certificate: {0}")]
    Certificate(String),
}

/// A server config: the keystore's key and chain, client certificates asked for as
/// `client_auth` says and verified against the truststore.
pub fn server_config(settings: &TlsSettings) -> Result<Arc<ServerConfig>, TlsConfigError> {
    let keystore = settings
        .keystore_location
        .as_deref()
        .ok_or(TlsConfigError::Required("ssl.keystore.location"))?;
    let (chain, key) = read_keystore(keystore)?;
    let provider = provider(settings)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(settings))?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let path = settings
                .truststore_location
                .as_deref()
                .ok_or(TlsConfigError::Required(
                    "ssl.truststore.location (with ssl.client.auth)",
                ))?;
            let roots = Arc::new(read_truststore(path)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = match auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsConfigError::Verifier(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config =
        builder
            .with_single_cert(chain, key)
            .map_err(|source| TlsConfigError::BadKeystore {
                path: keystore.to_path_buf(),
                source,
            })?;
    Ok(Arc::new(config))
}

/// A client config: servers verified against the truststore (and their name, given at connect),
/// the keystore's certificate presented when the server asks, if there is a keystore.
pub fn client_config(settings: &TlsSettings) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let path = settings
        .truststore_location
        .as_deref()
        .ok_or(TlsConfigError::Required("ssl.truststore.location"))?;
    let roots = Arc::new(read_truststore(path)?);
    let provider = provider(settings)?;
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| TlsConfigError::Verifier(e.to_string()))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(settings))?
        .with_webpki_verifier(verifier);
    let config = match settings.keystore_location.as_deref() {
        Some(keystore) => {
            let (chain, key) = read_keystore(keystore)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|source| TlsConfigError::BadKeystore {
                    path: keystore.to_path_buf(),
                    source,
                })?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

fn versions(settings: &TlsSettings) -> Vec<&'static SupportedProtocolVersion> {
    if settings.enabled_protocols.is_empty() {
        vec![&rustls::version::TLS13, &rustls::version::TLS12]
    } else {
        settings
            .enabled_protocols
            .iter()
            .map(|v| v.rustls())
            .collect()
    }
}

/// The ring provider, its suites cut down to `ssl.cipher.suites` when that is set (in that
/// order, which is the order this side prefers them in). Unset, the provider's suites with the
/// AES-256 ones last: AES-128-GCM first, as Go's TLS (etcd's) orders them; over the voters'
/// mutual TLS the medians of five interleaved pairs were 8% more committed MB/s with 8% less
/// leader CPU per byte (docs/benchmarks.md, "The voters' cipher suite").
fn provider(settings: &TlsSettings) -> Result<Arc<CryptoProvider>, TlsConfigError> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .sort_by_key(|s| s.suite().as_str().is_some_and(|n| n.contains("AES_256")));
    if !settings.cipher_suites.is_empty() {
        let mut chosen = Vec::new();
        for name in &settings.cipher_suites {
            let name = name.trim();
            let suite = provider
                .cipher_suites
                .iter()
                .find(|s| names_suite(name, s.suite()))
                .ok_or_else(|| TlsConfigError::UnknownCipherSuite(name.to_string()))?;
            chosen.push(*suite);
        }
        provider.cipher_suites = chosen;
    }
    let versions = versions(settings);
    if !provider
        .cipher_suites
        .iter()
        .any(|s| versions.iter().any(|v| s.version() == *v))
    {
        return Err(TlsConfigError::NoCipherSuites);
    }
    Ok(Arc::new(provider))
}

fn read(path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    std::fs::read(path).map_err(|source| TlsConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn certificates(
    path: &Path,
    pem: &[u8],
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsConfigError::Pem {
            path: path.to_path_buf(),
            what,
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsConfigError::Missing {
            path: path.to_path_buf(),
            what,
        });
    }
    Ok(certs)
}

/// A PEM keystore: the certificate chain (leaf first) and the first private key (PKCS#8, PKCS#1
/// or SEC1; encrypted keys are not read).
pub fn read_keystore(
    path: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsConfigError> {
    let pem = read(path)?;
    let chain = certificates(path, &pem, "certificate")?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|source| match source {
        rustls::pki_types::pem::Error::NoItemsFound => TlsConfigError::Missing {
            path: path.to_path_buf(),
            what: "unencrypted private key",
        },
        source => TlsConfigError::Pem {
            path: path.to_path_buf(),
            what: "private key",
            source,
        },
    })?;
    Ok((chain, key))
}

/// A PEM truststore: every certificate in it becomes a trust anchor.
/// Checks client certificate chains against a truststore, as a server config built from the
/// same settings would: what a reload uses to find the open connections whose peers no longer
/// pass (docs/security.md, "Reloading").
pub struct ChainCheck {
    verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>,
}

impl ChainCheck {
    /// None when `settings` checks no client certificates (no truststore, or `client_auth`
    /// none).
    pub fn new(settings: &TlsSettings) -> Result<Option<Self>, TlsConfigError> {
        let Some(path) = settings.truststore_location.as_deref() else {
            return Ok(None);
        };
        if settings.client_auth == ClientAuth::None {
            return Ok(None);
        }
        let roots = Arc::new(read_truststore(path)?);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider(settings)?)
            .build()
            .map_err(|e| TlsConfigError::Verifier(e.to_string()))?;
        Ok(Some(ChainCheck { verifier }))
    }

    /// Whether `chain` (leaf first) verifies now; an empty chain passes (a connection that
    /// presented none was let in without one).
    pub fn passes(&self, chain: &[CertificateDer<'_>]) -> bool {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return true;
        };
        self.verifier
            .verify_client_cert(leaf, intermediates, rustls::pki_types::UnixTime::now())
            .is_ok()
    }
}

pub fn read_truststore(path: &Path) -> Result<RootCertStore, TlsConfigError> {
    let pem = read(path)?;
    let mut roots = RootCertStore::empty();
    for (index, cert) in certificates(path, &pem, "CA certificate")?
        .into_iter()
        .enumerate()
    {
        roots.add(cert).map_err(|source| TlsConfigError::BadCa {
            path: path.to_path_buf(),
            index,
            source,
        })?;
    }
    Ok(roots)
}

fn parse<'a>(cert: &'a CertificateDer<'_>) -> Result<X509Certificate<'a>, TlsConfigError> {
    let (_, parsed) = X509Certificate::from_der(cert.as_ref())
        .map_err(|e| TlsConfigError::Certificate(e.to_string()))?;
    Ok(parsed)
}

/// When the certificate stops being valid (its `notAfter`).
pub fn not_after(cert: &CertificateDer<'_>) -> Result<SystemTime, TlsConfigError> {
    let seconds = parse(cert)?.validity().not_after.timestamp();
    Ok(match u64::try_from(seconds) {
        Ok(after) => SystemTime::UNIX_EPOCH + Duration::from_secs(after),
        Err(_) => SystemTime::UNIX_EPOCH - Duration::from_secs(seconds.unsigned_abs()),
    })
}

/// The subject distinguished name as Kafka sees it (Java's `X500Principal.getName()`, RFC 2253):
/// the most specific RDN first (`CN=voter-2,OU=ringraft,O=Example`), attributes of one RDN
/// joined by `+`, the RFC 2253 keywords (CN, C, L, ST, O, OU, STREET, DC, UID) by name and any
/// other attribute as its dotted OID with the value as `#` and the hex of its DER encoding
/// (so an e-mail address prints as `1.2.840.113549.1.9.1=#16...`). In string values `,` `=` `+`
/// `<` `>` `#` `;` `"` `\` are escaped with a backslash, as are leading and trailing spaces.
pub fn subject_dn(cert: &CertificateDer<'_>) -> Result<String, TlsConfigError> {
    let parsed = parse(cert)?;
    let rdns: Vec<_> = parsed.subject().iter().collect();
    let mut out = String::new();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, attr) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let oid = attr.attr_type().to_id_string();
            let keyword = keyword(&oid);
            match (keyword, string_value(attr.attr_value())) {
                (Some(keyword), Some(value)) => {
                    out.push_str(keyword);
                    out.push('=');
                    escape_into(&value, &mut out);
                }
                (keyword, _) => {
                    out.push_str(keyword.unwrap_or(&oid));
                    out.push_str("=#");
                    let der = attr
                        .attr_value()
                        .to_der_vec()
                        .map_err(|e| TlsConfigError::Certificate(e.to_string()))?;
                    for byte in der {
                        let _ = write!(out, "{byte:02x}");
                    }
                }
            }
        }
    }
    Ok(out)
}

fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// The value of a directory string type, decoded; None for anything else (printed as hex).
fn string_value(value: &Any<'_>) -> Option<String> {
    let data = value.data;
    match value.tag() {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::NumericString => {
            std::str::from_utf8(data).ok().map(str::to_string)
        }
        // T61 (Teletex) read as Latin-1, as Java does.
        Tag::TeletexString => Some(data.iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString => {
            if !data.len().is_multiple_of(2) {
                return None;
            }
            let units: Vec<u16> = data
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        Tag::UniversalString => {
            if !data.len().is_multiple_of(4) {
                return None;
            }
            data.chunks_exact(4)
                .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
                .collect()
        }
        _ => None,
    }
}

fn escape_into(value: &str, out: &mut String) {
    let chars: Vec<char> = value.chars().collect();
    let lead = chars
        .iter()
        .position(|&c| c != ' ' && c != '\r')
        .unwrap_or(chars.len());
    let trail = chars
        .iter()
        .rposition(|&c| c != ' ' && c != '\r')
        .map_or(0, |i| i + 1);
    for (i, &c) in chars.iter().enumerate() {
        if c == '\0' {
            out.push_str("\\00");
            continue;
        }
        if ",=+<>#;\"\\".contains(c) || i < lead || i >= trail {
            out.push('\\');
        }
        out.push(c);
    }
}

/// True if `name` is `suite`'s IANA name, as Kafka's `ssl.cipher.suites` (and Java) write it
/// (`TLS_AES_128_GCM_SHA256`), or rustls's own (`TLS13_AES_128_GCM_SHA256`): for the TLS 1.3
/// suites the two differ.
fn names_suite(name: &str, suite: rustls::CipherSuite) -> bool {
    let Some(ours) = suite.as_str() else {
        return false;
    };
    let tls13_rest = ours.strip_prefix("TLS13_");
    name == ours || tls13_rest.is_some_and(|rest| name.strip_prefix("TLS_") == Some(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_suites(names: &[&str], protocols: &[TlsVersion]) -> TlsSettings {
        TlsSettings {
            cipher_suites: names.iter().map(|n| n.to_string()).collect(),
            enabled_protocols: protocols.to_vec(),
            ..TlsSettings::default()
        }
    }

    fn chosen(settings: &TlsSettings) -> Vec<rustls::CipherSuite> {
        let provider = provider(settings).unwrap();
        provider.cipher_suites.iter().map(|s| s.suite()).collect()
    }

    #[test]
    fn cipher_suites_are_named_as_kafka_names_them_and_kept_in_order() {
        use rustls::CipherSuite as S;
        let settings = with_suites(
            &[
                "TLS_AES_128_GCM_SHA256",
                " TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                "TLS_CHACHA20_POLY1305_SHA256",
            ],
            &[],
        );
        assert_eq!(
            chosen(&settings),
            [
                S::TLS13_AES_128_GCM_SHA256,
                S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                S::TLS13_CHACHA20_POLY1305_SHA256
            ]
        );
        // rustls's own spelling of a TLS 1.3 suite is taken too.
        let settings = with_suites(&["TLS13_AES_256_GCM_SHA384"], &[]);
        assert_eq!(chosen(&settings), [S::TLS13_AES_256_GCM_SHA384]);
    }

    #[test]
    fn unset_cipher_suites_are_all_the_providers_with_aes_128_ahead_of_aes_256() {
        use rustls::CipherSuite as S;
        let defaults = rustls::crypto::ring::default_provider().cipher_suites.len();
        let all = chosen(&with_suites(&[], &[]));
        assert_eq!(all.len(), defaults);
        let at = |suite| all.iter().position(|s| *s == suite).unwrap();
        assert_eq!(all[0], S::TLS13_AES_128_GCM_SHA256);
        assert!(at(S::TLS13_AES_128_GCM_SHA256) < at(S::TLS13_AES_256_GCM_SHA384));
        assert!(
            at(S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)
                < at(S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384)
        );
    }

    #[test]
    fn unknown_cipher_suites_and_suites_of_no_enabled_protocol_are_refused() {
        for name in ["TLS_AES_128_GCM", "TLS_RSA_WITH_AES_128_CBC_SHA", ""] {
            let settings = with_suites(&[name], &[]);
            assert!(
                matches!(provider(&settings), Err(TlsConfigError::UnknownCipherSuite(n)) if n == name),
                "{name:?}"
            );
        }
        let settings = with_suites(
            &["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
            &[TlsVersion::Tls13],
        );
        assert!(matches!(
            provider(&settings),
            Err(TlsConfigError::NoCipherSuites)
        ));
    }

    #[test]
    fn escaping_follows_java_rfc2253() {
        let mut out = String::new();
        escape_into(" a,b=c+d#e ", &mut out);
        assert_eq!(out, "\\ a\\,b\\=c\\+d\\#e\\ ");
        let mut out = String::new();
        escape_into("plain text", &mut out);
        assert_eq!(out, "plain text");
    }

    #[test]
    fn settings_words_parse() {
        assert_eq!(ClientAuth::parse("Required").unwrap(), ClientAuth::Required);
        assert_eq!(ClientAuth::parse("none").unwrap(), ClientAuth::None);
        assert!(ClientAuth::parse("maybe").is_err());
        assert_eq!(TlsVersion::parse("TLSv1.3").unwrap(), TlsVersion::Tls13);
        assert!(TlsVersion::parse("TLSv1.1").is_err());
    }
}
