//! A certificate's subject written as Java's `X500Principal.getName()` writes it (RFC 2253),
//! the text Kafka's `ssl.principal.mapping.rules` and ACLs for TLS users are written against.
//!
//! As Java: the most specific RDN first (the reverse of the certificate's order); the
//! keywords CN, C, L, ST, O, OU, STREET, DC and UID, other types as a dotted OID with the
//! value as `#` and the hex of its DER encoding (e.g. emailAddress is
//! `1.2.840.113549.1.9.1=#16...`); string values with `, = + < > # ; " \` escaped by a
//! backslash, and leading or trailing spaces too; values that are not directory strings in
//! hex, as for unknown types.

use x509_parser::asn1_rs::{Any, Class, Header, Tag};
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::{AttributeTypeAndValue, X509Name};

use crate::tls_error::TlsError;

/// The RFC 2253 keywords Java emits, by OID; every other type is written as its OID.
const RFC2253_KEYWORDS: [(&str, &str); 9] = [
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// Characters Java's RFC 2253 writer escapes with a backslash wherever they appear.
const ESCAPED_CHARACTERS: &str = ",=+<>#;\"\\";

/// The subject of a DER certificate in RFC 2253 form, e.g. `CN=alice,OU=eng,O=Example
/// Corp,C=US`, exactly as a Kafka broker would name the client.
pub fn subject_dn(certificate_der: &[u8]) -> Result<String, TlsError> {
    let (_, certificate) = X509Certificate::from_der(certificate_der)
        .map_err(|error| TlsError::BadSubject(error.to_string()))?;
    Ok(rfc2253_name(certificate.subject()))
}

fn rfc2253_name(name: &X509Name<'_>) -> String {
    let mut relative_names: Vec<String> = name
        .iter_rdn()
        .map(|relative_name| {
            relative_name
                .iter()
                .map(rfc2253_attribute)
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    relative_names.reverse();
    relative_names.join(",")
}

fn rfc2253_attribute(attribute: &AttributeTypeAndValue<'_>) -> String {
    let oid = attribute.attr_type().to_id_string();
    let keyword = RFC2253_KEYWORDS
        .iter()
        .find(|(known_oid, _)| *known_oid == oid)
        .map(|(_, keyword)| *keyword);
    match (keyword, directory_string(attribute.attr_value())) {
        (Some(keyword), Some(text)) => format!("{keyword}={}", escape_value(&text)),
        (keyword, _) => format!(
            "{}=#{}",
            keyword.unwrap_or(&oid),
            lower_hex(&der_encoding(attribute.attr_value()))
        ),
    }
}

/// The value as text when it is one of the string types Java writes as text, decoded as
/// Java decodes it (byte strings as ISO-8859-1, BMPString as UTF-16).
fn directory_string(value: &Any<'_>) -> Option<String> {
    if value.header.class() != Class::Universal || value.header.is_constructed() {
        return None;
    }
    let bytes = value.data;
    match value.header.tag() {
        Tag::Utf8String => Some(String::from_utf8_lossy(bytes).into_owned()),
        Tag::PrintableString | Tag::T61String | Tag::Ia5String | Tag::GeneralString => {
            Some(bytes.iter().copied().map(char::from).collect())
        }
        Tag::BmpString => {
            let units = bytes.chunks_exact(2).map(|pair| match pair {
                [high, low] => u16::from_be_bytes([*high, *low]),
                _ => 0xfffd,
            });
            Some(
                char::decode_utf16(units)
                    .map(|unit| unit.unwrap_or(char::REPLACEMENT_CHARACTER))
                    .collect(),
            )
        }
        _ => None,
    }
}

/// Java's escaping: backslash before each special character, then before each leading and
/// trailing space or carriage return.
fn escape_value(text: &str) -> String {
    let mut escaped = Vec::with_capacity(text.len());
    for character in text.chars() {
        if ESCAPED_CHARACTERS.contains(character) {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    let is_blank = |character: &&char| **character == ' ' || **character == '\r';
    let leading = escaped.iter().take_while(is_blank).count();
    let trailing = escaped.iter().rev().take_while(is_blank).count();
    let mut written = String::with_capacity(escaped.len() + 2);
    for (position, character) in escaped.iter().enumerate() {
        if position < leading || position + trailing >= escaped.len() {
            written.push('\\');
        }
        written.push(*character);
    }
    written
}

/// The value's DER encoding (identifier, length, contents), what Java writes after `#`.
fn der_encoding(value: &Any<'_>) -> Vec<u8> {
    let mut encoded = Vec::with_capacity(value.data.len() + 8);
    match value.header.raw_tag() {
        Some(raw_tag) => encoded.extend_from_slice(raw_tag),
        None => push_identifier(&mut encoded, &value.header),
    }
    push_length(&mut encoded, value.data.len());
    encoded.extend_from_slice(value.data);
    encoded
}

fn push_identifier(encoded: &mut Vec<u8>, header: &Header<'_>) {
    let class_bits = (header.class() as u8) << 6;
    let constructed_bit = if header.is_constructed() { 0x20 } else { 0 };
    let Tag(number) = header.tag();
    match u8::try_from(number) {
        Ok(low_number) if low_number < 0x1f => encoded.push(class_bits | constructed_bit | low_number),
        _ => {
            encoded.push(class_bits | constructed_bit | 0x1f);
            let digits: Vec<u8> = (0..5)
                .rev()
                .map(|group| ((number >> (7 * group)) & 0x7f) as u8)
                .skip_while(|digit| *digit == 0)
                .collect();
            let last = digits.len().saturating_sub(1);
            encoded.extend(digits.iter().enumerate().map(|(position, digit)| {
                if position == last {
                    *digit
                } else {
                    digit | 0x80
                }
            }));
        }
    }
}

fn push_length(encoded: &mut Vec<u8>, length: usize) {
    match u8::try_from(length) {
        Ok(short) if short < 0x80 => encoded.push(short),
        _ => {
            let bytes = length.to_be_bytes();
            let significant: Vec<u8> = bytes.iter().copied().skip_while(|byte| *byte == 0).collect();
            let count = u8::try_from(significant.len()).unwrap_or(0);
            encoded.push(0x80 | count);
            encoded.extend_from_slice(&significant);
        }
    }
}

fn lower_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_java_does() {
        assert_eq!(escape_value("Example Corp"), "Example Corp");
        assert_eq!(escape_value("Doe, John"), r"Doe\, John");
        assert_eq!(
            escape_value(r#"a+b=c<d>e#f;g"h\i"#),
            r#"a\+b\=c\<d\>e\#f\;g\"h\\i"#
        );
        assert_eq!(escape_value("#hash"), r"\#hash");
        assert_eq!(escape_value("  padded "), r"\ \ padded\ ");
        assert_eq!(escape_value("   "), r"\ \ \ ");
        assert_eq!(escape_value("naïve 日本"), "naïve 日本");
        assert_eq!(escape_value(""), "");
    }

    #[test]
    fn der_lengths_and_tags_encode_canonically() {
        let mut encoded = Vec::new();
        push_length(&mut encoded, 5);
        push_length(&mut encoded, 200);
        push_length(&mut encoded, 300);
        assert_eq!(encoded, [5, 0x81, 200, 0x82, 0x01, 0x2c]);
        let mut identifier = Vec::new();
        push_identifier(&mut identifier, &Header::new_simple(Tag::Ia5String));
        push_identifier(&mut identifier, &Header::new_simple(Tag(200)));
        assert_eq!(identifier, [0x16, 0x1f, 0x81, 0x48]);
    }
}
