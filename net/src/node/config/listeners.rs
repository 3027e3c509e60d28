//! Listeners with Kafka's names: `listeners`, `listener.security.protocol.map`,
//! `controller.listener.names`, `advertised.listeners`, and the `ssl.*` / `sasl.*` settings of
//! each listener, global or under `listener.name.<name>.` (docs/configuration.md, "Listeners";
//! docs/security.md).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use super::{bad, host_port, is_wildcard, list_entries, parse_host_port, ConfigError, Props};
use crate::security::principal::SslPrincipalMapper;
use crate::security::tls::{ClientAuth, TlsSettings, TlsVersion};
use crate::transport::PerIpLimit;

/// Kafka's security protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    fn parse(v: &str) -> Result<Self, String> {
        match v.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_PLAINTEXT" => Ok(Self::SaslPlaintext),
            "SASL_SSL" => Ok(Self::SaslSsl),
            other => Err(format!(
                "unknown security protocol {other} (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
            )),
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        })
    }
}

/// A TLS listener's settings (PEM files only: `ssl.keystore.type=PEM`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SslSettings {
    /// What the TLS configs are built from (keystore, truststore, client auth, protocols,
    /// cipher suites).
    pub tls: TlsSettings,
    /// `ssl.principal.mapping.rules` (checked): the certificate subject to a principal name.
    pub principal_mapping_rules: String,
}

/// One listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Upper case, as in `listeners` (`CLIENT`, `CONTROLLER`, `PLAINTEXT`).
    pub name: String,
    pub protocol: SecurityProtocol,
    pub host: String,
    pub port: u16,
    /// Where others are told to connect (`advertised.listeners`; the listener when unset).
    pub advertised: (String, u16),
    /// Present exactly when the protocol uses TLS.
    pub ssl: Option<SslSettings>,
    /// `sasl.enabled.mechanisms`, upper case; empty unless the protocol uses SASL.
    pub sasl_mechanisms: Vec<String>,
    /// `max.connections`: connections it keeps open at once, counted apart from every other
    /// listener's.
    pub max_connections: usize,
    /// `max.connections.per.ip` and `max.connections.per.ip.overrides`: connections it keeps
    /// open at once from one address, counted apart from every other listener's.
    pub per_ip_limit: PerIpLimit,
}

/// Every listener and which one the voters use for each other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listeners {
    pub all: Vec<Listener>,
    /// Index in `all` of the listener named by `controller.listener.names` (the only listener
    /// when there is one): quorum RPCs are served there, and peers are dialled with its
    /// protocol.
    pub controller: usize,
}

impl Listeners {
    pub fn controller(&self) -> &Listener {
        &self.all[self.controller]
    }

    /// Whether a listener also serves the quorum RPCs (the controller listener does; so does a
    /// single listener that serves everything).
    pub fn serves_quorum(&self, index: usize) -> bool {
        index == self.controller
    }

    /// Whether a listener serves Kafka's client APIs: every listener but a dedicated controller
    /// listener (Kafka's split: clients never reach the controller listener's quorum RPCs
    /// through their own listener, and voters need not accept clients).
    pub fn serves_clients(&self, index: usize) -> bool {
        self.all.len() == 1 || index != self.controller
    }
}

/// Keys that a listener may override under `listener.name.<name>.`.
pub(super) const PER_LISTENER_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
    "ssl.endpoint.identification.algorithm",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "sasl.enabled.mechanisms",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
];

/// The SASL mechanisms a node can serve.
const MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Whether `key` is a per-listener override (`listener.name.<name>.<key>`) of a listener that
/// `listeners` names.
pub(super) fn is_listener_override(key: &str, map: &BTreeMap<String, String>) -> bool {
    let Some(rest) = key.strip_prefix("listener.name.") else {
        return false;
    };
    let Some((name, setting)) = rest.split_once('.') else {
        return false;
    };
    let named = map
        .get("listeners")
        .map(|v| parse_entries(v).unwrap_or_default())
        .unwrap_or_default()
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case(name));
    named && PER_LISTENER_KEYS.contains(&setting)
}

/// A listener's name and its `(host, port)`.
type Entry = (String, (String, u16));

/// `NAME://host:port` entries (a bare `host:port` is the PLAINTEXT listener).
fn parse_entries(v: &str) -> Result<Vec<Entry>, String> {
    let mut entries: Vec<Entry> = Vec::new();
    for entry in list_entries(v) {
        let (name, address) = match entry.split_once("://") {
            Some((name, rest)) => (name.trim().to_ascii_uppercase(), rest),
            None => ("PLAINTEXT".to_owned(), entry),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "`{entry}`: a listener name is letters, digits, _ and -"
            ));
        }
        let address = parse_host_port(address).map_err(|e| format!("`{entry}`: {e}"))?;
        if entries.iter().any(|(n, _)| *n == name) {
            return Err(format!("listener {name} is named twice"));
        }
        entries.push((name, address));
    }
    if entries.is_empty() {
        return Err("no listener".into());
    }
    Ok(entries)
}

/// `listener.security.protocol.map`: `NAME:PROTOCOL,...`.
fn parse_protocol_map(v: &str) -> Result<BTreeMap<String, SecurityProtocol>, String> {
    let mut map = BTreeMap::new();
    for entry in list_entries(v) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or(format!("`{entry}`: expected NAME:PROTOCOL"))?;
        let protocol = SecurityProtocol::parse(protocol).map_err(|e| format!("`{entry}`: {e}"))?;
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// The value of a listener's setting: `listener.name.<name>.<key>` if set, else `<key>`, else its
/// default.
fn setting(props: &Props<'_>, listener: &str, key: &'static str) -> (String, String) {
    let scoped = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
    if let Some(v) = props.0.get(&scoped) {
        return (scoped, v.clone());
    }
    let default = super::KEYS
        .iter()
        .find(|(k, _, _)| *k == key)
        .and_then(|(_, d, _)| *d)
        .expect("every per-listener key has a default in KEYS");
    let value = props.0.get(key).cloned().unwrap_or_else(|| default.into());
    (key.to_owned(), value)
}

fn ssl_settings(props: &Props<'_>, name: &str) -> Result<SslSettings, ConfigError> {
    for key in ["ssl.keystore.type", "ssl.truststore.type"] {
        let (key, value) = setting(props, name, key);
        if !value.trim().eq_ignore_ascii_case("PEM") {
            return Err(bad(&key, &value, "only PEM files are supported".into()));
        }
    }
    let (key, keystore) = setting(props, name, "ssl.keystore.location");
    if keystore.trim().is_empty() {
        return Err(bad(
            &key,
            &keystore,
            format!("listener {name} uses TLS: give the PEM file with its key and certificates"),
        ));
    }
    let (_, truststore) = setting(props, name, "ssl.truststore.location");
    let (key, auth) = setting(props, name, "ssl.client.auth");
    let client_auth = ClientAuth::parse(&auth).map_err(|e| bad(&key, &auth, e.to_string()))?;
    let (key, rules) = setting(props, name, "ssl.principal.mapping.rules");
    SslPrincipalMapper::parse(rules.trim()).map_err(|e| bad(&key, &rules, e.to_string()))?;
    let (key, protocols) = setting(props, name, "ssl.enabled.protocols");
    let enabled_protocols = list_entries(&protocols)
        .map(TlsVersion::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(&key, &protocols, e.to_string()))?;
    let (_, suites) = setting(props, name, "ssl.cipher.suites");
    let cipher_suites = list_entries(&suites).map(str::to_owned).collect();
    if client_auth != ClientAuth::None && truststore.trim().is_empty() {
        let (key, value) = setting(props, name, "ssl.truststore.location");
        return Err(bad(
            &key,
            &value,
            format!("listener {name} checks client certificates: give the CA certificates"),
        ));
    }
    Ok(SslSettings {
        tls: TlsSettings {
            keystore_location: Some(PathBuf::from(keystore.trim())),
            truststore_location: Some(truststore.trim())
                .filter(|t| !t.is_empty())
                .map(PathBuf::from),
            client_auth,
            enabled_protocols,
            cipher_suites,
        },
        principal_mapping_rules: rules.trim().to_owned(),
    })
}

fn sasl_mechanisms(props: &Props<'_>, name: &str) -> Result<Vec<String>, ConfigError> {
    let (key, value) = setting(props, name, "sasl.enabled.mechanisms");
    let mut mechanisms: Vec<String> = Vec::new();
    for m in list_entries(&value) {
        let m = m.to_ascii_uppercase();
        if !MECHANISMS.contains(&m.as_str()) {
            return Err(bad(
                &key,
                &value,
                format!("{m} is not supported ({})", MECHANISMS.join(", ")),
            ));
        }
        if !mechanisms.contains(&m) {
            mechanisms.push(m);
        }
    }
    if mechanisms.is_empty() {
        return Err(bad(
            &key,
            &value,
            format!("listener {name} uses SASL: name a mechanism"),
        ));
    }
    Ok(mechanisms)
}

/// `advertised.listeners`: per listener name; a bare `host:port` when there is one listener.
fn parse_advertised(v: &str, names: &[String]) -> Result<BTreeMap<String, (String, u16)>, String> {
    let mut advertised = BTreeMap::new();
    if v.trim().is_empty() {
        return Ok(advertised);
    }
    for (name, (host, port)) in parse_entries(v)? {
        let name = if names.len() == 1 && name == "PLAINTEXT" {
            names[0].clone()
        } else {
            name
        };
        if !names.contains(&name) {
            return Err(format!("listener {name} is not in `listeners`"));
        }
        if is_wildcard(&host) {
            return Err(format!(
                "{host} is a wildcard address; advertise one the other nodes can connect to"
            ));
        }
        if port == 0 {
            return Err("port 0 cannot be connected to".into());
        }
        advertised.insert(name, (host, port));
    }
    Ok(advertised)
}

/// The enumerated TLS settings are checked even where no listener uses them: a typo is an error,
/// not a setting silently ignored until TLS is turned on.
fn check_enumerated(props: &Props<'_>) -> Result<(), ConfigError> {
    let choices: [(&str, &[&str]); 4] = [
        ("ssl.client.auth", &["required", "requested", "none"]),
        ("ssl.endpoint.identification.algorithm", &["https"]),
        ("ssl.keystore.type", &["pem"]),
        ("ssl.truststore.type", &["pem"]),
    ];
    for (key, value) in props.0 {
        let setting = key
            .strip_prefix("listener.name.")
            .and_then(|rest| rest.split_once('.'))
            .map_or(key.as_str(), |(_, setting)| setting);
        if let Some((_, allowed)) = choices.iter().find(|(k, _)| *k == setting) {
            if !allowed.contains(&value.trim().to_ascii_lowercase().as_str()) {
                return Err(bad(key, value, format!("one of {}", allowed.join(", "))));
            }
        }
    }
    Ok(())
}

pub(super) fn parse(props: &Props<'_>) -> Result<Listeners, ConfigError> {
    check_enumerated(props)?;
    let entries = props.parse_required("listeners", parse_entries)?;
    let protocols = props.parse_or_default("listener.security.protocol.map", parse_protocol_map)?;
    let names: Vec<String> = entries.iter().map(|(n, _)| n.clone()).collect();
    let mut advertised =
        props.parse_or_default("advertised.listeners", |v| parse_advertised(v, &names))?;
    let controller = controller_index(props, &names)?;
    let mut all = Vec::with_capacity(entries.len());
    for (name, (host, port)) in entries {
        let protocol = *protocols.get(&name).ok_or_else(|| {
            bad(
                "listener.security.protocol.map",
                props
                    .0
                    .get("listener.security.protocol.map")
                    .map_or("", String::as_str),
                format!("gives no security protocol for listener {name}"),
            )
        })?;
        let advertised = match advertised.remove(&name) {
            Some(a) => a,
            None if is_wildcard(&host) => {
                return Err(ConfigError::WildcardWithoutAdvertised {
                    listener: format!("{name}://{}", host_port(&host, port)),
                })
            }
            None => (host.clone(), port),
        };
        let ssl = protocol
            .uses_tls()
            .then(|| ssl_settings(props, &name))
            .transpose()?;
        let sasl_mechanisms = if protocol.uses_sasl() {
            sasl_mechanisms(props, &name)?
        } else {
            Vec::new()
        };
        let (key, value) = setting(props, &name, "max.connections");
        let max_connections = super::parse_positive(value.trim())
            .map_err(|reason| bad(&key, &value, reason))? as usize;
        let per_ip_limit = per_ip_limit(props, &name)?;
        all.push(Listener {
            name,
            protocol,
            host,
            port,
            advertised,
            ssl,
            sasl_mechanisms,
            max_connections,
            per_ip_limit,
        });
    }
    let listeners = Listeners { all, controller };
    check_controller(&listeners)?;
    Ok(listeners)
}

/// `max.connections.per.ip` (Kafka's default: 2^31 - 1) and its overrides, `ADDRESS:N,...`
/// with IP addresses (IPv6 in brackets or not); the default may be 0 only when overrides
/// name the addresses that may connect, as in Kafka.
fn per_ip_limit(props: &Props<'_>, listener: &str) -> Result<PerIpLimit, ConfigError> {
    let (overrides_key, overrides_value) =
        setting(props, listener, "max.connections.per.ip.overrides");
    let overrides = list_entries(&overrides_value)
        .map(parse_ip_limit)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|reason| bad(&overrides_key, &overrides_value, reason))?;
    let (key, value) = setting(props, listener, "max.connections.per.ip");
    let default = super::parse_u64(&value).map_err(|reason| bad(&key, &value, reason))?;
    if default == 0 && overrides.is_empty() {
        return Err(bad(
            &key,
            &value,
            "0 refuses every connection: allowed only with max.connections.per.ip.overrides".into(),
        ));
    }
    Ok(PerIpLimit {
        default: usize::try_from(default).unwrap_or(usize::MAX),
        overrides,
    })
}

/// One `ADDRESS:N` of `max.connections.per.ip.overrides`.
fn parse_ip_limit(entry: &str) -> Result<(IpAddr, usize), String> {
    let (address, limit) = entry
        .rsplit_once(':')
        .ok_or_else(|| format!("{entry}: not ADDRESS:N"))?;
    let address = address.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = address.parse().map_err(|_| {
        format!("{entry}: {address} is not an IP address (host names are not resolved here)")
    })?;
    let limit = super::parse_u64(limit).map_err(|reason| format!("{entry}: {reason}"))?;
    Ok((
        ip.to_canonical(),
        usize::try_from(limit).unwrap_or(usize::MAX),
    ))
}

fn controller_index(props: &Props<'_>, names: &[String]) -> Result<usize, ConfigError> {
    let value = props
        .0
        .get("controller.listener.names")
        .map(|v| v.trim().to_owned())
        .unwrap_or_default();
    if value.is_empty() {
        if names.len() == 1 {
            return Ok(0);
        }
        return Err(ConfigError::Missing {
            key: "controller.listener.names",
        });
    }
    let name = value.to_ascii_uppercase();
    if name.contains(',') {
        return Err(bad(
            "controller.listener.names",
            &value,
            "name exactly one listener".into(),
        ));
    }
    names.iter().position(|n| *n == name).ok_or_else(|| {
        bad(
            "controller.listener.names",
            &value,
            format!("{name} is not in `listeners`"),
        )
    })
}

/// Voters authenticate each other with certificates: a TLS controller listener must require
/// them, and SASL between voters is not supported (a node has no SASL client credentials).
fn check_controller(listeners: &Listeners) -> Result<(), ConfigError> {
    let controller = listeners.controller();
    let name = &controller.name;
    if controller.protocol.uses_sasl() {
        return Err(bad(
            "listener.security.protocol.map",
            &format!("{name}:{}", controller.protocol),
            format!(
                "the controller listener {name} must be SSL (voters authenticate with \
                 certificates) or PLAINTEXT"
            ),
        ));
    }
    if let Some(ssl) = &controller.ssl {
        if ssl.tls.client_auth != ClientAuth::Required {
            let key = format!(
                "listener.name.{}.ssl.client.auth",
                name.to_ascii_lowercase()
            );
            return Err(bad(
                &key,
                "not required",
                format!(
                    "the controller listener {name} must require client certificates: a voter \
                     accepts quorum requests only from a peer that proved who it is"
                ),
            ));
        }
    }
    Ok(())
}
