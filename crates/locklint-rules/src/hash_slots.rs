//! Redis Cluster hash slots of key templates: which part of a key its slot is computed from
//! (the first non-empty `{hash tag}`, else the whole key), and whether two templates can be
//! told to land in different slots. Holes are values the code fills in at run time; a hole
//! is assumed to hold no braces, except one that starts the key (a prefix chosen elsewhere,
//! which may carry the tag itself).

use locklint_ir::{KeyRef, Part};

/// One piece of a key template, a character at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Char(char),
    /// A value filled in at run time, with its name when it has one.
    Hole(Option<String>),
}

/// What a key's slot is computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hashed {
    /// The key's first non-empty `{..}`.
    Tag(Vec<Piece>),
    /// The whole key (it has no hash tag).
    Whole(Vec<Piece>),
    /// Cannot be told: the key starts with a value chosen elsewhere, or is only a value.
    Unknown,
}

fn pieces(key: &KeyRef) -> Vec<Piece> {
    let mut out = Vec::new();
    for p in &key.parts {
        match p {
            Part::Lit(s) => out.extend(s.chars().map(Piece::Char)),
            Part::Hole(n) => out.push(Piece::Hole(n.clone())),
            Part::Const(n) => out.push(Piece::Hole(Some(n.clone()))),
        }
    }
    out
}

fn hashed(key: &KeyRef) -> Hashed {
    let p = pieces(key);
    if !matches!(p.first(), Some(Piece::Char(_))) {
        return Hashed::Unknown;
    }
    let Some(open) = p.iter().position(|x| *x == Piece::Char('{')) else {
        return Hashed::Whole(p);
    };
    match p[open + 1..].iter().position(|x| *x == Piece::Char('}')) {
        Some(len) if len > 0 => Hashed::Tag(p[open + 1..open + 1 + len].to_vec()),
        _ => Hashed::Whole(p),
    }
}

/// The text of a template without holes, if it has none.
fn text(p: &[Piece]) -> Option<String> {
    p.iter()
        .map(|x| match x {
            Piece::Char(c) => Some(*c),
            Piece::Hole(_) => None,
        })
        .collect()
}

/// Whether two templates can produce the same text: their literal beginnings and endings
/// agree up to their first and last holes (identical templates always can).
fn may_be_equal(a: &[Piece], b: &[Piece]) -> bool {
    if a == b {
        return true;
    }
    if let (Some(x), Some(y)) = (text(a), text(b)) {
        return x == y;
    }
    let agree = |mut x: Box<dyn Iterator<Item = &Piece> + '_>,
                 mut y: Box<dyn Iterator<Item = &Piece> + '_>| loop {
        match (x.next(), y.next()) {
            (Some(Piece::Char(c)), Some(Piece::Char(d))) if c == d => continue,
            (Some(Piece::Char(_)), Some(Piece::Char(_))) => return false,
            (Some(Piece::Hole(_)), _) | (_, Some(Piece::Hole(_))) => return true,
            // one ends where the other goes on with text: only a hole could fill it
            (None, None) => return true,
            _ => return false,
        }
    };
    agree(Box::new(a.iter()), Box::new(b.iter()))
        && agree(Box::new(a.iter().rev()), Box::new(b.iter().rev()))
}

/// The Redis Cluster slot of a key: CRC16 (XMODEM) of what it hashes, modulo 16384.
pub fn slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&c| c == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&c| c == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    let mut crc: u16 = 0;
    for &b in hashed {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc & 0x3fff
}

/// Whether two keys are known to hash to different slots: constant keys whose slots differ,
/// or templates whose hashed parts (tags, or whole keys without one) cannot be equal.
pub fn different_slots(a: &KeyRef, b: &KeyRef) -> bool {
    if let (Some(x), Some(y)) = (a.constant_text(), b.constant_text()) {
        return slot(x.as_bytes()) != slot(y.as_bytes());
    }
    match (hashed(a), hashed(b)) {
        (Hashed::Unknown, _) | (_, Hashed::Unknown) => false,
        (Hashed::Tag(x) | Hashed::Whole(x), Hashed::Tag(y) | Hashed::Whole(y)) => {
            !may_be_equal(&x, &y)
        }
    }
}

/// Whether a key's slot is computed from a hash tag (`lock:{order}:1`), as far as its template
/// shows; `None` when it cannot be told.
pub fn has_hash_tag(key: &KeyRef) -> Option<bool> {
    match hashed(key) {
        Hashed::Tag(_) => Some(true),
        Hashed::Whole(_) => Some(false),
        Hashed::Unknown => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(parts: &[Option<&str>]) -> KeyRef {
        let mut k = KeyRef::default();
        for p in parts {
            match p {
                Some(s) => k.push(Part::Lit(s.to_string())),
                None => k.parts.push(Part::Hole(Some("id".to_string()))),
            }
        }
        k
    }

    #[test]
    fn slots_of_known_keys() {
        // the values Redis documents and `CLUSTER KEYSLOT` answers
        assert_eq!(slot(b"123456789"), 0x31c3 & 0x3fff);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
    }

    #[test]
    fn templates_without_a_common_tag_differ() {
        let order = t(&[Some("lock:order:"), None]);
        let fence = t(&[Some("lock:fence:"), None]);
        assert!(different_slots(&order, &fence));
        // a common tag, in either position
        let a = t(&[Some("lock:{order}:"), None]);
        let b = t(&[Some("fence:{order}")]);
        assert!(!different_slots(&a, &b));
        // the same value inside braces
        let a = t(&[Some("lock:{"), None, Some("}")]);
        let b = t(&[Some("fence:{"), None, Some("}")]);
        assert!(!different_slots(&a, &b));
        // tags that differ
        let a = t(&[Some("lock:{order}:"), None]);
        let b = t(&[Some("lock:{fence}:"), None]);
        assert!(different_slots(&a, &b));
        // a tag of one against the whole other key
        let a = t(&[Some("lock:{order}:"), None]);
        assert!(different_slots(&a, &fence));
    }

    #[test]
    fn what_cannot_be_told_is_not_different() {
        // a prefix chosen elsewhere may carry the tag
        let a = t(&[None, Some(":lock")]);
        let b = t(&[None, Some(":fence")]);
        assert!(!different_slots(&a, &b));
        // a tag that is a value may equal a literal one
        let a = t(&[Some("lock:{"), None, Some("}")]);
        let b = t(&[Some("fence:{order}")]);
        assert!(!different_slots(&a, &b));
        // one template, two values: the values may be equal
        let mut a = t(&[Some("lock:")]);
        a.parts.push(Part::Hole(Some("a".into())));
        let mut b = t(&[Some("lock:")]);
        b.parts.push(Part::Hole(Some("b".into())));
        assert!(!different_slots(&a, &b));
        // constant keys that happen to share a slot
        assert!(!different_slots(
            &KeyRef::lit("{x}lock:a"),
            &KeyRef::lit("{x}lock:b")
        ));
        assert!(different_slots(
            &KeyRef::lit("lock:a"),
            &KeyRef::lit("lock:b")
        ));
    }

    #[test]
    fn hash_tags() {
        assert_eq!(has_hash_tag(&t(&[Some("lock:{order}:"), None])), Some(true));
        assert_eq!(has_hash_tag(&t(&[Some("lock:order:"), None])), Some(false));
        assert_eq!(has_hash_tag(&t(&[Some("lock:{}:x")])), Some(false));
        assert_eq!(has_hash_tag(&t(&[None, Some(":x")])), None);
    }
}
