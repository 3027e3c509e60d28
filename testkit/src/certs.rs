//! A throw-away certificate authority for local clusters and tests: a CA and the certificates it
//! signs, written as the PEM files a node's `ssl.*` settings name (docs/security.md shows the
//! same with openssl commands).

use std::path::{Path, PathBuf};

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// How long a certificate is valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// From 2020 to 2100.
    Current,
    /// Ended on 2021-01-01.
    Expired,
}

/// A CA whose certificate is `ca.pem` in its directory.
pub struct Authority {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

fn validity(params: &mut CertificateParams, validity: Validity) {
    params.not_before = date_time_ymd(2020, 1, 1);
    params.not_after = match validity {
        Validity::Current => date_time_ymd(2100, 1, 1),
        Validity::Expired => date_time_ymd(2021, 1, 1),
    };
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

impl Authority {
    /// A new CA named `name` (its subject `CN=name,O=ringraft-testkit`), written to
    /// `dir/ca.pem`.
    pub fn create(dir: &Path, name: &str) -> Result<Authority, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let key = KeyPair::generate().map_err(|e| format!("CA key: {e}"))?;
        let mut params = CertificateParams::new(Vec::new()).map_err(|e| e.to_string())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "ringraft-testkit");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut params, Validity::Current);
        let cert = params
            .self_signed(&key)
            .map_err(|e| format!("CA certificate: {e}"))?;
        write(&dir.join("ca.pem"), &cert.pem())?;
        Ok(Authority {
            dir: dir.to_owned(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate (`ssl.truststore.location`).
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate for `common_name` (subject `CN=common_name,O=ringraft-testkit`) valid for
    /// `hosts` (IP addresses or DNS names) as server and client, with its private key, written
    /// to `dir/stem.pem` (`ssl.keystore.location`: the key, then the certificate).
    pub fn issue(
        &self,
        stem: &str,
        common_name: &str,
        hosts: &[&str],
        valid: Validity,
    ) -> Result<PathBuf, String> {
        let key = KeyPair::generate().map_err(|e| format!("key of {common_name}: {e}"))?;
        let mut params = CertificateParams::new(Vec::new()).map_err(|e| e.to_string())?;
        params.subject_alt_names = hosts
            .iter()
            .map(|host| match host.parse() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => host
                    .to_string()
                    .try_into()
                    .map(SanType::DnsName)
                    .map_err(|e| format!("{host}: {e}")),
            })
            .collect::<Result<_, _>>()?;
        params
            .distinguished_name
            .push(DnType::OrganizationName, "ringraft-testkit");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        validity(&mut params, valid);
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| format!("certificate of {common_name}: {e}"))?;
        let path = self.dir.join(format!("{stem}.pem"));
        write(&path, &format!("{}{}", key.serialize_pem(), cert.pem()))?;
        Ok(path)
    }
}

/// The mapping rule that makes a subject with `CN=NAME` (wherever it stands among the RDNs) the
/// principal `User:NAME`.
pub const CN_MAPPING_RULE: &str = "RULE:^(.*,)?CN=([^,]+)(,.*)?$/$2/,DEFAULT";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_and_a_node_certificate_are_pem_files() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Authority::create(dir.path(), "test-ca").unwrap();
        let node = ca
            .issue(
                "node-1",
                "ringraft-1",
                &["127.0.0.1", "localhost"],
                Validity::Current,
            )
            .unwrap();
        let text = std::fs::read_to_string(node).unwrap();
        assert!(text.contains("BEGIN PRIVATE KEY") && text.contains("BEGIN CERTIFICATE"));
        let ca_text = std::fs::read_to_string(ca.ca_path()).unwrap();
        assert_eq!(ca_text.matches("BEGIN CERTIFICATE").count(), 1);
    }
}
