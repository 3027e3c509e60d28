//! The SASL state machines: the published SCRAM-SHA-256 exchange, round trips of every
//! mechanism, and every refusal with its typed error.

use std::sync::{Arc, OnceLock};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use proptest::prelude::*;

use super::*;
use crate::security::credentials::{ScramCredential, MIN_ITERATIONS};

const FAST: u32 = MIN_ITERATIONS;
const SCRAM: [Mechanism; 2] = [Mechanism::ScramSha256, Mechanism::ScramSha512];

/// alice: both SCRAM credentials ("alice-pw"); bob: SCRAM-SHA-256 only ("bob-pw"); carol:
/// SCRAM-SHA-512 only; "a,b=c": a name SCRAM must escape; "émile": a name SASLprep matters for.
fn store() -> Arc<CredentialStore> {
    static STORE: OnceLock<Arc<CredentialStore>> = OnceLock::new();
    use ScramMechanism::{Sha256, Sha512};
    STORE
        .get_or_init(|| {
            Arc::new(CredentialStore::with_passwords(
                "unused",
                &[
                    ("alice", Sha256, "alice-pw", FAST),
                    ("alice", Sha512, "alice-pw", FAST),
                    ("bob", Sha256, "bob-pw", FAST),
                    ("carol", Sha512, "carol-pw", FAST + 7),
                    ("a,b=c", Sha256, "pw", FAST),
                    ("a,b=c", Sha512, "pw", FAST),
                    ("\u{e9}mile", Sha512, "pass\u{2163}", FAST),
                ],
            ))
        })
        .clone()
}

/// Runs a whole exchange; the user the server authenticated, or the first error of either side.
fn run(client: &mut SaslClient, server: &mut SaslServer) -> Result<String, SaslError> {
    let mut token = client.first_message();
    loop {
        match server.step(&token)? {
            SaslStep::Continue(challenge) => {
                token = client
                    .step(&challenge)?
                    .expect("the client answers a challenge");
            }
            SaslStep::Done { user, token } => {
                assert_eq!(client.step(&token)?, None);
                return Ok(user);
            }
        }
    }
}

fn login(mechanism: Mechanism, user: &str, password: &str) -> Result<String, SaslError> {
    let mut client = SaslClient::new(mechanism, user, password)?;
    let mut server = SaslServer::new(mechanism, store());
    let result = run(&mut client, &mut server);
    assert!(server.is_over() || result.is_err());
    result
}

/// The server's challenge to a well-formed client-first for `user`.
fn server_first_for(server: &mut SaslServer, user: &str) -> String {
    let first = format!("n,,n={user},r=clientnonce");
    match server.step(first.as_bytes()).unwrap() {
        SaslStep::Continue(challenge) => String::from_utf8(challenge).unwrap(),
        done => panic!("{done:?}"),
    }
}

/// Steps `token` into a fresh server after `prefix` and returns the error; the server is over
/// afterwards.
fn refused(mechanism: Mechanism, prefix: &[&[u8]], token: &[u8]) -> SaslError {
    let mut server = SaslServer::new(mechanism, store());
    for step in prefix {
        server.step(step).unwrap();
    }
    let error = server.step(token).unwrap_err();
    assert!(server.is_over());
    assert_eq!(server.step(token), Err(SaslError::IllegalState));
    error
}

/// RFC 7677 section 3: the SCRAM-SHA-256 exchange for user "user", password "pencil".
#[test]
fn the_published_scram_sha_256_exchange() {
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let mut store = CredentialStore::empty("unused");
    store
        .add(
            "user",
            ScramCredential::from_password(ScramMechanism::Sha256, "pencil", &salt, 4096).unwrap(),
        )
        .unwrap();
    let mut server = SaslServer::with_nonce(
        Mechanism::ScramSha256,
        Arc::new(store),
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    );
    let mut client = SaslClient::with_fixed_nonce(
        Mechanism::ScramSha256,
        "user",
        "pencil",
        "rOprNGfwEbeRWgbNEkqO",
    )
    .unwrap();

    let client_first = client.first_message();
    assert_eq!(client_first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let SaslStep::Continue(server_first) = server.step(&client_first).unwrap() else {
        panic!("SCRAM takes two steps");
    };
    assert_eq!(
        String::from_utf8(server_first.clone()).unwrap(),
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let client_final = client.step(&server_first).unwrap().unwrap();
    assert_eq!(
        String::from_utf8(client_final.clone()).unwrap(),
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
         p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    );
    let SaslStep::Done { user, token } = server.step(&client_final).unwrap() else {
        panic!("the proof is the published one");
    };
    assert_eq!(user, "user");
    assert_eq!(
        String::from_utf8(token.clone()).unwrap(),
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
    assert_eq!(client.step(&token), Ok(None));
    assert_eq!(client.step(&token), Err(SaslError::IllegalState));
    assert_eq!(server.step(&client_final), Err(SaslError::IllegalState));
}

#[test]
fn mechanism_names_parse_and_display() {
    for mechanism in Mechanism::ALL {
        assert_eq!(mechanism.name().parse::<Mechanism>(), Ok(mechanism));
        assert_eq!(mechanism.to_string(), mechanism.name());
    }
    assert_eq!(
        "SCRAM-SHA-256".parse::<Mechanism>(),
        Ok(Mechanism::ScramSha256)
    );
    let unknown = "plain".parse::<Mechanism>().unwrap_err();
    assert_eq!(unknown, UnknownMechanism("plain".into()));
    assert_eq!(unknown.error_code(), UNSUPPORTED_SASL_MECHANISM);
    assert!("GSSAPI".parse::<Mechanism>().is_err());
    assert_eq!(Mechanism::Plain.scram(), None);
    assert_eq!(
        Mechanism::from(ScramMechanism::Sha512),
        Mechanism::ScramSha512
    );
}

#[test]
fn every_mechanism_round_trips() {
    for mechanism in Mechanism::ALL {
        assert_eq!(login(mechanism, "alice", "alice-pw"), Ok("alice".into()));
        assert_eq!(login(mechanism, "a,b=c", "pw"), Ok("a,b=c".into()));
    }
    // A password and name in another Unicode form are the same after SASLprep.
    for mechanism in [Mechanism::Plain, Mechanism::ScramSha512] {
        assert_eq!(
            login(mechanism, "e\u{301}mile", "passIV"),
            Ok("\u{e9}mile".into())
        );
    }
    assert_eq!(
        login(Mechanism::ScramSha512, "carol", "carol-pw"),
        Ok("carol".into())
    );
    // PLAIN uses whichever SCRAM credential the user has.
    assert_eq!(login(Mechanism::Plain, "bob", "bob-pw"), Ok("bob".into()));
    assert_eq!(
        login(Mechanism::Plain, "carol", "carol-pw"),
        Ok("carol".into())
    );
}

#[test]
fn step_counts_are_the_mechanisms() {
    for mechanism in Mechanism::ALL {
        let mut client = SaslClient::new(mechanism, "alice", "alice-pw").unwrap();
        let mut server = SaslServer::new(mechanism, store());
        let mut steps = 0;
        let mut token = client.first_message();
        loop {
            steps += 1;
            match server.step(&token).unwrap() {
                SaslStep::Continue(challenge) => token = client.step(&challenge).unwrap().unwrap(),
                SaslStep::Done { .. } => break,
            }
        }
        assert_eq!(steps, mechanism.steps());
        assert_eq!(server.step(&token), Err(SaslError::IllegalState));
        assert_eq!(server.step(b""), Err(SaslError::IllegalState));
    }
}

#[test]
fn wrong_password_and_unknown_user_fail_alike() {
    for mechanism in Mechanism::ALL {
        let wrong = login(mechanism, "alice", "alice-pw2");
        let unknown = login(mechanism, "mallory", "alice-pw");
        assert_eq!(wrong, Err(SaslError::AuthenticationFailed), "{mechanism}");
        assert_eq!(unknown, wrong, "{mechanism}");
    }
    // bob has no SCRAM-SHA-512 credential: as unknown as mallory there.
    assert_eq!(
        login(Mechanism::ScramSha512, "bob", "bob-pw"),
        Err(SaslError::AuthenticationFailed)
    );
}

#[test]
fn an_unknown_users_challenge_looks_like_a_known_users() {
    for mechanism in SCRAM {
        let shape = |challenge: &str| -> (usize, String) {
            let parts: Vec<&str> = challenge.split(',').collect();
            assert_eq!(parts.len(), 3, "{challenge}");
            let salt = BASE64.decode(&parts[1][2..]).unwrap();
            (salt.len(), parts[2].to_string())
        };
        let known = server_first_for(&mut SaslServer::new(mechanism, store()), "alice");
        let unknown = server_first_for(&mut SaslServer::new(mechanism, store()), "mallory");
        assert_eq!(shape(&known), shape(&unknown), "{mechanism}");
        // The decoy is stable: asking twice shows the same salt, as for a real user.
        let again = server_first_for(&mut SaslServer::new(mechanism, store()), "mallory");
        let salt = |c: &str| c.split(',').nth(1).unwrap().to_string();
        assert_eq!(salt(&unknown), salt(&again));
        assert_ne!(
            salt(&unknown),
            salt(&server_first_for(
                &mut SaslServer::new(mechanism, store()),
                "trent"
            ))
        );
    }
}

/// Runs client-first and server-first, then hands the client's final message to `tamper`.
fn tampered_final(mechanism: Mechanism, tamper: impl FnOnce(String) -> String) -> SaslError {
    let mut client = SaslClient::new(mechanism, "alice", "alice-pw").unwrap();
    let mut server = SaslServer::new(mechanism, store());
    let SaslStep::Continue(challenge) = server.step(&client.first_message()).unwrap() else {
        panic!();
    };
    let client_final = String::from_utf8(client.step(&challenge).unwrap().unwrap()).unwrap();
    let error = server.step(tamper(client_final).as_bytes()).unwrap_err();
    assert_eq!(server.step(b"anything"), Err(SaslError::IllegalState));
    error
}

/// Every SCRAM mechanism refuses each client-first message with its error.
fn assert_scram_refuses_first(cases: &[(&[u8], SaslError)]) {
    for mechanism in SCRAM {
        for (first, error) in cases {
            assert_eq!(&refused(mechanism, &[], first), error, "{mechanism}");
        }
    }
}

/// Asserts that each of `bad`, stepped after `prefix`, is refused with an error `expected`
/// accepts.
fn assert_refused_as<const N: usize>(
    mechanism: Mechanism,
    prefix: &[&[u8]],
    bad: [&[u8]; N],
    expected: impl Fn(&SaslError) -> bool,
) {
    for bad in bad {
        let error = refused(mechanism, prefix, bad);
        assert!(expected(&error), "{mechanism} {bad:?}: {error}");
    }
}

/// A change to the client's final message.
type Tamper = fn(String) -> String;

/// Every SCRAM mechanism refuses the client's final message, changed by each tamper, with its
/// error.
fn assert_scram_refuses_tampered(cases: &[(Tamper, SaslError)]) {
    for mechanism in SCRAM {
        for (tamper, error) in cases {
            assert_eq!(&tampered_final(mechanism, tamper), error, "{mechanism}");
        }
    }
}

#[test]
fn a_tampered_proof_fails() {
    for mechanism in SCRAM {
        let flip_one_bit = |message: String| {
            let (head, proof) = message.rsplit_once(",p=").unwrap();
            let mut proof = BASE64.decode(proof).unwrap();
            proof[3] ^= 0x10;
            format!("{head},p={}", BASE64.encode(proof))
        };
        assert_eq!(
            tampered_final(mechanism, flip_one_bit),
            SaslError::AuthenticationFailed
        );
        let truncate = |message: String| {
            let (head, proof) = message.rsplit_once(",p=").unwrap();
            let proof = BASE64.decode(proof).unwrap();
            format!("{head},p={}", BASE64.encode(&proof[..proof.len() - 1]))
        };
        assert!(matches!(
            tampered_final(mechanism, truncate),
            SaslError::Malformed(_)
        ));
    }
}

#[test]
fn a_wrong_nonce_fails() {
    let other_nonce = |message: String| message.replacen(",r=", ",r=x", 1);
    let shorter = |message: String| {
        let (binding, rest) = message.split_once(",r=").unwrap();
        let (nonce, proof) = rest.split_once(',').unwrap();
        format!("{binding},r={},{proof}", &nonce[..nonce.len() - 1])
    };
    assert_scram_refuses_tampered(&[
        (other_nonce, SaslError::NonceMismatch),
        (shorter, SaslError::NonceMismatch),
    ]);
}

/// A client-final for alice whose `r=` is `nonce(client nonce, combined nonce)`, with the proof
/// computed over that text (as a client that writes it so would), stepped into a server that
/// has sent its first message.
fn final_with_nonce(
    mechanism: Mechanism,
    nonce: impl FnOnce(&str, &str) -> String,
) -> Result<(SaslStep, Vec<u8>), SaslError> {
    let scram = mechanism.scram().unwrap();
    let client_nonce = "fyko+d2lbbFgONRv9qkxdawL";
    let first_bare = format!("n=alice,r={client_nonce}");
    let mut server = SaslServer::new(mechanism, store());
    let SaslStep::Continue(challenge) = server.step(format!("n,,{first_bare}").as_bytes())? else {
        panic!("SCRAM takes two steps");
    };
    let server_first = String::from_utf8(challenge).unwrap();
    let field = |name: &str| {
        let prefix = format!("{name}=");
        let part = server_first.split(',').find(|p| p.starts_with(&prefix));
        part.unwrap()[prefix.len()..].to_owned()
    };
    let (combined, salt) = (field("r"), BASE64.decode(field("s")).unwrap());
    let iterations: u32 = field("i").parse().unwrap();
    let without_proof = format!("c=biws,r={}", nonce(client_nonce, &combined));
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let (client_final, server_signature) =
        alice_final(scram, (&salt, iterations), &without_proof, &auth_message);
    let step = server.step(client_final.as_bytes())?;
    Ok((step, server_signature))
}

/// alice's side of a SCRAM exchange by hand, from her password and the server's `(salt,
/// iterations)` (RFC 5802, section 3): her client-final, `without_proof` with the proof over
/// `auth_message`, and the server signature she expects back.
fn alice_final(
    scram: ScramMechanism,
    (salt, iterations): (&[u8], u32),
    without_proof: &str,
    auth_message: &str,
) -> (String, Vec<u8>) {
    let salted = scram.salted_password(b"alice-pw", salt, iterations);
    let (client_key, server_key) = scram.client_and_server_keys(&salted);
    let signature = scram.hmac(&scram.hash(&client_key), &[auth_message.as_bytes()]);
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let client_final = format!("{without_proof},p={}", BASE64.encode(proof));
    (
        client_final,
        scram.hmac(&server_key, &[auth_message.as_bytes()]),
    )
}

/// librdkafka (kcat, confluent-kafka) writes its client-final's `r=` as its own nonce followed
/// by the server-first's whole `r=` (which starts with that nonce again); Kafka's broker takes
/// it, and so does this one, with the server's signature over the text as sent. No other
/// prefix or suffix is taken.
#[test]
fn librdkafkas_repeated_client_nonce_is_accepted() {
    for mechanism in SCRAM {
        let exact = final_with_nonce(mechanism, |_, combined| combined.to_owned()).unwrap();
        let repeated =
            final_with_nonce(mechanism, |client, combined| format!("{client}{combined}")).unwrap();
        for (step, server_signature) in [exact, repeated] {
            let SaslStep::Done { user, token } = step else {
                panic!("{mechanism}: {step:?}");
            };
            assert_eq!(user, "alice");
            assert_eq!(
                token,
                format!("v={}", BASE64.encode(server_signature)).into_bytes()
            );
        }
        let refused: [fn(&str, &str) -> String; 4] = [
            |client, combined| format!("{client}{client}{combined}"),
            |client, combined| format!("{combined}{client}"),
            |client, combined| format!("{}{combined}", &client[1..]),
            |client, combined| format!("{client}{}", &combined[..combined.len() - 1]),
        ];
        for nonce in refused {
            assert_eq!(
                final_with_nonce(mechanism, nonce).unwrap_err(),
                SaslError::NonceMismatch,
                "{mechanism}"
            );
        }
    }
}

#[test]
fn channel_binding_is_refused() {
    assert_scram_refuses_first(&[(
        b"p=tls-server-end-point,,n=alice,r=abc",
        SaslError::ChannelBindingNotSupported,
    )]);
    // c= must repeat the GS2 header the client sent.
    let claim_binding = |message: String| message.replacen("c=biws", "c=eSws", 1);
    let unbound = |message: String| message.replacen("c=biws", "c=cD10bHMsLA==", 1);
    assert_scram_refuses_tampered(&[
        (claim_binding, SaslError::ChannelBindingMismatch),
        (unbound, SaslError::ChannelBindingMismatch),
    ]);
}

/// A client that could bind ("y") may go on without binding; its c= is then "y,,".
#[test]
fn the_y_flag_is_accepted() {
    let mechanism = Mechanism::ScramSha256;
    let credential = store()
        .get("alice", ScramMechanism::Sha256)
        .unwrap()
        .clone();
    let mut server = SaslServer::new(mechanism, store());
    let bare = "n=alice,r=clientnonce";
    let SaslStep::Continue(challenge) = server.step(format!("y,,{bare}").as_bytes()).unwrap()
    else {
        panic!();
    };
    let challenge = String::from_utf8(challenge).unwrap();
    let nonce = challenge.split(',').next().unwrap();
    let without_proof = format!("c={},{nonce}", BASE64.encode("y,,"));
    // The client's side by hand, from the password.
    let auth_message = format!("{bare},{challenge},{without_proof}");
    let salt = (credential.salt(), credential.iterations());
    let (last, _) = alice_final(ScramMechanism::Sha256, salt, &without_proof, &auth_message);
    assert!(matches!(
        server.step(last.as_bytes()),
        Ok(SaslStep::Done { user, .. }) if user == "alice"
    ));
}

#[test]
fn extensions_are_refused() {
    assert_scram_refuses_first(&[
        (
            b"n,,n=alice,r=abc,tokenauth=true",
            SaslError::TokenAuthNotSupported,
        ),
        (
            b"n,,n=alice,r=abc,x=1",
            SaslError::UnsupportedExtension("x".into()),
        ),
        (
            b"n,,m=mandatory,n=alice,r=abc",
            SaslError::UnsupportedExtension("m".into()),
        ),
    ]);
    let with_extension = |message: String| {
        let (head, proof) = message.rsplit_once(",p=").unwrap();
        format!("{head},tokenauth=true,p={proof}")
    };
    assert_scram_refuses_tampered(&[(with_extension, SaslError::TokenAuthNotSupported)]);
}

#[test]
fn the_authorization_identity_must_be_the_user() {
    let token = |authzid: &str, user: &str, password: &str| {
        format!("{authzid}\0{user}\0{password}").into_bytes()
    };
    let mut server = SaslServer::new(Mechanism::Plain, store());
    assert!(matches!(
        server.step(&token("alice", "alice", "alice-pw")),
        Ok(SaslStep::Done { user, token }) if user == "alice" && token.is_empty()
    ));
    assert_eq!(
        refused(Mechanism::Plain, &[], &token("bob", "alice", "alice-pw")),
        SaslError::AuthorizationIdMismatch
    );
    for mechanism in SCRAM {
        let mut server = SaslServer::new(mechanism, store());
        assert!(server.step(b"n,a=alice,n=alice,r=abc").is_ok());
        assert_eq!(
            refused(mechanism, &[], b"n,a=bob,n=alice,r=abc"),
            SaslError::AuthorizationIdMismatch
        );
    }
}

#[test]
fn malformed_client_messages_are_refused() {
    let malformed_or_invalid =
        |error: &SaslError| matches!(error, SaslError::Malformed(_) | SaslError::InvalidInput(_));
    let long = vec![b'a'; MAX_TOKEN_BYTES + 1];
    let bad_plain = [
        &b""[..],
        b"alice\0alice-pw",
        b"\0alice",
        b"\0alice\0alice-pw\0",
        b"\0\0alice-pw",
        b"\0alice\0",
        b"\0alice\xff\0alice-pw",
        b"\0bell\x07\0alice-pw",
        &long,
    ];
    assert_refused_as(Mechanism::Plain, &[], bad_plain, malformed_or_invalid);
    for mechanism in SCRAM {
        let bad_first = [
            &b""[..],
            b"n,,",
            b"n,",
            b"n",
            b"x,,n=alice,r=abc",
            b"n,alice,n=alice,r=abc",
            b"n,,n=alice",
            b"n,,r=abc,n=alice",
            b"n,,n=,r=abc",
            b"n,,n=al=ice,r=abc",
            b"n,,n=alice,r=",
            b"n,,n=alice,r=a b",
            b"n,,n=alice,r=abc,",
            b"n,,n=alice,r=\xff",
            &long,
        ];
        assert_refused_as(mechanism, &[], bad_first, malformed_or_invalid);
        let first: &[u8] = b"n,,n=alice,r=abc";
        let bad_final = [
            &b""[..],
            b"c=biws,r=abc",
            b"p=AAAA",
            b"r=abc,c=biws,p=AAAA",
            b"c=!!,r=abc,p=AAAA",
            b"c=biws,p=AAAA",
            b"c=biws,r=abc,p=not base64",
            b"c=biws,r=abc,p=AAAA,x=1",
            &long,
        ];
        assert_refused_as(mechanism, &[first], bad_final, |error| {
            matches!(error, SaslError::Malformed(_) | SaslError::NonceMismatch)
        });
    }
}

#[test]
fn error_codes_are_kafkas() {
    assert_eq!(SaslError::IllegalState.error_code(), ILLEGAL_SASL_STATE);
    for error in [
        SaslError::AuthenticationFailed,
        SaslError::Malformed("x"),
        SaslError::NonceMismatch,
        SaslError::TokenAuthNotSupported,
    ] {
        assert_eq!(error.error_code(), SASL_AUTHENTICATION_FAILED);
    }
    // No error text names the user or echoes the password.
    for (mechanism, user, password) in [
        (Mechanism::Plain, "mallory", "hunter2"),
        (Mechanism::ScramSha256, "alice", "hunter2"),
    ] {
        let text = login(mechanism, user, password).unwrap_err().to_string();
        assert!(!text.contains(user) && !text.contains(password), "{text}");
    }
}

/// A server that does not hold the credential cannot finish: the client checks its signature.
#[test]
fn the_client_verifies_the_server() {
    for mechanism in SCRAM {
        let mut client = SaslClient::new(mechanism, "alice", "alice-pw").unwrap();
        let mut server = SaslServer::new(mechanism, store());
        let SaslStep::Continue(challenge) = server.step(&client.first_message()).unwrap() else {
            panic!();
        };
        let client_final = client.step(&challenge).unwrap().unwrap();
        let SaslStep::Done { token, .. } = server.step(&client_final).unwrap() else {
            panic!();
        };
        let mut forged = BASE64.decode(&token[2..]).unwrap();
        forged[0] ^= 1;
        let forged = format!("v={}", BASE64.encode(forged));
        let mut verifier = SaslClient::new(mechanism, "alice", "alice-pw").unwrap();
        verifier.nonce = client.nonce.clone();
        verifier.step(&challenge).unwrap();
        assert_eq!(
            verifier.step(forged.as_bytes()),
            Err(SaslError::ServerSignatureMismatch)
        );
        assert_eq!(verifier.step(&token), Err(SaslError::IllegalState));
        assert_eq!(client.step(&token), Ok(None));
    }
}

#[test]
fn the_client_refuses_bad_challenges() {
    let challenge = |mechanism, server_first: &str| {
        let mut client =
            SaslClient::with_fixed_nonce(mechanism, "alice", "alice-pw", "cnonce").unwrap();
        let result = client.step(server_first.as_bytes());
        if result.is_err() {
            assert_eq!(
                client.step(server_first.as_bytes()),
                Err(SaslError::IllegalState)
            );
        }
        result
    };
    for mechanism in SCRAM {
        assert!(challenge(mechanism, "r=cnonceSERVER,s=c2FsdA==,i=4096").is_ok());
        assert_eq!(
            challenge(mechanism, "r=cnonceSERVER,s=c2FsdA==,i=4095"),
            Err(SaslError::BadIterations(4095))
        );
        assert_eq!(
            challenge(mechanism, "r=cnonceSERVER,s=c2FsdA==,i=99999999999"),
            Err(SaslError::BadIterations(u32::MAX))
        );
        assert_eq!(
            challenge(mechanism, "r=othernonce,s=c2FsdA==,i=4096"),
            Err(SaslError::NonceMismatch)
        );
        assert_eq!(
            challenge(mechanism, "r=cnonce,s=c2FsdA==,i=4096"),
            Err(SaslError::NonceMismatch)
        );
        assert_eq!(
            challenge(mechanism, "e=unknown-user"),
            Err(SaslError::ServerError("unknown-user".into()))
        );
        for bad in [
            "",
            "r=cnonceSERVER",
            "r=cnonceSERVER,s=,i=4096",
            "r=cnonceSERVER,s=!!,i=4096",
            "r=cnonceSERVER,s=c2FsdA==,i=+4096",
            "r=cnonceSERVER,s=c2FsdA==",
            "s=c2FsdA==,r=cnonceSERVER,i=4096",
        ] {
            assert!(
                matches!(challenge(mechanism, bad), Err(SaslError::Malformed(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            challenge(mechanism, "r=cnonceSERVER,s=c2FsdA==,i=4096,x=1"),
            Err(SaslError::UnsupportedExtension(_))
        ));
    }
    let mut plain = SaslClient::new(Mechanism::Plain, "alice", "alice-pw").unwrap();
    assert!(matches!(plain.step(b"x"), Err(SaslError::Malformed(_))));
    assert_eq!(plain.step(b""), Err(SaslError::IllegalState));
    assert!(matches!(
        SaslClient::new(Mechanism::Plain, "", "pw"),
        Err(SaslError::InvalidInput(_))
    ));
    assert!(matches!(
        SaslClient::new(Mechanism::ScramSha256, "alice", "\u{7}"),
        Err(SaslError::InvalidInput(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary tokens, in any number of steps, into a server of any mechanism: errors, never
    /// a panic, and never a success.
    #[test]
    fn arbitrary_tokens_never_panic(
        mechanism in prop::sample::select(Mechanism::ALL.to_vec()),
        tokens in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..4),
    ) {
        let mut server = SaslServer::new(mechanism, store());
        for token in &tokens {
            if let Ok(SaslStep::Done { .. }) = server.step(token) {
                prop_assert!(false, "authenticated by arbitrary tokens");
            }
        }
    }

    /// A valid client-first, then arbitrary text shaped like a client-final.
    #[test]
    fn arbitrary_final_messages_never_panic(
        mechanism in prop::sample::select(SCRAM.to_vec()),
        user in prop::sample::select(vec!["alice", "mallory"]),
        last in "(c=[a-zA-Z0-9+/=]{0,8},)?(r=[!-~]{0,60},)?([a-z]=[^,]{0,5},)?p=[a-zA-Z0-9+/=]{0,90}",
    ) {
        let mut server = SaslServer::new(mechanism, store());
        let first = format!("n,,n={user},r=clientnonce");
        prop_assert!(server.step(first.as_bytes()).is_ok());
        prop_assert!(server.step(last.as_bytes()).is_err());
    }

    /// Arbitrary server tokens into a client: errors or a next token, never a panic.
    #[test]
    fn arbitrary_challenges_never_panic(
        mechanism in prop::sample::select(Mechanism::ALL.to_vec()),
        tokens in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..4),
    ) {
        let mut client = SaslClient::new(mechanism, "alice", "alice-pw").unwrap();
        for token in &tokens {
            let _ = client.step(token);
        }
    }
}
