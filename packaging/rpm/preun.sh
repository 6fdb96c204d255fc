# The preun scriptlet of the svc package: on erase ($1 = 0) disable the service and
# stop it.
if [ "$1" -eq 0 ] && command -v systemctl >/dev/null 2>&1; then
    systemctl --no-reload disable svc.service >/dev/null 2>&1 || :
    if [ -d /run/systemd/system ]; then
        systemctl stop svc.service >/dev/null 2>&1 || :
    fi
fi
