# PostgreSQL helpers for pgbench.sh and durable-tpcb.sh (sourced, not run).
# shellcheck shell=bash
#
# A private cluster: its own data directory under the caller's work directory, a Unix socket in
# a private directory, no TCP (listen_addresses = ''), durable settings (fsync, synchronous_commit
# and full_page_writes on, as by default; WAL settings left at their defaults). Nothing here
# touches a cluster that the system's own packages may run.

PG_USER=${PG_USER:-postgres}          # OS user that runs the server when we are root
PG_PORT=${PG_PORT:-55432}             # only names the socket file: no TCP listener
PG_SHARED_BUFFERS=${PG_SHARED_BUFFERS:-256MB}  # Glass's default buffer pool is 256 MiB too
PG_EXTRA_CONF=${PG_EXTRA_CONF:-}      # extra postgresql.conf lines (newline-separated)
PGBENCH_JOBS_MAX=${PGBENCH_JOBS_MAX:-2}

PG_BINDIR=${PG_BINDIR:-}
PG_STARTED=0
PG_ROOT=""   # $WORK/pg
PG_DATA=""
PG_SOCK=""

pg_bindir_ok() { [ -n "$1" ] && [ -x "$1/postgres" ] && [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ] && [ -x "$1/pgbench" ] && [ -x "$1/psql" ]; }

pg_find_bindir() {
  if [ -n "$PG_BINDIR" ]; then
    pg_bindir_ok "$PG_BINDIR" || die "PG_BINDIR=$PG_BINDIR lacks postgres/initdb/pg_ctl/pgbench/psql"
    return 0
  fi
  local d
  # Debian's layout: /usr/lib/postgresql/<major>/bin. On Debian 12 pgbench is in the server
  # package, postgresql-<major>; postgresql-contrib only pulls postgresql-contrib-<major>, which
  # that same server package provides.
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r); do
    if pg_bindir_ok "$d"; then PG_BINDIR=$d; return 0; fi
  done
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null)
    if pg_bindir_ok "$d"; then PG_BINDIR=$d; return 0; fi
  fi
  return 1
}

# pg_ensure_installed: find the server binaries, or install Debian's packages.
pg_ensure_installed() {
  pg_find_bindir && return 0
  [ "$(id -u)" = 0 ] || die "PostgreSQL is not installed and we are not root: install postgresql and postgresql-contrib (Debian), or set PG_BINDIR"
  command -v apt-get >/dev/null || die "PostgreSQL is not installed and there is no apt-get: install it and set PG_BINDIR"
  note "installing PostgreSQL from Debian's packages (apt-get install -y postgresql postgresql-contrib)"
  # Do not let the package create and start its own 'main' cluster on port 5432: it would
  # run beside the benchmark. Only when no such setting exists yet.
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
  fi
  export DEBIAN_FRONTEND=noninteractive
  local apt_opts=(-y -q -o Dpkg::Options::=--force-confold)
  if ! apt-get install "${apt_opts[@]}" postgresql postgresql-contrib </dev/null >&2; then
    apt-get update -q </dev/null >&2 || die "apt-get update failed"
    apt-get install "${apt_opts[@]}" postgresql postgresql-contrib </dev/null >&2 \
      || die "apt-get install postgresql postgresql-contrib failed"
  fi
  pg_find_bindir || die "installed PostgreSQL but found no /usr/lib/postgresql/*/bin with postgres, initdb, pg_ctl, pgbench and psql"
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u "$PG_USER" -- "$@"; else "$@"; fi
}

pg_version() { "$PG_BINDIR/postgres" --version; }

# pg_start WORK: initdb a cluster under WORK/pg and start it.
pg_start() {
  local work=$1
  PG_ROOT=$work/pg
  PG_DATA=$PG_ROOT/data
  PG_SOCK=$PG_ROOT/sock
  mkdir -p "$PG_ROOT" "$PG_SOCK" || die "cannot create $PG_ROOT"
  if [ "$(id -u)" = 0 ]; then
    # PostgreSQL refuses to run as root: the server runs as $PG_USER.
    if ! id "$PG_USER" >/dev/null 2>&1; then
      note "creating system user $PG_USER to run the server"
      useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER" || die "useradd $PG_USER failed"
    fi
    chmod 0755 "$work"
    chown "$PG_USER" "$PG_ROOT" "$PG_SOCK" || die "chown $PG_ROOT failed"
    runuser -u "$PG_USER" -- test -w "$PG_ROOT" \
      || die "$PG_USER cannot write $PG_ROOT (a parent directory not traversable by $PG_USER?): choose another --dir"
  fi
  as_pg "$PG_BINDIR/initdb" -D "$PG_DATA" -U postgres -A trust -E UTF8 --locale=C >"$PG_ROOT/initdb.log" 2>&1 \
    || { tail -20 "$PG_ROOT/initdb.log" >&2; die "initdb failed (log above)"; }
  {
    echo ""
    echo "# glass bench/peers: private instance"
    echo "port = $PG_PORT"
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$PG_SOCK'"
    echo "shared_buffers = $PG_SHARED_BUFFERS"
    echo "fsync = on"
    echo "synchronous_commit = on"
    echo "full_page_writes = on"
    if [ -n "$PG_EXTRA_CONF" ]; then printf '%s\n' "$PG_EXTRA_CONF"; fi
  } | as_pg tee -a "$PG_DATA/postgresql.conf" >/dev/null || die "cannot write postgresql.conf"
  as_pg "$PG_BINDIR/pg_ctl" -D "$PG_DATA" -l "$PG_ROOT/server.log" -w -t 120 start >/dev/null 2>&1 \
    || { tail -30 "$PG_ROOT/server.log" >&2 2>/dev/null; die "pg_ctl start failed (server log above)"; }
  PG_STARTED=1
  pg_psql -c "CREATE DATABASE bench" >/dev/null || die "CREATE DATABASE failed"
  note "$(pg_version) running on socket $PG_SOCK port $PG_PORT, data $PG_DATA"
  note "settings: $(pg_psql -d bench -At -F= -c "SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync','synchronous_commit','full_page_writes','wal_sync_method','wal_level','max_wal_size','checkpoint_timeout','shared_buffers','commit_delay','wal_buffers')")"
}

pg_psql() { "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCK" -p "$PG_PORT" -U postgres "$@" </dev/null; }

pg_stop() {
  [ "$PG_STARTED" = 1 ] || return 0
  PG_STARTED=0
  as_pg "$PG_BINDIR/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null 2>&1 \
    || as_pg "$PG_BINDIR/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1 \
    || note "warning: could not stop the server in $PG_DATA"
}

# pg_init_pgbench SCALE
pg_init_pgbench() {
  local scale=$1 t0 t1
  t0=$(date +%s.%N)
  "$PG_BINDIR/pgbench" -h "$PG_SOCK" -p "$PG_PORT" -U postgres -i -s "$scale" -q bench \
    </dev/null >"$PG_ROOT/pgbench-init.log" 2>&1 \
    || { tail -20 "$PG_ROOT/pgbench-init.log" >&2; die "pgbench -i -s $scale failed (log above)"; }
  t1=$(date +%s.%N)
  note "pgbench -i -s $scale: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s; database $(pg_psql -d bench -At -c "SELECT pg_size_pretty(pg_database_size('bench'))")"
}

# pg_server_jiffies: CPU time (clock ticks) of the server: the postmaster, its live children,
# and the children it has reaped (the backends of finished connections).
pg_server_jiffies() {
  local pm c
  pm=$(head -n 1 "$PG_DATA/postmaster.pid" 2>/dev/null) || { echo 0; return; }
  {
    awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$pm/stat" 2>/dev/null
    for c in $(ps -o pid= --ppid "$pm"); do
      awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$c/stat" 2>/dev/null
    done
  } | awk '{ s += $1 } END { print s + 0 }'
}

# pg_run_pgbench CLIENTS SECS LOGFILE: runs pgbench; prints "TPS others_cpu=X": the tps
# excluding connection establishing (PostgreSQL 14+: "without initial connection time") and
# other people's CPU use during the run (the server's and pgbench's own CPU left out).
pg_run_pgbench() {
  local c=$1 secs=$2 log=$3 j tps others
  j=$(( c < PGBENCH_JOBS_MAX ? c : PGBENCH_JOBS_MAX ))
  others=$(measured "$log" pg_server_jiffies \
      "$PG_BINDIR/pgbench" -h "$PG_SOCK" -p "$PG_PORT" -U postgres -c "$c" -j "$j" -M prepared -T "$secs" bench) \
    || { tail -20 "$log" >&2; die "pgbench -c $c -j $j -M prepared -T $secs failed (log above)"; }
  tps=$(sed -n -E 's/^tps = ([0-9.]+) \((without initial connection time|excluding connections establishing)\).*/\1/p' "$log" | head -n 1)
  [ -n "$tps" ] || { cat "$log" >&2; die "no tps line in pgbench's output (above)"; }
  printf '%.1f %s\n' "$tps" "$others"
}
