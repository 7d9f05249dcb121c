#!/usr/bin/env bash
# zk-ensemble: a 3-node ZooKeeper ensemble on loopback, to try the ZooKeeper backend
# against by hand (the tests start ensembles of their own: internal/testkit/testservers).
#   zk-ensemble.sh up | down | status | stop N [-KILL|-STOP] | start N
# Node N (1..3): client 127.0.0.1:228N, quorum 127.0.0.1:288(7+N), election 127.0.0.1:388(7+N)
# Connect string: 127.0.0.1:2281,127.0.0.1:2282,127.0.0.1:2283
set -euo pipefail
BASE=${ZK_ENSEMBLE_DIR:-${SIMBA_SERVICES_DIR:-/var/lib/simba-ci}/zk-ensemble}
TICK=${ZK_TICK_MS:-500}           # session timeout is clamped to [2*tick, 20*tick]
CP=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
[ -r /usr/share/java/zookeeper.jar ] || { echo "install the zookeeper package first" >&2; exit 1; }

four() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$((2280+$1)) && printf $2 >&3 && cat <&3" 2>/dev/null || true; }
mode() { four "$1" srvr | sed -n 's/^Mode: //p'; }
alive() { local p; p=$(cat "$BASE/node$1/zk.pid" 2>/dev/null) && grep -qs QuorumPeerMain /proc/$p/cmdline; }

write_cfg() {
  local i=$1 d=$BASE/node$1
  mkdir -p "$d/data"; echo "$i" >"$d/data/myid"
  cat >"$d/zoo.cfg" <<EOF
tickTime=$TICK
initLimit=10
syncLimit=5
dataDir=$d/data
clientPort=$((2280+i))
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,conf,isro,cons
server.1=127.0.0.1:2888:3888
server.2=127.0.0.1:2889:3889
server.3=127.0.0.1:2890:3890
EOF
}
start_node() { # keeps an existing zoo.cfg, so a restarted node keeps the ensemble's tickTime
  local i=$1 d=$BASE/node$1
  [ -f "$d/zoo.cfg" ] || write_cfg "$i"
  alive "$i" && return 0
  setsid nohup java -Xms32m -Xmx128m -Dzookeeper.log.dir="$d" -Dzookeeper.root.logger=INFO,CONSOLE \
    -cp "$CP" org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" >"$d/zookeeper.log" 2>&1 </dev/null &
  echo $! >"$d/zk.pid"
}
stop_node() { # stop_node N [-KILL|-STOP]  (-STOP freezes it: the port still accepts TCP)
  local p; p=$(cat "$BASE/node$1/zk.pid" 2>/dev/null) || return 0
  grep -qs QuorumPeerMain /proc/$p/cmdline || { rm -f "$BASE/node$1/zk.pid"; return 0; }
  if [ "${2:-}" = -STOP ]; then kill -STOP "$p"; return 0; fi
  kill "${2:--TERM}" "$p"; kill -CONT "$p" 2>/dev/null || true
  while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
  rm -f "$BASE/node$1/zk.pid"
}
wait_quorum() { # until every running node serves and exactly one is leader
  local deadline=$(( $(date +%s) + ${1:-60} )) ok leaders i m
  while :; do
    ok=1 leaders=0
    for i in 1 2 3; do
      alive "$i" || continue
      m=$(mode "$i"); [ -n "$m" ] || ok=0; [ "$m" = leader ] && leaders=$((leaders+1))
    done
    [ $ok = 1 ] && [ $leaders = 1 ] && return 0
    (( $(date +%s) < deadline )) || { echo "no quorum" >&2; return 1; }
    sleep 0.1
  done
}
status() { for i in 1 2 3; do printf 'node%s 127.0.0.1:%s %s\n' "$i" $((2280+i)) "$(alive "$i" && { mode "$i"; true; } || echo down)"; done; }

case "${1:-}" in
  up)     for i in 1 2 3; do alive "$i" || write_cfg "$i"; start_node "$i"; done; wait_quorum 90; status ;;
  down)   for i in 1 2 3; do stop_node "$i"; done ;;
  status) status ;;
  stop)   stop_node "$2" "${3:-}" ;;
  start)  start_node "$2"; wait_quorum 90 ;;
  *) echo "usage: $0 up|down|status|stop N [-KILL|-STOP]|start N" >&2; exit 2 ;;
esac
