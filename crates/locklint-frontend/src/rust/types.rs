//! The type a value is declared with, as the name of the type whose methods it calls: the type
//! of a parameter or an annotated local, seen through references and smart pointers
//! (`&Arc<RedisPool>` → `RedisPool`). Generic and trait-object types name no one type.

/// Wrappers whose methods reach the type they hold (by `Deref`).
const POINTERS: &[&str] = &["Arc", "Rc", "Box", "Cow"];

/// The name of the type `ty` calls methods on, when one type is named.
pub fn receiver_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Reference(r) => receiver_name(&r.elem),
        syn::Type::Paren(p) => receiver_name(&p.elem),
        syn::Type::Group(g) => receiver_name(&g.elem),
        syn::Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last()?;
            let name = last.ident.to_string();
            if POINTERS.contains(&name.as_str()) {
                let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
                    return None;
                };
                return args.args.iter().find_map(|a| match a {
                    syn::GenericArgument::Type(t) => receiver_name(t),
                    _ => None,
                });
            }
            // a single upper-case letter is a type parameter
            let generic = name.len() == 1 && name.chars().all(|c| c.is_ascii_uppercase());
            (!generic && name != "Self").then_some(name)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::receiver_name;

    fn of(text: &str) -> Option<String> {
        receiver_name(&syn::parse_str::<syn::Type>(text).unwrap())
    }

    #[test]
    fn names_the_type_behind_references_and_pointers() {
        assert_eq!(
            of("&RedisConnectionPool").as_deref(),
            Some("RedisConnectionPool")
        );
        assert_eq!(
            of("&Arc<redis_interface::RedisConnectionPool>").as_deref(),
            Some("RedisConnectionPool")
        );
        assert_eq!(of("&mut Box<MemoryStore>").as_deref(), Some("MemoryStore"));
    }

    #[test]
    fn generic_and_trait_types_name_none() {
        assert_eq!(of("&T"), None);
        assert_eq!(of("&impl LockStore"), None);
        assert_eq!(of("&dyn LockStore"), None);
        assert_eq!(of("Self"), None);
    }
}
