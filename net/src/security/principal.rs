//! Who a connection is: a Kafka principal `TYPE:NAME`, how a certificate's subject DN becomes
//! one (`ssl.principal.mapping.rules`), and which principal speaks for which replica
//! (docs/security.md, "Principals and ACLs").
//!
//! Pure logic: the transport hands over the DN string, the SASL layer the user name.

use std::fmt;
use std::str::FromStr;

use regex::{Captures, Regex};
use thiserror::Error;

/// The principal type of every principal ringraft makes.
pub const USER_TYPE: &str = "User";
/// The name of the principal of a connection that did not authenticate (PLAINTEXT).
pub const ANONYMOUS_NAME: &str = "ANONYMOUS";

/// A Kafka principal, `User:alice`. Type and name are case-sensitive.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KafkaPrincipal {
    /// `User` for every principal ringraft makes.
    pub principal_type: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PrincipalError {
    #[error("`{text}` is not a principal: expected `TYPE:NAME`, e.g. `User:alice`")]
    NotTypeColonName { text: String },
}

impl KafkaPrincipal {
    pub fn new(principal_type: impl Into<String>, name: impl Into<String>) -> Self {
        KafkaPrincipal {
            principal_type: principal_type.into(),
            name: name.into(),
        }
    }

    /// `User:NAME`.
    pub fn user(name: impl Into<String>) -> Self {
        Self::new(USER_TYPE, name)
    }

    /// `User:ANONYMOUS`, the principal of an unauthenticated (PLAINTEXT) connection.
    pub fn anonymous() -> Self {
        Self::user(ANONYMOUS_NAME)
    }

    /// `User:*`, which an ACL uses to name every principal.
    pub fn wildcard() -> Self {
        Self::user("*")
    }

    pub fn is_wildcard(&self) -> bool {
        self.principal_type == USER_TYPE && self.name == "*"
    }

    /// Parses `TYPE:NAME`: split at the first `:`, both parts non-empty; the name may contain
    /// further colons. Nothing is trimmed.
    pub fn parse(text: &str) -> Result<Self, PrincipalError> {
        match text.split_once(':') {
            Some((principal_type, name)) if !principal_type.is_empty() && !name.is_empty() => {
                Ok(Self::new(principal_type, name))
            }
            _ => Err(PrincipalError::NotTypeColonName {
                text: text.to_owned(),
            }),
        }
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

impl FromStr for KafkaPrincipal {
    type Err = PrincipalError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

// ---------------------------------------------------------------------------------------------
// ssl.principal.mapping.rules
// ---------------------------------------------------------------------------------------------

/// A bad `ssl.principal.mapping.rules` value. `rule` counts from 1.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MappingRuleError {
    #[error("no rules: use DEFAULT for the whole distinguished name")]
    Empty,
    #[error("rule {rule}: `{text}` is neither `DEFAULT` nor `RULE:pattern/replacement/[L|U]`")]
    UnknownRule { rule: usize, text: String },
    #[error("rule {rule}: the {part} is not closed by an unescaped `/`")]
    Unterminated { rule: usize, part: &'static str },
    #[error("rule {rule}: expected `,` before the next rule, found `{found}`")]
    ExpectedComma { rule: usize, found: String },
    #[error("rule {rule}: bad pattern `{pattern}`: {reason}")]
    BadPattern {
        rule: usize,
        pattern: String,
        reason: String,
    },
    #[error("rule {rule}: bad replacement `{replacement}`: {reason}")]
    BadReplacement {
        rule: usize,
        replacement: String,
        reason: String,
    },
}

/// A distinguished name the rules cannot map: the TLS handshake is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MappingError {
    #[error("no principal mapping rule matches `{dn}`")]
    NoMatchingRule { dn: String },
    #[error("principal mapping rule {rule} maps `{dn}` to an empty name")]
    EmptyName { dn: String, rule: usize },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// One piece of a replacement: literal text, or a capture group by number or name.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Group(usize),
    Named(String),
}

#[derive(Clone, Debug)]
enum MappingRule {
    Default,
    Rule {
        /// The pattern anchored at both ends: a rule applies only when it matches the whole DN.
        whole: Regex,
        /// The pattern as written: every match in the DN is replaced.
        pattern: Regex,
        replacement: Vec<Piece>,
        case: Case,
    },
}

/// `ssl.principal.mapping.rules`: the rules that turn a client certificate's subject DN (RFC 2253
/// form, `CN=voter-2,OU=ringraft,O=Example`) into a user name (docs/security.md, "Principals
/// and ACLs").
///
/// The value is a comma-separated list of `DEFAULT` (the whole DN) and
/// `RULE:pattern/replacement/` with an optional `L` (lower case) or `U` (upper case) after the
/// last `/`. A `/` inside a pattern or replacement is written `\/`; commas inside a pattern are
/// part of it (the rule runs to its closing `/`). Rules are tried in order; the first whose
/// pattern matches the whole DN gives the name: every match of the pattern in the DN is replaced
/// by the replacement (`$1`, `${name}` for groups, `\` escapes the next character).
#[derive(Clone, Debug)]
pub struct SslPrincipalMapper {
    rules: Vec<MappingRule>,
}

impl Default for SslPrincipalMapper {
    /// `DEFAULT`: the principal is `User:` followed by the whole DN.
    fn default() -> Self {
        SslPrincipalMapper {
            rules: vec![MappingRule::Default],
        }
    }
}

impl SslPrincipalMapper {
    pub fn parse(rules: &str) -> Result<Self, MappingRuleError> {
        let mut parsed = Vec::new();
        let mut rest = rules.trim_start();
        if rest.is_empty() {
            return Err(MappingRuleError::Empty);
        }
        loop {
            let index = parsed.len() + 1;
            let (rule, after) = parse_rule(index, rest)?;
            parsed.push(rule);
            rest = after.trim_start();
            if rest.is_empty() {
                break;
            }
            match rest.strip_prefix(',') {
                Some(after_comma) => {
                    rest = after_comma.trim_start();
                    if rest.is_empty() {
                        return Err(MappingRuleError::UnknownRule {
                            rule: index + 1,
                            text: String::new(),
                        });
                    }
                }
                None => {
                    return Err(MappingRuleError::ExpectedComma {
                        rule: index,
                        found: rest.to_owned(),
                    })
                }
            }
        }
        Ok(SslPrincipalMapper { rules: parsed })
    }

    /// The user name for `dn`: the first rule that applies, or an error when none does (or the
    /// rule that applies yields an empty name).
    pub fn name_of(&self, dn: &str) -> Result<String, MappingError> {
        for (i, rule) in self.rules.iter().enumerate() {
            let name = match rule {
                MappingRule::Default => dn.to_owned(),
                MappingRule::Rule {
                    whole,
                    pattern,
                    replacement,
                    case,
                } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let replaced = replace_all(pattern, dn, replacement);
                    match case {
                        Case::Keep => replaced,
                        Case::Lower => replaced.to_lowercase(),
                        Case::Upper => replaced.to_uppercase(),
                    }
                }
            };
            if name.is_empty() {
                return Err(MappingError::EmptyName {
                    dn: dn.to_owned(),
                    rule: i + 1,
                });
            }
            return Ok(name);
        }
        Err(MappingError::NoMatchingRule { dn: dn.to_owned() })
    }

    /// `User:` + [`name_of`](Self::name_of).
    pub fn principal_of(&self, dn: &str) -> Result<KafkaPrincipal, MappingError> {
        self.name_of(dn).map(KafkaPrincipal::user)
    }
}

/// Parses one rule at the start of `text`; returns it and what follows it.
fn parse_rule(index: usize, text: &str) -> Result<(MappingRule, &str), MappingRuleError> {
    if let Some(rest) = text.strip_prefix("DEFAULT") {
        return Ok((MappingRule::Default, rest));
    }
    let Some(rest) = text.strip_prefix("RULE:") else {
        let end = text.find(',').unwrap_or(text.len());
        return Err(MappingRuleError::UnknownRule {
            rule: index,
            text: text[..end].trim_end().to_owned(),
        });
    };
    let (pattern, rest) = until_slash(rest).ok_or(MappingRuleError::Unterminated {
        rule: index,
        part: "pattern",
    })?;
    let (replacement, rest) = until_slash(rest).ok_or(MappingRuleError::Unterminated {
        rule: index,
        part: "replacement",
    })?;
    let (case, rest) = match rest.as_bytes().first() {
        Some(b'L') => (Case::Lower, &rest[1..]),
        Some(b'U') => (Case::Upper, &rest[1..]),
        _ => (Case::Keep, rest),
    };
    // `\/` is how a rule writes a slash; the regex gets a plain `/`.
    let regex_text = pattern.replace("\\/", "/");
    let bad_pattern = |e: regex::Error| MappingRuleError::BadPattern {
        rule: index,
        pattern: pattern.to_owned(),
        reason: e.to_string(),
    };
    let compiled = Regex::new(&regex_text).map_err(bad_pattern)?;
    let whole = Regex::new(&format!(r"\A(?:{regex_text})\z")).map_err(bad_pattern)?;
    let pieces = parse_replacement(replacement, &compiled).map_err(|reason| {
        MappingRuleError::BadReplacement {
            rule: index,
            replacement: replacement.to_owned(),
            reason,
        }
    })?;
    Ok((
        MappingRule::Rule {
            whole,
            pattern: compiled,
            replacement: pieces,
            case,
        },
        rest,
    ))
}

/// Splits `text` at its first `/` not escaped by `\`: (before, after the slash).
fn until_slash(text: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '/' => return Some((&text[..i], &text[i + 1..])),
            _ => {}
        }
    }
    None
}

/// Parses a replacement with the rules of Java's `Matcher.replaceAll` as Kafka uses them:
/// `\c` is the character `c`; `${name}` is a named group; `$` and digits is a group number:
/// the first digit always, each further digit while the number stays a group of the pattern.
/// A `$N` whose first digit is above the pattern's group count is the literal text `$N` when
/// the pattern has groups (Kafka escapes it); with no groups at all it is an error here
/// (Kafka would fail every mapping with that rule).
fn parse_replacement(text: &str, pattern: &Regex) -> Result<Vec<Piece>, String> {
    let groups = pattern.captures_len() - 1;
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars().peekable();
    let flush = |literal: &mut String, pieces: &mut Vec<Piece>| {
        if !literal.is_empty() {
            pieces.push(Piece::Text(std::mem::take(literal)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped) => literal.push(escaped),
                None => return Err("a `\\` at the end escapes nothing".into()),
            },
            '$' => match chars.peek().copied() {
                Some('{') => {
                    chars.next();
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(n) => name.push(n),
                            None => return Err("`${` without its `}`".into()),
                        }
                    }
                    if !pattern.capture_names().any(|n| n == Some(name.as_str())) {
                        return Err(format!("the pattern has no group named `{name}`"));
                    }
                    flush(&mut literal, &mut pieces);
                    pieces.push(Piece::Named(name));
                }
                Some(d) if d.is_ascii_digit() => {
                    chars.next();
                    let mut number = d as usize - '0' as usize;
                    if number > groups {
                        if groups == 0 {
                            return Err(format!("`${number}`: the pattern has no groups"));
                        }
                        literal.push('$');
                        literal.push(d);
                        continue;
                    }
                    while let Some(next) = chars.peek().and_then(|c| c.to_digit(10)) {
                        let longer = number * 10 + next as usize;
                        if longer > groups {
                            break;
                        }
                        number = longer;
                        chars.next();
                    }
                    flush(&mut literal, &mut pieces);
                    pieces.push(Piece::Group(number));
                }
                _ => return Err("`$` is followed by neither a group number nor `{name}`".into()),
            },
            other => literal.push(other),
        }
    }
    flush(&mut literal, &mut pieces);
    Ok(pieces)
}

/// Replaces every match of `pattern` in `text`, searching as Java's `Matcher.find` does: the
/// next search starts where the last match ended, one character later after an empty match.
fn replace_all(pattern: &Regex, text: &str, replacement: &[Piece]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while from <= text.len() {
        let Some(caps) = pattern.captures_at(text, from) else {
            break;
        };
        let whole = caps.get(0).expect("group 0 is the match");
        out.push_str(&text[copied..whole.start()]);
        expand(&caps, replacement, &mut out);
        copied = whole.end();
        from = if whole.is_empty() {
            match text[whole.end()..].chars().next() {
                Some(c) => whole.end() + c.len_utf8(),
                None => break,
            }
        } else {
            whole.end()
        };
    }
    out.push_str(&text[copied..]);
    out
}

fn expand(caps: &Captures<'_>, replacement: &[Piece], out: &mut String) {
    for piece in replacement {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Group(i) => out.push_str(caps.get(*i).map_or("", |m| m.as_str())),
            Piece::Named(name) => out.push_str(caps.name(name).map_or("", |m| m.as_str())),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Replica principals
// ---------------------------------------------------------------------------------------------

const ID_PLACEHOLDER: &str = "{id}";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplicaTemplateError {
    #[error("replica principal template `{template}`: {source}")]
    Principal {
        template: String,
        source: PrincipalError,
    },
    #[error(
        "replica principal template `{template}` must contain `{{id}}` exactly once, in the name"
    )]
    Placeholder { template: String },
}

/// The principal each replica authenticates as, from a template such as `User:ringraft-{id}`:
/// the node binds a connection's principal to a replica id with it, so a quorum request that
/// claims to come from replica X is accepted only from X's principal (docs/security.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaPrincipals {
    principal_type: String,
    prefix: String,
    suffix: String,
}

impl ReplicaPrincipals {
    pub fn parse(template: &str) -> Result<Self, ReplicaTemplateError> {
        let principal =
            KafkaPrincipal::parse(template).map_err(|source| ReplicaTemplateError::Principal {
                template: template.to_owned(),
                source,
            })?;
        let placeholder = || ReplicaTemplateError::Placeholder {
            template: template.to_owned(),
        };
        if principal.principal_type.contains(ID_PLACEHOLDER) {
            return Err(placeholder());
        }
        let (prefix, suffix) = principal
            .name
            .split_once(ID_PLACEHOLDER)
            .ok_or_else(placeholder)?;
        if suffix.contains(ID_PLACEHOLDER) {
            return Err(placeholder());
        }
        Ok(ReplicaPrincipals {
            principal_type: principal.principal_type.clone(),
            prefix: prefix.to_owned(),
            suffix: suffix.to_owned(),
        })
    }

    /// The principal of replica `id` (`id` >= 0).
    pub fn principal_of(&self, id: i32) -> KafkaPrincipal {
        debug_assert!(id >= 0, "replica ids are not negative");
        KafkaPrincipal::new(
            self.principal_type.clone(),
            format!("{}{id}{}", self.prefix, self.suffix),
        )
    }

    /// The replica whose principal `principal` is: the template with a decimal id >= 0 in
    /// place of `{id}` (no sign, no leading zero, within i32). None for any other principal.
    pub fn replica_of(&self, principal: &KafkaPrincipal) -> Option<i32> {
        if principal.principal_type != self.principal_type {
            return None;
        }
        let digits = principal
            .name
            .strip_prefix(self.prefix.as_str())?
            .strip_suffix(self.suffix.as_str())?;
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !canonical {
            return None;
        }
        digits.parse().ok()
    }
}

impl fmt::Display for ReplicaPrincipals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}{ID_PLACEHOLDER}{}",
            self.principal_type, self.prefix, self.suffix
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_display_and_parse_round_trip() {
        let alice = KafkaPrincipal::parse("User:alice").unwrap();
        assert_eq!(alice, KafkaPrincipal::user("alice"));
        assert_eq!(alice.to_string(), "User:alice");
        assert_eq!(KafkaPrincipal::anonymous().to_string(), "User:ANONYMOUS");
        assert_eq!(
            "User:CN=a,O=b:c".parse::<KafkaPrincipal>().unwrap().name,
            "CN=a,O=b:c",
            "the name keeps later colons"
        );
        assert!(KafkaPrincipal::wildcard().is_wildcard());
        assert!(!KafkaPrincipal::user("alice").is_wildcard());
        for bad in ["", "alice", ":alice", "User:", ":"] {
            assert_eq!(
                KafkaPrincipal::parse(bad),
                Err(PrincipalError::NotTypeColonName { text: bad.into() }),
                "{bad}"
            );
        }
    }

    const KAFKA_EXAMPLE: &str = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
        RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
        RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\
        DEFAULT";

    #[test]
    fn kafkas_documented_example() {
        let mapper = SslPrincipalMapper::parse(KAFKA_EXAMPLE).unwrap();
        let cases = [
            (
                "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown",
                "serviceuser",
            ),
            (
                "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown",
                "adminuser@admin",
            ),
            ("OU=Admin,CN=Admin.User,O=Unknown", "admin.user"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ];
        for (dn, name) in cases {
            assert_eq!(mapper.name_of(dn).unwrap(), name, "{dn}");
        }
        assert_eq!(
            mapper.principal_of("CN=voter-2,OU=ServiceUsers").unwrap(),
            KafkaPrincipal::user("voter-2")
        );
    }

    #[test]
    fn the_replica_example_of_docs_security() {
        let mapper = SslPrincipalMapper::parse(
            r"RULE:^CN=voter-([0-9]+),OU=ringraft,.*$/ringraft-$1/,DEFAULT",
        )
        .unwrap();
        let principal = mapper
            .principal_of("CN=voter-2,OU=ringraft,O=Example")
            .unwrap();
        assert_eq!(principal, KafkaPrincipal::user("ringraft-2"));
        let replicas = ReplicaPrincipals::parse("User:ringraft-{id}").unwrap();
        assert_eq!(replicas.replica_of(&principal), Some(2));
        assert_eq!(
            mapper.name_of("CN=intruder,OU=ringraft,O=Example").unwrap(),
            "CN=intruder,OU=ringraft,O=Example"
        );
    }

    #[test]
    fn rules_may_span_lines_and_spaces() {
        let spaced = KAFKA_EXAMPLE
            .replace(",RULE", " ,\n  RULE")
            .replace(",DEFAULT", ",\nDEFAULT ");
        let mapper = SslPrincipalMapper::parse(&spaced).unwrap();
        assert_eq!(
            mapper.name_of("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"),
            Ok("adminuser@admin".into())
        );
    }

    #[test]
    fn default_rule_is_the_whole_dn() {
        let dn = "CN=voter-2,OU=ringraft,O=Example";
        assert_eq!(SslPrincipalMapper::default().name_of(dn).unwrap(), dn);
        assert_eq!(
            SslPrincipalMapper::parse("DEFAULT")
                .unwrap()
                .name_of(dn)
                .unwrap(),
            dn
        );
    }

    #[test]
    fn first_matching_rule_wins_and_no_match_is_an_error() {
        let mapper =
            SslPrincipalMapper::parse("RULE:^CN=([^,]*),OU=a$/$1-a/,RULE:^CN=([^,]*),.*$/$1/U")
                .unwrap();
        assert_eq!(mapper.name_of("CN=x,OU=a").unwrap(), "x-a");
        assert_eq!(mapper.name_of("CN=x,OU=b").unwrap(), "X");
        assert_eq!(
            mapper.name_of("O=nobody"),
            Err(MappingError::NoMatchingRule {
                dn: "O=nobody".into()
            })
        );
    }

    #[test]
    fn a_rule_applies_only_when_it_matches_the_whole_dn() {
        // `CN=(\w+)` finds a match inside the DN but does not match all of it.
        let mapper = SslPrincipalMapper::parse(r"RULE:CN=(\w+)/$1/,DEFAULT").unwrap();
        assert_eq!(mapper.name_of("CN=a,O=b").unwrap(), "CN=a,O=b");
        assert_eq!(mapper.name_of("CN=a").unwrap(), "a");
    }

    #[test]
    fn every_match_is_replaced_as_java_finds_them() {
        // After a whole-string match, Java finds one more (empty) match at the end.
        let all = SslPrincipalMapper::parse("RULE:.*/x/").unwrap();
        assert_eq!(all.name_of("abc").unwrap(), "xx");
        // A pattern that matches the whole DN can still match several times.
        let each = SslPrincipalMapper::parse("RULE:(?:CN=[a-z]+,?)+/$0;/").unwrap();
        assert_eq!(each.name_of("CN=a,CN=b").unwrap(), "CN=a,CN=b;");
        // `a|ab` matches all of `ab`, but the search from 0 takes `a` first.
        let first = SslPrincipalMapper::parse("RULE:a|ab/x/").unwrap();
        assert_eq!(first.name_of("ab").unwrap(), "xb");
        // After an empty match the search moves on one character.
        let lazy = SslPrincipalMapper::parse("RULE:(a??)/<$1>/").unwrap();
        assert_eq!(lazy.name_of("a").unwrap(), "<>a<>");
    }

    #[test]
    fn replacement_groups_and_escapes() {
        let m = |rules: &str, dn: &str| SslPrincipalMapper::parse(rules).unwrap().name_of(dn);
        assert_eq!(
            m(r"RULE:^CN=(?P<cn>[^,]*),O=(.*)$/${cn}.$2/", "CN=a,O=b").unwrap(),
            "a.b"
        );
        assert_eq!(m(r"RULE:^CN=(?<cn>[^,]*)$/${cn}/", "CN=a").unwrap(), "a");
        // `$12` with two groups is group 1 then `2`; `$9` above the count is literal.
        assert_eq!(m(r"RULE:^(a)(b)$/$12$9/", "ab").unwrap(), "a2$9");
        assert_eq!(m(r"RULE:^(a)(b)$/$0/", "ab").unwrap(), "ab");
        assert_eq!(m(r"RULE:^(a)(b)$/\$1\\$2/", "ab").unwrap(), r"$1\b");
        // A slash in a pattern or replacement is written `\/`; commas stay in the pattern.
        assert_eq!(
            m(r"RULE:^CN=([^,]*),O=a\/b$/$1\/x/", "CN=q,O=a/b").unwrap(),
            "q/x"
        );
        // An optional group that did not take part is empty.
        assert_eq!(m(r"RULE:^(a)?b$/[$1]/", "b").unwrap(), "[]");
        assert_eq!(m(r"RULE:^CN=(.*)$/$1/U", "CN=abc").unwrap(), "ABC");
    }

    #[test]
    fn an_empty_mapped_name_is_an_error() {
        let mapper = SslPrincipalMapper::parse(KAFKA_EXAMPLE).unwrap();
        assert_eq!(
            mapper.name_of("O=x,CN=,OU=y"),
            Err(MappingError::EmptyName {
                dn: "O=x,CN=,OU=y".into(),
                rule: 3
            })
        );
    }

    #[test]
    fn bad_rules_are_typed_errors() {
        use MappingRuleError as E;
        let err = |rules: &str| SslPrincipalMapper::parse(rules).unwrap_err();
        assert_eq!(err(""), E::Empty);
        assert_eq!(err("  \n"), E::Empty);
        assert_eq!(
            err("DEFAUL"),
            E::UnknownRule {
                rule: 1,
                text: "DEFAUL".into()
            }
        );
        assert_eq!(
            err("DEFAULT,"),
            E::UnknownRule {
                rule: 2,
                text: String::new()
            }
        );
        assert_eq!(
            err("DEFAULT/L"),
            E::ExpectedComma {
                rule: 1,
                found: "/L".into()
            }
        );
        assert_eq!(
            err("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U"),
            E::ExpectedComma {
                rule: 1,
                found: "/U".into()
            }
        );
        assert_eq!(
            err("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/LU"),
            E::ExpectedComma {
                rule: 1,
                found: "U".into()
            }
        );
        assert_eq!(
            err("DEFAULT,RULE:^CN=(.*?),OU=ServiceUsers.*$/$1"),
            E::Unterminated {
                rule: 2,
                part: "replacement"
            }
        );
        assert_eq!(
            err(r"RULE:^CN=(.*)\/"),
            E::Unterminated {
                rule: 1,
                part: "pattern"
            }
        );
        assert!(matches!(
            err("RULE:^CN=(.*$/$1/"),
            E::BadPattern { rule: 1, .. }
        ));
        assert!(
            matches!(err(r"RULE:^(a)\1$/$1/"), E::BadPattern { .. }),
            "no backreferences"
        );
        for replacement in ["$", "$x", "${nope}", "${cn", "$1"] {
            let rules = format!("DEFAULT,RULE:^CN=.*$/{replacement}/");
            assert!(
                matches!(err(&rules), E::BadReplacement { rule: 2, .. }),
                "{replacement}"
            );
        }
    }

    #[test]
    fn a_trailing_backslash_in_a_replacement_escapes_nothing() {
        // A rule cannot end its replacement with `\` (it would escape the closing `/`).
        let pattern = Regex::new("(a)").unwrap();
        assert!(parse_replacement("x\\", &pattern).is_err());
        assert_eq!(
            parse_replacement("x\\\\", &pattern),
            Ok(vec![Piece::Text("x\\".into())])
        );
    }

    #[test]
    fn replica_template_binds_ids_exactly() {
        let replicas = ReplicaPrincipals::parse("User:ringraft-{id}").unwrap();
        assert_eq!(replicas.to_string(), "User:ringraft-{id}");
        assert_eq!(replicas.principal_of(2), KafkaPrincipal::user("ringraft-2"));
        for id in [0, 1, 9, 10, 1234, i32::MAX] {
            assert_eq!(replicas.replica_of(&replicas.principal_of(id)), Some(id));
        }
        for name in [
            "ringraft-",
            "ringraft-02",
            "ringraft-00",
            "ringraft--1",
            "ringraft-+1",
            "ringraft-1 ",
            "ringraft-1x",
            "ringraft-2147483648",
            "ringraft-١",
            "xringraft-1",
            "ringraft",
        ] {
            assert_eq!(
                replicas.replica_of(&KafkaPrincipal::user(name)),
                None,
                "{name}"
            );
        }
        assert_eq!(
            replicas.replica_of(&KafkaPrincipal::new("Group", "ringraft-1")),
            None
        );
        let suffixed = ReplicaPrincipals::parse("User:node{id}1").unwrap();
        assert_eq!(
            suffixed.replica_of(&KafkaPrincipal::user("node121")),
            Some(12)
        );
        assert_eq!(suffixed.replica_of(&KafkaPrincipal::user("node1")), None);
        let bare = ReplicaPrincipals::parse("User:{id}").unwrap();
        assert_eq!(bare.replica_of(&KafkaPrincipal::user("7")), Some(7));
    }

    #[test]
    fn bad_replica_templates() {
        for bad in [
            "User:ringraft",
            "User:{id}-{id}",
            "{id}:x{id}",
            "ringraft-{id}",
            "User:",
        ] {
            assert!(ReplicaPrincipals::parse(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            ReplicaPrincipals::parse("ringraft-{id}"),
            Err(ReplicaTemplateError::Principal { .. })
        ));
        assert!(matches!(
            ReplicaPrincipals::parse("User:ringraft"),
            Err(ReplicaTemplateError::Placeholder { .. })
        ));
    }
}
