//! Kafka's `ssl.principal.mapping.rules`: how a TLS client's certificate subject becomes the
//! user name in its principal, so ACLs written for a Kafka cluster's TLS users keep working.
//!
//! The rules are split and parsed with the same expressions as Kafka's `SslPrincipalMapper`
//! (the `regex` crate's leftmost-first matching agrees with Java's for them), and the
//! replacement follows `Matcher.replaceAll`: `$n` and `${name}` insert groups, `\x` is a
//! literal `x`, and — as Kafka — a `$n` naming a group the pattern does not have is literal.
//!
//! Differences from Java, as the `regex` crate differs: no look-around or back-references in
//! patterns (refused when parsed), and `\s`, `\w`, `\d` and `.` are Unicode-aware.

use std::fmt;
use std::sync::LazyLock;

use regex::{Captures, Regex};

use crate::tls_error::TlsError;

/// One rule as Kafka's `SslPrincipalMapper.RULE_PATTERN` reads it: `DEFAULT` (group 1), or
/// `RULE:<pattern>/<replacement>/[LU]` (groups 2, 4 and 6), or anything else (group 7).
const RULE_PATTERN: &str = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)";

/// Java's `\s`, which (unlike the `regex` crate's) is ASCII only.
const JAVA_WHITESPACE: &str = r"[\t\n\x0B\x0C\r ]";

/// Kafka's `RULE_SPLITTER`: rules separated by commas, a comma inside a rule's pattern
/// included (the pattern runs to the next unescaped `/`).
static RULE_SPLITTER: LazyLock<Result<Regex, regex::Error>> = LazyLock::new(|| {
    Regex::new(&format!(
        "{JAVA_WHITESPACE}*({RULE_PATTERN}){JAVA_WHITESPACE}*(,{JAVA_WHITESPACE}*|$)"
    ))
});

/// Kafka's `RULE_PARSER`, anchored as Java's `Matcher.lookingAt`.
static RULE_PARSER: LazyLock<Result<Regex, regex::Error>> =
    LazyLock::new(|| Regex::new(&format!("^(?:{RULE_PATTERN})")));

/// The parsed `ssl.principal.mapping.rules` of a listener: tried in order, the first rule
/// that applies names the client. Equal when their source texts are equal.
#[derive(Clone, Debug)]
pub struct PrincipalMappingRules {
    source: String,
    rules: Vec<MappingRule>,
}

impl PrincipalMappingRules {
    /// Kafka's default for `ssl.principal.mapping.rules`: the principal's name is the DN.
    pub const DEFAULT_TEXT: &'static str = "DEFAULT";

    /// Parses Kafka's rule syntax; the error names the rule that does not parse, so the
    /// operator can find it in a long list.
    pub fn parse(text: &str) -> Result<Self, TlsError> {
        let splitter = built_in_expression(&RULE_SPLITTER)?;
        let trimmed = text.trim_matches(|character: char| character <= ' ');
        let rules = splitter
            .captures_iter(trimmed)
            .filter_map(|captures| captures.get(1))
            .map(|rule| parse_rule(rule.as_str()))
            .filter_map(Result::transpose)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PrincipalMappingRules {
            source: text.to_owned(),
            rules,
        })
    }

    /// `DEFAULT`: every client is named by its certificate's DN, what Kafka does when the
    /// setting is absent.
    pub fn default_rules() -> Self {
        PrincipalMappingRules {
            source: Self::DEFAULT_TEXT.to_owned(),
            rules: vec![MappingRule::Default],
        }
    }

    /// The name for a client whose certificate has this subject (RFC 2253 form, as
    /// [`crate::subject_dn`] writes it); `None` when no rule applies, which Kafka treats as a
    /// failed authentication.
    pub fn apply(&self, distinguished_name: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| rule.apply(distinguished_name))
    }

    /// The text the rules were parsed from, for logs and configuration dumps.
    pub fn source(&self) -> &str {
        &self.source
    }
}

impl Default for PrincipalMappingRules {
    fn default() -> Self {
        Self::default_rules()
    }
}

impl PartialEq for PrincipalMappingRules {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for PrincipalMappingRules {}

impl fmt::Display for PrincipalMappingRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

fn built_in_expression(
    expression: &'static LazyLock<Result<Regex, regex::Error>>,
) -> Result<&'static Regex, TlsError> {
    LazyLock::force(expression)
        .as_ref()
        .map_err(|error| TlsError::BadMappingRule {
            rule: String::new(),
            reason: format!("the rule parser itself does not compile: {error}"),
        })
}

/// One rule; `Ok(None)` for the empty rules Kafka skips (`,,` or a trailing comma).
fn parse_rule(rule: &str) -> Result<Option<MappingRule>, TlsError> {
    let refuse = |reason: String| TlsError::BadMappingRule {
        rule: rule.to_owned(),
        reason,
    };
    let parser = built_in_expression(&RULE_PARSER)?;
    let captures = parser
        .captures(rule)
        .ok_or_else(|| refuse("not DEFAULT or RULE:pattern/replacement/[LU]".to_owned()))?;
    let parsed_len = captures.get(0).map_or(0, |whole| whole.end());
    if parsed_len != rule.len() {
        let unmatched = rule.get(parsed_len..).unwrap_or_default();
        return Err(refuse(format!(
            "expected DEFAULT or RULE:pattern/replacement/[LU], but `{unmatched}` is left over"
        )));
    }
    if captures.get(1).is_some() {
        return Ok(Some(MappingRule::Default));
    }
    let (Some(pattern), Some(replacement)) = (captures.get(2), captures.get(4)) else {
        return Ok(None);
    };
    let case = match captures.get(6).map(|flag| flag.as_str()) {
        Some("L") => CaseChange::Lower,
        Some("U") => CaseChange::Upper,
        _ => CaseChange::Keep,
    };
    MappingRule::replacing(pattern.as_str(), replacement.as_str(), case)
        .map(Some)
        .map_err(refuse)
}

/// What `/L` and `/U` do to the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CaseChange {
    Keep,
    Lower,
    Upper,
}

/// A piece of a rule's replacement: text, or a group of the match.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ReplacementPart {
    Literal(String),
    Group(usize),
}

#[derive(Clone, Debug)]
enum MappingRule {
    /// The DN itself.
    Default,
    /// `RULE:pattern/replacement/[LU]`.
    Replacing {
        pattern: Regex,
        /// The pattern anchored at both ends: Java's `Matcher.matches`, the rule's condition.
        whole_match: Regex,
        replacement: Vec<ReplacementPart>,
        case: CaseChange,
    },
}

impl MappingRule {
    fn replacing(pattern_text: &str, replacement_text: &str, case: CaseChange) -> Result<Self, String> {
        let pattern_text = unescape_slashes(pattern_text);
        let pattern = Regex::new(&pattern_text).map_err(|error| format!("bad pattern: {error}"))?;
        let whole_match =
            Regex::new(&format!("^(?:{pattern_text})$")).map_err(|error| format!("bad pattern: {error}"))?;
        let replacement = parse_replacement(replacement_text, &pattern)?;
        Ok(MappingRule::Replacing {
            pattern,
            whole_match,
            replacement,
            case,
        })
    }

    fn apply(&self, distinguished_name: &str) -> Option<String> {
        let MappingRule::Replacing {
            pattern,
            whole_match,
            replacement,
            case,
        } = self
        else {
            return Some(distinguished_name.to_owned());
        };
        if !whole_match.is_match(distinguished_name) {
            return None;
        }
        let replaced = pattern.replace_all(distinguished_name, |captures: &Captures<'_>| {
            expand(replacement, captures)
        });
        Some(match case {
            CaseChange::Keep => replaced.into_owned(),
            CaseChange::Lower => replaced.to_lowercase(),
            CaseChange::Upper => replaced.to_uppercase(),
        })
    }
}

fn expand(replacement: &[ReplacementPart], captures: &Captures<'_>) -> String {
    let mut expanded = String::new();
    for part in replacement {
        match part {
            ReplacementPart::Literal(text) => expanded.push_str(text),
            ReplacementPart::Group(index) => {
                expanded.push_str(captures.get(*index).map_or("", |group| group.as_str()));
            }
        }
    }
    expanded
}

/// `\/` in a rule's pattern is how Kafka's syntax writes a `/`; Java's regex reads it as `/`,
/// the `regex` crate is given the `/` itself. Other escapes are left to the regex.
fn unescape_slashes(pattern: &str) -> String {
    let mut unescaped = String::with_capacity(pattern.len());
    let mut characters = pattern.chars();
    while let Some(character) = characters.next() {
        if character != '\\' {
            unescaped.push(character);
            continue;
        }
        match characters.next() {
            Some('/') => unescaped.push('/'),
            Some(escaped) => {
                unescaped.push('\\');
                unescaped.push(escaped);
            }
            None => unescaped.push('\\'),
        }
    }
    unescaped
}

/// Reads a replacement as Java's `Matcher.appendReplacement` does, after Kafka's rewrite of
/// `$n` for groups the pattern lacks into a literal `$n`.
fn parse_replacement(text: &str, pattern: &Regex) -> Result<Vec<ReplacementPart>, String> {
    let group_count = pattern.captures_len().saturating_sub(1);
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut characters = text.chars().peekable();
    while let Some(character) = characters.next() {
        match character {
            '\\' => literal.push(
                characters
                    .next()
                    .ok_or("the replacement ends with a '\\' that escapes nothing")?,
            ),
            '$' => {
                let group = parse_group_reference(&mut characters, pattern, group_count)?;
                match group {
                    GroupReference::Group(index) => {
                        if !literal.is_empty() {
                            parts.push(ReplacementPart::Literal(std::mem::take(&mut literal)));
                        }
                        parts.push(ReplacementPart::Group(index));
                    }
                    GroupReference::LiteralDollar(digit) => {
                        literal.push('$');
                        literal.push(digit);
                    }
                }
            }
            other => literal.push(other),
        }
    }
    if !literal.is_empty() {
        parts.push(ReplacementPart::Literal(literal));
    }
    Ok(parts)
}

enum GroupReference {
    Group(usize),
    /// Kafka's rewrite: `$n` past the pattern's groups is the literal text.
    LiteralDollar(char),
}

fn parse_group_reference(
    characters: &mut std::iter::Peekable<std::str::Chars<'_>>,
    pattern: &Regex,
    group_count: usize,
) -> Result<GroupReference, String> {
    let first = characters
        .next()
        .ok_or("the replacement ends with a '$' that names no group")?;
    if first == '{' {
        return parse_named_group(characters, pattern).map(GroupReference::Group);
    }
    let mut index = first
        .to_digit(10)
        .ok_or_else(|| format!("'${first}' in the replacement is not a group reference"))?
        as usize;
    if index > group_count {
        if group_count > 0 {
            return Ok(GroupReference::LiteralDollar(first));
        }
        return Err(format!(
            "the replacement uses ${index} but the pattern has no groups"
        ));
    }
    while let Some(next_index) = characters
        .peek()
        .and_then(|next| next.to_digit(10))
        .map(|digit| index * 10 + digit as usize)
        .filter(|next_index| *next_index <= group_count)
    {
        index = next_index;
        characters.next();
    }
    Ok(GroupReference::Group(index))
}

fn parse_named_group(
    characters: &mut std::iter::Peekable<std::str::Chars<'_>>,
    pattern: &Regex,
) -> Result<usize, String> {
    let mut name = String::new();
    while let Some(character) = characters.next_if(char::is_ascii_alphanumeric) {
        name.push(character);
    }
    if characters.next() != Some('}') {
        return Err("a '${' group reference in the replacement has no closing '}'".to_owned());
    }
    if name.is_empty() || name.starts_with(|first: char| first.is_ascii_digit()) {
        return Err(format!("'${{{name}}}' in the replacement is not a group name"));
    }
    pattern
        .capture_names()
        .position(|group_name| group_name == Some(name.as_str()))
        .ok_or_else(|| format!("the pattern has no group named {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> PrincipalMappingRules {
        PrincipalMappingRules::parse(text).expect("valid rules")
    }

    #[test]
    fn default_names_the_client_by_its_dn() {
        let dn = "CN=alice,OU=eng,O=Example Corp,C=US";
        assert_eq!(
            PrincipalMappingRules::default_rules().apply(dn).as_deref(),
            Some(dn)
        );
        assert_eq!(rules("DEFAULT").apply(dn).as_deref(), Some(dn));
        assert_eq!(rules("DEFAULT"), PrincipalMappingRules::default());
    }

    #[test]
    fn rules_rewrite_and_change_case() {
        let lower = rules("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L");
        assert_eq!(
            lower.apply("CN=Alice,OU=Eng,O=Example Corp,C=US").as_deref(),
            Some("alice@eng")
        );
        let upper = rules("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/U");
        assert_eq!(
            upper.apply("CN=Alice,OU=Eng,O=Example Corp,C=US").as_deref(),
            Some("ALICE@ENG")
        );
        let kept = rules("RULE:^CN=([^,]*),.*$/user-$1/");
        assert_eq!(kept.apply("CN=Bob,O=x").as_deref(), Some("user-Bob"));
    }

    #[test]
    fn first_matching_rule_wins_as_in_kafka() {
        let mapper = rules(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, \
             RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, \
             RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, \
             RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, \
             DEFAULT",
        );
        assert_eq!(
            mapper.apply("CN=Duke,OU=ServiceUsers,O=Org,C=US").as_deref(),
            Some("duke")
        );
        assert_eq!(
            mapper
                .apply("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US")
                .as_deref(),
            Some("duke@sme")
        );
        assert_eq!(
            mapper.apply("cn=duke,ou=sme,dc=mycp,dc=com").as_deref(),
            Some("DUKE@SME")
        );
        assert_eq!(
            mapper.apply("cN=duke,OU=JavaSoft,O=Sun Microsystems").as_deref(),
            Some("DUKE")
        );
        assert_eq!(
            mapper.apply("OU=JavaSoft,O=Sun Microsystems,C=US").as_deref(),
            Some("OU=JavaSoft,O=Sun Microsystems,C=US")
        );
    }

    #[test]
    fn no_matching_rule_gives_none() {
        let mapper = rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/");
        assert_eq!(mapper.apply("CN=alice,OU=eng,O=Example Corp,C=US"), None);
        assert_eq!(rules("").apply("CN=alice"), None);
    }

    #[test]
    fn escaped_commas_in_names_and_slashes_in_rules() {
        let mapper = rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT");
        assert_eq!(
            mapper.apply(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz").as_deref(),
            Some(r"Tkac\, Adam")
        );
        let slashes = rules(r"RULE:^CN=([^,]*)\/x$/a\/$1/");
        assert_eq!(slashes.apply("CN=b/x").as_deref(), Some("a/b"));
    }

    #[test]
    fn group_references_follow_java_and_kafka() {
        // Kafka: a reference past the pattern's groups is literal text.
        let literal = rules("RULE:^CN=(.*)$/$1@$4/");
        assert_eq!(literal.apply("CN=x").as_deref(), Some("x@$4"));
        // Java: digits extend the group number only while such a group exists.
        let extended = rules("RULE:^CN=(.*)$/$10/");
        assert_eq!(extended.apply("CN=x").as_deref(), Some("x0"));
        let named = rules("RULE:^CN=(?P<user>.*)$/${user}!/");
        assert_eq!(named.apply("CN=x").as_deref(), Some("x!"));
        let whole = rules("RULE:^CN=.*$/[$0]/");
        assert_eq!(whole.apply("CN=x").as_deref(), Some("[CN=x]"));
    }

    #[test]
    fn empty_rules_are_skipped_as_in_kafka() {
        assert_eq!(rules(",   , , ,      , , ,   ").rules.len(), 0);
        assert_eq!(rules(",,RULE://,,,DEFAULT,,").rules.len(), 2);
        assert_eq!(
            rules("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ")
                .rules
                .len(),
            3
        );
    }

    #[test]
    fn malformed_rules_are_refused_and_named() {
        for text in [
            "default",
            "DEFAUL",
            "DEFAULT/L",
            "DEFAULT/U",
            "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
            "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
            "RULE:^CN=(.*$/$1/",
            "RULE:^CN=.*$/$1/",
            "RULE:^CN=(.*)$/${nope}/",
            "RULE:^CN=(.*)$/$x/",
            "RULE:^CN=(?=a).*$/x/",
        ] {
            match PrincipalMappingRules::parse(text) {
                Err(TlsError::BadMappingRule { rule, .. }) => {
                    assert!(!rule.is_empty() && text.contains(&rule), "{text}: {rule}")
                }
                other => panic!("{text} should be refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn valid_kafka_rules_parse() {
        for text in [
            "DEFAULT",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
            "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
            "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
            "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
        ] {
            assert!(PrincipalMappingRules::parse(text).is_ok(), "{text}");
        }
    }
}
