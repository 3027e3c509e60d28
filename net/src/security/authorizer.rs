//! The authorizer: may this principal, from this host, do this operation on this resource?
//! Kafka's ACL semantics (docs/security.md, "Principals and ACLs"), its configuration
//! (`authorizer.acl.file`, `super.users`, `allow.everyone.if.no.acl.found`) and the kind of
//! [`Authorization`] an API declares (each API's own is on its row of the node's API table).
//!
//! Pure logic but for reading the ACL file. The node loads an [`Authorizer`] at start-up, keeps
//! it in an `Arc`, and on SIGHUP loads it again and swaps the `Arc` only if the new file is good
//! ([`AuthorizerConfig::reload`]): a bad edit keeps the rules in force.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use engine::raft::ErrorCode;

use super::acl::{
    load_acl_file, parse_user, AclEntry, AclLineError, AclLoadError, Operation, Permission,
    Resource, ResourceType,
};
use super::principal::KafkaPrincipal;

// ---------------------------------------------------------------------------------------------
// What each API needs
// ---------------------------------------------------------------------------------------------

/// What a request of one API needs before it is served. Every row of the node's API table
/// (net/src/node/api_table.rs) declares one, so an API cannot be served without saying what it
/// needs, and a key with no row is refused (docs/security.md, "The operation each API needs").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authorization {
    /// Nothing: a handshake API every connection may use whoever it is (ApiVersions, and the
    /// SASL exchange that establishes who it is). These are also the only APIs a SASL
    /// connection may use before it has authenticated.
    NoneNeeded,
    /// This operation on a resource of this kind: a topic request is checked on each topic it
    /// names, a cluster request on `kafka-cluster`.
    Required(Operation, ResourceType),
}

/// Kafka's error code for a request refused on a resource of this kind.
pub const fn denied_error(resource_type: ResourceType) -> ErrorCode {
    match resource_type {
        ResourceType::Topic => ErrorCode::TOPIC_AUTHORIZATION_FAILED,
        ResourceType::Group => ErrorCode::GROUP_AUTHORIZATION_FAILED,
        ResourceType::Cluster => ErrorCode::CLUSTER_AUTHORIZATION_FAILED, // 31
        ResourceType::TransactionalId => ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
}

// ---------------------------------------------------------------------------------------------
// The authorizer
// ---------------------------------------------------------------------------------------------

/// The ACLs, the super users and the no-ACL default, and the decision they make.
#[derive(Clone, Debug)]
pub struct Authorizer {
    acls: Vec<AclEntry>,
    super_users: Vec<KafkaPrincipal>,
    allow_everyone_if_no_acl_found: bool,
}

/// What the ACLs of one resource say about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    /// A DENY applies.
    Denied,
    /// An ALLOW applies and no DENY does.
    Allowed,
    /// The resource has ACLs, none of them allows this request.
    NotAllowed,
    /// No ACL matches the resource at all.
    NoAcl,
}

impl Authorizer {
    pub fn new(
        acls: Vec<AclEntry>,
        super_users: Vec<KafkaPrincipal>,
        allow_everyone_if_no_acl_found: bool,
    ) -> Self {
        Authorizer {
            acls,
            super_users,
            allow_everyone_if_no_acl_found,
        }
    }

    pub fn acls(&self) -> &[AclEntry] {
        &self.acls
    }

    pub fn is_super_user(&self, principal: &KafkaPrincipal) -> bool {
        self.super_users.contains(principal)
    }

    /// Kafka's rules, in order:
    /// 1. a super user is allowed everything;
    /// 2. the ACLs that match the resource (its type, and a literal name, `*`, or a prefix of
    ///    the name) decide; when there are none, `allow.everyone.if.no.acl.found` does;
    /// 3. of those, the ones for this principal (or `User:*`) and host (or `*`) apply: a DENY of
    ///    the operation (or ALL) refuses, whatever ALLOW there is; otherwise an ALLOW of the
    ///    operation, of ALL, or of an operation that implies it (READ, WRITE, DELETE and ALTER
    ///    imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows; otherwise refused.
    ///
    /// IDEMPOTENT_WRITE on the cluster is also allowed to a principal that may WRITE to some
    /// topic, unless a DENY of IDEMPOTENT_WRITE (or ALL) on the cluster applies.
    pub fn authorize(
        &self,
        principal: &KafkaPrincipal,
        host: IpAddr,
        operation: Operation,
        resource: &Resource,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let decision = self.decide(principal, host, operation, resource);
        let allowed = match decision {
            Decision::Allowed => true,
            Decision::Denied | Decision::NotAllowed => false,
            Decision::NoAcl => self.allow_everyone_if_no_acl_found,
        };
        if allowed || decision == Decision::Denied {
            return allowed;
        }
        operation == Operation::IdempotentWrite
            && resource.resource_type == ResourceType::Cluster
            && self.may_write_some_topic(principal, host)
    }

    fn decide(
        &self,
        principal: &KafkaPrincipal,
        host: IpAddr,
        operation: Operation,
        resource: &Resource,
    ) -> Decision {
        let mut decision = Decision::NoAcl;
        for acl in self
            .acls
            .iter()
            .filter(|acl| acl.matches_resource(resource))
        {
            if decision == Decision::NoAcl {
                decision = Decision::NotAllowed;
            }
            if !acl.applies_to(principal, host) {
                continue;
            }
            match acl.permission {
                Permission::Deny if denies(acl.operation, operation) => return Decision::Denied,
                Permission::Allow if grants(acl.operation, operation) => {
                    decision = Decision::Allowed
                }
                _ => {}
            }
        }
        decision
    }

    /// Whether some topic exists that the principal may WRITE to: an ALLOW of WRITE (or ALL)
    /// on topics that no DENY of WRITE (or ALL) covers entirely, or, with
    /// `allow.everyone.if.no.acl.found`, a topic no ACL names (there is one unless an ACL
    /// names every topic).
    fn may_write_some_topic(&self, principal: &KafkaPrincipal, host: IpAddr) -> bool {
        let topic_acls = || {
            self.acls
                .iter()
                .filter(|acl| acl.resource_type == ResourceType::Topic)
        };
        let writes = |acl: &&AclEntry| {
            matches!(acl.operation, Operation::Write | Operation::All)
                && acl.applies_to(principal, host)
        };
        let uncovered_allow = topic_acls()
            .filter(writes)
            .filter(|acl| acl.permission == Permission::Allow)
            .any(|allow| {
                !topic_acls()
                    .filter(writes)
                    .filter(|acl| acl.permission == Permission::Deny)
                    .any(|deny| deny.pattern.covers(&allow.pattern))
            });
        uncovered_allow
            || (self.allow_everyone_if_no_acl_found
                && !topic_acls().any(|acl| acl.pattern.matches_every_name()))
    }
}

/// Whether an ALLOW of `acl` grants `requested`.
fn grants(acl: Operation, requested: Operation) -> bool {
    use Operation::*;
    acl == All
        || acl == requested
        || (requested == Describe && matches!(acl, Read | Write | Delete | Alter))
        || (requested == DescribeConfigs && acl == AlterConfigs)
}

/// Whether a DENY of `acl` refuses `requested`: only the operation itself or ALL (a DENY of READ
/// does not refuse DESCRIBE).
fn denies(acl: Operation, requested: Operation) -> bool {
    acl == Operation::All || acl == requested
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// `authorizer.acl.file`, `super.users` and `allow.everyone.if.no.acl.found`, as the node's
/// configuration read them (docs/configuration.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizerConfig {
    pub acl_file: PathBuf,
    pub super_users: Vec<KafkaPrincipal>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// Reads the ACL file and builds the authorizer.
    pub fn load(&self) -> Result<Authorizer, AclLoadError> {
        Ok(Authorizer::new(
            load_acl_file(&self.acl_file)?,
            self.super_users.clone(),
            self.allow_everyone_if_no_acl_found,
        ))
    }

    /// Loads the file again (SIGHUP) and replaces `current` only if it loaded: on an error the
    /// rules in force stay, and the error says why the new ones were not taken.
    pub fn reload(&self, current: &mut Arc<Authorizer>) -> Result<(), AclLoadError> {
        *current = Arc::new(self.load()?);
        Ok(())
    }
}

/// `super.users`: `User:a;User:b` (semicolons, since a name mapped from a certificate may hold
/// commas), spaces around entries ignored, empty = none. `User:` principals only, and not
/// `User:*` (which would switch authorization off; `allow.everyone.if.no.acl.found` is the
/// setting for open resources).
pub fn parse_super_users(text: &str) -> Result<Vec<KafkaPrincipal>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(';')
        .map(|entry| {
            let entry = entry.trim();
            if entry.is_empty() {
                return Err("an empty entry between `;`".to_owned());
            }
            let principal = parse_user(entry).map_err(|e: AclLineError| e.to_string())?;
            if principal.is_wildcard() {
                return Err("`User:*` cannot be a super user".to_owned());
            }
            Ok(principal)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::{parse_acl_file, AclHost, ResourcePattern};
    use proptest::prelude::*;
    use Operation::*;

    fn user(name: &str) -> KafkaPrincipal {
        KafkaPrincipal::user(name)
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn local() -> IpAddr {
        ip("127.0.0.1")
    }

    fn acls(text: &str) -> Vec<AclEntry> {
        parse_acl_file(text).unwrap()
    }

    fn authorizer(text: &str) -> Authorizer {
        Authorizer::new(acls(text), vec![], false)
    }

    fn topic(name: &str) -> Resource {
        Resource::topic(name)
    }

    #[test]
    fn denied_errors_are_kafkas() {
        assert_eq!(denied_error(ResourceType::Topic).0, 29);
        assert_eq!(denied_error(ResourceType::Group).0, 30);
        assert_eq!(denied_error(ResourceType::Cluster).0, 31);
        assert_eq!(denied_error(ResourceType::TransactionalId).0, 53);
    }

    #[test]
    fn super_users_are_always_allowed() {
        let a = Authorizer::new(
            acls("deny User:* ALL topic:* from *\ndeny User:root ALL cluster:* from *"),
            vec![user("root")],
            false,
        );
        for op in Operation::VALUES {
            assert!(a.authorize(&user("root"), local(), *op, &topic("t")));
            assert!(a.authorize(&user("root"), local(), *op, &Resource::cluster()));
            assert!(!a.authorize(&user("alice"), local(), *op, &topic("t")));
        }
        assert!(a.is_super_user(&user("root")));
        assert!(!a.is_super_user(&KafkaPrincipal::new("Group", "root")));
    }

    #[test]
    fn a_deny_wins_over_any_allow() {
        let a = authorizer(
            "allow User:alice ALL topic:t from *\n\
             allow User:alice WRITE topic-prefix:t from *\n\
             allow User:* WRITE topic:* from *\n\
             deny User:alice WRITE topic:t from *",
        );
        assert!(!a.authorize(&user("alice"), local(), Write, &topic("t")));
        assert!(a.authorize(&user("alice"), local(), Read, &topic("t")));
        assert!(a.authorize(&user("alice"), local(), Write, &topic("t2")));
        assert!(a.authorize(&user("bob"), local(), Write, &topic("t")));
    }

    #[test]
    fn all_matches_every_operation() {
        let allow = authorizer("allow User:alice ALL topic:t from *");
        let deny =
            authorizer("allow User:alice ALL topic:t from *\ndeny User:alice ALL topic:t from *");
        for op in Operation::VALUES {
            assert!(
                allow.authorize(&user("alice"), local(), *op, &topic("t")),
                "{op}"
            );
            assert!(
                !deny.authorize(&user("alice"), local(), *op, &topic("t")),
                "{op}"
            );
        }
    }

    #[test]
    fn describe_is_implied_by_read_write_delete_alter() {
        for op in Operation::VALUES {
            let a = authorizer(&format!("allow User:alice {op} topic:t from *"));
            let implied = matches!(op, All | Read | Write | Delete | Alter | Describe);
            assert_eq!(
                a.authorize(&user("alice"), local(), Describe, &topic("t")),
                implied,
                "{op}"
            );
            let implied = matches!(op, All | AlterConfigs | DescribeConfigs);
            assert_eq!(
                a.authorize(&user("alice"), local(), DescribeConfigs, &topic("t")),
                implied,
                "{op}"
            );
        }
        // Nothing else is implied: READ does not give WRITE, ALTER_CONFIGS does not give ALTER.
        let a = authorizer(
            "allow User:alice READ topic:t from *\nallow User:alice ALTER_CONFIGS topic:t from *",
        );
        assert!(!a.authorize(&user("alice"), local(), Write, &topic("t")));
        assert!(!a.authorize(&user("alice"), local(), Alter, &topic("t")));
    }

    #[test]
    fn a_deny_of_an_implying_operation_does_not_deny_what_it_implies() {
        let a = authorizer(
            "allow User:alice DESCRIBE topic:t from *\ndeny User:alice READ topic:t from *",
        );
        assert!(a.authorize(&user("alice"), local(), Describe, &topic("t")));
        assert!(!a.authorize(&user("alice"), local(), Read, &topic("t")));
    }

    #[test]
    fn idempotent_write_is_implied_by_write_on_any_topic() {
        let cluster = Resource::cluster();
        let may = |text: &str, who: &str| {
            authorizer(text).authorize(&user(who), local(), IdempotentWrite, &cluster)
        };
        assert!(may(
            "allow User:alice IDEMPOTENT_WRITE cluster:kafka-cluster from *",
            "alice"
        ));
        assert!(may("allow User:alice WRITE topic:t from *", "alice"));
        assert!(may("allow User:alice ALL topic-prefix:t from *", "alice"));
        assert!(may("allow User:* WRITE topic:* from *", "alice"));
        assert!(!may("allow User:alice WRITE topic:t from *", "bob"));
        assert!(!may("allow User:alice READ topic:t from *", "alice"));
        assert!(!may("allow User:alice WRITE group:t from *", "alice"));
        // An ALLOW that a DENY covers entirely gives no topic to write to.
        assert!(!may(
            "allow User:alice WRITE topic:t from *\ndeny User:alice WRITE topic:* from *",
            "alice"
        ));
        assert!(!may(
            "allow User:alice WRITE topic:tx from *\ndeny User:* ALL topic-prefix:t from *",
            "alice"
        ));
        assert!(!may("allow User:alice WRITE topic-prefix:tx from *\ndeny User:alice WRITE topic-prefix:t from *", "alice"));
        assert!(!may(
            "allow User:alice WRITE topic:t from *\ndeny User:alice WRITE topic:t from *",
            "alice"
        ));
        // A DENY that covers part of it leaves the rest.
        assert!(may(
            "allow User:alice WRITE topic-prefix:t from *\ndeny User:alice WRITE topic:t1 from *",
            "alice"
        ));
        assert!(may(
            "allow User:alice WRITE topic:* from *\ndeny User:alice WRITE topic-prefix:t from *",
            "alice"
        ));
        // A DENY of IDEMPOTENT_WRITE on the cluster wins over the topic rule.
        assert!(!may("allow User:alice WRITE topic:t from *\ndeny User:alice IDEMPOTENT_WRITE cluster:kafka-cluster from *", "alice"));
        // The rule is only for IDEMPOTENT_WRITE on the cluster.
        let a = authorizer("allow User:alice WRITE topic:t from *");
        assert!(!a.authorize(&user("alice"), local(), ClusterAction, &cluster));
        assert!(!a.authorize(&user("alice"), local(), IdempotentWrite, &topic("u")));
        // With the no-ACL default open, a topic no ACL names is writable by anyone.
        let open = |text: &str| {
            Authorizer::new(acls(text), vec![], true).authorize(
                &user("bob"),
                local(),
                IdempotentWrite,
                &cluster,
            )
        };
        assert!(open(
            "deny User:* ALL cluster:* from 10.0.0.1\nallow User:alice WRITE topic:t from *"
        ));
        assert!(!open(
            "deny User:* ALL cluster:* from 10.0.0.1\nallow User:alice WRITE topic:* from *"
        ));
    }

    #[test]
    fn wildcard_and_prefixed_resources() {
        let a = authorizer(
            "allow User:alice READ topic:* from *\n\
             allow User:bob WRITE topic-prefix:__ from *\n\
             allow User:carol ALTER cluster:* from *",
        );
        assert!(a.authorize(&user("alice"), local(), Read, &topic("anything")));
        assert!(a.authorize(&user("bob"), local(), Write, &topic("__cluster_metadata")));
        assert!(a.authorize(&user("bob"), local(), Write, &topic("__")));
        assert!(!a.authorize(&user("bob"), local(), Write, &topic("_x")));
        assert!(a.authorize(&user("carol"), local(), Alter, &Resource::cluster()));
        // A topic literally named `kafka-cluster` is not the cluster, and the other way round.
        let a = authorizer("allow User:alice ALL topic:kafka-cluster from *");
        assert!(!a.authorize(&user("alice"), local(), Alter, &Resource::cluster()));
        let a = authorizer("allow User:alice ALL cluster:kafka-cluster from *");
        assert!(!a.authorize(&user("alice"), local(), Alter, &topic("kafka-cluster")));
    }

    #[test]
    fn hosts_must_match() {
        let a = authorizer(
            "allow User:alice WRITE topic:t from 10.0.0.1\n\
             allow User:alice READ topic:t from *\n\
             deny User:alice READ topic:t from 10.0.0.9",
        );
        assert!(a.authorize(&user("alice"), ip("10.0.0.1"), Write, &topic("t")));
        assert!(a.authorize(&user("alice"), ip("::ffff:10.0.0.1"), Write, &topic("t")));
        assert!(!a.authorize(&user("alice"), ip("10.0.0.2"), Write, &topic("t")));
        assert!(a.authorize(&user("alice"), ip("10.0.0.2"), Read, &topic("t")));
        assert!(!a.authorize(&user("alice"), ip("10.0.0.9"), Read, &topic("t")));
    }

    #[test]
    fn no_acl_for_the_resource_lets_the_default_decide() {
        let text = "allow User:alice READ topic:a from *";
        for open in [false, true] {
            let a = Authorizer::new(acls(text), vec![], open);
            // `b` has no ACL at all: the setting decides, for every principal and operation.
            assert_eq!(a.authorize(&user("bob"), local(), Write, &topic("b")), open);
            assert_eq!(
                a.authorize(
                    &KafkaPrincipal::anonymous(),
                    local(),
                    Describe,
                    &Resource::cluster()
                ),
                open
            );
            // `a` has an ACL, so anything it does not allow is refused, open or not.
            assert!(!a.authorize(&user("bob"), local(), Read, &topic("a")));
            assert!(!a.authorize(&user("alice"), local(), Write, &topic("a")));
            assert!(a.authorize(&user("alice"), local(), Read, &topic("a")));
        }
        // An ACL for another host or principal still makes the resource "named".
        let a = Authorizer::new(acls("deny User:x READ topic:a from 10.9.9.9"), vec![], true);
        assert!(!a.authorize(&user("bob"), local(), Read, &topic("a")));
        let empty = Authorizer::new(vec![], vec![], false);
        assert!(!empty.authorize(&user("bob"), local(), Read, &topic("a")));
    }

    #[test]
    fn user_wildcard_principal_matches_everyone() {
        let a = authorizer("allow User:* DESCRIBE cluster:kafka-cluster from *\ndeny User:* WRITE topic:t from *\nallow User:alice WRITE topic:t from *");
        for who in [user("alice"), KafkaPrincipal::anonymous(), user("CN=x,O=y")] {
            assert!(
                a.authorize(&who, local(), Describe, &Resource::cluster()),
                "{who}"
            );
            assert!(!a.authorize(&who, local(), Write, &topic("t")), "{who}");
        }
        // `User:*` is a pattern of ACLs, not a principal that holds every ACL.
        let a = authorizer("allow User:alice READ topic:t from *");
        assert!(!a.authorize(&KafkaPrincipal::wildcard(), local(), Read, &topic("t")));
    }

    fn operation() -> impl Strategy<Value = Operation> {
        proptest::sample::select(Operation::VALUES)
    }

    fn resource_type() -> impl Strategy<Value = ResourceType> {
        proptest::sample::select(ResourceType::VALUES)
    }

    const NAMES: [&str; 5] = ["a", "ab", "b", "__x", "kafka-cluster"];
    const USERS: [&str; 3] = ["alice", "bob", "carol"];
    const HOSTS: [&str; 3] = ["127.0.0.1", "10.0.0.9", "::1"];

    fn pattern() -> impl Strategy<Value = ResourcePattern> {
        prop_oneof![
            proptest::sample::select(&NAMES[..]).prop_map(|n| ResourcePattern::Literal(n.into())),
            Just(ResourcePattern::Literal("*".into())),
            proptest::sample::select(&["", "a", "_", "k"][..])
                .prop_map(|p| ResourcePattern::Prefixed(p.into())),
        ]
    }

    fn acl_host() -> impl Strategy<Value = AclHost> {
        prop_oneof![
            Just(AclHost::Any),
            proptest::sample::select(&HOSTS[..]).prop_map(|h| AclHost::Ip(ip(h))),
        ]
    }

    fn principal() -> impl Strategy<Value = KafkaPrincipal> {
        prop_oneof![
            proptest::sample::select(&USERS[..]).prop_map(user),
            Just(KafkaPrincipal::wildcard()),
        ]
    }

    fn acl() -> impl Strategy<Value = AclEntry> {
        (
            principal(),
            acl_host(),
            operation(),
            prop_oneof![Just(Permission::Allow), Just(Permission::Deny)],
            resource_type(),
            pattern(),
        )
            .prop_map(
                |(principal, host, operation, permission, resource_type, pattern)| AclEntry {
                    principal,
                    host,
                    operation,
                    permission,
                    resource_type,
                    pattern,
                },
            )
    }

    proptest! {
        /// A DENY that matches (principal or User:*, host or *, the operation or ALL, a pattern
        /// that matches the resource) refuses, whatever else the ACLs say, unless the principal
        /// is a super user.
        #[test]
        fn a_matching_deny_always_refuses_but_super_users(
            others in proptest::collection::vec(acl(), 0..12),
            at in any::<prop::sample::Index>(),
            who in proptest::sample::select(&USERS[..]),
            host in proptest::sample::select(&HOSTS[..]),
            operation in operation(),
            resource_type in resource_type(),
            name in proptest::sample::select(&NAMES[..]),
            deny_everyone in any::<bool>(),
            deny_any_host in any::<bool>(),
            deny_all in any::<bool>(),
            deny_pattern in 0..3u8,
            prefix_len in 0..3usize,
            supers in proptest::sample::subsequence(&USERS[..], 0..=3),
            open in any::<bool>(),
        ) {
            let host = ip(host);
            let principal = user(who);
            let pattern = match deny_pattern {
                0 => ResourcePattern::Literal(name.into()),
                1 => ResourcePattern::Literal("*".into()),
                _ => ResourcePattern::Prefixed(name[..prefix_len.min(name.len())].into()),
            };
            let deny = AclEntry {
                principal: if deny_everyone { KafkaPrincipal::wildcard() } else { principal.clone() },
                host: if deny_any_host { AclHost::Any } else { AclHost::Ip(host) },
                operation: if deny_all { All } else { operation },
                permission: Permission::Deny,
                resource_type,
                pattern,
            };
            let mut acls = others;
            acls.insert(at.index(acls.len() + 1), deny);
            let super_users: Vec<KafkaPrincipal> = supers.iter().map(|s| user(s)).collect();
            let is_super = super_users.contains(&principal);
            let a = Authorizer::new(acls, super_users, open);
            let resource = Resource::new(resource_type, name);
            prop_assert_eq!(a.authorize(&principal, host, operation, &resource), is_super);
        }
    }

    #[test]
    fn super_users_parse_as_kafka_writes_them() {
        assert_eq!(parse_super_users(""), Ok(vec![]));
        assert_eq!(parse_super_users("  "), Ok(vec![]));
        assert_eq!(
            parse_super_users("User:Bob;User:Alice"),
            Ok(vec![user("Bob"), user("Alice")])
        );
        assert_eq!(
            parse_super_users(" User:CN=a,O=b ; User:ringraft-1 "),
            Ok(vec![user("CN=a,O=b"), user("ringraft-1")])
        );
        for bad in [
            "User:a;;User:b",
            "User:a;",
            "bob",
            "user:bob",
            "User:*",
            "Group:g",
        ] {
            assert!(parse_super_users(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn load_and_reload_swap_only_a_good_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acls");
        std::fs::write(&path, "allow User:alice READ topic:t from *\n").unwrap();
        let config = AuthorizerConfig {
            acl_file: path.clone(),
            super_users: vec![user("admin")],
            allow_everyone_if_no_acl_found: false,
        };
        let mut current = Arc::new(config.load().unwrap());
        let reads = |a: &Authorizer, who: &str| a.authorize(&user(who), local(), Read, &topic("t"));
        assert!(reads(&current, "alice") && !reads(&current, "bob") && reads(&current, "admin"));

        std::fs::write(&path, "allow User:bob READ topic:t from *\n").unwrap();
        config.reload(&mut current).unwrap();
        assert!(!reads(&current, "alice") && reads(&current, "bob"));

        // A bad edit is refused with its line, and the rules in force stay.
        std::fs::write(
            &path,
            "allow User:carol READ topic:t from *\nallow User:dave READ\n",
        )
        .unwrap();
        let err = config.reload(&mut current).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(reads(&current, "bob") && !reads(&current, "carol"));

        std::fs::remove_file(&path).unwrap();
        assert!(matches!(
            config.reload(&mut current),
            Err(AclLoadError::Read { .. })
        ));
        assert!(reads(&current, "bob"));
    }
}
