#!/usr/bin/env bash
# services.sh: the servers the tests of Simba for Go talk to, on loopback.
#
#   scripts/services.sh [up] [SERVICE...]   install what is missing (apt-get), start
#                                           what is not answering, wait until each answers
#   scripts/services.sh down [SERVICE...]   stop what this script started (by pid file);
#                                           data is kept
#   scripts/services.sh status [SERVICE...] say what answers and what this script started
#
# SERVICE is redis, redis-cluster, postgres, zookeeper or mariadb; the default is
# all five.
#
# Servers (the defaults of internal/testkit/testservers):
#   Redis       127.0.0.1:6379, no persistence
#   Redis Cluster  three masters on 127.0.0.1:7001-7003, no replicas, no persistence
#   PostgreSQL  127.0.0.1:5432, database simba, trust auth on 127.0.0.1, ssl off
#               (and the pgbouncer program, which a test starts in front of it)
#   ZooKeeper   127.0.0.1:2181, standalone, tickTime 500, maxSessionTimeout 60000
#   MariaDB     127.0.0.1:3306, database test, root with an empty password over TCP
#               (Debian 12's mariadb-server, 10.11; the MySQL backend's tests)
#
# A server that already answers is left alone, whoever started it; "down" never
# stops it. Idempotent: a second "up" only checks (well under a second).
# Needs root (or sudo) only to install packages and to start PostgreSQL as user
# postgres; does not need systemd. Daemons never hold this script's stdout or
# stderr, so CI can capture its output.
#
# Environment: SIMBA_SERVICES_DIR (state, logs, pid files; default
# /var/lib/simba-ci), SIMBA_PG_VERSION and SIMBA_PG_CLUSTER (the Debian cluster
# to use when PostgreSQL must be started; default 15/main, Debian 12's).
set -euo pipefail

STATE=${SIMBA_SERVICES_DIR:-/var/lib/simba-ci}
PGV=${SIMBA_PG_VERSION:-15} PGCLUSTER=${SIMBA_PG_CLUSTER:-main}
REDIS_PORT=6379 PG_PORT=5432 ZK_PORT=2181 PG_DB=simba MYSQL_PORT=3306 MYSQL_DB=test
CLUSTER_PORTS=(7001 7002 7003)
PGBIN=/usr/lib/postgresql/$PGV/bin PGCONF=/etc/postgresql/$PGV/$PGCLUSTER
PGDATA=/var/lib/postgresql/$PGV/$PGCLUSTER
ZKDIR=$STATE/zk
ZK_CP=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
export DEBIAN_FRONTEND=noninteractive

T0=$(date +%s%N) TS=$T0
say() { echo "[services] $*"; }
mark() { # mark MESSAGE: print MESSAGE with the time since the last mark and in total
  local now; now=$(date +%s%N)
  printf '[services] %-50s %6d ms (total %6d ms)\n' "$1" $(((now - TS) / 1000000)) $(((now - T0) / 1000000))
  TS=$now
}
die() { echo "[services] ERROR: $*" >&2; exit 1; }
wait_for() { # wait_for SECONDS CMD...: run CMD every 0.1 s until it succeeds
  local deadline=$(($(date +%s) + $1)); shift
  until "$@" >/dev/null 2>&1; do
    (($(date +%s) < deadline)) || return 1
    sleep 0.1
  done
}
alive() { # alive PIDFILE PATTERN: the pid in PIDFILE runs a command line matching PATTERN
  local pid; pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && grep -qs "$2" "/proc/$pid/cmdline"
}
as_root() { if ((EUID == 0)); then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root for: $*"; fi; }
as_pg() { (cd / && as_root runuser -u postgres -- "$@"); } # cd /: postgres may not read the caller's directory

# ---------------------------------------------------------------- probes
# Each probe uses bash's /dev/tcp where it can, so that it works before any
# client is installed.
tcp_say() { # tcp_say PORT TEXT: send TEXT to 127.0.0.1:PORT, print the reply
  timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "$2" >&3 && cat <&3' _ "$1" "$2" 2>/dev/null
}
redis_up() { tcp_say $REDIS_PORT 'PING\r\nQUIT\r\n' | grep -q '^+PONG'; }
cluster_node_up() { tcp_say "$1" 'PING\r\nQUIT\r\n' | grep -q '^+PONG'; }
cluster_up() { tcp_say "${CLUSTER_PORTS[0]}" 'CLUSTER INFO\r\nQUIT\r\n' | grep -q 'cluster_state:ok'; }
zk_up() { tcp_say $ZK_PORT srvr | grep -q '^Mode: '; } # 'ruok' says imok before it serves
pg_port_up() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ $PG_PORT 2>/dev/null; }
pg_db_up() { # the DSN the tests use works: TCP, trust, database simba
  command -v psql >/dev/null &&
    psql -w -h 127.0.0.1 -p $PG_PORT -U postgres -d "$PG_DB" -qAtc 'select 1' 2>/dev/null | grep -q '^1$'
}
mysql_port_up() { timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ $MYSQL_PORT 2>/dev/null; }
mysql_db_up() { # the URL the tests use works: TCP, root without a password, database test
  command -v mariadb >/dev/null &&
    mariadb --protocol=tcp -h 127.0.0.1 -P $MYSQL_PORT -u root -D "$MYSQL_DB" -N -e 'select 1' 2>/dev/null | grep -q '^1$'
}

# ---------------------------------------------------------------- install
apt_install() { # apt_install PKG...: with the current package lists first, refreshed only if that fails
  mkdir -p "$STATE"
  local log=$STATE/apt.log
  as_root apt-get install -y -qq --no-install-recommends "$@" >>"$log" 2>&1 ||
    { as_root apt-get update -qq >>"$log" 2>&1 && as_root apt-get install -y -qq --no-install-recommends "$@" >>"$log" 2>&1; } ||
    { tail -30 "$log" >&2; die "apt-get install $* failed (log: $log)"; }
  mark "apt-get install $*"
}

# ---------------------------------------------------------------- Redis
start_redis() {
  if redis_up; then mark "redis: already answering"; return; fi
  command -v redis-server >/dev/null || apt_install redis-server
  mkdir -p "$STATE"
  # --daemonize points the daemon's stdio at /dev/null; its own log is redis.log.
  redis-server --bind 127.0.0.1 --port $REDIS_PORT --daemonize yes \
    --pidfile "$STATE/redis.pid" --logfile "$STATE/redis.log" --dir "$STATE" \
    --save '' --appendonly no </dev/null >>"$STATE/redis.log" 2>&1 ||
    { tail -20 "$STATE/redis.log" >&2; die "redis-server did not start"; }
  wait_for 15 redis_up || { tail -20 "$STATE/redis.log" >&2; die "redis not answering on 127.0.0.1:$REDIS_PORT"; }
  mark "redis: started"
}

# ---------------------------------------------------------------- Redis Cluster
# Three masters, one per port, each in a directory of its own; created once
# with redis-cli --cluster create, then restarted from their nodes.conf.
start_redis_cluster() {
  if cluster_up; then mark "redis-cluster: already answering"; return; fi
  command -v redis-server >/dev/null || apt_install redis-server
  command -v redis-cli >/dev/null || apt_install redis-tools
  local port dir fresh=
  for port in "${CLUSTER_PORTS[@]}"; do
    dir=$STATE/redis-cluster/$port
    mkdir -p "$dir"
    [ -s "$dir/nodes.conf" ] || fresh=1
    if ! cluster_node_up "$port"; then
      (cd "$dir" && redis-server --bind 127.0.0.1 --port "$port" --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout 2000 --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir" \
        --save '' --appendonly no </dev/null >>"$dir/redis.log" 2>&1) ||
        { tail -20 "$dir/redis.log" >&2; die "redis-server (cluster) on $port did not start"; }
    fi
  done
  for port in "${CLUSTER_PORTS[@]}"; do
    wait_for 15 cluster_node_up "$port" || die "redis cluster node $port not answering"
  done
  if [ -n "$fresh" ] && ! cluster_up; then
    local addrs=() p
    for p in "${CLUSTER_PORTS[@]}"; do addrs+=("127.0.0.1:$p"); done
    # A node that kept old slots from a cluster that no longer exists would
    # refuse to join: start from empty nodes.
    for p in "${CLUSTER_PORTS[@]}"; do redis-cli -p "$p" FLUSHALL >/dev/null 2>&1 || true; redis-cli -p "$p" CLUSTER RESET HARD >/dev/null 2>&1 || true; done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$STATE/redis-cluster/create.log" 2>&1 ||
      { tail -20 "$STATE/redis-cluster/create.log" >&2; die "redis-cli --cluster create failed"; }
  fi
  wait_for 30 cluster_up || die "redis cluster on ${CLUSTER_PORTS[*]} not ok (cluster_state)"
  mark "redis-cluster: started"
}

# ---------------------------------------------------------------- PostgreSQL
# Uses Debian's cluster $PGV/$PGCLUSTER; the server runs as user postgres.
HBA_CHANGED=
pg_configure() { # trust on loopback TCP (first matching line wins), ssl off, listen on 127.0.0.1
  [ -f "$PGCONF/postgresql.conf" ] || { as_root pg_createcluster -p $PG_PORT "$PGV" "$PGCLUSTER" >/dev/null; mark "postgres: cluster $PGV/$PGCLUSTER created"; }
  local conf=$PGCONF/conf.d/simba-ci.conf
  printf "# written by simba scripts/services.sh\nlisten_addresses = '127.0.0.1'\nport = %s\nssl = off\n" $PG_PORT | as_root tee "$conf" >/dev/null
  as_root chown postgres:postgres "$conf"
  if ! as_root grep -q '^host all all 127.0.0.1/32 trust$' "$PGCONF/pg_hba.conf"; then
    as_root sed -i '1i # simba scripts/services.sh: trust TCP on loopback (first match wins)\nhost all all 127.0.0.1/32 trust' "$PGCONF/pg_hba.conf"
    HBA_CHANGED=1
  fi
}
start_postgres() {
  # PgBouncer is not a server the tests share: the notification test starts
  # its own, in transaction mode, in front of this PostgreSQL.
  command -v pgbouncer >/dev/null || apt_install pgbouncer
  if pg_db_up; then mark "postgres: already answering"; return; fi
  local pkgs=()
  [ -x "$PGBIN/postgres" ] || pkgs+=("postgresql-$PGV")
  command -v pg_createcluster >/dev/null || pkgs+=(postgresql-common)
  command -v psql >/dev/null || pkgs+=("postgresql-client-$PGV")
  if ((${#pkgs[@]})); then
    apt_install "${pkgs[@]}"
    if pg_db_up; then mark "postgres: already answering"; return; fi
  fi
  if pg_port_up; then
    # Someone else's server answers: fix what the DSN needs, never restart it.
    if as_root test -d "$PGDATA"; then
      pg_configure
      if [ -n "$HBA_CHANGED" ]; then
        as_pg psql -p $PG_PORT -qAtc 'select pg_reload_conf()' >/dev/null
        mark "postgres: trust on 127.0.0.1 added, reloaded"
      fi
    fi
    mark "postgres: already answering"
  else
    pg_configure
    mkdir -p "$STATE"
    local log=$STATE/postgres.log
    as_root touch "$log" && as_root chown postgres "$log"
    as_root install -d -o postgres -g postgres -m 2775 /var/run/postgresql
    as_pg "$PGBIN/pg_ctl" start -w -s -t 60 -D "$PGDATA" -l "$log" \
      -o "-c config_file=$PGCONF/postgresql.conf" </dev/null >>"$log" 2>&1 ||
      { tail -20 "$log" >&2; die "pg_ctl start failed (log: $log)"; }
    as_root head -1 "$PGDATA/postmaster.pid" >"$STATE/postgres.pid" # so that "down" stops only what we started
    wait_for 30 pg_port_up || die "postgres not answering on 127.0.0.1:$PG_PORT"
    mark "postgres: started"
  fi
  if ! psql -w -h 127.0.0.1 -p $PG_PORT -U postgres -d postgres -qAtc \
    "select 1 from pg_database where datname = '$PG_DB'" 2>/dev/null | grep -q 1; then
    psql -w -h 127.0.0.1 -p $PG_PORT -U postgres -d postgres -qAtc "create database $PG_DB" >/dev/null 2>&1 ||
      as_pg psql -p $PG_PORT -qAtc "create database $PG_DB" >/dev/null
    mark "postgres: database $PG_DB created"
  fi
  wait_for 10 pg_db_up ||
    die "cannot connect to postgres://postgres@127.0.0.1:$PG_PORT/$PG_DB?sslmode=disable (trust auth on 127.0.0.1 needed in pg_hba.conf)"
}

# ---------------------------------------------------------------- ZooKeeper
start_zookeeper() {
  if zk_up; then mark "zookeeper: already answering"; return; fi
  local pkgs=()
  { [ -r /usr/share/java/zookeeper.jar ] && [ -d /etc/zookeeper/conf ]; } || pkgs+=(zookeeper) # pulls a JRE and its libraries
  [ -r /usr/share/java/slf4j-log4j12.jar ] || pkgs+=(libslf4j-java)                            # without these two it logs nothing
  [ -r /usr/share/java/log4j-1.2.jar ] || pkgs+=(liblog4j1.2-java)
  ((${#pkgs[@]} == 0)) || apt_install "${pkgs[@]}"
  command -v java >/dev/null || apt_install default-jre-headless
  mkdir -p "$ZKDIR/data"
  if ! alive "$ZKDIR/zk.pid" QuorumPeerMain; then # not one of ours still starting
    cat >"$ZKDIR/zoo.cfg" <<CFG
# written by simba scripts/services.sh
tickTime=500
maxSessionTimeout=60000
initLimit=10
syncLimit=5
dataDir=$ZKDIR/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,conf,isro,cons
CFG
    setsid nohup java -Xms64m -Xmx256m -Dzookeeper.log.dir="$ZKDIR" -Dzookeeper.root.logger=INFO,CONSOLE \
      -cp "$ZK_CP" org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZKDIR/zoo.cfg" \
      </dev/null >"$ZKDIR/zookeeper.log" 2>&1 &
    echo $! >"$ZKDIR/zk.pid"
  fi
  wait_for 60 zk_up || { tail -30 "$ZKDIR/zookeeper.log" >&2; die "zookeeper not serving on 127.0.0.1:$ZK_PORT (log: $ZKDIR/zookeeper.log)"; }
  mark "zookeeper: started"
}

# ---------------------------------------------------------------- MariaDB
# Debian's mariadb-server (no MySQL 8 for Debian 12). Its root authenticates
# by unix socket only: the socket, as root, lets root in over TCP with an
# empty password, as the tests' URL needs (mysql://root@127.0.0.1:3306/test).
mysql_root() { as_root mariadb --protocol=socket -u root -N "$@"; }
start_mariadb() {
  if mysql_db_up; then mark "mariadb: already answering"; return; fi
  { [ -x /usr/sbin/mariadbd ] && command -v mariadb >/dev/null; } || apt_install mariadb-server mariadb-client
  if mysql_db_up; then mark "mariadb: already answering"; return; fi
  if ! mysql_port_up; then
    mkdir -p "$STATE"
    as_root install -d -o mysql -g mysql -m 755 /run/mysqld
    [ -d /var/lib/mysql/mysql ] || { as_root mariadb-install-db --user=mysql --datadir=/var/lib/mysql >>"$STATE/mariadb.log" 2>&1 &&
      mark "mariadb: data directory initialised"; }
    if ! alive "$STATE/mariadb.pid" mariadbd; then
      as_root setsid nohup /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 --port=$MYSQL_PORT \
        --log-error="$STATE/mariadb.log" </dev/null >>"$STATE/mariadb.log" 2>&1 &
      echo $! >"$STATE/mariadb.pid"
    fi
    wait_for 60 mysql_port_up || { tail -20 "$STATE/mariadb.log" >&2; die "mariadb not answering on 127.0.0.1:$MYSQL_PORT (log: $STATE/mariadb.log)"; }
    mark "mariadb: started"
  fi
  # Someone else's server, or ours: give root an empty password over TCP
  # (keeping the socket login) and create the database, through the socket.
  if ! mysql_db_up; then
    mysql_root -e "ALTER USER root@localhost IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
      CREATE USER IF NOT EXISTS root@'127.0.0.1' IDENTIFIED BY '';
      GRANT ALL PRIVILEGES ON *.* TO root@'127.0.0.1' WITH GRANT OPTION;
      CREATE DATABASE IF NOT EXISTS \`$MYSQL_DB\`;" 2>>"$STATE/mariadb.log" ||
      die "cannot configure root over the socket (log: $STATE/mariadb.log)"
    mark "mariadb: root over TCP, database $MYSQL_DB"
  fi
  wait_for 10 mysql_db_up || die "cannot connect to mysql://root@127.0.0.1:$MYSQL_PORT/$MYSQL_DB"
}

# ---------------------------------------------------------------- down
stop_pid() { # stop_pid NAME PIDFILE PATTERN: stop the process we started, if it still runs
  if alive "$2" "$3"; then
    local pid; pid=$(cat "$2")
    kill "$pid"
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && die "$1 (pid $pid) did not stop"
    mark "$1: stopped (pid $pid)"
  else
    mark "$1: not started by this script, left alone"
  fi
  rm -f "$2"
}
down_redis() { stop_pid redis "$STATE/redis.pid" redis-server; }
down_redis_cluster() {
  local port
  for port in "${CLUSTER_PORTS[@]}"; do stop_pid "redis-cluster $port" "$STATE/redis-cluster/$port/redis.pid" redis-server; done
}
down_zookeeper() { stop_pid zookeeper "$ZKDIR/zk.pid" QuorumPeerMain; }
down_mariadb() { stop_pid mariadb "$STATE/mariadb.pid" mariadbd; }
down_postgres() {
  local ours pid
  ours=$(cat "$STATE/postgres.pid" 2>/dev/null || true)
  pid=$(as_root head -1 "$PGDATA/postmaster.pid" 2>/dev/null || true)
  if [ -n "$ours" ] && [ "$ours" = "$pid" ]; then
    as_pg "$PGBIN/pg_ctl" stop -s -m fast -D "$PGDATA"
    mark "postgres: stopped (pid $pid)"
  else
    mark "postgres: not started by this script, left alone"
  fi
  rm -f "$STATE/postgres.pid"
}

status_one() { # status_one NAME PIDFILE PROBE
  local ours=
  [ ! -s "$2" ] || ours=" (started by this script, pid $(cat "$2"))"
  if $3; then say "$1: answering$ours"; else say "$1: NOT answering$ours"; return 1; fi
}
status_redis() { status_one redis "$STATE/redis.pid" redis_up; }
status_redis_cluster() { status_one redis-cluster "$STATE/redis-cluster/${CLUSTER_PORTS[0]}/redis.pid" cluster_up; }
status_postgres() { status_one postgres "$STATE/postgres.pid" pg_db_up; }
status_zookeeper() { status_one zookeeper "$ZKDIR/zk.pid" zk_up; }
status_mariadb() { status_one mariadb "$STATE/mariadb.pid" mysql_db_up; }

cmd=up
case ${1:-} in up | down | status) cmd=$1; shift ;; esac
services=("$@")
((${#services[@]})) || services=(redis redis-cluster postgres zookeeper mariadb)
for s in "${services[@]}"; do
  case $s in redis | redis-cluster | postgres | zookeeper | mariadb) ;; *) echo "usage: $0 [up|down|status] [redis|redis-cluster|postgres|zookeeper|mariadb]..." >&2; exit 2 ;; esac
done
rc=0
for s in "${services[@]}"; do
  fn=${s//-/_}
  case $cmd in
  up) "start_$fn" ;;
  down) "down_$fn" ;;
  status) "status_$fn" || rc=1 ;;
  esac
done
[ "$cmd" != up ] || say "ready: ${services[*]} (redis 127.0.0.1:$REDIS_PORT | redis cluster 127.0.0.1:${CLUSTER_PORTS[0]}-${CLUSTER_PORTS[2]} | postgres://postgres@127.0.0.1:$PG_PORT/$PG_DB?sslmode=disable | zookeeper 127.0.0.1:$ZK_PORT | mysql://root@127.0.0.1:$MYSQL_PORT/$MYSQL_DB)"
exit $rc
