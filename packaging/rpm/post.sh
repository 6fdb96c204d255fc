# The post scriptlet of the svc package. The package owns its directories; /run/svc,
# on a tmpfs, is a ghost entry, made now by tmpfiles.d as at every boot. Then, as
# Fedora's systemd_post macro does, the preset policy decides whether the service is
# enabled on installation ($1 = 1); nothing is started by the installation. An upgrade
# restarts it from the postun scriptlet.
if ! { command -v systemd-tmpfiles >/dev/null 2>&1 &&
    systemd-tmpfiles --create /usr/lib/tmpfiles.d/svc.conf; }; then
    install -d -m 0755 /run/svc
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -eq 1 ] && command -v systemctl >/dev/null 2>&1; then
    systemctl --no-reload preset svc.service >/dev/null 2>&1 || :
fi
