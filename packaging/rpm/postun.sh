# %postun of the svc package. An erase keeps the logs and state (/var/log/svc,
# /var/lib/svc) and a modified configuration (as /etc/svc/svc.conf.rpmsave); rpm has no
# purge: delete those directories by hand to remove everything.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
