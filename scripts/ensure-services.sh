#!/bin/sh
# Makes sure the server binaries the test suites need are installed:
#   redis-server (package redis-server), PostgreSQL initdb/postgres (postgresql),
#   mariadbd (mariadb-server), and chromium (chromium) for the headless check of
#   `locklint audit --format html`.
# A missing binary is installed with apt-get when running as root on Debian/Ubuntu;
# otherwise the script says what to install. It never fails because a service is already
# there, and never starts or stops servers (the test harnesses start throwaway servers
# from these binaries when none is reachable).
set -u

have() { command -v "$1" >/dev/null 2>&1; }

have_postgres() {
    have initdb && have postgres && return 0
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && return 0
    done
    return 1
}

have_mariadb() {
    have mariadbd || have mysqld || [ -x /usr/sbin/mariadbd ] || [ -x /usr/sbin/mysqld ]
}

can_apt=no
if [ "$(id -u)" = 0 ] && have apt-get && [ -r /etc/os-release ] &&
    grep -qiE '^(ID|ID_LIKE)=.*(debian|ubuntu)' /etc/os-release; then
    can_apt=yes
fi

apt_updated=no
install_pkg() {
    pkg=$1
    if [ "$can_apt" != yes ]; then
        echo "ensure-services: $pkg is missing; install it (apt-get install $pkg) - not root on Debian/Ubuntu, so not installing" >&2
        return 0
    fi
    if [ "$apt_updated" = no ]; then
        echo "ensure-services: apt-get update"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || true
        apt_updated=yes
    fi
    echo "ensure-services: installing $pkg"
    # policy-rc.d keeps the package scripts from starting system services in containers.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
        remove_policy=yes
    else
        remove_policy=no
    fi
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null; then
        echo "ensure-services: installed $pkg"
    else
        echo "ensure-services: could not install $pkg" >&2
    fi
    [ "$remove_policy" = yes ] && rm -f /usr/sbin/policy-rc.d
    return 0
}

if have redis-server; then
    echo "ensure-services: redis-server present ($(command -v redis-server))"
else
    install_pkg redis-server
fi

if have_postgres; then
    echo "ensure-services: postgres present"
else
    install_pkg postgresql
fi

if have_mariadb; then
    echo "ensure-services: mariadbd present"
else
    install_pkg mariadb-server
fi

if have chromium || have chromium-browser; then
    echo "ensure-services: chromium present"
else
    install_pkg chromium
fi

exit 0
