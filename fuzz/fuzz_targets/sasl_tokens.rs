//! Arbitrary tokens into the SASL state machines (docs/security.md, "SASL") and arbitrary bytes
//! into the SaslHandshake / SaslAuthenticate codecs. They must return errors, never panic, never
//! authenticate without the password, and never take more steps than the mechanism has; what a
//! codec decodes must encode to bytes that decode to the same message.
//!
//! The first byte picks the mode, the mechanism and the version; the rest is split at 0xff
//! (never valid in a SASL token, which is UTF-8) into the tokens of one exchange.

#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use net::security::credentials::{CredentialStore, ScramMechanism, MIN_ITERATIONS};
use net::security::sasl::{Mechanism, SaslClient, SaslServer, SaslStep};
use net::wire::kafka::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use net::wire::{WireReader, WireWriter};

const PASSWORD: &str = "the password";

fn store() -> Arc<CredentialStore> {
    static STORE: OnceLock<Arc<CredentialStore>> = OnceLock::new();
    STORE
        .get_or_init(|| {
            let mut store = CredentialStore::empty("unused");
            for mechanism in ScramMechanism::ALL {
                store
                    .add_password("alice", mechanism, PASSWORD, MIN_ITERATIONS)
                    .unwrap();
            }
            Arc::new(store)
        })
        .clone()
}

/// Steps every token into `server`; asserts the bounds on the way.
fn drive(mut server: SaslServer, tokens: &[&[u8]], already: usize) {
    let mechanism = server.mechanism();
    for (i, token) in tokens.iter().enumerate() {
        let steps = already + i + 1;
        match server.step(token) {
            Ok(SaslStep::Done { .. }) => panic!("{mechanism}: authenticated without the password"),
            Ok(SaslStep::Continue(_)) => assert!(steps < mechanism.steps()),
            Err(_) => assert!(server.is_over()),
        }
        if steps >= mechanism.steps() {
            assert!(server.is_over());
        }
    }
}

fn codecs(version: i16, input: Bytes) {
    macro_rules! round_trip {
        ($type:ty, $version:expr) => {
            if let Ok(message) = <$type>::decode(&mut WireReader::new(input.clone()), $version) {
                // Not byte for byte (a null array reads as empty, unknown tags are skipped), but
                // what was read is what is written.
                let mut w = WireWriter::new();
                message.encode(&mut w, $version);
                let again =
                    <$type>::decode(&mut WireReader::new(w.into_inner().freeze()), $version);
                assert_eq!(again.as_ref(), Ok(&message), stringify!($type));
            }
        };
    }
    round_trip!(SaslAuthenticateRequest, version % 3);
    round_trip!(SaslAuthenticateResponse, version % 3);
    round_trip!(SaslHandshakeRequest, version % 2);
    round_trip!(SaslHandshakeResponse, version % 2);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mechanism = Mechanism::ALL[usize::from(mode >> 2) % 3];
    let tokens: Vec<&[u8]> = rest.split(|&b| b == 0xff).take(4).collect();
    match mode % 4 {
        0 => codecs(i16::from(mode >> 2), Bytes::copy_from_slice(rest)),
        1 => drive(SaslServer::new(mechanism, store()), &tokens, 0),
        2 => {
            // A real client's first message, then arbitrary ones: the final-message parser.
            let mut server = SaslServer::new(mechanism, store());
            let client = SaslClient::new(mechanism, "alice", PASSWORD).unwrap();
            match server.step(&client.first_message()) {
                Ok(SaslStep::Continue(_)) => drive(server, &tokens, 1),
                Ok(SaslStep::Done { .. }) => assert_eq!(mechanism, Mechanism::Plain),
                Err(error) => panic!("{mechanism}: a real client refused: {error}"),
            }
        }
        _ => {
            // Arbitrary server tokens into a client: it must never accept a forged exchange.
            let mut client = SaslClient::new(mechanism, "alice", PASSWORD).unwrap();
            let mut finished = false;
            for token in &tokens {
                match client.step(token) {
                    Ok(None) => finished = true,
                    Ok(Some(_)) | Err(_) => {}
                }
            }
            // Only PLAIN finishes on a server token alone (the empty one); SCRAM needs the
            // server's signature, which arbitrary bytes do not forge.
            if finished {
                assert_eq!(mechanism, Mechanism::Plain);
            }
        }
    }
});
