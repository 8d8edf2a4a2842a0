//! The local bindings in scope during a function walk, innermost last, found by name in
//! constant time however many there are.

use std::collections::HashMap;

/// Bindings in scope; leaving a scope truncates to the length it had on entry.
#[derive(Debug)]
pub struct Env<T> {
    items: Vec<(String, T)>,
    /// Indexes into `items` per name, innermost last.
    by_name: HashMap<String, Vec<usize>>,
    /// The same per upper-cased name.
    by_upper: HashMap<String, Vec<usize>>,
}

impl<T> Default for Env<T> {
    fn default() -> Self {
        Env {
            items: Vec::new(),
            by_name: HashMap::new(),
            by_upper: HashMap::new(),
        }
    }
}

fn unindex(map: &mut HashMap<String, Vec<usize>>, name: &str) {
    if let Some(v) = map.get_mut(name) {
        v.pop();
        if v.is_empty() {
            map.remove(name);
        }
    }
}

impl<T> Env<T> {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn push(&mut self, name: String, item: T) {
        let at = self.items.len();
        self.by_name.entry(name.clone()).or_default().push(at);
        self.by_upper
            .entry(name.to_ascii_uppercase())
            .or_default()
            .push(at);
        self.items.push((name, item));
    }

    /// Leave every scope entered since the length was `len`.
    pub fn truncate(&mut self, len: usize) {
        while self.items.len() > len {
            let Some((name, _)) = self.items.pop() else {
                break;
            };
            unindex(&mut self.by_name, &name);
            unindex(&mut self.by_upper, &name.to_ascii_uppercase());
        }
    }

    /// The innermost binding of `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        let at = *self.by_name.get(name)?.last()?;
        self.items.get(at).map(|(_, t)| t)
    }

    /// The innermost binding of `name`, to update.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut T> {
        let at = *self.by_name.get(name)?.last()?;
        self.items.get_mut(at).map(|(_, t)| t)
    }

    /// The bindings made since the length was `len`, in order.
    pub fn since(&self, len: usize) -> impl Iterator<Item = (&str, &T)> {
        self.items
            .get(len..)
            .unwrap_or_default()
            .iter()
            .map(|(n, t)| (n.as_str(), t))
    }

    /// The innermost binding whose name, upper-cased, is `upper`.
    pub fn get_upper(&self, upper: &str) -> Option<&T> {
        let at = *self.by_upper.get(upper)?.last()?;
        self.items.get(at).map(|(_, t)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inner_bindings_shadow_and_scopes_unwind() {
        let mut env = Env::default();
        env.push("a".to_string(), 1);
        let mark = env.len();
        env.push("a".to_string(), 2);
        env.push("b".to_string(), 3);
        assert_eq!(env.get("a"), Some(&2));
        assert_eq!(env.get_upper("B"), Some(&3));
        env.truncate(mark);
        assert_eq!(env.get("a"), Some(&1));
        assert_eq!(env.get("b"), None);
        assert_eq!(env.get_upper("B"), None);
    }
}
