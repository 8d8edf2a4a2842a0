//! The shape of a file's intermediate form ([`of`]): a hash of the form as the analysis cache
//! stores it, with every offset into the file replaced by its rank among them, so that text
//! added or removed where the form records nothing leaves it as it was.
//!
//! The form is serialised twice through [`Shaper`], a `serde` serialiser that writes no text:
//! once to gather the offsets (the ends of each span, `{start, end}`; the file side of each
//! point of a text map, `{points: [(text, file), ..]}`; a function's `item_slot`), once to hash
//! every value, an offset as its rank.

use crate::ir::FileIr;
use serde::ser::{self, Serialize};
use std::hash::Hasher;

/// A hash of a file's intermediate form as the analysis cache stores it (without its text),
/// with every offset into the file (each span's ends, each point of a literal's text map, where
/// a fix adds an item) replaced by its rank among them: text added or removed where the form
/// records nothing (a comment, blank lines, code the front-ends keep nothing of) moves the
/// offsets after it without reordering them, and leaves the hash as it was. Everything else,
/// the names, keys, operations and embedded texts, must be the same. `None` when the form does
/// not serialise. The form must be placed first in the project ([`FileIr::place_at`]`(0)`).
pub(crate) fn of(ir: &FileIr) -> Option<u64> {
    let mut offsets = Vec::new();
    ir.serialize(Shaper {
        out: &mut Out::Gather(&mut offsets),
        at: At::Value,
    })
    .ok()?;
    offsets.sort_unstable();
    offsets.dedup();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    ir.serialize(Shaper {
        out: &mut Out::Hash {
            hasher: &mut hasher,
            ranks: &offsets,
        },
        at: At::Value,
    })
    .ok()?;
    Some(hasher.finish())
}

/// Where a [`Shaper`]'s output goes.
enum Out<'a> {
    /// The offsets, in the order met.
    Gather(&'a mut Vec<u64>),
    /// A hash of every value, an offset as its rank among `ranks` (sorted).
    Hash {
        hasher: &'a mut std::collections::hash_map::DefaultHasher,
        ranks: &'a [u64],
    },
}

impl Out<'_> {
    fn bytes(&mut self, tag: u8, bytes: &[u8]) {
        if let Out::Hash { hasher, .. } = self {
            hasher.write_u8(tag);
            hasher.write_usize(bytes.len());
            hasher.write(bytes);
        }
    }

    fn number(&mut self, tag: u8, n: u64) {
        if let Out::Hash { hasher, .. } = self {
            hasher.write_u8(tag);
            hasher.write_u64(n);
        }
    }

    fn offset(&mut self, n: u64) {
        match self {
            Out::Gather(offsets) => offsets.push(n),
            Out::Hash { hasher, ranks } => {
                hasher.write_u8(b'o');
                hasher.write_usize(ranks.binary_search(&n).unwrap_or(usize::MAX));
            }
        }
    }
}

/// What the value being serialised is, by where it stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    Value,
    /// An offset, if it is a number.
    Offset,
    /// A text map's points: pairs whose second number is an offset.
    Points,
    /// One point: its second element is an offset.
    Point,
}

/// The serialiser of [`of`] (and of every compound value inside).
struct Shaper<'s, 'a> {
    out: &'s mut Out<'a>,
    at: At,
}

/// A value that does not serialise.
#[derive(Debug)]
struct Unshaped(String);

impl std::fmt::Display for Unshaped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unshaped {}

impl ser::Error for Unshaped {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Unshaped(msg.to_string())
    }
}

/// A compound value being serialised: its elements so far, and what its fields are.
struct Compound<'s, 'a> {
    out: &'s mut Out<'a>,
    at: At,
    /// Elements serialised so far.
    index: usize,
    /// Fields of a struct of two: `start` and `end` are a span's ends.
    pair: bool,
    /// Fields of a struct of one: `points` is a text map's.
    single: bool,
}

impl<'s, 'a> Shaper<'s, 'a> {
    /// The serialiser of a value that stands for nothing but itself.
    fn plain(self) -> Shaper<'s, 'a> {
        Shaper {
            out: self.out,
            at: At::Value,
        }
    }

    /// The serialiser of the value of an enum's `variant`, named first.
    fn variant(self, variant: &str) -> Shaper<'s, 'a> {
        self.out.bytes(b'V', variant.as_bytes());
        self.plain()
    }

    fn compound(self, tag: u8, len: Option<usize>) -> Compound<'s, 'a> {
        self.out.number(tag, len.map_or(u64::MAX, |l| l as u64));
        Compound {
            out: self.out,
            at: self.at,
            index: 0,
            pair: len == Some(2),
            single: len == Some(1),
        }
    }

    fn unsigned(self, n: u64) {
        if self.at == At::Offset {
            self.out.offset(n);
        } else {
            self.out.number(b'u', n);
        }
    }
}

/// Serialisers of narrow numbers that serialise them widened.
macro_rules! widened {
    ($($method:ident: $narrow:ty => $wide_method:ident($wide:ty)),*) => {$(
        fn $method(self, v: $narrow) -> Result<(), Unshaped> {
            self.$wide_method(<$wide>::from(v))
        }
    )*};
}

impl<'s, 'a> ser::Serializer for Shaper<'s, 'a> {
    type Ok = ();
    type Error = Unshaped;
    type SerializeSeq = Compound<'s, 'a>;
    type SerializeTuple = Compound<'s, 'a>;
    type SerializeTupleStruct = Compound<'s, 'a>;
    type SerializeTupleVariant = Compound<'s, 'a>;
    type SerializeMap = Compound<'s, 'a>;
    type SerializeStruct = Compound<'s, 'a>;
    type SerializeStructVariant = Compound<'s, 'a>;

    widened!(
        serialize_i8: i8 => serialize_i64(i64),
        serialize_i16: i16 => serialize_i64(i64),
        serialize_i32: i32 => serialize_i64(i64),
        serialize_u8: u8 => serialize_u64(u64),
        serialize_u16: u16 => serialize_u64(u64),
        serialize_u32: u32 => serialize_u64(u64),
        serialize_f32: f32 => serialize_f64(f64)
    );

    fn serialize_bool(self, v: bool) -> Result<(), Unshaped> {
        self.out.number(b'b', u64::from(v));
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Unshaped> {
        match u64::try_from(v) {
            Ok(n) => self.unsigned(n),
            Err(_) => self.out.number(b'i', v as u64),
        }
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Unshaped> {
        self.unsigned(v);
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Unshaped> {
        self.out.number(b'f', v.to_bits());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Unshaped> {
        self.out.number(b'c', u64::from(v));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Unshaped> {
        self.out.bytes(b's', v.as_bytes());
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Unshaped> {
        self.out.bytes(b'y', v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Unshaped> {
        self.out.number(b'n', 0);
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Unshaped> {
        self.out.number(b'S', 0);
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Unshaped> {
        self.out.number(b'(', 0);
        Ok(())
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result<(), Unshaped> {
        self.out.bytes(b'U', name.as_bytes());
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Unshaped> {
        self.out.bytes(b'v', variant.as_bytes());
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Unshaped> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Unshaped> {
        value.serialize(self.variant(variant))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'s, 'a>, Unshaped> {
        Ok(self.compound(b'[', len))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'s, 'a>, Unshaped> {
        Ok(self.compound(b'[', Some(len)))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'s, 'a>, Unshaped> {
        Ok(self.compound(b'[', Some(len)))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'s, 'a>, Unshaped> {
        Ok(self.variant(variant).compound(b'[', Some(len)))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'s, 'a>, Unshaped> {
        Ok(self.plain().compound(b'{', len))
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'s, 'a>, Unshaped> {
        Ok(self.plain().compound(b'{', Some(len)))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'s, 'a>, Unshaped> {
        ser::Serializer::serialize_struct(self.variant(variant), "", len)
    }
}

impl Compound<'_, '_> {
    /// An element of a sequence or tuple: a text map's points each hold an offset second.
    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Unshaped> {
        let at = match self.at {
            At::Points => At::Point,
            At::Point if self.index == 1 => At::Offset,
            _ => At::Value,
        };
        self.index += 1;
        value.serialize(Shaper { out: self.out, at })
    }

    /// A field of a struct: the ends of a span, a text map's points and a function's
    /// `item_slot` are offsets.
    fn field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Unshaped> {
        self.out.bytes(b'k', key.as_bytes());
        let at = match key {
            "start" | "end" if self.pair => At::Offset,
            "points" if self.single => At::Points,
            "item_slot" => At::Offset,
            _ => At::Value,
        };
        value.serialize(Shaper { out: self.out, at })
    }

    fn end(self) -> Result<(), Unshaped> {
        self.out.number(b']', 0);
        Ok(())
    }
}

macro_rules! elements {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Unshaped;
            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Unshaped> {
                self.element(value)
            }
            fn end(self) -> Result<(), Unshaped> {
                Compound::end(self)
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Unshaped;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Unshaped> {
        key.serialize(Shaper {
            out: self.out,
            at: At::Value,
        })
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Unshaped> {
        value.serialize(Shaper {
            out: self.out,
            at: At::Value,
        })
    }
    fn end(self) -> Result<(), Unshaped> {
        Compound::end(self)
    }
}

macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Unshaped;
            fn serialize_field<T: ?Sized + Serialize>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Unshaped> {
                self.field(key, value)
            }
            fn end(self) -> Result<(), Unshaped> {
                Compound::end(self)
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;
    use std::path::PathBuf;

    fn form(text: &str) -> FileIr {
        let file = SourceFile::new(PathBuf::from("/p/src/locks.rs"), text.to_string());
        let mut ir = crate::engine::analyze_file(0, file);
        ir.place_at(0);
        ir
    }

    const HELPER: &str = "pub async fn release(con: &mut redis::aio::MultiplexedConnection, key: &str) {\n    let _: () = redis::cmd(\"DEL\").arg(key).query_async(con).await.unwrap();\n}\n\npub const KEY: &str = \"lock:report\";\n";

    #[test]
    fn text_the_form_keeps_nothing_of_leaves_the_shape() {
        let before = of(&form(HELPER)).unwrap();
        // a comment above everything, and blank lines between the items: every offset moves
        let moved = format!("// The locks.\n{}", HELPER.replace("}\n\n", "}\n\n\n\n"));
        assert_eq!(of(&form(&moved)), Some(before));
        assert_eq!(
            of(&form(HELPER)),
            Some(before),
            "the same text, the same shape"
        );
    }

    #[test]
    fn what_the_form_keeps_changes_the_shape() {
        let before = of(&form(HELPER)).unwrap();
        for edited in [
            HELPER.replace("lock:report", "lock:invoice"),
            HELPER.replace("\"DEL\"", "\"UNLINK\""),
            HELPER.replace("release", "unlock"),
            format!("{HELPER}\npub fn other() {{}}\n"),
            // the items swapped: the same pieces, the offsets in another order
            format!(
                "pub const KEY: &str = \"lock:report\";\n\n{}",
                &HELPER[..HELPER.find("\npub const").unwrap()]
            ),
        ] {
            assert_ne!(of(&form(&edited)), Some(before), "{edited}");
        }
    }
}
