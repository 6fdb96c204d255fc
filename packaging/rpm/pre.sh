# The pre scriptlet of the svc package (plain shell, inserted into svc.spec: no RPM
# macro here).
# Refuses to install over a user named svc that is not a system user (jobs run as svc by
# default), then creates the svc user before the files are installed.
if entry=$(getent passwd svc); then
    uid=$(echo "$entry" | cut -d: -f3)
    sys_uid_max=$(awk '$1 == "SYS_UID_MAX" { print $2 }' /etc/login.defs 2>/dev/null || true)
    [ -n "$sys_uid_max" ] || sys_uid_max=999
    if [ "$uid" -gt "$sys_uid_max" ]; then
        echo "svc: a user named svc exists with uid $uid, which is not a system user" >&2
        echo "svc: (system users have uids up to $sys_uid_max). The jobs of svc run as" >&2
        echo "svc: that user by default; rename or remove it, then install again." >&2
        exit 1
    fi
fi
if command -v systemd-sysusers >/dev/null 2>&1; then
    echo 'u svc - "svc job runner" /var/lib/svc/home /usr/sbin/nologin' |
        systemd-sysusers --replace=/usr/lib/sysusers.d/svc.conf - || :
fi
if ! getent passwd svc >/dev/null; then
    useradd --system --user-group --home-dir /var/lib/svc/home --no-create-home \
        --shell /sbin/nologin --comment "svc job runner" svc || :
fi
