//! SASL (docs/security.md, "SASL"): the mechanisms PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 as
//! sans-IO state machines, one per connection. The server side ([`SaslServer`]) checks a
//! client's tokens against a [`CredentialStore`]; the client side ([`SaslClient`]) is what the
//! tests and the blocking client use, and checks the server's signature (mutual
//! authentication).
//!
//! Both take a token and give the next one; carrying tokens in SaslAuthenticate bodies is the
//! caller's business (`wire::kafka::SaslAuthenticateRequest`). No error says whether a user
//! exists: an unknown user gets the same answers, and costs the same work, as a wrong password,
//! because the exchange runs against a decoy credential.

mod plain;
mod scram;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use engine::raft::ErrorCode;
use thiserror::Error;

use crate::security::credentials::{CredentialError, CredentialStore, ScramMechanism};
use crate::wire::kafka::{
    ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
};

/// The longest token either side takes in one step; longer is [`SaslError::Malformed`].
pub const MAX_TOKEN_BYTES: usize = 4096;

/// A SASL mechanism this server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 3] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
    ];

    /// Kafka's name: "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512".
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => ScramMechanism::Sha256.name(),
            Mechanism::ScramSha512 => ScramMechanism::Sha512.name(),
        }
    }

    /// The SCRAM hash, None for PLAIN.
    pub fn scram(self) -> Option<ScramMechanism> {
        match self {
            Mechanism::Plain => None,
            Mechanism::ScramSha256 => Some(ScramMechanism::Sha256),
            Mechanism::ScramSha512 => Some(ScramMechanism::Sha512),
        }
    }

    /// How many client tokens an exchange takes: PLAIN one, SCRAM two.
    pub fn steps(self) -> usize {
        match self {
            Mechanism::Plain => 1,
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => 2,
        }
    }
}

impl From<ScramMechanism> for Mechanism {
    fn from(mechanism: ScramMechanism) -> Self {
        match mechanism {
            ScramMechanism::Sha256 => Mechanism::ScramSha256,
            ScramMechanism::Sha512 => Mechanism::ScramSha512,
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A mechanism name this server does not speak (names are case-sensitive, as in Kafka).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("unsupported SASL mechanism {0:?} (supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")]
pub struct UnknownMechanism(pub String);

impl UnknownMechanism {
    /// What a SaslHandshake response carries for it.
    pub fn error_code(&self) -> ErrorCode {
        UNSUPPORTED_SASL_MECHANISM
    }
}

impl FromStr for Mechanism {
    type Err = UnknownMechanism;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| UnknownMechanism(name.chars().take(64).collect()))
    }
}

/// What a server step produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaslStep {
    /// A challenge for the client; the exchange goes on.
    Continue(Vec<u8>),
    /// Authenticated as `user` (its SASLprep form, as stored). `token` is the server's final
    /// message for the client (SCRAM's server signature; empty for PLAIN).
    Done { user: String, token: Vec<u8> },
}

/// Why an exchange failed. Every variant's text is safe to send to the client: none names a
/// user, a password or a key, and none tells an unknown user from a wrong password.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SaslError {
    /// Wrong password, unknown user, or a proof that does not verify: one answer for all.
    #[error("authentication failed: invalid credentials")]
    AuthenticationFailed,
    #[error("malformed SASL message: {0}")]
    Malformed(&'static str),
    /// The client asked for channel binding (`p=` in SCRAM's GS2 header).
    #[error("channel binding is not supported")]
    ChannelBindingNotSupported,
    /// SCRAM's `c=` does not repeat the client's GS2 header.
    #[error("the channel binding attribute does not match the client's first message")]
    ChannelBindingMismatch,
    /// The authorization identity is neither empty nor the user name.
    #[error("the authorization identity must be empty or equal to the user name")]
    AuthorizationIdMismatch,
    /// SCRAM delegation tokens (`tokenauth`) are not supported.
    #[error("delegation tokens (the tokenauth extension) are not supported")]
    TokenAuthNotSupported,
    /// A SCRAM extension or attribute this implementation does not know.
    #[error("unsupported SCRAM extension {0:?}")]
    UnsupportedExtension(String),
    /// The nonce does not continue this exchange.
    #[error("the nonce does not continue this exchange")]
    NonceMismatch,
    /// A user name or password that SASLprep refuses (or an empty one).
    #[error("invalid user name or password: {0}")]
    InvalidInput(String),
    /// A step after the exchange ended (done, failed, or all its steps taken).
    #[error("the SASL exchange is over: no further step is expected")]
    IllegalState,
    /// Client side: the server's signature does not verify, so it does not hold the
    /// credential.
    #[error("the server's signature does not verify: it is not the server it claims to be")]
    ServerSignatureMismatch,
    /// Client side: the server answered with an error attribute (`e=`).
    #[error("the server refused: {0}")]
    ServerError(String),
    /// Client side: the server asked for an iteration count out of range.
    #[error("the server asks for {0} iterations, outside the accepted range")]
    BadIterations(u32),
    #[error("the operating system's random number generator failed: {0}")]
    Random(String),
}

impl SaslError {
    /// The Kafka error code of a SaslAuthenticate response that carries this error.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            SaslError::IllegalState => ILLEGAL_SASL_STATE,
            _ => SASL_AUTHENTICATION_FAILED,
        }
    }
}

/// The user name and password errors of the credentials module, as SASL errors. The text
/// comes from there and names neither.
fn input_error(error: CredentialError) -> SaslError {
    match error {
        CredentialError::InvalidUserName { reason } => {
            SaslError::InvalidInput(format!("user name: {reason}"))
        }
        CredentialError::InvalidPassword { reason } => {
            SaslError::InvalidInput(format!("password: {reason}"))
        }
        other => SaslError::InvalidInput(other.to_string()),
    }
}

fn random_nonce() -> Result<String, SaslError> {
    use base64::Engine;
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).map_err(|e| SaslError::Random(e.to_string()))?;
    // 24 bytes are 32 base64 characters without padding, none of them a comma.
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// A token as text: SCRAM and PLAIN messages are UTF-8, and bounded.
fn token_text(token: &[u8]) -> Result<&str, SaslError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(SaslError::Malformed("token above 4096 bytes"));
    }
    std::str::from_utf8(token).map_err(|_| SaslError::Malformed("not UTF-8"))
}

enum ServerState {
    Start,
    ScramSentFirst(Box<scram::ServerFirstSent>),
    Over,
}

/// The server side of one connection's SASL exchange.
pub struct SaslServer {
    mechanism: Mechanism,
    store: Arc<CredentialStore>,
    state: ServerState,
    /// Set only by the tests' constructor: the server part of SCRAM's nonce.
    fixed_nonce: Option<String>,
}

impl SaslServer {
    pub fn new(mechanism: Mechanism, store: Arc<CredentialStore>) -> Self {
        Self {
            mechanism,
            store,
            state: ServerState::Start,
            fixed_nonce: None,
        }
    }

    /// A server whose SCRAM nonce is `nonce` instead of random (published test vectors).
    #[cfg(test)]
    pub(crate) fn with_nonce(
        mechanism: Mechanism,
        store: Arc<CredentialStore>,
        nonce: &str,
    ) -> Self {
        Self {
            fixed_nonce: Some(nonce.into()),
            ..Self::new(mechanism, store)
        }
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Whether the exchange has ended (authenticated or failed).
    pub fn is_over(&self) -> bool {
        matches!(self.state, ServerState::Over)
    }

    /// Takes the client's next token. Any error ends the exchange: every later step is
    /// [`SaslError::IllegalState`], as is a step after [`SaslStep::Done`].
    pub fn step(&mut self, client_token: &[u8]) -> Result<SaslStep, SaslError> {
        let state = std::mem::replace(&mut self.state, ServerState::Over);
        let (next, result) = match (state, self.mechanism.scram()) {
            (ServerState::Over, _) => return Err(SaslError::IllegalState),
            (ServerState::Start, None) => (
                ServerState::Over,
                plain::server_step(&self.store, client_token),
            ),
            (ServerState::Start, Some(scram)) => {
                let nonce = match self.fixed_nonce.take() {
                    Some(nonce) => nonce,
                    None => random_nonce()?,
                };
                match scram::server_first(&self.store, scram, client_token, nonce) {
                    Ok(sent) => {
                        let token = sent.server_first.clone().into_bytes();
                        (
                            ServerState::ScramSentFirst(Box::new(sent)),
                            Ok(SaslStep::Continue(token)),
                        )
                    }
                    Err(error) => (ServerState::Over, Err(error)),
                }
            }
            (ServerState::ScramSentFirst(sent), _) => {
                (ServerState::Over, scram::server_final(&sent, client_token))
            }
        };
        self.state = next;
        result
    }
}

enum ClientState {
    AwaitingServerFirst,
    AwaitingServerFinal(Box<scram::ClientFinalSent>),
    AwaitingPlainOutcome,
    Over,
}

/// The client side of one SASL exchange: send [`first_message`](Self::first_message), then
/// feed each server token to [`step`](Self::step) and send what it returns until it returns
/// None (authenticated, and for SCRAM the server proved it holds the credential).
pub struct SaslClient {
    mechanism: Mechanism,
    user: String,
    password: String,
    nonce: String,
    state: ClientState,
}

impl fmt::Debug for SaslClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslClient")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl SaslClient {
    /// `user` and `password` are SASLprep'd here; either may be refused.
    pub fn new(mechanism: Mechanism, user: &str, password: &str) -> Result<Self, SaslError> {
        Self::with_nonce(mechanism, user, password, random_nonce()?)
    }

    fn with_nonce(
        mechanism: Mechanism,
        user: &str,
        password: &str,
        nonce: String,
    ) -> Result<Self, SaslError> {
        use crate::security::credentials::{prepare_password, prepare_user_name};
        let user = prepare_user_name(user).map_err(input_error)?;
        let password = prepare_password(password).map_err(input_error)?;
        let state = match mechanism {
            Mechanism::Plain => ClientState::AwaitingPlainOutcome,
            _ => ClientState::AwaitingServerFirst,
        };
        Ok(Self {
            mechanism,
            user,
            password,
            nonce,
            state,
        })
    }

    /// A client whose SCRAM nonce is `nonce` instead of random (published test vectors).
    #[cfg(test)]
    pub(crate) fn with_fixed_nonce(
        mechanism: Mechanism,
        user: &str,
        password: &str,
        nonce: &str,
    ) -> Result<Self, SaslError> {
        Self::with_nonce(mechanism, user, password, nonce.into())
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// The client's first token (the same on every call).
    pub fn first_message(&self) -> Vec<u8> {
        match self.mechanism {
            Mechanism::Plain => plain::client_message(&self.user, &self.password),
            _ => scram::client_first(&self.user, &self.nonce).into_bytes(),
        }
    }

    /// Takes the server's next token: `Some(token)` to send back, or `None` when the exchange
    /// is complete and the server verified.
    pub fn step(&mut self, server_token: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        let state = std::mem::replace(&mut self.state, ClientState::Over);
        match state {
            ClientState::Over => Err(SaslError::IllegalState),
            ClientState::AwaitingPlainOutcome => {
                if server_token.is_empty() {
                    Ok(None)
                } else {
                    Err(SaslError::Malformed(
                        "PLAIN: the server's final token is not empty",
                    ))
                }
            }
            ClientState::AwaitingServerFirst => {
                let scram = self.mechanism.scram().expect("SCRAM state");
                let sent = scram::client_final(
                    scram,
                    &self.user,
                    &self.password,
                    &self.nonce,
                    server_token,
                )?;
                let token = sent.client_final.clone().into_bytes();
                self.state = ClientState::AwaitingServerFinal(Box::new(sent));
                Ok(Some(token))
            }
            ClientState::AwaitingServerFinal(sent) => {
                scram::client_verify(&sent, server_token)?;
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests;
