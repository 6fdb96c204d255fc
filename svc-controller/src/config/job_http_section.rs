//! The `[job.http "NAME"]` sections (JobHttps, in `job_http.d`): an HTTP request the
//! runner makes, on a timer or when called.

use std::path::Path;

use super::job_model::{DEFAULT_HEADER_SIGN, DEFAULT_LOG_RETENTION, HttpJobConfig};
use super::job_section::run_as;
use super::loader::Loader;
use super::section_reader::KeyKind::{self, Bool, List, Scalar};
use super::section_reader::Reader;
use super::syntax::Section;
use super::values::{
    check_header_name, parse_count, parse_http_header, parse_http_method, parse_http_timeout,
    parse_ping_url, parse_request_type, resolve_http_url,
};

pub(super) const HTTP_JOB_KEYS: &[(&str, KeyKind)] = &[
    ("description", Scalar),
    ("secret", Scalar),
    ("interval", Scalar),
    ("schedule", Scalar),
    ("http_method", Scalar),
    ("http_url", Scalar),
    ("http_request_type", Scalar),
    ("http_header", List),
    ("http_timeout", Scalar),
    ("http_insecure", Bool),
    ("http_follow_redirects", Bool),
    ("header_sign", Scalar),
    ("log_retention", Scalar),
    ("user", Scalar),
    ("group", Scalar),
    ("timezone", Scalar),
    ("notif_on_success", List),
    ("notif_on_failed", List),
    ("ping_url", Scalar),
];

impl Loader<'_> {
    /// A `[job.http "NAME"]` section; the JobHttp is kept when none of its keys has a
    /// problem.
    pub(super) fn load_http_job(&mut self, file: &Path, section: &Section) {
        let before = self.errors.len();
        let id = self.register_id(file, section, true);
        let main = self.main;
        let mut r = Reader::new(file, section, HTTP_JOB_KEYS, &mut self.errors);

        let description = r.text_or_empty("description").unwrap_or_default();
        let secret = r.secret("secret");
        let timezone = r.zone(main);
        let timer = r.timer(&timezone);
        let http_method = r
            .parsed("http_method", parse_http_method)
            .unwrap_or_default();
        let http_url = r.parsed("http_url", |v| resolve_http_url(v, &main.listen_address));
        // Empty means the default, as upstream reads it.
        let http_request_type = match r.text_or_empty("http_request_type") {
            Some(text) if !text.is_empty() => r.parsed("http_request_type", parse_request_type),
            _ => None,
        }
        .unwrap_or_default();
        let http_headers = r.list("http_header", parse_http_header);
        let http_timeout = r
            .parsed("http_timeout", parse_http_timeout)
            .flatten()
            .unwrap_or(main.http_timeout);
        let header_sign = r
            .parsed("header_sign", check_header_name)
            .unwrap_or_else(|| DEFAULT_HEADER_SIGN.to_string());
        let http_insecure = r.flag("http_insecure").unwrap_or(false);
        let http_follow_redirects = r.flag("http_follow_redirects").unwrap_or(false);
        let log_retention = r
            .parsed("log_retention", parse_count)
            .unwrap_or(DEFAULT_LOG_RETENTION);
        let (user, group) = run_as(&mut r, main);
        let notif_on_success = r.notif_names("notif_on_success");
        let notif_on_failed = r.notif_names("notif_on_failed");
        let ping_url = r.parsed("ping_url", parse_ping_url);

        if !r.has("http_url") {
            r.fail_key("http_url", "a JobHttp needs http_url");
        }
        drop(r);
        let notif_on_success =
            self.note_notif_refs(file, section, "notif_on_success", notif_on_success);
        let notif_on_failed =
            self.note_notif_refs(file, section, "notif_on_failed", notif_on_failed);

        let Some(http_url) = http_url else {
            return;
        };
        if self.errors.len() != before {
            return;
        }
        self.http_jobs.push(HttpJobConfig {
            id,
            name: section.name.clone(),
            file: file.to_path_buf(),
            description,
            timer,
            timezone,
            http_method,
            http_url,
            http_request_type,
            http_headers,
            http_timeout,
            http_insecure,
            http_follow_redirects,
            secret,
            header_sign,
            log_retention,
            user,
            group,
            notif_on_success,
            notif_on_failed,
            ping_url,
        });
    }
}

#[cfg(test)]
#[path = "job_http_section_tests.rs"]
mod tests;
