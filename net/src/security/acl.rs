//! ACLs: operations, resources, entries and the ACL file (docs/security.md, "Principals and
//! ACLs").
//!
//! The file (`authorizer.acl.file`) has one rule per line:
//!
//! ```text
//! # comment
//! allow User:alice WRITE topic:__cluster_metadata from *
//! deny User:* ALL cluster:kafka-cluster from 10.0.0.9
//! allow User:admin DESCRIBE topic-prefix:__ from *
//! ```
//!
//! `allow|deny PRINCIPAL OPERATION RESOURCE from HOST`. Keywords, operations and resource kinds
//! are case-insensitive; principals and names are not. A word with spaces is quoted
//! (`"User:CN=a,O=Example Corp"`). A bad line is an error that names it.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use thiserror::Error;

use super::principal::{KafkaPrincipal, PrincipalError, USER_TYPE};

/// The configuration key of the ACL file.
pub const ACL_FILE_KEY: &str = "authorizer.acl.file";

/// The name of the one cluster resource, as in Kafka.
pub const CLUSTER_NAME: &str = "kafka-cluster";

macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident, $error:ident, $what:literal { $($variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($variant,)*
        }

        #[derive(Debug, Clone, PartialEq, Eq, Error)]
        #[error("`{0}` is not {what}: expected one of {list}", what = $what, list = [$($text),*].join(", "))]
        pub struct $error(pub String);

        impl $name {
            /// Every value, in declaration order.
            pub const VALUES: &'static [$name] = &[$($name::$variant,)*];

            /// Kafka's name (`CLUSTER_ACTION`).
            pub const fn kafka_name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// Case-insensitive, with or without `_` / `-` between words: `CLUSTER_ACTION`,
            /// `ClusterAction`, `cluster-action`.
            pub fn parse(text: &str) -> Result<Self, $error> {
                let squash = |s: &str| -> String {
                    s.chars()
                        .filter(|c| *c != '_' && *c != '-')
                        .map(|c| c.to_ascii_lowercase())
                        .collect()
                };
                let wanted = squash(text);
                Self::VALUES
                    .iter()
                    .copied()
                    .find(|v| squash(v.kafka_name()) == wanted)
                    .ok_or_else(|| $error(text.to_owned()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.kafka_name())
            }
        }

        impl FromStr for $name {
            type Err = $error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }
    };
}

named_enum! {
    /// What a request does to a resource (Kafka's ACL operations).
    Operation, UnknownOperation, "an operation" {
        All = "ALL",
        Read = "READ",
        Write = "WRITE",
        Create = "CREATE",
        Delete = "DELETE",
        Alter = "ALTER",
        Describe = "DESCRIBE",
        ClusterAction = "CLUSTER_ACTION",
        DescribeConfigs = "DESCRIBE_CONFIGS",
        AlterConfigs = "ALTER_CONFIGS",
        IdempotentWrite = "IDEMPOTENT_WRITE",
    }
}

named_enum! {
    /// The kinds of resource an ACL names.
    ResourceType, UnknownResourceType, "a resource type" {
        Topic = "TOPIC",
        Cluster = "CLUSTER",
        Group = "GROUP",
        TransactionalId = "TRANSACTIONAL_ID",
    }
}

impl ResourceType {
    /// The keyword of the ACL file (`topic`, `cluster`, `group`, `transactional-id`).
    pub const fn keyword(self) -> &'static str {
        match self {
            ResourceType::Topic => "topic",
            ResourceType::Cluster => "cluster",
            ResourceType::Group => "group",
            ResourceType::TransactionalId => "transactional-id",
        }
    }
}

/// One resource a request acts on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Resource {
    pub resource_type: ResourceType,
    pub name: String,
}

impl Resource {
    pub fn new(resource_type: ResourceType, name: impl Into<String>) -> Self {
        Resource {
            resource_type,
            name: name.into(),
        }
    }

    pub fn topic(name: impl Into<String>) -> Self {
        Self::new(ResourceType::Topic, name)
    }

    /// The cluster, `kafka-cluster`.
    pub fn cluster() -> Self {
        Self::new(ResourceType::Cluster, CLUSTER_NAME)
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.resource_type.keyword(), self.name)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Permission {
    Allow,
    Deny,
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Permission::Allow => "allow",
            Permission::Deny => "deny",
        })
    }
}

/// Which resource names of its type an ACL applies to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ResourcePattern {
    /// Exactly this name; `*` is every name.
    Literal(String),
    /// Every name that starts with this prefix.
    Prefixed(String),
}

impl ResourcePattern {
    pub fn matches(&self, name: &str) -> bool {
        match self {
            ResourcePattern::Literal(literal) => literal == "*" || literal == name,
            ResourcePattern::Prefixed(prefix) => name.starts_with(prefix.as_str()),
        }
    }

    /// Whether every name this pattern matches, `other` matches too.
    pub fn covers(&self, other: &ResourcePattern) -> bool {
        use ResourcePattern::{Literal, Prefixed};
        match (self, other) {
            (Literal(all), _) if all == "*" => true,
            (Prefixed(p), Prefixed(q)) => q.starts_with(p.as_str()),
            (Prefixed(p), Literal(name)) => name != "*" && name.starts_with(p.as_str()),
            (Literal(a), Literal(b)) => a == b,
            (Literal(_), Prefixed(_)) => false,
        }
    }

    /// Whether it matches every name (`*`, or an empty prefix).
    pub fn matches_every_name(&self) -> bool {
        match self {
            ResourcePattern::Literal(literal) => literal == "*",
            ResourcePattern::Prefixed(prefix) => prefix.is_empty(),
        }
    }
}

/// The host an ACL applies to: any, or one IP address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AclHost {
    Any,
    Ip(IpAddr),
}

impl AclHost {
    /// Whether a client at `host` is covered. IPv4-mapped IPv6 addresses compare as IPv4.
    pub fn matches(&self, host: IpAddr) -> bool {
        match self {
            AclHost::Any => true,
            AclHost::Ip(ip) => ip.to_canonical() == host.to_canonical(),
        }
    }
}

impl fmt::Display for AclHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AclHost::Any => f.write_str("*"),
            AclHost::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// "Principal P is allowed/denied operation O from host H on the resources matching the
/// pattern."
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AclEntry {
    /// A principal, or `User:*` for every principal.
    pub principal: KafkaPrincipal,
    pub host: AclHost,
    pub operation: Operation,
    pub permission: Permission,
    pub resource_type: ResourceType,
    pub pattern: ResourcePattern,
}

impl AclEntry {
    pub fn matches_principal(&self, principal: &KafkaPrincipal) -> bool {
        self.principal.is_wildcard() || self.principal == *principal
    }

    pub fn matches_resource(&self, resource: &Resource) -> bool {
        self.resource_type == resource.resource_type && self.pattern.matches(&resource.name)
    }

    /// Whether the entry is about `principal` connecting from `host`.
    pub fn applies_to(&self, principal: &KafkaPrincipal, host: IpAddr) -> bool {
        self.matches_principal(principal) && self.host.matches(host)
    }
}

/// The entry as a line of the ACL file (which parses back to the same entry).
impl fmt::Display for AclEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (suffix, name) = match &self.pattern {
            ResourcePattern::Literal(name) => ("", name),
            ResourcePattern::Prefixed(prefix) => ("-prefix", prefix),
        };
        write!(
            f,
            "{} {} {} {} from {}",
            self.permission,
            quoted(&self.principal.to_string()),
            self.operation,
            quoted(&format!("{}{suffix}:{name}", self.resource_type.keyword())),
            self.host
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The ACL file
// ---------------------------------------------------------------------------------------------

/// What is wrong with one line of the ACL file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AclLineError {
    #[error("a quoted word must end with `\"` before a space or the end of the line; inside, `\\\"` is a quote and `\\\\` a backslash")]
    Quote,
    #[error("expected `allow` or `deny`, found `{0}`")]
    Permission(String),
    #[error("missing the {0} (a line is `allow|deny PRINCIPAL OPERATION RESOURCE from HOST`)")]
    Missing(&'static str),
    #[error(transparent)]
    Principal(#[from] PrincipalError),
    #[error("`{0}`: ACLs name `User:` principals (the type is case-sensitive)")]
    PrincipalType(String),
    #[error(transparent)]
    Operation(#[from] UnknownOperation),
    #[error(
        "`{0}` is not a resource: expected topic:NAME, group:NAME, transactional-id:NAME \
         (each also as KIND-prefix:PREFIX) or cluster:kafka-cluster"
    )]
    Resource(String),
    #[error("`{0}`: the resource name is empty")]
    EmptyName(String),
    #[error("`{0}`: a prefix of `*` matches no name; `KIND:*` is every resource of a kind")]
    WildcardPrefix(String),
    #[error("`{0}`: the cluster resource is `cluster:kafka-cluster` (or `cluster:*`)")]
    ClusterName(String),
    #[error("expected `from HOST`, found `{0}`")]
    From(String),
    #[error("`{0}` is not a host: expected `*` or an IP address")]
    Host(String),
    #[error("unexpected `{0}` after the host")]
    Trailing(String),
}

/// A bad ACL file: the line (from 1) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}: {error}")]
pub struct AclFileError {
    pub line: usize,
    pub error: AclLineError,
}

/// The ACL file could not be loaded.
#[derive(Debug, Error)]
pub enum AclLoadError {
    #[error("cannot read {ACL_FILE_KEY} {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{ACL_FILE_KEY} {path}: {source}")]
    Parse { path: PathBuf, source: AclFileError },
}

impl FromStr for AclEntry {
    type Err = AclLineError;

    /// One rule, `allow|deny PRINCIPAL OPERATION RESOURCE from HOST`.
    fn from_str(line: &str) -> Result<Self, Self::Err> {
        let mut words = words(line)?.into_iter();
        let mut next = |what: &'static str| words.next().ok_or(AclLineError::Missing(what));
        let permission = match next("permission")? {
            p if p.eq_ignore_ascii_case("allow") => Permission::Allow,
            p if p.eq_ignore_ascii_case("deny") => Permission::Deny,
            other => return Err(AclLineError::Permission(other)),
        };
        let principal = parse_user(&next("principal")?)?;
        let operation = Operation::parse(&next("operation")?)?;
        let (resource_type, pattern) = parse_resource(&next("resource")?)?;
        let from = next("`from HOST`")?;
        if !from.eq_ignore_ascii_case("from") {
            return Err(AclLineError::From(from));
        }
        let host = parse_host(&next("host")?)?;
        if let Some(extra) = words.next() {
            return Err(AclLineError::Trailing(extra));
        }
        Ok(AclEntry {
            principal,
            host,
            operation,
            permission,
            resource_type,
            pattern,
        })
    }
}

/// Splits a line into words at whitespace. A word may be quoted, `"User:O=Example Corp"`, to
/// hold spaces; inside quotes `\"` is a quote and `\\` a backslash.
fn words(line: &str) -> Result<Vec<String>, AclLineError> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(escaped @ ('"' | '\\')) => word.push(escaped),
                        _ => return Err(AclLineError::Quote),
                    },
                    Some(other) => word.push(other),
                    None => return Err(AclLineError::Quote),
                }
            }
            if chars.peek().is_some_and(|c| !c.is_whitespace()) {
                return Err(AclLineError::Quote);
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        words.push(word);
    }
    Ok(words)
}

/// `text` as one word of the file: quoted when it holds whitespace or starts with a quote.
fn quoted(text: &str) -> String {
    if !text.is_empty() && !text.starts_with('"') && !text.contains(char::is_whitespace) {
        return text.to_owned();
    }
    let mut out = String::from('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A `User:NAME` principal (`User:*` included): other types are refused, since ringraft makes
/// only `User` principals and a mistyped type would never match.
pub(crate) fn parse_user(text: &str) -> Result<KafkaPrincipal, AclLineError> {
    let principal = KafkaPrincipal::parse(text)?;
    if principal.principal_type != USER_TYPE {
        return Err(AclLineError::PrincipalType(text.to_owned()));
    }
    Ok(principal)
}

fn parse_resource(text: &str) -> Result<(ResourceType, ResourcePattern), AclLineError> {
    let bad = || AclLineError::Resource(text.to_owned());
    let (kind, name) = text.split_once(':').ok_or_else(bad)?;
    let (kind, prefixed) = match kind.len().checked_sub("-prefix".len()) {
        Some(at) if kind.is_char_boundary(at) && kind[at..].eq_ignore_ascii_case("-prefix") => {
            (&kind[..at], true)
        }
        _ => (kind, false),
    };
    let resource_type = ResourceType::VALUES
        .iter()
        .copied()
        .find(|t| t.keyword().eq_ignore_ascii_case(kind))
        .ok_or_else(bad)?;
    if name.is_empty() {
        return Err(AclLineError::EmptyName(text.to_owned()));
    }
    if resource_type == ResourceType::Cluster && (prefixed || (name != CLUSTER_NAME && name != "*"))
    {
        return Err(AclLineError::ClusterName(text.to_owned()));
    }
    if prefixed && name == "*" {
        return Err(AclLineError::WildcardPrefix(text.to_owned()));
    }
    let pattern = if prefixed {
        ResourcePattern::Prefixed(name.to_owned())
    } else {
        ResourcePattern::Literal(name.to_owned())
    };
    Ok((resource_type, pattern))
}

fn parse_host(text: &str) -> Result<AclHost, AclLineError> {
    if text == "*" {
        return Ok(AclHost::Any);
    }
    text.parse()
        .map(AclHost::Ip)
        .map_err(|_| AclLineError::Host(text.to_owned()))
}

/// Parses the text of an ACL file: one rule per line; blank lines and lines whose first
/// non-blank character is `#` are skipped.
pub fn parse_acl_file(text: &str) -> Result<Vec<AclEntry>, AclFileError> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let entry = line
            .parse()
            .map_err(|error| AclFileError { line: i + 1, error })?;
        entries.push(entry);
    }
    Ok(entries)
}

/// Reads and parses the ACL file at `path`.
pub fn load_acl_file(path: &Path) -> Result<Vec<AclEntry>, AclLoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| AclLoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_acl_file(&text).map_err(|source| AclLoadError::Parse {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_parse_as_kafka_names_and_camel_case() {
        assert_eq!(
            Operation::parse("CLUSTER_ACTION"),
            Ok(Operation::ClusterAction)
        );
        assert_eq!(
            Operation::parse("ClusterAction"),
            Ok(Operation::ClusterAction)
        );
        assert_eq!(
            Operation::parse("cluster-action"),
            Ok(Operation::ClusterAction)
        );
        assert_eq!(
            Operation::parse("idempotentwrite"),
            Ok(Operation::IdempotentWrite)
        );
        assert_eq!(Operation::parse("all"), Ok(Operation::All));
        for op in Operation::VALUES {
            assert_eq!(Operation::parse(&op.to_string()), Ok(*op));
        }
        assert_eq!(Operation::VALUES.len(), 11);
        assert!(
            Operation::parse("ANY").is_err(),
            "a filter, not an operation"
        );
        assert!(Operation::parse("REED").is_err());
        assert_eq!(
            ResourceType::parse("transactional_id"),
            Ok(ResourceType::TransactionalId)
        );
        assert_eq!(ResourceType::Cluster.to_string(), "CLUSTER");
    }

    #[test]
    fn patterns_match_and_cover() {
        use ResourcePattern::{Literal, Prefixed};
        let lit = |s: &str| Literal(s.into());
        let pre = |s: &str| Prefixed(s.into());
        assert!(lit("a").matches("a") && !lit("a").matches("ab"));
        assert!(lit("*").matches("anything"));
        assert!(pre("__").matches("__cluster_metadata") && !pre("__").matches("_x"));
        assert!(!pre("*").matches("a"), "a prefix is not a wildcard");
        assert!(lit("*").covers(&pre("a")) && lit("*").covers(&lit("*")));
        assert!(pre("a").covers(&pre("ab")) && pre("a").covers(&lit("ab")));
        assert!(!pre("ab").covers(&pre("a")) && !pre("a").covers(&lit("*")));
        assert!(lit("a").covers(&lit("a")) && !lit("a").covers(&lit("*")));
        assert!(!lit("a").covers(&pre("a")));
        assert!(lit("*").matches_every_name() && pre("").matches_every_name());
        assert!(!pre("a").matches_every_name());
    }

    #[test]
    fn hosts_compare_as_addresses() {
        let ip: IpAddr = "10.0.0.9".parse().unwrap();
        let mapped: IpAddr = "::ffff:10.0.0.9".parse().unwrap();
        assert!(AclHost::Ip(ip).matches(mapped) && AclHost::Ip(mapped).matches(ip));
        assert!(!AclHost::Ip(ip).matches("10.0.0.8".parse().unwrap()));
        assert!(AclHost::Any.matches(mapped));
        let v6: IpAddr = "fe80::1".parse().unwrap();
        assert!(AclHost::Ip("fe80:0::0001".parse().unwrap()).matches(v6));
    }

    const GOOD: &str = r#"# The quorum's own traffic.
allow User:alice WRITE topic:__cluster_metadata from *

   # indented comment
deny User:* ALL cluster:kafka-cluster from 10.0.0.9
allow User:admin DESCRIBE topic-prefix:__ from *
ALLOW User:ringraft-1 ClusterAction CLUSTER:kafka-cluster FROM ::1
	allow   User:CN=a,O=b   read   Topic:*   from   *  	
allow User:bob WRITE group:g1 from 127.0.0.1
allow User:bob describe transactional-id-prefix:tx- from *
deny User:bob all cluster:* from *
allow "User:CN=x,O=Example \"Corp\" \\ Ltd" READ "group:my group" from *
"#;

    #[test]
    fn a_good_file() {
        let acls = parse_acl_file(GOOD).unwrap();
        assert_eq!(acls.len(), 9);
        assert_eq!(
            acls[0],
            AclEntry {
                principal: KafkaPrincipal::user("alice"),
                host: AclHost::Any,
                operation: Operation::Write,
                permission: Permission::Allow,
                resource_type: ResourceType::Topic,
                pattern: ResourcePattern::Literal("__cluster_metadata".into()),
            }
        );
        assert_eq!(
            acls[1],
            AclEntry {
                principal: KafkaPrincipal::wildcard(),
                host: AclHost::Ip("10.0.0.9".parse().unwrap()),
                operation: Operation::All,
                permission: Permission::Deny,
                resource_type: ResourceType::Cluster,
                pattern: ResourcePattern::Literal(CLUSTER_NAME.into()),
            }
        );
        assert_eq!(acls[2].pattern, ResourcePattern::Prefixed("__".into()));
        assert_eq!(acls[3].operation, Operation::ClusterAction);
        assert_eq!(acls[3].host, AclHost::Ip("::1".parse().unwrap()));
        assert_eq!(acls[4].principal, KafkaPrincipal::user("CN=a,O=b"));
        assert_eq!(acls[4].pattern, ResourcePattern::Literal("*".into()));
        assert_eq!(acls[5].resource_type, ResourceType::Group);
        assert_eq!(acls[6].resource_type, ResourceType::TransactionalId);
        assert_eq!(acls[6].pattern, ResourcePattern::Prefixed("tx-".into()));
        assert_eq!(
            acls[8].principal,
            KafkaPrincipal::user(r#"CN=x,O=Example "Corp" \ Ltd"#)
        );
        assert_eq!(acls[8].pattern, ResourcePattern::Literal("my group".into()));
        for acl in &acls {
            assert_eq!(
                acl.to_string().parse::<AclEntry>().as_ref(),
                Ok(acl),
                "{acl}"
            );
        }
        assert_eq!(
            acls[2].to_string(),
            "allow User:admin DESCRIBE topic-prefix:__ from *"
        );
        assert_eq!(parse_acl_file("").unwrap(), vec![]);
        assert_eq!(parse_acl_file("# only\n\n").unwrap(), vec![]);
    }

    #[test]
    fn every_kind_of_bad_line_names_its_line() {
        use AclLineError as E;
        let cases: &[(&str, AclLineError)] = &[
            (
                "permit User:a READ topic:t from *",
                E::Permission("permit".into()),
            ),
            ("allow", E::Missing("principal")),
            ("allow User:a", E::Missing("operation")),
            ("allow User:a READ", E::Missing("resource")),
            ("allow User:a READ topic:t", E::Missing("`from HOST`")),
            ("allow User:a READ topic:t from", E::Missing("host")),
            (
                "allow alice READ topic:t from *",
                E::Principal(PrincipalError::NotTypeColonName {
                    text: "alice".into(),
                }),
            ),
            (
                "allow user:a READ topic:t from *",
                E::PrincipalType("user:a".into()),
            ),
            (
                "allow Group:g READ topic:t from *",
                E::PrincipalType("Group:g".into()),
            ),
            (
                "allow User:a REED topic:t from *",
                E::Operation(UnknownOperation("REED".into())),
            ),
            (
                "allow User:a READ topics:t from *",
                E::Resource("topics:t".into()),
            ),
            ("allow User:a READ t from *", E::Resource("t".into())),
            (
                "allow User:a READ topic-prefx:t from *",
                E::Resource("topic-prefx:t".into()),
            ),
            (
                "allow User:a READ topic: from *",
                E::EmptyName("topic:".into()),
            ),
            (
                "allow User:a READ topic-prefix: from *",
                E::EmptyName("topic-prefix:".into()),
            ),
            (
                "allow User:a READ topic-prefix:* from *",
                E::WildcardPrefix("topic-prefix:*".into()),
            ),
            (
                "allow User:a ALTER cluster:prod from *",
                E::ClusterName("cluster:prod".into()),
            ),
            (
                "allow User:a ALTER cluster-prefix:kafka from *",
                E::ClusterName("cluster-prefix:kafka".into()),
            ),
            ("allow User:a READ topic:t on *", E::From("on".into())),
            (
                "allow User:a READ topic:t from host1",
                E::Host("host1".into()),
            ),
            (
                "allow User:a READ topic:t from 10.0.0.0/8",
                E::Host("10.0.0.0/8".into()),
            ),
            (
                "allow User:a READ topic:t from * # no trailing comments",
                E::Trailing("#".into()),
            ),
            (
                "allow User:a READ topic:t from * x",
                E::Trailing("x".into()),
            ),
            ("allow \"User:a READ topic:t from *", E::Quote),
            ("allow \"User:a\"x READ topic:t from *", E::Quote),
            ("allow \"User:\\a\" READ topic:t from *", E::Quote),
        ];
        for (bad, error) in cases {
            let text =
                format!("# header\nallow User:ok READ topic:t from *\n\n{bad}\nallow junk\n");
            assert_eq!(
                parse_acl_file(&text),
                Err(AclFileError {
                    line: 4,
                    error: error.clone()
                }),
                "{bad}"
            );
        }
        let err = parse_acl_file("\n\nallow User:a READ topic:t from nowhere").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 3: `nowhere` is not a host: expected `*` or an IP address"
        );
    }

    #[test]
    fn load_reads_the_file_and_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acls");
        std::fs::write(&path, GOOD).unwrap();
        assert_eq!(load_acl_file(&path).unwrap().len(), 9);
        std::fs::write(&path, "allow User:a READ topic:t from *\ndeny\n").unwrap();
        let err = load_acl_file(&path).unwrap_err();
        assert!(matches!(&err, AclLoadError::Parse { source, .. } if source.line == 2));
        assert!(err.to_string().contains("line 2"), "{err}");
        let missing = dir.path().join("missing");
        assert!(matches!(
            load_acl_file(&missing),
            Err(AclLoadError::Read { .. })
        ));
    }
}
