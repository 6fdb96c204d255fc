//! The key of a Standard Webhooks secret (`whsec_` and base64), which the configuration
//! checks and the signature rules use.

use base64::Engine as _;

/// The HMAC key of a Standard Webhooks secret: the bytes after `whsec_`, base64-decoded;
/// any other secret as it is. `None`: `whsec_` followed by no valid base64.
pub fn standard_key(secret: &[u8]) -> Option<Vec<u8>> {
    match secret.strip_prefix(b"whsec_") {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok(),
        None => Some(secret.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whsec_secret_is_its_decoded_bytes_and_another_is_itself() {
        assert_eq!(standard_key(b"whsec_aGVsbG8="), Some(b"hello".to_vec()));
        assert_eq!(standard_key(b"whsec_!!"), None);
        assert_eq!(standard_key(b"plain"), Some(b"plain".to_vec()));
    }
}
