//! Shared by the TLS transport tests (and the transport bench): certificates made in the test
//! with rcgen and written as PEM stores (so the `security::tls` builders read them), and a
//! blocking TLS client (the echo server, plain or TLS, is `transport_support::EchoServer`).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use net::security::tls::{client_config, server_config, ClientAuth, TlsSettings, TlsVersion};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::{ClientConfig, ServerConfig};

/// A CA that signs leaf certificates, each written as a PEM keystore (key + chain) in `dir`.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub name: String,
    /// The CA certificate as a PEM truststore.
    pub truststore: PathBuf,
    dir: PathBuf,
}

fn dn(parts: &[(DnType, &str)]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for (ty, value) in parts {
        dn.push(ty.clone(), *value);
    }
    dn
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = dn(&[
            (DnType::OrganizationName, "Example"),
            (DnType::CommonName, name),
        ]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        let truststore = dir.join(format!("{name}-truststore.pem"));
        std::fs::write(&truststore, cert.pem()).unwrap();
        Self {
            issuer: Issuer::new(params, key),
            name: name.to_string(),
            truststore,
            dir: dir.to_path_buf(),
        }
    }

    /// A leaf for 127.0.0.1 and localhost, usable by servers and clients, subject
    /// `CN=<cn>,OU=ringraft,O=Example`, valid now unless `expired`. Returns the keystore path.
    pub fn leaf(&self, cn: &str, expired: bool) -> PathBuf {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name = dn(&[
            (DnType::OrganizationName, "Example"),
            (DnType::OrganizationalUnitName, "ringraft"),
            (DnType::CommonName, cn),
        ]);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let path = self.dir.join(format!("{}-{cn}-keystore.pem", self.name));
        std::fs::write(&path, format!("{}{}", key.serialize_pem(), cert.pem())).unwrap();
        path
    }
}

/// Two CAs and the certificates the tests use, in a temporary directory.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: Ca,
    pub other_ca: Ca,
    pub server: PathBuf,
    pub client: PathBuf,
    pub expired_client: PathBuf,
    pub foreign_client: PathBuf,
}

impl Pki {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new(dir.path(), "ca");
        let other_ca = Ca::new(dir.path(), "other-ca");
        Self {
            server: ca.leaf("server-1", false),
            client: ca.leaf("voter-2", false),
            expired_client: ca.leaf("expired", true),
            foreign_client: other_ca.leaf("intruder", false),
            ca,
            other_ca,
            dir,
        }
    }

    /// A server config: our server certificate, client certificates per `client_auth`.
    pub fn server(&self, client_auth: ClientAuth, protocols: &[TlsVersion]) -> Arc<ServerConfig> {
        server_config(&TlsSettings {
            keystore_location: Some(self.server.clone()),
            truststore_location: Some(self.ca.truststore.clone()),
            client_auth,
            enabled_protocols: protocols.to_vec(),
            cipher_suites: Vec::new(),
        })
        .unwrap()
    }

    /// A client config trusting `ca`, presenting `keystore` if given.
    pub fn client(
        &self,
        ca: &Ca,
        keystore: Option<&Path>,
        protocols: &[TlsVersion],
    ) -> Arc<ClientConfig> {
        client_config(&TlsSettings {
            keystore_location: keystore.map(Path::to_path_buf),
            truststore_location: Some(ca.truststore.clone()),
            client_auth: ClientAuth::None,
            enabled_protocols: protocols.to_vec(),
            cipher_suites: Vec::new(),
        })
        .unwrap()
    }
}

pub fn server_name() -> rustls::pki_types::ServerName<'static> {
    rustls::pki_types::ServerName::try_from("localhost").unwrap()
}

/// A blocking rustls client over a std TcpStream, for peers that must not share the test's loop.
pub struct StdTlsClient {
    pub stream: rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>,
}

impl StdTlsClient {
    pub fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> Self {
        let tcp = crate::transport_support::std_client(addr);
        let conn = rustls::ClientConnection::new(config, server_name()).unwrap();
        Self {
            stream: rustls::StreamOwned::new(conn, tcp),
        }
    }

    pub fn round_trip(&mut self, body: &[u8]) -> std::io::Result<Vec<u8>> {
        use std::io::{Read, Write};
        self.stream
            .write_all(&net::wire::frame::size_prefix(body.len()))?;
        self.stream.write_all(body)?;
        self.stream.flush()?;
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix)?;
        let mut echoed = vec![0u8; u32::from_be_bytes(prefix) as usize];
        self.stream.read_exact(&mut echoed)?;
        Ok(echoed)
    }
}
