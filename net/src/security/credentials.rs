//! SCRAM credentials and the credentials file (docs/security.md, "Credentials file").
//!
//! A credential is what a SCRAM server keeps of a password: a random salt, an iteration count,
//! `StoredKey = H(HMAC(SaltedPassword, "Client Key"))` and
//! `ServerKey = HMAC(SaltedPassword, "Server Key")`, where
//! `SaltedPassword = PBKDF2-HMAC-H(SASLprep(password), salt, iterations)`. Neither key gives the
//! password back, and PLAIN is checked against the same credential (recompute SaltedPassword
//! from the offered password, compare StoredKey), so no password is ever stored.
//!
//! [`CredentialStore`] is one JSON file, one entry per user with a credential per mechanism,
//! salts and keys in base64. Loading refuses anything doubtful with a typed error naming the
//! file (a corrupt file is never cleared); saving replaces the file atomically (temp file with
//! mode 0600, fsync, rename, directory fsync). One writer at a time: two tools saving at once
//! each write a whole file, and the last rename wins.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;
use thiserror::Error;

/// The fewest PBKDF2 iterations a credential may have (SCRAM-SHA-256's minimum).
pub const MIN_ITERATIONS: u32 = 4096;
/// The most: every PLAIN login and every client's SCRAM login pays for them.
pub const MAX_ITERATIONS: u32 = 65_536;
/// What `ringraft credentials add` uses unless told otherwise.
pub const DEFAULT_ITERATIONS: u32 = 8192;
/// Bytes of a generated salt.
pub const SALT_LEN: usize = 32;
/// The longest salt a file may hold (credentials made elsewhere may use other lengths).
pub const MAX_SALT_LEN: usize = 128;
/// The longest user name, in bytes after SASLprep.
pub const MAX_USER_NAME_LEN: usize = 255;
/// The only file `version` this build reads and writes.
pub const FILE_VERSION: u32 = 1;

/// The hash of a SCRAM mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The Kafka (and IANA) name: "SCRAM-SHA-256" or "SCRAM-SHA-512".
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Bytes of the hash's output, and so of StoredKey, ServerKey and a client proof.
    pub fn hash_len(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }

    /// `H(data)`.
    pub(crate) fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `HMAC(key, parts[0] || parts[1] || ...)`.
    pub(crate) fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
            let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .expect("HMAC takes keys of any length");
            for part in parts {
                mac.update(part);
            }
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            ScramMechanism::Sha256 => run::<Hmac<Sha256>>(key, parts),
            ScramMechanism::Sha512 => run::<Hmac<Sha512>>(key, parts),
        }
    }

    /// `Hi(password, salt, iterations)`: PBKDF2 with this hash's HMAC, one block of output.
    pub(crate) fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.hash_len()];
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
            }
        }
        out
    }

    /// ClientKey and ServerKey from SaltedPassword.
    pub(crate) fn client_and_server_keys(self, salted_password: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (
            self.hmac(salted_password, &[b"Client Key"]),
            self.hmac(salted_password, &[b"Server Key"]),
        )
    }
}

impl fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Error)]
pub enum CredentialError {
    #[error("cannot read credentials file {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    /// Not the expected JSON, or values out of range. Fix or restore the file by hand.
    #[error("credentials file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("credentials file {path} has version {found}; this build reads only {FILE_VERSION}")]
    UnknownVersion { path: PathBuf, found: u32 },
    /// Creating, writing or renaming failed: the old file is intact.
    #[error("cannot write credentials file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    /// fsync of the new file or of its directory failed: whether the new content is durable is
    /// unknown.
    #[error("fsync of {path} failed: {source}")]
    SyncFailed { path: PathBuf, source: io::Error },
    #[error("invalid user name: {reason}")]
    InvalidUserName { reason: String },
    #[error("invalid password: {reason}")]
    InvalidPassword { reason: String },
    #[error("invalid credential: {reason}")]
    InvalidCredential { reason: String },
    #[error("{iterations} iterations: at least {MIN_ITERATIONS} are required")]
    TooFewIterations { iterations: u32 },
    #[error("{iterations} iterations: at most {MAX_ITERATIONS} are allowed")]
    TooManyIterations { iterations: u32 },
    #[error("no user {user:?}")]
    NoSuchUser { user: String },
    #[error("user {user:?} has no {mechanism} credential")]
    NoSuchCredential {
        user: String,
        mechanism: ScramMechanism,
    },
    #[error("the operating system's random number generator failed: {0}")]
    Random(String),
}

/// SASLprep of a user name (docs/security.md, "SASL"): refused when SASLprep refuses it, when
/// it is empty, or above [`MAX_USER_NAME_LEN`] bytes.
pub fn prepare_user_name(name: &str) -> Result<String, CredentialError> {
    let invalid = |reason: String| CredentialError::InvalidUserName { reason };
    let prepared = stringprep::saslprep(name).map_err(|e| invalid(e.to_string()))?;
    if prepared.is_empty() {
        return Err(invalid("empty".into()));
    }
    if prepared.len() > MAX_USER_NAME_LEN {
        return Err(invalid(format!(
            "{} bytes, above the limit of {MAX_USER_NAME_LEN}",
            prepared.len()
        )));
    }
    Ok(prepared.into_owned())
}

/// SASLprep of a password: refused when SASLprep refuses it or when it is empty. The error
/// never contains the password.
pub fn prepare_password(password: &str) -> Result<String, CredentialError> {
    let invalid = |reason: String| CredentialError::InvalidPassword { reason };
    let prepared = stringprep::saslprep(password).map_err(|e| {
        // SASLprep names the offending character; leave even that out.
        invalid(match e.to_string() {
            s if s.starts_with("prohibited character") => "a prohibited character".into(),
            s => s,
        })
    })?;
    if prepared.is_empty() {
        return Err(invalid("empty".into()));
    }
    Ok(prepared.into_owned())
}

fn check_iterations(iterations: u32) -> Result<(), CredentialError> {
    if iterations < MIN_ITERATIONS {
        Err(CredentialError::TooFewIterations { iterations })
    } else if iterations > MAX_ITERATIONS {
        Err(CredentialError::TooManyIterations { iterations })
    } else {
        Ok(())
    }
}

fn random_bytes(len: usize) -> Result<Vec<u8>, CredentialError> {
    let mut out = vec![0u8; len];
    getrandom::fill(&mut out).map_err(|e| CredentialError::Random(e.to_string()))?;
    Ok(out)
}

/// One user's SCRAM credential for one mechanism. Its keys are secrets (with StoredKey and a
/// recorded exchange a client can be impersonated): `Debug` leaves them out.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    mechanism: ScramMechanism,
    salt: Vec<u8>,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
    iterations: u32,
}

impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("mechanism", &self.mechanism)
            .field("salt_len", &self.salt.len())
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// A credential for `password` with a fresh random salt of [`SALT_LEN`] bytes.
    pub fn generate(
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> Result<Self, CredentialError> {
        check_iterations(iterations)?;
        let salt = random_bytes(SALT_LEN)?;
        Self::from_password(mechanism, password, &salt, iterations)
    }

    /// The credential of `password` with a given salt (deterministic).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, CredentialError> {
        check_iterations(iterations)?;
        let password = prepare_password(password)?;
        let salted = mechanism.salted_password(password.as_bytes(), salt, iterations);
        let (client_key, server_key) = mechanism.client_and_server_keys(&salted);
        Self::from_parts(
            mechanism,
            salt.to_vec(),
            mechanism.hash(&client_key),
            server_key,
            iterations,
        )
    }

    /// A credential from its stored parts, checked: iterations in range, a salt of 1 to
    /// [`MAX_SALT_LEN`] bytes, keys of the hash's length.
    pub fn from_parts(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
        iterations: u32,
    ) -> Result<Self, CredentialError> {
        check_iterations(iterations)?;
        let corrupt = |reason: String| CredentialError::InvalidCredential { reason };
        if salt.is_empty() || salt.len() > MAX_SALT_LEN {
            return Err(corrupt(format!(
                "a salt of {} bytes (1 to {MAX_SALT_LEN} expected)",
                salt.len()
            )));
        }
        for (what, key) in [("StoredKey", &stored_key), ("ServerKey", &server_key)] {
            if key.len() != mechanism.hash_len() {
                return Err(corrupt(format!(
                    "a {mechanism} {what} of {} bytes ({} expected)",
                    key.len(),
                    mechanism.hash_len()
                )));
            }
        }
        Ok(Self {
            mechanism,
            salt,
            stored_key,
            server_key,
            iterations,
        })
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    pub fn salt(&self) -> &[u8] {
        &self.salt
    }

    pub fn iterations(&self) -> u32 {
        self.iterations
    }

    pub fn stored_key(&self) -> &[u8] {
        &self.stored_key
    }

    pub fn server_key(&self) -> &[u8] {
        &self.server_key
    }

    /// Whether `password` (already SASLprep'd) is this credential's: recomputes StoredKey with
    /// the stored salt and iterations and compares in constant time.
    pub fn verify_prepared_password(&self, password: &str) -> bool {
        let salted =
            self.mechanism
                .salted_password(password.as_bytes(), &self.salt, self.iterations);
        let (client_key, _) = self.mechanism.client_and_server_keys(&salted);
        let stored_key = self.mechanism.hash(&client_key);
        stored_key.ct_eq(&self.stored_key).into()
    }
}

/// A user and the mechanisms it has a credential for (never the credentials themselves).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserEntry {
    pub name: String,
    pub mechanisms: Vec<ScramMechanism>,
}

/// What a server authenticates an unknown user against, so that an unknown user costs the same
/// work and gets the same answers as a wrong password (docs/security.md, "SASL"). Derived from
/// the file's secrets, so it is stable while the file is, and unguessable without the file.
#[derive(Clone)]
struct Decoys {
    key: [u8; 32],
    iterations: BTreeMap<ScramMechanism, u32>,
    plain: ScramMechanism,
}

impl Decoys {
    fn of(users: &BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"ringraft credential decoys");
        let mut counts: BTreeMap<ScramMechanism, BTreeMap<u32, usize>> = BTreeMap::new();
        for (name, credentials) in users {
            hasher.update((name.len() as u64).to_be_bytes());
            hasher.update(name.as_bytes());
            for credential in credentials.values() {
                hasher.update(credential.mechanism.name().as_bytes());
                hasher.update((credential.salt.len() as u64).to_be_bytes());
                hasher.update(&credential.salt);
                hasher.update(&credential.stored_key);
                hasher.update(&credential.server_key);
                *counts
                    .entry(credential.mechanism)
                    .or_default()
                    .entry(credential.iterations)
                    .or_default() += 1;
            }
        }
        // Per mechanism the most common count (ties to the larger); the default without any.
        let iterations = ScramMechanism::ALL
            .into_iter()
            .map(|mechanism| {
                let typical = counts
                    .get(&mechanism)
                    .and_then(|by_count| {
                        by_count
                            .iter()
                            .max_by_key(|(iterations, count)| (**count, **iterations))
                            .map(|(iterations, _)| *iterations)
                    })
                    .unwrap_or(DEFAULT_ITERATIONS);
                (mechanism, typical)
            })
            .collect();
        let total = |m| counts.get(&m).map_or(0, |c| c.values().sum::<usize>());
        let plain = if total(ScramMechanism::Sha256) > total(ScramMechanism::Sha512) {
            ScramMechanism::Sha256
        } else {
            ScramMechanism::Sha512
        };
        Self {
            key: hasher.finalize().into(),
            iterations,
            plain,
        }
    }

    fn credential(&self, user: &str, mechanism: ScramMechanism) -> ScramCredential {
        let label = |what: &[u8]| -> Vec<u8> {
            mechanism.hmac(
                &self.key,
                &[what, mechanism.name().as_bytes(), b"\0", user.as_bytes()],
            )
        };
        let mut salt = label(b"salt");
        salt.truncate(SALT_LEN);
        ScramCredential {
            mechanism,
            salt,
            stored_key: label(b"stored key"),
            server_key: label(b"server key"),
            iterations: self.iterations[&mechanism],
        }
    }
}

/// A credential to authenticate against: the user's own, or a decoy for a user the store does
/// not have (then authentication must fail whatever the client sends).
pub(crate) struct Lookup {
    pub(crate) credential: ScramCredential,
    pub(crate) known: bool,
}

/// The credentials file, in memory.
pub struct CredentialStore {
    path: PathBuf,
    users: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    decoys: Decoys,
}

impl fmt::Debug for CredentialStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialStore")
            .field("path", &self.path)
            .field("users", &self.users.len())
            .finish_non_exhaustive()
    }
}

/// The file's JSON, field for field.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileData {
    version: u32,
    users: Vec<UserData>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserData {
    name: String,
    credentials: Vec<CredentialData>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CredentialData {
    mechanism: String,
    iterations: u32,
    salt: String,
    stored_key: String,
    server_key: String,
}

/// Only the version, read first so a newer file is reported as such rather than as corrupt.
#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

impl CredentialStore {
    /// An empty store that [`save`](Self::save) writes to `path`; nothing is read or written.
    pub fn empty(path: impl Into<PathBuf>) -> Self {
        let users = BTreeMap::new();
        Self {
            path: path.into(),
            decoys: Decoys::of(&users),
            users,
        }
    }

    /// Reads the file, which must exist.
    pub fn load(path: impl Into<PathBuf>) -> Result<Self, CredentialError> {
        let path = path.into();
        let text = fs::read_to_string(&path).map_err(|source| CredentialError::Read {
            path: path.clone(),
            source,
        })?;
        if let Ok(metadata) = fs::metadata(&path) {
            let mode = metadata.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(
                    "credentials file {} has mode {:o}: others than its owner can read it \
                     (chmod 600)",
                    path.display(),
                    mode & 0o777
                );
            }
        }
        Self::parse(path, &text)
    }

    /// Reads the file, or starts empty if there is none (what adding the first user needs).
    /// Any other failure to read is an error, as in [`load`](Self::load).
    pub fn load_or_empty(path: impl Into<PathBuf>) -> Result<Self, CredentialError> {
        let path = path.into();
        match fs::symlink_metadata(&path) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Self::empty(path)),
            _ => Self::load(path),
        }
    }

    fn parse(path: PathBuf, text: &str) -> Result<Self, CredentialError> {
        let corrupt = |reason: String| CredentialError::Corrupt {
            path: path.clone(),
            reason,
        };
        let version: VersionOnly =
            serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        if version.version != FILE_VERSION {
            return Err(CredentialError::UnknownVersion {
                path,
                found: version.version,
            });
        }
        let data: FileData = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        let mut users = BTreeMap::new();
        for user in data.users {
            let name = match prepare_user_name(&user.name) {
                Ok(prepared) if prepared == user.name => prepared,
                Ok(_) => {
                    return Err(corrupt(format!(
                        "user name {:?} is not in its SASLprep form",
                        user.name
                    )))
                }
                Err(error) => return Err(corrupt(format!("user name {:?}: {error}", user.name))),
            };
            if user.credentials.is_empty() {
                return Err(corrupt(format!("user {name:?} has no credential")));
            }
            let mut credentials = BTreeMap::new();
            for credential in user.credentials {
                let mechanism =
                    ScramMechanism::from_name(&credential.mechanism).ok_or_else(|| {
                        corrupt(format!(
                            "user {name:?}: unknown mechanism {:?}",
                            credential.mechanism
                        ))
                    })?;
                let decode = |what: &str, value: &str| {
                    BASE64.decode(value).map_err(|e| {
                        corrupt(format!(
                            "user {name:?}, {mechanism}: {what} is not base64: {e}"
                        ))
                    })
                };
                let parsed = ScramCredential::from_parts(
                    mechanism,
                    decode("salt", &credential.salt)?,
                    decode("storedKey", &credential.stored_key)?,
                    decode("serverKey", &credential.server_key)?,
                    credential.iterations,
                )
                .map_err(|error| {
                    let reason = match error {
                        CredentialError::InvalidCredential { reason } => reason,
                        other => other.to_string(),
                    };
                    corrupt(format!("user {name:?}, {mechanism}: {reason}"))
                })?;
                if credentials.insert(mechanism, parsed).is_some() {
                    return Err(corrupt(format!(
                        "user {name:?} has two {mechanism} credentials"
                    )));
                }
            }
            if users.insert(name.clone(), credentials).is_some() {
                return Err(corrupt(format!("user {name:?} appears twice")));
            }
        }
        Ok(Self {
            path,
            decoys: Decoys::of(&users),
            users,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// The file's text: pretty JSON with a final newline, users in name order.
    fn render(&self) -> String {
        let data = FileData {
            version: FILE_VERSION,
            users: self
                .users
                .iter()
                .map(|(name, credentials)| UserData {
                    name: name.clone(),
                    credentials: credentials
                        .values()
                        .map(|c| CredentialData {
                            mechanism: c.mechanism.name().into(),
                            iterations: c.iterations,
                            salt: BASE64.encode(&c.salt),
                            stored_key: BASE64.encode(&c.stored_key),
                            server_key: BASE64.encode(&c.server_key),
                        })
                        .collect(),
                })
                .collect(),
        };
        let mut text = serde_json::to_string_pretty(&data).expect("plain data serializes");
        text.push('\n');
        text
    }

    /// Replaces the file atomically: writes `<name>.tmp` beside it (created anew with mode
    /// 0600), fsyncs it, renames it over the file and fsyncs the directory. A crash leaves the
    /// old or the new file, never a mix.
    pub fn save(&self) -> Result<(), CredentialError> {
        let write_error = |path: &Path, source| CredentialError::Write {
            path: path.to_path_buf(),
            source,
        };
        let file_name = self.path.file_name().ok_or_else(|| {
            write_error(
                &self.path,
                io::Error::new(io::ErrorKind::InvalidInput, "not a file name"),
            )
        })?;
        let dir = match self.path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut temp_name = file_name.to_os_string();
        temp_name.push(".tmp");
        let temp = dir.join(temp_name);
        // A temporary file a crash left behind was never the file: start it anew, so that
        // create_new applies the mode (and refuses a symlink planted there).
        match fs::remove_file(&temp) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                return Err(write_error(&temp, error))
            }
            _ => {}
        }
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| write_error(&temp, e))?;
        let written = file
            .write_all(self.render().as_bytes())
            .map_err(|e| write_error(&temp, e))
            .and_then(|()| {
                file.sync_all()
                    .map_err(|source| CredentialError::SyncFailed {
                        path: temp.clone(),
                        source,
                    })
            })
            .and_then(|()| fs::rename(&temp, &self.path).map_err(|e| write_error(&self.path, e)));
        if let Err(error) = written {
            let _ = fs::remove_file(&temp);
            return Err(error);
        }
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|source| CredentialError::SyncFailed { path: dir, source })
    }

    /// Adds or replaces `user`'s credential for its mechanism. Returns true if it replaced one.
    pub fn add(
        &mut self,
        user: &str,
        credential: ScramCredential,
    ) -> Result<bool, CredentialError> {
        let user = prepare_user_name(user)?;
        let replaced = self
            .users
            .entry(user)
            .or_default()
            .insert(credential.mechanism, credential)
            .is_some();
        self.decoys = Decoys::of(&self.users);
        Ok(replaced)
    }

    /// [`add`](Self::add) of a credential generated from `password` with a random salt.
    pub fn add_password(
        &mut self,
        user: &str,
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> Result<bool, CredentialError> {
        let user = prepare_user_name(user)?;
        let credential = ScramCredential::generate(mechanism, password, iterations)?;
        self.add(&user, credential)
    }

    /// A store at `path` holding these (user, mechanism, password, iterations): the tests'
    /// fixture.
    #[cfg(test)]
    pub(crate) fn with_passwords(
        path: impl Into<PathBuf>,
        passwords: &[(&str, ScramMechanism, &str, u32)],
    ) -> Self {
        let mut store = Self::empty(path);
        for &(user, mechanism, password, iterations) in passwords {
            store
                .add_password(user, mechanism, password, iterations)
                .expect("a test credential is valid");
        }
        store
    }

    /// Deletes `user`'s credential for `mechanism`, or all of them (and so the user) with
    /// `None`. A user left without credentials is removed.
    pub fn delete(
        &mut self,
        user: &str,
        mechanism: Option<ScramMechanism>,
    ) -> Result<(), CredentialError> {
        let user = prepare_user_name(user)?;
        let Some(credentials) = self.users.get_mut(&user) else {
            return Err(CredentialError::NoSuchUser { user });
        };
        if let Some(mechanism) = mechanism {
            if credentials.remove(&mechanism).is_none() {
                return Err(CredentialError::NoSuchCredential { user, mechanism });
            }
            if credentials.is_empty() {
                self.users.remove(&user);
            }
        } else {
            self.users.remove(&user);
        }
        self.decoys = Decoys::of(&self.users);
        Ok(())
    }

    /// Every user with its mechanisms, in name order.
    pub fn list(&self) -> Vec<UserEntry> {
        self.users
            .iter()
            .map(|(name, credentials)| UserEntry {
                name: name.clone(),
                mechanisms: credentials.keys().copied().collect(),
            })
            .collect()
    }

    /// `user`'s credential for `mechanism`; `user` is matched after SASLprep.
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        let user = prepare_user_name(user).ok()?;
        self.users.get(&user)?.get(&mechanism)
    }

    /// The credential a SCRAM exchange for `user` (SASLprep'd) runs against.
    pub(crate) fn scram_lookup(&self, user: &str, mechanism: ScramMechanism) -> Lookup {
        match self.users.get(user).and_then(|c| c.get(&mechanism)) {
            Some(credential) => Lookup {
                credential: credential.clone(),
                known: true,
            },
            None => Lookup {
                credential: self.decoys.credential(user, mechanism),
                known: false,
            },
        }
    }

    /// The credential a PLAIN login of `user` (SASLprep'd) is checked against: SCRAM-SHA-512's
    /// if the user has one, else SCRAM-SHA-256's.
    pub(crate) fn plain_lookup(&self, user: &str) -> Lookup {
        let own = self.users.get(user).and_then(|credentials| {
            credentials
                .get(&ScramMechanism::Sha512)
                .or_else(|| credentials.get(&ScramMechanism::Sha256))
        });
        match own {
            Some(credential) => Lookup {
                credential: credential.clone(),
                known: true,
            },
            None => Lookup {
                credential: self.decoys.credential(user, self.decoys.plain),
                known: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: u32 = MIN_ITERATIONS;

    fn store_in(dir: &Path) -> CredentialStore {
        CredentialStore::empty(dir.join("credentials.json"))
    }

    #[test]
    fn mechanism_names() {
        for mechanism in ScramMechanism::ALL {
            assert_eq!(ScramMechanism::from_name(mechanism.name()), Some(mechanism));
            assert_eq!(mechanism.to_string(), mechanism.name());
        }
        assert_eq!(ScramMechanism::from_name("scram-sha-256"), None);
        assert_eq!(ScramMechanism::from_name("PLAIN"), None);
    }

    /// RFC 7677's example: user "user", password "pencil", this salt, 4096 iterations.
    #[test]
    fn the_published_sha256_credential() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential =
            ScramCredential::from_password(ScramMechanism::Sha256, "pencil", &salt, 4096).unwrap();
        assert!(credential.verify_prepared_password("pencil"));
        assert!(!credential.verify_prepared_password("pencil "));
        // ServerKey checked through the published server signature in the SASL tests; here,
        // StoredKey against an independent derivation of the same definitions.
        let salted = ScramMechanism::Sha256.salted_password(b"pencil", &salt, 4096);
        let client_key = ScramMechanism::Sha256.hmac(&salted, &[b"Client Key"]);
        assert_eq!(credential.stored_key(), &Sha256::digest(&client_key)[..]);
    }

    #[test]
    fn iterations_below_the_minimum_or_above_the_maximum_are_refused() {
        for mechanism in ScramMechanism::ALL {
            assert!(matches!(
                ScramCredential::generate(mechanism, "pw", MIN_ITERATIONS - 1),
                Err(CredentialError::TooFewIterations { iterations: 4095 })
            ));
            assert!(matches!(
                ScramCredential::from_password(mechanism, "pw", b"salt", MAX_ITERATIONS + 1),
                Err(CredentialError::TooManyIterations { .. })
            ));
            let c = ScramCredential::generate(mechanism, "pw", MIN_ITERATIONS).unwrap();
            assert_eq!(c.salt().len(), SALT_LEN);
            assert_eq!(c.stored_key().len(), mechanism.hash_len());
            assert_eq!(c.server_key().len(), mechanism.hash_len());
        }
    }

    #[test]
    fn salts_are_random_and_debug_shows_no_secret() {
        let a = ScramCredential::generate(ScramMechanism::Sha256, "pw", FAST).unwrap();
        let b = ScramCredential::generate(ScramMechanism::Sha256, "pw", FAST).unwrap();
        assert_ne!(a.salt(), b.salt());
        assert_ne!(a.stored_key(), b.stored_key());
        let debug = format!("{a:?}");
        assert!(!debug.contains(&format!("{:?}", a.stored_key())), "{debug}");
        assert!(!debug.contains(&format!("{:?}", a.salt())), "{debug}");
    }

    #[test]
    fn names_and_passwords_are_saslprepped() {
        // U+00A0 (no-break space) maps to a space; U+00AD (soft hyphen) to nothing.
        assert_eq!(prepare_user_name("a\u{a0}b\u{ad}").unwrap(), "a b");
        assert!(matches!(
            prepare_user_name("\u{ad}"),
            Err(CredentialError::InvalidUserName { .. })
        ));
        assert!(prepare_user_name("bell\u{7}").is_err());
        assert!(prepare_user_name(&"x".repeat(MAX_USER_NAME_LEN + 1)).is_err());
        let error = prepare_password("secret\u{7}").unwrap_err().to_string();
        assert!(!error.contains("secret"), "{error}");
        assert!(prepare_password("").is_err());
        // The same password in two Unicode forms is one credential.
        let salt = b"0123456789";
        let composed =
            ScramCredential::from_password(ScramMechanism::Sha512, "\u{e9}t\u{e9}", salt, FAST)
                .unwrap();
        assert!(composed.verify_prepared_password(&prepare_password("e\u{301}te\u{301}").unwrap()));
    }

    #[test]
    fn add_replace_delete_list() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = store_in(dir.path());
        assert!(!store
            .add_password("alice", ScramMechanism::Sha256, "a", FAST)
            .unwrap());
        assert!(!store
            .add_password("alice", ScramMechanism::Sha512, "a", FAST)
            .unwrap());
        assert!(!store
            .add_password("bob", ScramMechanism::Sha512, "b", FAST)
            .unwrap());
        let before = store.get("alice", ScramMechanism::Sha256).unwrap().clone();
        assert!(store
            .add_password("alice", ScramMechanism::Sha256, "a2", FAST)
            .unwrap());
        assert_ne!(store.get("alice", ScramMechanism::Sha256).unwrap(), &before);
        assert_eq!(
            store.list(),
            vec![
                UserEntry {
                    name: "alice".into(),
                    mechanisms: vec![ScramMechanism::Sha256, ScramMechanism::Sha512]
                },
                UserEntry {
                    name: "bob".into(),
                    mechanisms: vec![ScramMechanism::Sha512]
                },
            ]
        );
        store.delete("alice", Some(ScramMechanism::Sha256)).unwrap();
        assert!(matches!(
            store.delete("alice", Some(ScramMechanism::Sha256)),
            Err(CredentialError::NoSuchCredential { .. })
        ));
        store.delete("bob", Some(ScramMechanism::Sha512)).unwrap();
        assert!(matches!(
            store.delete("bob", None),
            Err(CredentialError::NoSuchUser { .. })
        ));
        store.delete("alice", None).unwrap();
        assert!(store.is_empty());
    }

    #[test]
    fn save_and_load_round_trip_with_mode_0600_and_no_password() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::with_passwords(
            dir.path().join("credentials.json"),
            &[
                ("alice", ScramMechanism::Sha256, "correct horse", FAST),
                ("bob", ScramMechanism::Sha512, "battery staple", FAST + 1),
            ],
        );
        store.save().unwrap();
        let path = dir.path().join("credentials.json");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(!dir.path().join("credentials.json.tmp").exists());
        let text = fs::read_to_string(&path).unwrap();
        assert!(!text.contains("correct horse") && !text.contains("battery"));
        let loaded = CredentialStore::load(&path).unwrap();
        assert_eq!(loaded.list(), store.list());
        for (user, mechanism) in [
            ("alice", ScramMechanism::Sha256),
            ("bob", ScramMechanism::Sha512),
        ] {
            assert_eq!(loaded.get(user, mechanism), store.get(user, mechanism));
        }
        assert!(loaded
            .get("alice", ScramMechanism::Sha256)
            .unwrap()
            .verify_prepared_password("correct horse"));
        // Saving again over a stale temporary file (a crash mid-save) works.
        fs::write(dir.path().join("credentials.json.tmp"), "half").unwrap();
        loaded.save().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn a_missing_file_is_an_error_for_load_and_empty_for_load_or_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.json");
        let error = CredentialStore::load(&path).unwrap_err();
        assert!(matches!(error, CredentialError::Read { .. }));
        assert!(error.to_string().contains("none.json"), "{error}");
        assert!(CredentialStore::load_or_empty(&path).unwrap().is_empty());
    }

    fn corrupt_reason(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        fs::write(&path, text).unwrap();
        let error = CredentialStore::load_or_empty(&path).unwrap_err();
        // Never cleared.
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
        assert!(error.to_string().contains("c.json"), "{error}");
        match error {
            CredentialError::Corrupt { reason, .. } => reason,
            other => panic!("not Corrupt: {other}"),
        }
    }

    #[test]
    fn corrupt_files_are_typed_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let alice = ("alice", ScramMechanism::Sha256, "pw", FAST);
        let store = CredentialStore::with_passwords(dir.path().join("credentials.json"), &[alice]);
        let good = store.render();
        let key = BASE64.encode(
            store
                .get("alice", ScramMechanism::Sha256)
                .unwrap()
                .stored_key(),
        );

        corrupt_reason("");
        corrupt_reason(&good[..good.len() / 2]);
        corrupt_reason("{\"version\":1,\"users\":[],\"extra\":0}");
        assert!(corrupt_reason(&good.replace("SCRAM-SHA-256", "SCRAM-SHA-1")).contains("unknown"));
        assert!(
            corrupt_reason(&good.replace("\"iterations\": 4096", "\"iterations\": 1000"))
                .contains("at least 4096")
        );
        assert!(corrupt_reason(&good.replace(&key, "not base64!")).contains("base64"));
        assert!(corrupt_reason(&good.replace(&key, "AAAA")).contains("StoredKey"));
        assert!(corrupt_reason(&good.replace("\"alice\"", "\"\"")).contains("user name"));
        assert!(corrupt_reason(&good.replace("\"alice\"", "\"a\u{a0}b\"")).contains("SASLprep"));
        let mut twice: serde_json::Value = serde_json::from_str(&good).unwrap();
        let user = twice["users"][0].clone();
        twice["users"].as_array_mut().unwrap().push(user);
        let twice = twice.to_string();
        assert!(corrupt_reason(&twice).contains("twice"));
        assert!(
            corrupt_reason("{\"version\":1,\"users\":[{\"name\":\"a\",\"credentials\":[]}]}")
                .contains("no credential")
        );

        let path = dir.path().join("v2.json");
        fs::write(&path, "{\"version\":2,\"whatever\":true}").unwrap();
        assert!(matches!(
            CredentialStore::load(&path),
            Err(CredentialError::UnknownVersion { found: 2, .. })
        ));
    }

    #[test]
    fn decoys_are_stable_and_unlike_real_credentials() {
        let store = CredentialStore::with_passwords(
            "unused",
            &[
                ("alice", ScramMechanism::Sha256, "pw", 5000),
                ("bob", ScramMechanism::Sha256, "pw", 5000),
            ],
        );
        let a = store.scram_lookup("mallory", ScramMechanism::Sha256);
        let b = store.scram_lookup("mallory", ScramMechanism::Sha256);
        assert!(!a.known);
        assert_eq!(a.credential, b.credential);
        // Looks like the real ones: salt length and the common iteration count.
        assert_eq!(a.credential.salt().len(), SALT_LEN);
        assert_eq!(a.credential.iterations(), 5000);
        assert_ne!(
            a.credential,
            store
                .scram_lookup("trent", ScramMechanism::Sha256)
                .credential
        );
        let sha512 = store
            .scram_lookup("mallory", ScramMechanism::Sha512)
            .credential;
        assert_eq!(sha512.iterations(), DEFAULT_ITERATIONS);
        assert_eq!(sha512.stored_key().len(), 64);
        assert!(store.scram_lookup("alice", ScramMechanism::Sha256).known);
        assert!(!store.scram_lookup("alice", ScramMechanism::Sha512).known);
        let plain = store.plain_lookup("mallory");
        assert!(!plain.known);
        assert_eq!(plain.credential.mechanism(), ScramMechanism::Sha256);
        assert!(store.plain_lookup("bob").known);
    }
}
