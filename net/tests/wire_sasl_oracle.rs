//! SaslHandshake and SaslAuthenticate against an independent Kafka codec (the `kafka-protocol`
//! crate): Kafka's bytes decode with ours, ours equal Kafka's and decode with Kafka's, in every
//! version of both directions; the version ranges and header versions agree too.

mod wire_support;

use bytes::Bytes;
use engine::raft::ErrorCode;
use kafka_protocol::messages::{
    SaslAuthenticateRequest as KpAuthenticateRequest,
    SaslAuthenticateResponse as KpAuthenticateResponse, SaslHandshakeRequest as KpHandshakeRequest,
    SaslHandshakeResponse as KpHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use net::wire::kafka::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    SASL_AUTHENTICATE_SPEC, SASL_AUTHENTICATION_FAILED, SASL_HANDSHAKE_SPEC,
    UNSUPPORTED_SASL_MECHANISM,
};
use net::wire::WireReader;
use wire_support::{assert_same_as_kafka_in, assert_spec_matches, theirs, versions};

#[test]
fn specs_match_kafka() {
    assert_spec_matches::<KpHandshakeRequest, KpHandshakeResponse>(&SASL_HANDSHAKE_SPEC, true);
    assert_spec_matches::<KpAuthenticateRequest, KpAuthenticateResponse>(
        &SASL_AUTHENTICATE_SPEC,
        true,
    );
}

#[test]
fn sasl_handshake_matches_kafka_in_every_version() {
    assert_same_as_kafka_in(versions(&SASL_HANDSHAKE_SPEC), |_| {
        let request = SaslHandshakeRequest {
            mechanism: "SCRAM-SHA-512".into(),
        };
        let kp_request = KpHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-512"));
        vec![(request, kp_request)]
    });
    assert_same_as_kafka_in(versions(&SASL_HANDSHAKE_SPEC), |_| {
        [
            (
                ErrorCode::NONE,
                vec!["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
            ),
            (UNSUPPORTED_SASL_MECHANISM, vec!["SCRAM-SHA-512"]),
            (UNSUPPORTED_SASL_MECHANISM, vec![]),
        ]
        .map(|(error, mechanisms)| {
            let response = SaslHandshakeResponse {
                error,
                mechanisms: mechanisms.iter().map(|m| m.to_string()).collect(),
            };
            let kp_response = KpHandshakeResponse::default()
                .with_error_code(error.0)
                .with_mechanisms(
                    mechanisms
                        .iter()
                        .map(|m| StrBytes::from_string(m.to_string()))
                        .collect(),
                );
            (response, kp_response)
        })
        .to_vec()
    });
}

const TOKENS: [&[u8]; 3] = [
    b"",
    b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    b"\0alice\0a password with \xff bytes",
];

#[test]
fn sasl_authenticate_matches_kafka_in_every_version() {
    assert_same_as_kafka_in(versions(&SASL_AUTHENTICATE_SPEC), |_| {
        TOKENS
            .map(|token| {
                let request = SaslAuthenticateRequest {
                    auth_bytes: Bytes::from_static(token),
                };
                let kp_request =
                    KpAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(token));
                (request, kp_request)
            })
            .to_vec()
    });
    assert_same_as_kafka_in(versions(&SASL_AUTHENTICATE_SPEC), |version| {
        let lifetime = if version >= 1 { 3_600_000 } else { 0 };
        let failed = Some("Authentication failed: invalid credentials");
        let mut pairs = Vec::new();
        for token in TOKENS {
            for (error, message) in [
                (ErrorCode::NONE, None),
                (SASL_AUTHENTICATION_FAILED, failed),
            ] {
                let response = SaslAuthenticateResponse {
                    error,
                    error_message: message.map(str::to_string),
                    auth_bytes: Bytes::from_static(token),
                    session_lifetime_ms: lifetime,
                };
                let kp_response = KpAuthenticateResponse::default()
                    .with_error_code(error.0)
                    .with_error_message(message.map(StrBytes::from_static_str))
                    .with_auth_bytes(Bytes::from_static(token))
                    .with_session_lifetime_ms(lifetime);
                pairs.push((response, kp_response));
            }
        }
        pairs
    });
}

/// A token above the limit is refused even though Kafka's codec carries it.
#[test]
fn kafkas_oversized_token_is_refused() {
    let big = Bytes::from(vec![7u8; net::wire::kafka::MAX_AUTH_BYTES + 1]);
    for version in SASL_AUTHENTICATE_SPEC.min_version..=SASL_AUTHENTICATE_SPEC.max_version {
        let kp_request = KpAuthenticateRequest::default().with_auth_bytes(big.clone());
        let mut r = WireReader::new(theirs(&kp_request, version));
        assert!(matches!(
            SaslAuthenticateRequest::decode(&mut r, version),
            Err(net::wire::kafka::SaslCodecError::TooLong { .. })
        ));
    }
}
