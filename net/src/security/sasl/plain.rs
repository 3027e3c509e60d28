//! PLAIN (docs/security.md, "SASL"): one client message `authzid NUL authcid NUL password`,
//! checked against the user's SCRAM credential, so no password is stored for it either.

use super::{input_error, token_text, SaslError, SaslStep};
use crate::security::credentials::{prepare_password, prepare_user_name, CredentialStore};

pub(super) fn server_step(store: &CredentialStore, token: &[u8]) -> Result<SaslStep, SaslError> {
    let text = token_text(token)?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(authcid), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SaslError::Malformed(
            "PLAIN: expected authzid NUL user name NUL password",
        ));
    };
    let user = prepare_user_name(authcid).map_err(input_error)?;
    if !authzid.is_empty() && prepare_user_name(authzid).ok().as_deref() != Some(user.as_str()) {
        return Err(SaslError::AuthorizationIdMismatch);
    }
    let password = prepare_password(password).map_err(input_error)?;
    // An unknown user is checked against a decoy: the same PBKDF2 work, the same answer.
    let lookup = store.plain_lookup(&user);
    let matches = lookup.credential.verify_prepared_password(&password);
    if matches && lookup.known {
        Ok(SaslStep::Done {
            user,
            token: Vec::new(),
        })
    } else {
        Err(SaslError::AuthenticationFailed)
    }
}

/// The client's only message, with an empty authorization identity.
pub(super) fn client_message(user: &str, password: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(user.len() + password.len() + 2);
    message.push(0);
    message.extend_from_slice(user.as_bytes());
    message.push(0);
    message.extend_from_slice(password.as_bytes());
    message
}
