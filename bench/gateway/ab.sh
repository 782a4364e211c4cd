#!/bin/bash
# A/B of two builds of the gateway on this machine: CPU time per request of `edgelimit serve`
# (bench/gateway/memory.yaml) under `wrk -t1 -c50`, the gateway pinned to core 1 and the origin and
# wrk to core 0 (less scheduling noise than throughput on 2 shared cores), rounds alternating.
#
#   bench/gateway/ab.sh <checkout A> <checkout B> [rounds]   # each checkout built (npm run build)
#
# e.g. git worktree add /tmp/old <rev> && (cd /tmp/old && npm ci && npm run build)
#      bench/gateway/ab.sh /tmp/old . 6
set -u
A_DIR=$(cd "$1" && pwd); B_DIR=$(cd "$2" && pwd); ROUNDS=${3:-6}
HERE=$(cd "$(dirname "$0")" && pwd)
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }
O=$(free_port); P=$(free_port)
taskset -c 0 node "$HERE/origin.mjs" "$O" > /dev/null & OP=$!
trap 'kill $OP 2>/dev/null' EXIT
sleep 1
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; } # utime + stime, 1/100 s
run() {
  taskset -c 1 node "$1/packages/gateway/dist/cli.js" serve --config "$HERE/memory.yaml" \
    --upstream "http://127.0.0.1:$O" --port "$P" --admin-port 0 -q --log-level warn > /dev/null 2>&1 &
  local gp=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$P/" && break; sleep 0.1; done
  taskset -c 0 wrk -t1 -c50 -d3s "http://127.0.0.1:$P/" > /dev/null
  local c0 n c1
  c0=$(ticks $gp)
  n=$(taskset -c 0 wrk -t1 -c50 -d6s "http://127.0.0.1:$P/" | awk '/requests in/ {print $1}')
  c1=$(ticks $gp)
  kill $gp; wait $gp 2> /dev/null
  echo "$n $c0 $c1" | awk '{printf "%.1f µs/req (%d requests)", ($3-$2)*10000/$1, $1}'
}
echo "A = $A_DIR ($(git -C "$A_DIR" rev-parse --short HEAD)), B = $B_DIR ($(git -C "$B_DIR" rev-parse --short HEAD))"
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then a=$(run "$A_DIR"); b=$(run "$B_DIR"); else b=$(run "$B_DIR"); a=$(run "$A_DIR"); fi
  echo "round $round  A $a  |  B $b"
done
