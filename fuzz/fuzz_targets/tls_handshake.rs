//! Arbitrary bytes as a client's first flights into the server side of the TLS wrapper the event
//! loop uses for each connection (`net::transport::TlsSession`), fed in chunks of every size.
//! It must never panic, and what it holds (the received record in progress, the records it
//! wants sent) must stay bounded whatever arrives.
//!
//! The first byte picks the chunk size and whether a real ClientHello goes first (so the rest
//! reaches the states after it); the remaining bytes are the client's stream.

#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use net::transport::TlsSession;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// A TLS record: 5 header bytes and at most 64 KiB - 1 of body.
const MAX_HELD: usize = 5 + 0xffff;
/// What one feed may make the server want to send (its flight, tickets or an alert).
const MAX_OUTPUT: usize = 256 * 1024;

struct Fixture {
    server: Arc<ServerConfig>,
    client_hello: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert.der().clone()).unwrap();
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut hello_conn = rustls::ClientConnection::new(
            Arc::new(client),
            ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        let mut client_hello = Vec::new();
        while hello_conn.wants_write() {
            hello_conn.write_tls(&mut client_hello).unwrap();
        }
        Fixture {
            server: Arc::new(server),
            client_hello,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let fixture = fixture();
    let mut session = TlsSession::server(fixture.server.clone(), None).unwrap();
    let chunk = usize::from(control >> 1) * 64 + 1;
    let mut input = Vec::with_capacity(stream.len() + fixture.client_hello.len());
    if control & 1 == 1 {
        input.extend_from_slice(&fixture.client_hello);
    }
    input.extend_from_slice(stream);
    let mut plaintext = 0usize;
    for piece in input.chunks(chunk) {
        let fed = session.feed(piece, &mut |p| plaintext += p.len());
        let mut out = Vec::new();
        session.take_output(&mut out);
        assert!(out.len() <= MAX_OUTPUT, "wants to send {} bytes", out.len());
        assert!(
            session.buffered() <= MAX_HELD,
            "holds {}",
            session.buffered()
        );
        match fed {
            Ok(fed) if !fed.peer_closed => {}
            // The loop would close the connection here.
            _ => break,
        }
    }
    // No client finished a handshake, so no application data can have come out.
    assert_eq!(plaintext, 0);
});
