//! Configuration: the main file, `job.d/*.conf` and `job_http.d/*.conf`, parsed and
//! validated into the domain types of `model.rs` and `job_model.rs`.
//!
//! Layout (all below `dir_base`, which the main file sets, default `/`):
//!
//! - main file: given on the command line (packaged: `/etc/svc/svc.conf`), section `[svc]`;
//! - `$dir_base/etc/svc/job.d/*.conf`: `[job "NAME"]` sections (legacy `[hook "NAME"]`);
//! - `$dir_base/etc/svc/job_http.d/*.conf`: `[job.http "NAME"]` sections;
//! - `[notif "NAME"]` sections (where notifications go) in the main file or any of those;
//! - `$dir_base/etc/svc/user.conf` (optional): `[user "NAME"]` sections with a `password`
//!   hash; when it names at least one user, the UI and the GET API need a login.
//!
//! The main file may hold job and JobHttp sections too. Loading never stops at the first
//! problem: every problem is collected as a [`ConfigIssue`] naming file, section, key and
//! value, and [`load`] fails with all of them at once.

mod cluster_section;
mod database_url;
mod guards;
mod job_http_section;
mod job_model;
mod job_section;
mod loader;
mod main_section;
mod model;
mod notif_section;
mod section_reader;
mod syntax;
#[cfg(test)]
mod test_tree;
mod users_section;
mod values;

pub use database_url::{DatabaseTargets, TargetSession, host_label, parse_database_url};
pub use job_model::{
    AuthKind, DEFAULT_HEADER_SIGN, DEFAULT_JOB_TIMEOUT, DEFAULT_LOG_RETENTION,
    DEFAULT_PATCHHOST_PUBLIC_KEY, HttpJobConfig, HttpMethod, HttpRequestType, JobConfig, OnBusy,
    PingUrl, ResourceLimits,
};
pub(crate) use loader::is_conf_file;
pub use loader::{job_id_from_name, known_keys, load};
pub use model::{
    ClusterConfig, Config, ConfigError, ConfigIssue, DEFAULT_AUDIT_MAX_SIZE, DEFAULT_DIR_STATE,
    DEFAULT_HTTP_BODY_TIMEOUT, DEFAULT_HTTP_TIMEOUT, DEFAULT_LISTEN_ADDRESS, DEFAULT_LOG_MAX_SIZE,
    DEFAULT_MAX_BODY_IN_FLIGHT, DEFAULT_NAME, EmailNotif, MainConfig, NotifConfig, NotifKind,
    SmtpCredentials, SmtpSecurity, SmtpServer, UserConfig, WebhookKey, WebhookNotif, resolve_path,
};
pub(crate) use syntax::main_sections;
pub use syntax::quote_value;
