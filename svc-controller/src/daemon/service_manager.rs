//! Service-manager notifications (`sd_notify(3)`): readiness, reload, stop and the
//! watchdog pings of the systemd unit (`Type=notify`, `WatchdogSec=`).
//!
//! Every function is a no-op when the process was not started by systemd (no
//! `NOTIFY_SOCKET`), so running by hand or under the test harness is unchanged. A failure
//! to notify is logged and never stops the service.

use std::time::Duration;

use sd_notify::NotifyState;

/// Sends `states` to the service manager, logging (not returning) a failure.
fn send(states: &[NotifyState<'_>]) {
    if let Err(err) = sd_notify::notify(states) {
        tracing::warn!(error = %err, "cannot notify the service manager");
    }
}

/// `READY=1` with a one-line status: the listener is bound and the jobs are loaded.
pub fn ready(status: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// `RELOADING=1` (with `MONOTONIC_USEC`, which systemd 253+ expects) before a reload.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send(&[NotifyState::Reloading, now]),
        Err(_) => send(&[NotifyState::Reloading]),
    }
}

/// `STOPPING=1`: the shutdown has begun.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// `WATCHDOG=1`: the main loop is alive.
pub fn watchdog() {
    send(&[NotifyState::Watchdog]);
}

/// How often to ping the watchdog: half of `WATCHDOG_USEC` when the service manager
/// asked for pings (for this very process), `None` otherwise.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled()
        .filter(|timeout| !timeout.is_zero())
        .map(|timeout| timeout / 2)
}
