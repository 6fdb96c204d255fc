//! What each code host's deliveries say of themselves, in its own headers and payload:
//! the delivery ID (the replay key), the event, and for a push the ref and the commit.
//! Signatures are checked elsewhere ([`crate::access::auth`]); this reads, after that check,
//! what the commands get as `SVC_*` variables and what `filter_event` and `filter_ref`
//! look at.

use axum::http::HeaderMap;
use serde::Deserialize;

use crate::config::AuthKind;
use crate::store::delivery::{DeliveryFacts, clean};

/// Headers that carry a host's delivery ID, first found wins.
fn delivery_headers(kind: AuthKind) -> &'static [&'static str] {
    match kind {
        AuthKind::Github => &["x-github-delivery"],
        // `Idempotency-Key` stays the same across GitLab's retries of one delivery; the
        // event UUID of older releases too.
        AuthKind::Gitlab => &["idempotency-key", "x-gitlab-event-uuid"],
        AuthKind::Gitea => &[
            "x-forgejo-delivery",
            "x-gitea-delivery",
            "x-github-delivery",
        ],
        // Bitbucket Cloud, then Bitbucket Data Center.
        AuthKind::Bitbucket => &["x-request-uuid", "x-request-id"],
        AuthKind::Standard => &["webhook-id", "svix-id"],
        _ => &[],
    }
}

/// Headers that carry the event, first found wins.
fn event_headers(kind: AuthKind) -> &'static [&'static str] {
    match kind {
        AuthKind::Gitlab => &["x-gitlab-event"],
        AuthKind::Gitea => &["x-forgejo-event", "x-gitea-event", "x-github-event"],
        AuthKind::Bitbucket => &["x-event-key"],
        AuthKind::Standard => &[],
        // GitHub, sourcehut, and what generic senders use.
        _ => &["x-github-event", "x-webhook-event"],
    }
}

/// The raw delivery ID of a request, the replay key of the hosts that send one.
pub fn delivery_id(kind: AuthKind, headers: &HeaderMap) -> Option<&[u8]> {
    delivery_headers(kind)
        .iter()
        .filter_map(|name| headers.get(*name))
        .map(|value| value.as_bytes().trim_ascii())
        .find(|value| !value.is_empty())
}

/// Whether reading a body's ref and commit is worth a blocking thread: a push payload is
/// a few KiB, but a body may be up to the route's limit.
pub fn is_large(body: &[u8]) -> bool {
    body.len() > 256 * 1024
}

/// The facts of a delivery whose signature held. The body is parsed only for the hosts
/// whose push payloads are known (see [`is_large`] for where to call this).
pub fn facts(kind: AuthKind, headers: &HeaderMap, body: &[u8]) -> DeliveryFacts {
    let header = |names: &[&str]| {
        names
            .iter()
            .filter_map(|name| headers.get(*name))
            .find_map(|value| clean(&String::from_utf8_lossy(value.as_bytes())))
    };
    let known = matches!(
        kind,
        AuthKind::Github | AuthKind::Gitlab | AuthKind::Gitea | AuthKind::Bitbucket
    );
    let payload = if known || kind == AuthKind::Standard {
        Payload::read(body)
    } else {
        None
    };
    let (git_ref, commit) = match (&payload, known) {
        (Some(payload), true) => payload.push(kind),
        _ => (None, None),
    };
    let event = match kind {
        // A Standard Webhooks payload names its event type in the body.
        AuthKind::Standard => payload
            .as_ref()
            .and_then(|p| p.kind.as_deref())
            .and_then(clean),
        _ => header(event_headers(kind)),
    };
    DeliveryFacts {
        event,
        id: header(delivery_headers(kind)),
        git_ref: git_ref.as_deref().and_then(clean),
        commit: commit.as_deref().and_then(clean),
    }
}

/// The members of the known hosts' push payloads that tell the ref and the commit;
/// everything else in the body is skipped unread.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Payload {
    /// GitHub, GitLab, Gitea: the pushed ref.
    #[serde(rename = "ref")]
    git_ref: Option<String>,
    /// GitHub, GitLab, Gitea: the commit the ref points at after the push.
    after: Option<String>,
    /// GitLab: the commit checked out after the push.
    checkout_sha: Option<String>,
    /// Bitbucket Cloud.
    push: Option<BitbucketPush>,
    /// Bitbucket Data Center.
    changes: Vec<BitbucketServerChange>,
    /// Standard Webhooks: the event type.
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BitbucketPush {
    changes: Vec<BitbucketChange>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BitbucketChange {
    new: Option<BitbucketRef>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BitbucketRef {
    /// `branch` or `tag`.
    #[serde(rename = "type")]
    kind: String,
    name: String,
    target: BitbucketTarget,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BitbucketTarget {
    hash: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BitbucketServerChange {
    #[serde(rename = "refId")]
    ref_id: Option<String>,
    #[serde(rename = "toHash")]
    to_hash: Option<String>,
}

impl Payload {
    /// A JSON body, or GitHub's form-encoded one (`payload=<JSON>`); `None` otherwise.
    fn read(body: &[u8]) -> Option<Payload> {
        if let Ok(payload) = serde_json::from_slice(body) {
            return Some(payload);
        }
        let json = form_urlencoded::parse(body)
            .find(|(name, _)| name == "payload")?
            .1;
        serde_json::from_str(&json).ok()
    }

    /// The ref and commit of a push, as `kind`'s payload tells them.
    fn push(&self, kind: AuthKind) -> (Option<String>, Option<String>) {
        match kind {
            AuthKind::Bitbucket => {
                let cloud = self
                    .push
                    .as_ref()
                    .and_then(|push| push.changes.first())
                    .and_then(|change| change.new.as_ref());
                if let Some(new) = cloud {
                    let prefix = if new.kind == "tag" {
                        "refs/tags/"
                    } else {
                        "refs/heads/"
                    };
                    let git_ref = (!new.name.is_empty()).then(|| format!("{prefix}{}", new.name));
                    return (git_ref, new.target.hash.clone());
                }
                match self.changes.first() {
                    Some(change) => (change.ref_id.clone(), change.to_hash.clone()),
                    None => (None, None),
                }
            }
            AuthKind::Gitlab => {
                let commit = self.checkout_sha.clone().or_else(|| self.after.clone());
                (self.git_ref.clone(), commit)
            }
            _ => (self.git_ref.clone(), self.after.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("header value"));
        }
        map
    }

    /// The push event of Gitea's documentation (its headers, and the members of its
    /// payload that matter here).
    #[test]
    fn gitea_push_as_documented() {
        let h = headers(&[
            ("x-github-delivery", "f6266f16-1bf3-46a5-9ea4-602e06ead473"),
            ("x-github-event", "push"),
            ("x-gitea-delivery", "f6266f16-1bf3-46a5-9ea4-602e06ead473"),
            ("x-gitea-event", "push"),
        ]);
        let body = br#"{"secret": "x", "ref": "refs/heads/develop",
            "before": "28e1879d029cb852e4844d9c718537df08844e03",
            "after": "bffeb74224043ba2feb48d137756c8a9331c449a", "commits": []}"#;
        let facts = facts(AuthKind::Gitea, &h, body);
        assert_eq!(facts.event.as_deref(), Some("push"));
        assert_eq!(
            facts.id.as_deref(),
            Some("f6266f16-1bf3-46a5-9ea4-602e06ead473")
        );
        assert_eq!(facts.git_ref.as_deref(), Some("refs/heads/develop"));
        assert_eq!(
            facts.commit.as_deref(),
            Some("bffeb74224043ba2feb48d137756c8a9331c449a")
        );
        let forgejo = headers(&[("x-forgejo-delivery", "fj-1"), ("x-forgejo-event", "push")]);
        let facts = super::facts(AuthKind::Gitea, &forgejo, b"{}");
        assert_eq!(
            (facts.id.as_deref(), facts.event.as_deref()),
            (Some("fj-1"), Some("push"))
        );
    }

    #[test]
    fn github_push_json_and_form_encoded() {
        let h = headers(&[
            ("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            ("x-github-event", "push"),
        ]);
        let json =
            br#"{"ref":"refs/tags/v1.2","after":"0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c"}"#;
        for body in [
            json.to_vec(),
            format!(
                "payload={}",
                form_urlencoded::byte_serialize(json).collect::<String>()
            )
            .into_bytes(),
        ] {
            let facts = facts(AuthKind::Github, &h, &body);
            assert_eq!(facts.event.as_deref(), Some("push"));
            assert_eq!(
                facts.id.as_deref(),
                Some("72d3162e-cc78-11e3-81ab-4c9367dc0958")
            );
            assert_eq!(facts.git_ref.as_deref(), Some("refs/tags/v1.2"));
            assert_eq!(
                facts.commit.as_deref(),
                Some("0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c")
            );
        }
        // Not a push: no ref, and nothing made up.
        let ping = facts(
            AuthKind::Github,
            &h,
            br#"{"zen":"Keep it logically awesome."}"#,
        );
        assert_eq!((ping.git_ref, ping.commit), (None, None));
    }

    #[test]
    fn gitlab_push_prefers_the_idempotency_key_and_checkout_sha() {
        let h = headers(&[
            ("x-gitlab-event", "Push Hook"),
            ("x-gitlab-event-uuid", "uuid-1"),
            ("idempotency-key", "key-1"),
        ]);
        let body = br#"{"object_kind":"push","ref":"refs/heads/main",
            "before":"95790bf891e76fee5e1747ab589903a6a1f80f22",
            "after":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
            "checkout_sha":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7"}"#;
        let facts = facts(AuthKind::Gitlab, &h, body);
        assert_eq!(facts.event.as_deref(), Some("Push Hook"));
        assert_eq!(facts.id.as_deref(), Some("key-1"));
        assert_eq!(facts.git_ref.as_deref(), Some("refs/heads/main"));
        assert_eq!(
            facts.commit.as_deref(),
            Some("da1560886d4f094c3e6c9ef40349f7d38b5d27d7")
        );
        let older = headers(&[("x-gitlab-event-uuid", "uuid-2")]);
        assert_eq!(
            delivery_id(AuthKind::Gitlab, &older),
            Some(b"uuid-2".as_slice())
        );
    }

    #[test]
    fn bitbucket_cloud_and_data_center_pushes() {
        let h = headers(&[("x-event-key", "repo:push"), ("x-request-uuid", "bb-1")]);
        let cloud = br#"{"push":{"changes":[{"new":{"type":"branch","name":"main",
            "target":{"hash":"709d658dc5b6d6afcd46049c2f332ee3f515a67d"}}}]}}"#;
        let facts = facts(AuthKind::Bitbucket, &h, cloud);
        assert_eq!(facts.event.as_deref(), Some("repo:push"));
        assert_eq!(facts.id.as_deref(), Some("bb-1"));
        assert_eq!(facts.git_ref.as_deref(), Some("refs/heads/main"));
        assert_eq!(
            facts.commit.as_deref(),
            Some("709d658dc5b6d6afcd46049c2f332ee3f515a67d")
        );
        let tag = br#"{"push":{"changes":[{"new":{"type":"tag","name":"v2","target":{}}}]}}"#;
        let facts = super::facts(AuthKind::Bitbucket, &h, tag);
        assert_eq!(facts.git_ref.as_deref(), Some("refs/tags/v2"));
        let server = headers(&[
            ("x-event-key", "repo:refs_changed"),
            ("x-request-id", "dc-1"),
        ]);
        let body = br#"{"changes":[{"refId":"refs/heads/master",
            "toHash":"a00945762949b7787ecabc388c0e20b1b85f0b57"}]}"#;
        let facts = super::facts(AuthKind::Bitbucket, &server, body);
        assert_eq!(facts.id.as_deref(), Some("dc-1"));
        assert_eq!(facts.git_ref.as_deref(), Some("refs/heads/master"));
        assert_eq!(
            facts.commit.as_deref(),
            Some("a00945762949b7787ecabc388c0e20b1b85f0b57")
        );
    }

    #[test]
    fn standard_webhooks_name_the_event_in_the_body() {
        let h = headers(&[("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")]);
        let facts = facts(
            AuthKind::Standard,
            &h,
            br#"{"type":"invoice.paid","ref":"x"}"#,
        );
        assert_eq!(facts.event.as_deref(), Some("invoice.paid"));
        assert_eq!(facts.id.as_deref(), Some("msg_p5jXN8AQM9LWM0D4loKWxJek"));
        assert_eq!(facts.git_ref, None, "not a code host: no ref");
    }

    #[test]
    fn generic_senders_keep_their_event_header_and_nothing_else() {
        let h = headers(&[("x-webhook-event", "deploy"), ("x-github-delivery", "d")]);
        let facts = facts(AuthKind::HmacSha256, &h, br#"{"ref":"refs/heads/main"}"#);
        assert_eq!(facts.event.as_deref(), Some("deploy"));
        assert_eq!((facts.id, facts.git_ref), (None, None));
    }
}
