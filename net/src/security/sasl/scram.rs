//! SCRAM-SHA-256 and SCRAM-SHA-512 (docs/security.md, "SASL"): the four messages, parsed
//! strictly, without channel binding.
//!
//! ```text
//! client-first  n,,n=USER,r=CNONCE               (GS2 header "n,," or "y,,"; "a=USER" allowed)
//! server-first  r=CNONCE SNONCE,s=SALT,i=ITERATIONS
//! client-final  c=biws,r=CNONCE SNONCE,p=PROOF
//! server-final  v=SERVER_SIGNATURE
//! ```
//!
//! AuthMessage = client-first-bare "," server-first "," client-final-without-proof;
//! ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage);
//! ServerSignature = HMAC(ServerKey, AuthMessage).

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use subtle::{Choice, ConstantTimeEq};

use super::{input_error, token_text, SaslError, SaslStep};
use crate::security::credentials::{
    prepare_user_name, CredentialStore, ScramCredential, ScramMechanism, MAX_ITERATIONS,
    MIN_ITERATIONS,
};

/// The value of `name=value`, if `part` is that attribute.
fn attribute<'a>(part: &'a str, name: &str) -> Option<&'a str> {
    part.strip_prefix(name)?.strip_prefix('=')
}

/// At most 64 printable ASCII characters of text the peer sent, for an error message.
fn sanitized(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(64)
        .collect()
}

/// Any attribute past the known ones. Kafka refuses extensions it does not support, and this
/// server supports none: `tokenauth` (delegation tokens) gets its own error.
fn refuse_extension(part: &str) -> SaslError {
    let key = part.split_once('=').map_or(part, |(key, _)| key);
    match key {
        "" => SaslError::Malformed("SCRAM: an empty attribute"),
        "tokenauth" => SaslError::TokenAuthNotSupported,
        key => SaslError::UnsupportedExtension(sanitized(key)),
    }
}

/// A user name as SCRAM writes it: "," as "=2C" and "=" as "=3D".
fn encode_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

fn decode_name(text: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['=', '\0']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("=2C") {
            out.push(',');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("=3D") {
            out.push('=');
            rest = after;
        } else {
            return Err(SaslError::Malformed("SCRAM: bad escape in a user name"));
        }
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(SaslError::Malformed("SCRAM: empty user name"));
    }
    Ok(out)
}

/// A nonce: printable ASCII but ",".
fn check_nonce(nonce: &str) -> Result<(), SaslError> {
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(SaslError::Malformed("SCRAM: bad nonce"));
    }
    Ok(())
}

fn decode_base64(text: &str, what: &'static str) -> Result<Vec<u8>, SaslError> {
    BASE64.decode(text).map_err(|_| SaslError::Malformed(what))
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// What the server keeps between its two steps.
pub(super) struct ServerFirstSent {
    mechanism: ScramMechanism,
    user: String,
    gs2_header: String,
    client_first_bare: String,
    pub(super) server_first: String,
    /// The combined nonce: the client's, then the server's.
    nonce: String,
    /// How many bytes of `nonce` are the client's.
    client_nonce_len: usize,
    credential: ScramCredential,
    known: bool,
}

/// The client's first message in, the server's first message out.
pub(super) fn server_first(
    store: &CredentialStore,
    mechanism: ScramMechanism,
    token: &[u8],
    server_nonce: String,
) -> Result<ServerFirstSent, SaslError> {
    let text = token_text(token)?;
    let (flag, rest) = text
        .split_once(',')
        .ok_or(SaslError::Malformed("SCRAM: no GS2 header"))?;
    match flag {
        // "y": the client could bind but thinks the server cannot, which is true.
        "n" | "y" => {}
        flag if flag.starts_with("p=") => return Err(SaslError::ChannelBindingNotSupported),
        _ => return Err(SaslError::Malformed("SCRAM: bad channel binding flag")),
    }
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or(SaslError::Malformed("SCRAM: no GS2 header"))?;
    let gs2_header = &text[..flag.len() + 1 + authzid.len() + 1];
    let authzid = match authzid {
        "" => None,
        a => Some(decode_name(attribute(a, "a").ok_or(
            SaslError::Malformed("SCRAM: bad authorization identity"),
        )?)?),
    };

    let mut parts = bare.split(',');
    let name = parts.next().unwrap_or_default();
    if name.starts_with("m=") {
        return Err(SaslError::UnsupportedExtension("m".into()));
    }
    let name = attribute(name, "n").ok_or(SaslError::Malformed("SCRAM: expected n=user"))?;
    let user = prepare_user_name(&decode_name(name)?).map_err(input_error)?;
    let client_nonce = parts
        .next()
        .and_then(|part| attribute(part, "r"))
        .ok_or(SaslError::Malformed("SCRAM: expected r=nonce"))?;
    check_nonce(client_nonce)?;
    if let Some(extension) = parts.next() {
        return Err(refuse_extension(extension));
    }
    if let Some(authzid) = authzid {
        if prepare_user_name(&authzid).ok().as_deref() != Some(user.as_str()) {
            return Err(SaslError::AuthorizationIdMismatch);
        }
    }

    // An unknown user gets a decoy credential: the same kind of salt and iteration count, the
    // same work, and a failure only at the proof.
    let lookup = store.scram_lookup(&user, mechanism);
    let nonce = format!("{client_nonce}{server_nonce}");
    let server_first = format!(
        "r={nonce},s={},i={}",
        BASE64.encode(lookup.credential.salt()),
        lookup.credential.iterations()
    );
    Ok(ServerFirstSent {
        mechanism,
        user,
        gs2_header: gs2_header.into(),
        client_first_bare: bare.into(),
        server_first,
        nonce,
        client_nonce_len: client_nonce.len(),
        credential: lookup.credential,
        known: lookup.known,
    })
}

/// Whether a client-final `r=` is the client nonce followed by the whole combined nonce, as
/// librdkafka (kcat, confluent-kafka) writes it: it joins its own nonce to the server-first's
/// `r=` value, which already starts with it. Kafka's broker accepts any `r=` that ends with the
/// combined nonce; this accepts that one form besides the exact one (docs/security.md,
/// "SASL"). The server's part is still required whole, so a replayed final message still fails,
/// and the proof covers the `r=` as sent.
fn repeats_client_nonce(nonce: &str, sent: &ServerFirstSent) -> bool {
    let client_nonce = &sent.nonce[..sent.client_nonce_len];
    nonce.strip_prefix(client_nonce) == Some(sent.nonce.as_str())
}

/// The client's final message in: the proof checked, the server's signature out.
pub(super) fn server_final(sent: &ServerFirstSent, token: &[u8]) -> Result<SaslStep, SaslError> {
    let text = token_text(token)?;
    let (without_proof, proof) = text
        .rsplit_once(",p=")
        .ok_or(SaslError::Malformed("SCRAM: expected p=proof last"))?;
    let mut parts = without_proof.split(',');
    let binding = parts
        .next()
        .and_then(|part| attribute(part, "c"))
        .ok_or(SaslError::Malformed("SCRAM: expected c=binding"))?;
    if decode_base64(binding, "SCRAM: c= is not base64")? != sent.gs2_header.as_bytes() {
        return Err(SaslError::ChannelBindingMismatch);
    }
    let nonce = parts
        .next()
        .and_then(|part| attribute(part, "r"))
        .ok_or(SaslError::Malformed("SCRAM: expected r=nonce"))?;
    if nonce != sent.nonce && !repeats_client_nonce(nonce, sent) {
        return Err(SaslError::NonceMismatch);
    }
    if let Some(extension) = parts.next() {
        return Err(refuse_extension(extension));
    }
    let proof = decode_base64(proof, "SCRAM: p= is not base64")?;
    let mechanism = sent.mechanism;
    if proof.len() != mechanism.hash_len() {
        return Err(SaslError::Malformed("SCRAM: a proof of the wrong length"));
    }
    let auth_message = format!(
        "{},{},{without_proof}",
        sent.client_first_bare, sent.server_first
    );
    let credential = &sent.credential;
    let client_signature = mechanism.hmac(credential.stored_key(), &[auth_message.as_bytes()]);
    let client_key = xor(&proof, &client_signature);
    let verified = mechanism.hash(&client_key).ct_eq(credential.stored_key())
        & Choice::from(u8::from(sent.known));
    if !bool::from(verified) {
        return Err(SaslError::AuthenticationFailed);
    }
    let server_signature = mechanism.hmac(credential.server_key(), &[auth_message.as_bytes()]);
    Ok(SaslStep::Done {
        user: sent.user.clone(),
        token: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
    })
}

/// The client's first message: no channel binding, no authorization identity.
pub(super) fn client_first(user: &str, nonce: &str) -> String {
    format!("n,,{}", client_first_bare(user, nonce))
}

fn client_first_bare(user: &str, nonce: &str) -> String {
    format!("n={},r={nonce}", encode_name(user))
}

/// What the client keeps for the server's final message.
pub(super) struct ClientFinalSent {
    pub(super) client_final: String,
    server_signature: Vec<u8>,
}

/// The server's first message in, the client's final message out.
pub(super) fn client_final(
    mechanism: ScramMechanism,
    user: &str,
    password: &str,
    client_nonce: &str,
    token: &[u8],
) -> Result<ClientFinalSent, SaslError> {
    let text = token_text(token)?;
    if let Some(error) = attribute(text, "e") {
        return Err(SaslError::ServerError(sanitized(error)));
    }
    let mut parts = text.split(',');
    let first = parts.next().unwrap_or_default();
    if first.starts_with("m=") {
        return Err(SaslError::UnsupportedExtension("m".into()));
    }
    let nonce = attribute(first, "r").ok_or(SaslError::Malformed("SCRAM: expected r=nonce"))?;
    check_nonce(nonce)?;
    if nonce.len() <= client_nonce.len() || !nonce.starts_with(client_nonce) {
        return Err(SaslError::NonceMismatch);
    }
    let salt = parts
        .next()
        .and_then(|part| attribute(part, "s"))
        .ok_or(SaslError::Malformed("SCRAM: expected s=salt"))?;
    let salt = decode_base64(salt, "SCRAM: s= is not base64")?;
    if salt.is_empty() {
        return Err(SaslError::Malformed("SCRAM: empty salt"));
    }
    let iterations = parts
        .next()
        .and_then(|part| attribute(part, "i"))
        .ok_or(SaslError::Malformed("SCRAM: expected i=iterations"))?;
    if iterations.is_empty() || !iterations.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SaslError::Malformed("SCRAM: bad iteration count"));
    }
    let iterations: u32 = iterations.parse().unwrap_or(u32::MAX);
    if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
        return Err(SaslError::BadIterations(iterations));
    }
    if let Some(extension) = parts.next() {
        return Err(refuse_extension(extension));
    }

    let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
    let (client_key, server_key) = mechanism.client_and_server_keys(&salted);
    let stored_key = mechanism.hash(&client_key);
    let without_proof = format!("c={},r={nonce}", BASE64.encode("n,,"));
    let auth_message = format!(
        "{},{text},{without_proof}",
        client_first_bare(user, client_nonce)
    );
    let client_signature = mechanism.hmac(&stored_key, &[auth_message.as_bytes()]);
    let proof = xor(&client_key, &client_signature);
    Ok(ClientFinalSent {
        client_final: format!("{without_proof},p={}", BASE64.encode(proof)),
        server_signature: mechanism.hmac(&server_key, &[auth_message.as_bytes()]),
    })
}

/// The server's final message: its signature must be the one only the credential's holder can
/// compute.
pub(super) fn client_verify(sent: &ClientFinalSent, token: &[u8]) -> Result<(), SaslError> {
    let text = token_text(token)?;
    if let Some(error) = attribute(text, "e") {
        return Err(SaslError::ServerError(sanitized(error)));
    }
    let mut parts = text.split(',');
    let signature = parts
        .next()
        .and_then(|part| attribute(part, "v"))
        .ok_or(SaslError::Malformed("SCRAM: expected v=signature"))?;
    if let Some(extension) = parts.next() {
        return Err(refuse_extension(extension));
    }
    let signature = decode_base64(signature, "SCRAM: v= is not base64")?;
    if bool::from(signature.ct_eq(&sent.server_signature)) {
        Ok(())
    } else {
        Err(SaslError::ServerSignatureMismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_escape_and_unescape() {
        for name in ["plain", "a,b", "a=b", "=2C", ",=,", "é"] {
            assert_eq!(decode_name(&encode_name(name)).unwrap(), name);
        }
        assert_eq!(encode_name("a=,"), "a=3D=2C");
        for bad in ["", "a=", "a=2c", "a=41", "a\0b"] {
            assert!(decode_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn nonces_are_printable_without_commas() {
        check_nonce("rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0").unwrap();
        for bad in ["", "a b", "a,b", "é", "a\u{7f}"] {
            assert!(check_nonce(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn extensions_are_refused_by_name() {
        assert_eq!(
            refuse_extension("tokenauth=true"),
            SaslError::TokenAuthNotSupported
        );
        assert_eq!(
            refuse_extension("x=1"),
            SaslError::UnsupportedExtension("x".into())
        );
        assert!(matches!(refuse_extension(""), SaslError::Malformed(_)));
        let long = format!("{}=1", "\u{7}k".repeat(100));
        let SaslError::UnsupportedExtension(shown) = refuse_extension(&long) else {
            panic!();
        };
        assert_eq!(shown, "k".repeat(64));
    }
}
