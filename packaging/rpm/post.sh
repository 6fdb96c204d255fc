# %post of the svc package: svc's directories, then, as Fedora's %systemd_post does, the
# preset policy decides whether the service is enabled on installation ($1 = 1); nothing
# is started by the installation. An upgrade restarts it from %postun.
if ! { command -v systemd-tmpfiles >/dev/null 2>&1 &&
    systemd-tmpfiles --create /usr/lib/tmpfiles.d/svc.conf; }; then
    install -d -m 0755 /run/svc /var/lib/svc /var/lib/svc/job
    install -d -m 0750 /var/log/svc
    install -d -m 0711 /var/lib/svc/run
    install -d -m 0700 -o svc -g svc /var/lib/svc/home
fi
# Empty directories for the operator's job files (cargo-generate-rpm 0.21 cannot package
# an empty directory).
for dir in /etc/svc/job.d /etc/svc/job_http.d; do
    [ -d "$dir" ] || install -d -m 0755 "$dir"
done
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -eq 1 ] && command -v systemctl >/dev/null 2>&1; then
    systemctl --no-reload preset svc.service >/dev/null 2>&1 || :
fi
