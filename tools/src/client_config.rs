//! `--command-config FILE`: how the admin commands reach a listener that is not PLAINTEXT, in
//! the properties Kafka's own tools read (docs/security.md, "A secured 3-node cluster").

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use net::client::{BlockingClient, ClientError};
use net::security::sasl::Mechanism;
use net::security::tls::{client_config, TlsSettings};

/// The keys a command config may hold.
const KEYS: &[&str] = &[
    "security.protocol",
    "ssl.truststore.location",
    "ssl.keystore.location",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
];

/// A parsed command config: TLS (with the CA to trust and an optional client certificate) and
/// a SASL login, each optional.
pub struct ClientSettings {
    tls: Option<Arc<rustls::ClientConfig>>,
    sasl: Option<(Mechanism, String, String)>,
}

impl ClientSettings {
    /// PLAINTEXT: no file.
    pub fn plaintext() -> Self {
        ClientSettings {
            tls: None,
            sasl: None,
        }
    }

    pub fn load(path: &Path) -> Result<Self, String> {
        let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let map: BTreeMap<String, String> = java_properties::read(std::io::BufReader::new(file))
            .map_err(|e| format!("{}: {e}", path.display()))?
            .into_iter()
            .collect();
        if let Some(key) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!("{}: unknown key `{key}`", path.display()));
        }
        let get = |key: &str| map.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        let protocol = get("security.protocol")
            .unwrap_or("PLAINTEXT")
            .to_ascii_uppercase();
        let (tls, sasl) = match protocol.as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => {
                return Err(format!(
                    "security.protocol {other}: not a security protocol"
                ))
            }
        };
        let tls = tls
            .then(|| {
                client_config(&TlsSettings {
                    truststore_location: get("ssl.truststore.location").map(PathBuf::from),
                    keystore_location: get("ssl.keystore.location").map(PathBuf::from),
                    ..TlsSettings::default()
                })
                .map_err(|e| format!("{}: {e}", path.display()))
            })
            .transpose()?;
        let sasl = sasl
            .then(|| -> Result<_, String> {
                let mechanism = get("sasl.mechanism").unwrap_or("SCRAM-SHA-512");
                let mechanism: Mechanism = mechanism
                    .parse()
                    .map_err(|e| format!("sasl.mechanism {mechanism}: {e}"))?;
                let user = get("sasl.username").ok_or("sasl.username is required for SASL")?;
                let password = get("sasl.password").ok_or("sasl.password is required for SASL")?;
                Ok((mechanism, user.to_owned(), password.to_owned()))
            })
            .transpose()?;
        Ok(ClientSettings { tls, sasl })
    }

    /// A connection to `server` (`host:port`, the host also the name its certificate must
    /// carry) at `addr`, authenticated as the settings say.
    pub fn connect(&self, server: &str, addr: SocketAddr) -> Result<BlockingClient, ClientError> {
        let timeout = Duration::from_secs(5);
        let mut client = match &self.tls {
            Some(config) => {
                let host = server
                    .rsplit_once(':')
                    .map_or(server, |(host, _)| host)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                BlockingClient::connect_tls(addr, timeout, config.clone(), host)
            }
            None => BlockingClient::connect(addr, timeout),
        }?;
        if let Some((mechanism, user, password)) = &self.sasl {
            client.authenticate(*mechanism, user, password)?;
        }
        Ok(client)
    }
}
