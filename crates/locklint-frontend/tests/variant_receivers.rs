//! A receiver bound by an enum variant's pattern is typed from the enum's declaration, and a
//! call's arguments say which parameters of the caller they are made of.

use locklint_frontend::rust::analyze;
use locklint_ir::source::SourceFile;
use locklint_ir::{ArgParams, Call, Event, FileIr, Receiver};
use std::path::PathBuf;

const SOURCE: &str = r#"
use std::sync::Arc;

pub enum Store {
    Local(LocalStore),
    Redis(Arc<backend::RedisStore>),
    Pair(LocalStore, LocalStore),
}

impl Store {
    pub async fn key_delete(&self, key: impl Into<Key>) {
        match self {
            Store::Local(store) => store.key_delete(key.into().as_bytes()).await,
            Store::Redis(store) => store.key_delete(key.into().as_bytes()).await,
            Store::Pair(a, _) => a.key_delete(b"").await,
        }
    }

    pub async fn release_lock(&self, prefix: u8, key: &[u8]) {
        let other = prefix;
        self.key_delete(Key::build(prefix, key)).await;
        self.key_delete(Key::build(other, b"x")).await;
    }

    pub async fn redis_only(&self, key: &[u8]) {
        if let Self::Redis(inner) = self {
            inner.key_delete(key).await;
        }
    }
}
"#;

fn ir() -> FileIr {
    let file = SourceFile::new(PathBuf::from("store.rs"), SOURCE.to_string());
    analyze(0, file)
}

fn calls<'a>(ir: &'a FileIr, func: &str) -> Vec<&'a Call> {
    ir.functions
        .iter()
        .filter(|f| f.name == func)
        .flat_map(|f| f.events.iter())
        .filter_map(|e| match e {
            Event::Call(c) if c.name == "key_delete" => Some(&**c),
            _ => None,
        })
        .collect()
}

fn field(c: &Call) -> Option<(String, String)> {
    match c.receiver.as_deref()? {
        Receiver::Field { owner, field } => Some((owner.clone(), field.clone())),
        Receiver::Type(_) => None,
    }
}

#[test]
fn one_field_variants_are_typed_like_fields_of_the_enum() {
    let ir = ir();
    let types: Vec<_> = ir
        .field_types
        .iter()
        .filter(|(owner, _, _)| owner == "Store")
        .map(|(_, v, t)| (v.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        types,
        vec![("Local", "LocalStore"), ("Redis", "RedisStore")]
    );
}

#[test]
fn a_binding_of_a_variant_pattern_is_a_field_of_the_enum() {
    let ir = ir();
    let dispatch: Vec<_> = calls(&ir, "key_delete").into_iter().map(field).collect();
    assert_eq!(
        dispatch,
        vec![
            Some(("Store".to_string(), "Local".to_string())),
            Some(("Store".to_string(), "Redis".to_string())),
            // two fields: no one type for `a`
            None,
        ]
    );
    let inner: Vec<_> = calls(&ir, "redis_only").into_iter().map(field).collect();
    assert_eq!(
        inner,
        vec![Some(("Store".to_string(), "Redis".to_string()))]
    );
}

#[test]
fn arguments_name_the_parameters_they_are_made_of() {
    let ir = ir();
    let dispatch = calls(&ir, "key_delete");
    assert_eq!(
        dispatch[1].arg_params,
        vec![ArgParams {
            direct: Some(0),
            built_from: vec![],
        }]
    );
    let release = calls(&ir, "release_lock");
    assert_eq!(
        release[0].arg_params,
        vec![ArgParams {
            direct: None,
            built_from: vec![0, 1],
        }]
    );
    // a local is not the parameter it was copied from
    assert_eq!(release[1].arg_params, vec![ArgParams::default()]);
}
