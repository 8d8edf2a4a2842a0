//! "Did you mean ...?": the closest known name to a misspelt one, for rule names and
//! configuration keys alike.

/// The candidate nearest to `word` by edit distance, if it is close enough (3 edits or fewer)
/// to be a likely typo.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        // the distance is at least the difference in length: a long word is compared with
        // nothing (the distance costs the product of the lengths)
        .filter(|c| c.chars().count().abs_diff(word.chars().count()) <= 3)
        .map(|c| (strsim::levenshtein(c, word), c))
        .min()
        .filter(|(d, _)| *d <= 3)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn nearest_within_three_edits() {
        let known = ["separate-expire", "unfenced-write", "get-then-set"];
        assert_eq!(closest("separate-expiry", known), Some("separate-expire"));
        assert_eq!(closest("unfenced_write", known), Some("unfenced-write"));
        assert_eq!(closest("something-else", known), None);
        let long = "unfenced-write".repeat(10_000);
        assert_eq!(closest(&long, known), None);
    }
}
