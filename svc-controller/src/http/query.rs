//! Query strings and form bodies of the API: their pairs, one value by key, and the job
//! ID as the endpoints take it. Shared by every handler that reads a query or a form.

use super::ApiError;
use super::error::names;

/// Pairs of a query string or form body. Bad percent-encoding decodes lossily.
pub(super) fn params(raw: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(raw).into_owned().collect()
}

/// The value of the first pair named `key`.
pub(super) fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The number `key` of `pairs`, from 1 to `max`; `default` when absent or empty.
/// `Err`: 400 saying the range.
pub(super) fn number_up_to<T>(
    pairs: &[(String, String)],
    key: &str,
    default: T,
    max: T,
) -> Result<T, ApiError>
where
    T: std::str::FromStr + PartialOrd + From<u8> + std::fmt::Display + Copy,
{
    match param(pairs, key) {
        None | Some("") => Ok(default),
        Some(text) => text
            .parse::<T>()
            .ok()
            .filter(|n| (T::from(1)..=max).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(format!("{key} must be a number from 1 to {max}"))
            }),
    }
}

/// A job ID as the API takes it: present, non-empty, and of the characters IDs use.
pub(super) fn job_id(value: Option<&str>) -> Result<&str, ApiError> {
    match value {
        None | Some("") => Err(ApiError::bad_request("empty job id").named(names::INVALID_JOB_ID)),
        Some(id)
            if id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
        {
            Ok(id)
        }
        Some(_) => Err(ApiError::bad_request("invalid job id").named(names::INVALID_JOB_ID)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_up_to_a_bound_has_its_default_and_its_range() {
        let pairs = params(b"limit=20&zero=0&big=1001&word=x&empty=");
        assert_eq!(number_up_to(&pairs, "limit", 50usize, 1000).ok(), Some(20));
        assert_eq!(number_up_to(&pairs, "none", 50usize, 1000).ok(), Some(50));
        assert_eq!(number_up_to(&pairs, "empty", 50usize, 1000).ok(), Some(50));
        for key in ["zero", "big", "word"] {
            let err = number_up_to(&pairs, key, 50usize, 1000).expect_err(key);
            assert!(format!("{err:?}").contains(&format!("{key} must be a number from 1 to 1000")));
        }
    }

    #[test]
    fn pairs_decode_and_the_first_of_a_key_wins() {
        let pairs = params(b"id=a%20b&x=1&id=second&plus=a+b&bad=%ZZ");
        assert_eq!(param(&pairs, "id"), Some("a b"));
        assert_eq!(param(&pairs, "plus"), Some("a b"));
        assert_eq!(param(&pairs, "bad"), Some("%ZZ"));
        assert_eq!(param(&pairs, "missing"), None);
    }

    #[test]
    fn job_ids_are_checked() {
        assert_eq!(job_id(Some("deploy-site_2")), Ok("deploy-site_2"));
        for bad in [None, Some(""), Some("a b"), Some("../x"), Some("é")] {
            assert!(job_id(bad).is_err(), "{bad:?}");
        }
    }
}
