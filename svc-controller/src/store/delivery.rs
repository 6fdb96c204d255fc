//! What a webhook delivery says of itself (event, delivery ID, pushed ref and commit):
//! read by the HTTP layer from the code host's headers and body, kept with a queued
//! trigger, and handed to the run's commands as `SVC_EVENT`, `SVC_DELIVERY`, `SVC_REF`
//! and `SVC_COMMIT`.

/// Longest value kept (in bytes, cut at a character boundary): these come from the
/// request, and end up in the environment of every command of the run.
pub const MAX_FACT_LEN: usize = 1024;

/// The facts of one delivery; each `None` when the delivery did not tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryFacts {
    /// The event (`push`, `Push Hook`, `repo:push`, ...): `SVC_EVENT`.
    pub event: Option<String>,
    /// The code host's delivery ID: `SVC_DELIVERY`.
    pub id: Option<String>,
    /// The ref a push moved (`refs/heads/main`): `SVC_REF`.
    pub git_ref: Option<String>,
    /// The commit that ref now points at: `SVC_COMMIT`.
    pub commit: Option<String>,
}

impl DeliveryFacts {
    /// The facts as environment variables of the run, those the delivery told.
    pub fn env(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("SVC_EVENT", &self.event),
            ("SVC_DELIVERY", &self.id),
            ("SVC_REF", &self.git_ref),
            ("SVC_COMMIT", &self.commit),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.as_deref().map(|v| (name, v)))
    }
}

/// `value` as a fact: control characters (NUL among them, which no environment
/// variable may hold) and surrounding blanks dropped, cut to [`MAX_FACT_LEN`]; `None`
/// when nothing is left.
pub fn clean(value: &str) -> Option<String> {
    let mut text: String = value.trim().chars().filter(|c| !c.is_control()).collect();
    if text.len() > MAX_FACT_LEN {
        let mut end = MAX_FACT_LEN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_cleaned_and_bounded() {
        assert_eq!(clean("  push \n"), Some("push".into()));
        assert_eq!(clean("a\0b\x1bc"), Some("abc".into()));
        assert_eq!(clean(" \t"), None);
        let long = "é".repeat(MAX_FACT_LEN);
        let cut = clean(&long).expect("kept");
        assert!(cut.len() <= MAX_FACT_LEN && cut.len() >= MAX_FACT_LEN - 1);
        assert!(cut.chars().all(|c| c == 'é'));
    }

    #[test]
    fn env_lists_what_was_told() {
        let facts = DeliveryFacts {
            event: Some("push".into()),
            id: None,
            git_ref: Some("refs/heads/main".into()),
            commit: Some("abc".into()),
        };
        let env: Vec<_> = facts.env().collect();
        assert_eq!(
            env,
            [
                ("SVC_EVENT", "push"),
                ("SVC_REF", "refs/heads/main"),
                ("SVC_COMMIT", "abc")
            ]
        );
    }
}
