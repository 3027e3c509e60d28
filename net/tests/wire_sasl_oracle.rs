//! SaslHandshake and SaslAuthenticate against an independent Kafka codec (the `kafka-protocol`
//! crate): Kafka's bytes decode with ours, ours equal Kafka's and decode with Kafka's, in every
//! version of both directions; the version ranges and header versions agree too.

mod oracle_support;

use bytes::Bytes;
use engine::raft::ErrorCode;
use kafka_protocol::messages::{
    SaslAuthenticateRequest as KpAuthenticateRequest,
    SaslAuthenticateResponse as KpAuthenticateResponse, SaslHandshakeRequest as KpHandshakeRequest,
    SaslHandshakeResponse as KpHandshakeResponse,
};
use kafka_protocol::protocol::{HeaderVersion, Request, StrBytes};
use net::wire::api::ApiSpec;
use net::wire::kafka::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
    SASL_AUTHENTICATE_SPEC, SASL_AUTHENTICATION_FAILED, SASL_HANDSHAKE_SPEC,
    UNSUPPORTED_SASL_MECHANISM,
};
use net::wire::WireReader;
use oracle_support::*;

/// Our spec's key, range and header versions are Kafka's.
fn assert_spec_matches<Req: Request, Resp: HeaderVersion>(spec: &ApiSpec) {
    assert_eq!(spec.key, Req::KEY);
    assert_eq!(spec.min_version, Req::VERSIONS.min);
    assert_eq!(spec.max_version, Req::VERSIONS.max);
    for version in spec.min_version..=spec.max_version {
        let request_header = if spec.is_flexible(version) { 2 } else { 1 };
        assert_eq!(Req::header_version(version), request_header, "v{version}");
        let response_header = i16::from(spec.response_header_flexible(version));
        assert_eq!(Resp::header_version(version), response_header, "v{version}");
    }
}

#[test]
fn specs_match_kafka() {
    assert_spec_matches::<KpHandshakeRequest, KpHandshakeResponse>(&SASL_HANDSHAKE_SPEC);
    assert_spec_matches::<KpAuthenticateRequest, KpAuthenticateResponse>(&SASL_AUTHENTICATE_SPEC);
}

#[test]
fn sasl_handshake_matches_kafka_in_every_version() {
    for version in SASL_HANDSHAKE_SPEC.min_version..=SASL_HANDSHAKE_SPEC.max_version {
        let request = SaslHandshakeRequest {
            mechanism: "SCRAM-SHA-512".into(),
        };
        let kp_request = KpHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-512"));
        let kafka_bytes = theirs(&kp_request, version);
        assert_eq!(
            ours(|w| request.encode(w, version)),
            kafka_bytes,
            "v{version}"
        );
        let mut r = WireReader::new(kafka_bytes);
        assert_eq!(
            SaslHandshakeRequest::decode(&mut r, version),
            Ok(request.clone())
        );
        let back: KpHandshakeRequest = decode_theirs(ours(|w| request.encode(w, version)), version);
        assert_eq!(back, kp_request);

        for (error, mechanisms) in [
            (
                ErrorCode::NONE,
                vec!["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
            ),
            (UNSUPPORTED_SASL_MECHANISM, vec!["SCRAM-SHA-512"]),
            (UNSUPPORTED_SASL_MECHANISM, vec![]),
        ] {
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
            let kafka_bytes = theirs(&kp_response, version);
            assert_eq!(
                ours(|w| response.encode(w, version)),
                kafka_bytes,
                "v{version}"
            );
            let mut r = WireReader::new(kafka_bytes);
            assert_eq!(
                SaslHandshakeResponse::decode(&mut r, version),
                Ok(response.clone())
            );
            let back: KpHandshakeResponse =
                decode_theirs(ours(|w| response.encode(w, version)), version);
            assert_eq!(back, kp_response);
        }
    }
}

#[test]
fn sasl_authenticate_matches_kafka_in_every_version() {
    let tokens: [&'static [u8]; 3] = [
        b"",
        b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        b"\0alice\0a password with \xff bytes",
    ];
    for version in SASL_AUTHENTICATE_SPEC.min_version..=SASL_AUTHENTICATE_SPEC.max_version {
        for token in tokens {
            let request = SaslAuthenticateRequest {
                auth_bytes: Bytes::from_static(token),
            };
            let kp_request =
                KpAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(token));
            let kafka_bytes = theirs(&kp_request, version);
            assert_eq!(
                ours(|w| request.encode(w, version)),
                kafka_bytes,
                "v{version}"
            );
            let mut r = WireReader::new(kafka_bytes);
            assert_eq!(
                SaslAuthenticateRequest::decode(&mut r, version),
                Ok(request.clone())
            );
            let back: KpAuthenticateRequest =
                decode_theirs(ours(|w| request.encode(w, version)), version);
            assert_eq!(back, kp_request);

            for (error, message) in [
                (ErrorCode::NONE, None),
                (
                    SASL_AUTHENTICATION_FAILED,
                    Some("Authentication failed: invalid credentials"),
                ),
            ] {
                let lifetime = if version >= 1 { 3_600_000 } else { 0 };
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
                let kafka_bytes = theirs(&kp_response, version);
                assert_eq!(
                    ours(|w| response.encode(w, version)),
                    kafka_bytes,
                    "v{version}"
                );
                let mut r = WireReader::new(kafka_bytes);
                assert_eq!(
                    SaslAuthenticateResponse::decode(&mut r, version),
                    Ok(response.clone())
                );
                let back: KpAuthenticateResponse =
                    decode_theirs(ours(|w| response.encode(w, version)), version);
                assert_eq!(back, kp_response);
            }
        }
    }
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
