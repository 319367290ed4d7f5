//! The mutator: frame `i` of a run is a function of (run seed, i) alone, so any frame can be
//! rebuilt from its index. Frames cycle through every advertised (api, version); each is a seed
//! left valid, mutated where its fields are (boundary integers and varints, lengths that lie,
//! duplicated or dropped array elements, tagged fields, header versions and api keys,
//! truncations, trailing bytes), havocked as raw bytes, or both.

use std::ops::Range;

use kafka_protocol::messages::ApiKey;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::seeds::{put_count, put_uvarint, Seed};
use crate::tokens::{Kind, Label, Token};

/// Mutated frames are cut to this size (the in-process board holds one).
pub const FRAME_BYTES_MAX: usize = 256 * 1024;

/// One generated frame (no size prefix) and how it was made.
#[derive(Debug, Clone)]
pub struct Mutant {
    pub seed: usize,
    pub bytes: Vec<u8>,
    pub how: Vec<&'static str>,
}

/// A replacement of `at` (in the seed's frame) by `with`.
#[derive(Debug, Clone)]
struct Edit {
    at: Range<usize>,
    with: Vec<u8>,
}

pub struct Mutator {
    seeds: Vec<Seed>,
    /// Seed indexes per (api, version), in table order.
    groups: Vec<Vec<usize>>,
}

impl Mutator {
    pub fn new(seeds: Vec<Seed>) -> Mutator {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (index, seed) in seeds.iter().enumerate() {
            let same = |g: &Vec<usize>| {
                let first = &seeds[g[0]];
                first.api == seed.api && first.version == seed.version
            };
            match groups.iter_mut().find(|g| same(g)) {
                Some(group) => group.push(index),
                None => groups.push(vec![index]),
            }
        }
        Mutator { seeds, groups }
    }

    pub fn seeds(&self) -> &[Seed] {
        &self.seeds
    }

    /// Frame `index` of the run `run_seed`.
    pub fn frame(&self, run_seed: u64, index: u64) -> Mutant {
        let mut rng = SmallRng::seed_from_u64(mix(run_seed, index));
        let group = &self.groups[(index % self.groups.len() as u64) as usize];
        let seed_index = *group.choose(&mut rng).expect("groups are not empty");
        let seed = &self.seeds[seed_index];
        let mut how = Vec::new();
        let roll = rng.gen_range(0..100);
        let mut bytes = if roll < 4 {
            how.push("valid");
            seed.frame.to_vec()
        } else if roll < 85 {
            structural(seed, &mut rng, &mut how)
        } else {
            seed.frame.to_vec()
        };
        if roll >= 70 {
            self.havoc(seed, &mut bytes, &mut rng, &mut how);
        }
        bytes.truncate(FRAME_BYTES_MAX);
        Mutant {
            seed: seed_index,
            bytes,
            how,
        }
    }

    /// Raw-byte mutations, mostly in the body so that the header still routes the frame.
    fn havoc(&self, seed: &Seed, bytes: &mut Vec<u8>, rng: &mut SmallRng, how: &mut Vec<&'static str>) {
        for _ in 0..rng.gen_range(1..=4) {
            if bytes.is_empty() {
                bytes.push(rng.gen());
            }
            let body_at = seed.body_at.min(bytes.len() - 1);
            let at = if rng.gen_bool(0.85) {
                rng.gen_range(body_at..bytes.len())
            } else {
                rng.gen_range(0..bytes.len())
            };
            how.push(havoc_one(self, bytes, at, rng));
        }
    }
}

fn havoc_one(mutator: &Mutator, bytes: &mut Vec<u8>, at: usize, rng: &mut SmallRng) -> &'static str {
    match rng.gen_range(0..8) {
        0 => {
            bytes[at] ^= 1 << rng.gen_range(0..8);
            "bit-flip"
        }
        1 => {
            bytes[at] = *[0u8, 1, 0x7f, 0x80, 0xff].choose(rng).expect("non-empty");
            "interesting-byte"
        }
        2 => {
            let extra: Vec<u8> = (0..rng.gen_range(1..=16)).map(|_| rng.gen()).collect();
            bytes.splice(at..at, extra);
            "insert-bytes"
        }
        3 => {
            let end = (at + rng.gen_range(1..=16)).min(bytes.len());
            bytes.drain(at..end);
            "delete-bytes"
        }
        4 => {
            let end = (at + rng.gen_range(1..=64)).min(bytes.len());
            let copy = bytes[at..end].to_vec();
            bytes.splice(at..at, copy);
            "duplicate-bytes"
        }
        5 => {
            bytes.truncate(at);
            "truncate"
        }
        6 => {
            let value = *[0i32, -1, 1, i32::MAX, i32::MIN, 0x7fff, 0x10000]
                .choose(rng)
                .expect("non-empty");
            let end = (at + 4).min(bytes.len());
            bytes.splice(at..end, value.to_be_bytes());
            "interesting-int32"
        }
        _ => {
            let other = &mutator.seeds[rng.gen_range(0..mutator.seeds.len())].frame;
            let from = rng.gen_range(0..other.len());
            bytes.truncate(at);
            bytes.extend_from_slice(&other[from..]);
            "splice"
        }
    }
}

/// 1 to 3 field-aware edits of the seed, applied from the back so that offsets hold.
fn structural(seed: &Seed, rng: &mut SmallRng, how: &mut Vec<&'static str>) -> Vec<u8> {
    let mut edits: Vec<Edit> = Vec::new();
    for _ in 0..rng.gen_range(1..=3) {
        let (name, new) = field_edit(seed, rng);
        let overlaps = new
            .iter()
            .any(|n| edits.iter().any(|e| ranges_touch(&e.at, &n.at)));
        if !overlaps && !new.is_empty() {
            how.push(name);
            edits.extend(new);
        }
    }
    apply(&seed.frame, edits)
}

fn ranges_touch(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start <= b.end && b.start <= a.end
}

fn apply(frame: &[u8], mut edits: Vec<Edit>) -> Vec<u8> {
    edits.sort_by_key(|e| std::cmp::Reverse(e.at.start));
    let mut bytes = frame.to_vec();
    for edit in edits {
        bytes.splice(edit.at, edit.with);
    }
    bytes
}

/// One field-aware mutation: its name and its edits.
fn field_edit(seed: &Seed, rng: &mut SmallRng) -> (&'static str, Vec<Edit>) {
    let pick = |rng: &mut SmallRng, wanted: &dyn Fn(&Token) -> bool| -> Option<Token> {
        let matching: Vec<&Token> = seed.tokens.iter().filter(|t| wanted(t)).collect();
        matching.choose(rng).map(|t| (*t).clone())
    };
    let end = seed.frame.len();
    let one = |name, at: Range<usize>, with: Vec<u8>| (name, vec![Edit { at, with }]);
    match rng.gen_range(0..20) {
        0..=3 => element_edit(seed, rng),
        4 | 5 => match pick(rng, &|t| t.label == Label::Partition) {
            Some(t) => one(
                "partition-index",
                t.at.clone(),
                partition_value(rng).to_be_bytes().to_vec(),
            ),
            None => int_edit(seed, rng),
        },
        6 | 7 => match pick(rng, &|t| is_varint(t.kind)) {
            Some(t) => one("uvarint", t.at.clone(), boundary_uvarint(t.value, rng)),
            None => int_edit(seed, rng),
        },
        8 | 9 => length_edit(seed, rng),
        10 | 11 => match pick(rng, &|t| t.kind == Kind::TaggedCount) {
            Some(t) => one("tagged-fields", t.at.clone(), tagged_fields(rng)),
            None => length_edit(seed, rng),
        },
        12 | 13 => header_edit(seed, rng),
        14 => match pick(rng, &|t| t.label == Label::WaitMs) {
            Some(t) => one("wait-ms", t.at.clone(), wait_value(rng).to_be_bytes().to_vec()),
            None => int_edit(seed, rng),
        },
        15 => {
            let cut = seed.tokens.choose(rng).map_or(0, |t| t.at.start);
            one("truncate-at-field", cut..end, Vec::new())
        }
        16 => {
            let extra: Vec<u8> = (0..rng.gen_range(1..=4)).map(|_| rng.gen()).collect();
            one("trailing-bytes", end..end, extra)
        }
        _ => int_edit(seed, rng),
    }
}

fn is_varint(kind: Kind) -> bool {
    matches!(kind, Kind::Uvarint | Kind::CompactLen | Kind::TaggedCount)
}

/// A body integer (not a wait) replaced by a boundary value of its width.
fn int_edit(seed: &Seed, rng: &mut SmallRng) -> (&'static str, Vec<Edit>) {
    let ints: Vec<&Token> = seed
        .tokens
        .iter()
        .filter(|t| matches!(t.kind, Kind::Int { width: 1 | 2 | 4 | 8 }) && t.label != Label::WaitMs)
        .filter(|t| t.at.start >= seed.body_at)
        .collect();
    let Some(token) = ints.choose(rng) else {
        return header_edit(seed, rng);
    };
    let with = boundary_int(token.at.len(), token.value, rng);
    (
        "int-boundary",
        vec![Edit {
            at: token.at.clone(),
            with,
        }],
    )
}

fn boundary_int(width: usize, value: i64, rng: &mut SmallRng) -> Vec<u8> {
    let common = [
        0i64,
        1,
        -1,
        -2,
        value + 1,
        value - 1,
        0x7f,
        0x80,
        0xff,
        0x7fff,
        0x8000,
        0xffff,
    ];
    let wide = [0x7fff_ffff, 0x8000_0000, 0xffff_ffff, i64::MAX, i64::MIN, 1 << 32];
    let value = if rng.gen_bool(0.7) {
        *common.choose(rng).expect("non-empty")
    } else if rng.gen_bool(0.8) {
        *wide.choose(rng).expect("non-empty")
    } else {
        rng.gen()
    };
    value.to_be_bytes()[8 - width..].to_vec()
}

fn partition_value(rng: &mut SmallRng) -> i32 {
    *[-1, -2, i32::MIN, 3, 4, 1000, i32::MAX, 0, 1, 2]
        .choose(rng)
        .expect("non-empty")
}

/// Waits stay under the hang bound: a longer wait would be the broker doing as told.
fn wait_value(rng: &mut SmallRng) -> i32 {
    *[-1, 0, 1, 10, 50, 300, i32::MIN].choose(rng).expect("non-empty")
}

/// Boundary uvarints, some overlong or unterminated.
fn boundary_uvarint(value: i64, rng: &mut SmallRng) -> Vec<u8> {
    let mut out = Vec::new();
    match rng.gen_range(0..10) {
        0 => out.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x00]), // 0, overlong
        1 => out.extend_from_slice(&[0xff; 6]),                      // never terminates
        2 => out.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x7f]), // beyond u32
        _ => {
            let values = [
                0u64,
                1,
                2,
                value as u64 + 1,
                (value as u64).saturating_sub(1),
                0x7f,
                0x80,
                0x3fff,
                0x4000,
                1 << 31,
                (1 << 31) - 1,
                (1 << 32) - 1,
            ];
            put_uvarint(&mut out, *values.choose(rng).expect("non-empty"));
        }
    }
    out
}

/// A length prefix that lies about its payload, or a payload cut short.
fn length_edit(seed: &Seed, rng: &mut SmallRng) -> (&'static str, Vec<Edit>) {
    let lengths: Vec<(usize, &Token)> = seed
        .tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| matches!(t.kind, Kind::StrLen16 | Kind::BytesLen32 | Kind::CompactLen))
        .collect();
    let Some(&(index, token)) = lengths.choose(rng) else {
        return int_edit(seed, rng);
    };
    if rng.gen_bool(0.3) {
        if let Some(payload) = seed.tokens.get(index + 1).filter(|p| !p.at.is_empty()) {
            let cut = rng.gen_range(payload.at.start..payload.at.end);
            return (
                "payload-cut",
                vec![Edit {
                    at: cut..payload.at.end,
                    with: Vec::new(),
                }],
            );
        }
    }
    let with = match token.kind {
        Kind::StrLen16 => boundary_int(2, token.value, rng),
        Kind::BytesLen32 => boundary_int(4, token.value, rng),
        _ => boundary_uvarint(token.value, rng),
    };
    (
        "length",
        vec![Edit {
            at: token.at.clone(),
            with,
        }],
    )
}

/// Array elements duplicated (once or many times), dropped, or a count that lies.
fn element_edit(seed: &Seed, rng: &mut SmallRng) -> (&'static str, Vec<Edit>) {
    let Some(element) = seed.elements.choose(rng) else {
        return int_edit(seed, rng);
    };
    let token = &seed.tokens[element.count];
    let count = match token.kind {
        Kind::Int { .. } => token.value,
        _ => token.value - 1,
    };
    let span = element.span.clone();
    let recount = |n: i64| {
        let mut with = Vec::new();
        put_count(&mut with, token.kind, n);
        Edit {
            at: token.at.clone(),
            with,
        }
    };
    match rng.gen_range(0..6) {
        0 | 1 => {
            let insert = Edit {
                at: span.end..span.end,
                with: seed.frame[span].to_vec(),
            };
            ("duplicate-element", vec![recount(count + 1), insert])
        }
        2 => {
            let copies = rng.gen_range(2..=64);
            let with = seed.frame[span.clone()].repeat(copies);
            let insert = Edit {
                at: span.end..span.end,
                with,
            };
            (
                "duplicate-element-many",
                vec![recount(count + copies as i64), insert],
            )
        }
        3 => (
            "drop-element",
            vec![
                recount(count - 1),
                Edit {
                    at: span,
                    with: Vec::new(),
                },
            ],
        ),
        _ => {
            let lie = *[
                0,
                -1,
                count + 1,
                count - 1,
                0x7fff_ffff,
                0x1000_0000,
                i32::MIN as i64,
            ]
            .choose(rng)
            .expect("non-empty");
            ("array-count", vec![recount(lie)])
        }
    }
}

/// A tagged-field section of 1-3 fields, some with sizes that lie.
fn tagged_fields(rng: &mut SmallRng) -> Vec<u8> {
    let count = rng.gen_range(1..=3u64);
    let mut out = Vec::new();
    put_uvarint(&mut out, count);
    for _ in 0..count {
        let tag = *[0u64, 1, 2, 3, 7, 0x7fff_ffff, (1 << 32) - 1]
            .choose(rng)
            .expect("non-empty");
        let payload: Vec<u8> = (0..rng.gen_range(0..=8)).map(|_| rng.gen()).collect();
        let size = if rng.gen_bool(0.7) {
            payload.len() as u64
        } else {
            *[payload.len() as u64 + 1, (1 << 31) - 1, (1 << 32) - 1]
                .choose(rng)
                .expect("non-empty")
        };
        put_uvarint(&mut out, tag);
        put_uvarint(&mut out, size);
        out.extend_from_slice(&payload);
    }
    out
}

/// The header: another version (so the header or body is parsed at the wrong flexibility),
/// versions out of range, other or unknown api keys, a client id length that lies.
fn header_edit(seed: &Seed, rng: &mut SmallRng) -> (&'static str, Vec<Edit>) {
    let range = seed.api.valid_versions();
    match rng.gen_range(0..4) {
        0 | 1 => {
            let version = *[
                seed.version + 1,
                seed.version - 1,
                range.max + 1,
                -1,
                i16::MAX,
                rng.gen_range(0..=range.max),
            ]
            .choose(rng)
            .expect("non-empty");
            (
                "header-version",
                vec![Edit {
                    at: 2..4,
                    with: version.to_be_bytes().to_vec(),
                }],
            )
        }
        2 => {
            let key = if rng.gen_bool(0.7) {
                laminar_protocol::codec::SUPPORTED_APIS
                    .choose(rng)
                    .expect("non-empty")
                    .key as i16
            } else {
                *[-1i16, 67, 1000, i16::MAX, ApiKey::EndTxn as i16]
                    .choose(rng)
                    .expect("non-empty")
            };
            (
                "header-api-key",
                vec![Edit {
                    at: 0..2,
                    with: key.to_be_bytes().to_vec(),
                }],
            )
        }
        _ => {
            let client_id = seed
                .tokens
                .iter()
                .find(|t| t.kind == Kind::StrLen16 && t.at.start == 8);
            let Some(token) = client_id else {
                return (
                    "header-version",
                    vec![Edit {
                        at: 2..4,
                        with: (-1i16).to_be_bytes().to_vec(),
                    }],
                );
            };
            let with = boundary_int(2, token.value, rng);
            (
                "header-client-id",
                vec![Edit {
                    at: token.at.clone(),
                    with,
                }],
            )
        }
    }
}

/// SplitMix64 of the run seed and the frame index: neighbouring frames get unrelated streams.
fn mix(run_seed: u64, index: u64) -> u64 {
    let mut z = run_seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mutator() -> Mutator {
        Mutator::new(crate::seeds::all().unwrap())
    }

    #[test]
    fn frames_are_a_function_of_seed_and_index() {
        let m = mutator();
        for index in [0, 1, 77, 123_456] {
            assert_eq!(m.frame(7, index).bytes, m.frame(7, index).bytes);
        }
        let differ = (0..200)
            .filter(|&i| m.frame(7, i).bytes != m.frame(8, i).bytes)
            .count();
        assert!(differ > 150, "{differ} of 200 frames differ between run seeds");
    }

    #[test]
    fn every_api_version_comes_round_and_every_kind_of_mutation_occurs() {
        let m = mutator();
        let groups = m.groups.len() as u64;
        let mut seen = std::collections::BTreeSet::new();
        let mut hows = std::collections::BTreeSet::new();
        for index in 0..groups * 40 {
            let mutant = m.frame(1, index);
            let seed = &m.seeds[mutant.seed];
            seen.insert((seed.api as i16, seed.version));
            hows.extend(mutant.how);
        }
        assert_eq!(seen.len() as u64, groups);
        for how in [
            "valid",
            "duplicate-element",
            "drop-element",
            "array-count",
            "partition-index",
            "uvarint",
            "tagged-fields",
            "header-version",
            "length",
            "splice",
            "bit-flip",
            "wait-ms",
        ] {
            assert!(hows.contains(how), "no {how} in {hows:?}");
        }
    }

    #[test]
    fn a_duplicated_element_is_still_a_valid_request() {
        let seed = crate::seeds::build(ApiKey::Produce, 9, 0).unwrap();
        let element = &seed.elements[0];
        let token = &seed.tokens[element.count];
        // v9 is flexible: a compact array holds its count + 1
        let count = token.value - 1;
        let grown = crate::seeds::with_duplicate(&seed.frame, token, count + 1, element.span.clone());
        let mut body = bytes::Bytes::from(grown[seed.body_at..].to_vec());
        let request = kafka_protocol::messages::RequestKind::decode(ApiKey::Produce, &mut body, 9).unwrap();
        let kafka_protocol::messages::RequestKind::Produce(produce) = request else {
            panic!()
        };
        assert_eq!(produce.topic_data.len(), 3, "topics: the first one twice");
        assert_eq!(produce.topic_data[0].name, produce.topic_data[1].name);
    }
}
