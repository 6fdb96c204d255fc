# The postun scriptlet of the svc package. After an upgrade ($1 >= 1) the running
# service is restarted on the new files, as Fedora's systemd_postun_with_restart macro
# does. An erase keeps the logs and state (/var/log/svc, /var/lib/svc) and a modified
# configuration (as /etc/svc/svc.conf.rpmsave); rpm has no purge: delete those
# directories by hand to remove everything.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 1 ]; then
        systemctl try-restart svc.service >/dev/null 2>&1 || :
    fi
fi
