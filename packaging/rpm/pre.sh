# %pre of the svc package (plain shell: cargo-generate-rpm expands no RPM macro).
# Creates the svc user before the files are installed.
if command -v systemd-sysusers >/dev/null 2>&1; then
    echo 'u svc - "svc job runner" /var/lib/svc/home /usr/sbin/nologin' |
        systemd-sysusers --replace=/usr/lib/sysusers.d/svc.conf - || :
fi
if ! getent passwd svc >/dev/null; then
    useradd --system --user-group --home-dir /var/lib/svc/home --no-create-home \
        --shell /sbin/nologin --comment "svc job runner" svc || :
fi
