#!/usr/bin/env bash
# The training example across two "hosts": two network namespaces joined by
# a veth pair (10.99.0.1 and 10.99.0.2), two processes on each, so that the
# rendezvous, the control plane and Gloo run over a real interface with
# non-loopback addresses (VARSYNC_BIND), as on a cluster, with a cluster
# token (VARSYNC_CLUSTER_TOKEN). With the netem queueing discipline
# available, each direction adds 1 ms of delay. The four processes must end
# with the single-process weights; a fifth process on the second host, with
# another token, must be refused (and process 0 must log it).
#
# Needs unprivileged user and network namespaces (unshare -rnm) and
# iproute2; without them the test is skipped (exit 77), saying why.
#
#   training_hosts.sh TRAINING_BINARY WORKDIR
set -uo pipefail
training=$1
workdir=$2
mkdir -p "$workdir"
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "${VARSYNC_HOSTS_INSIDE:-}" ]; then
  if ! command -v ip >/dev/null || ! command -v unshare >/dev/null; then
    echo "SKIPPED: needs iproute2 (ip) and unshare"; exit 77
  fi
  if ! unshare -rnm --propagation private true 2>/dev/null; then
    echo "SKIPPED: this machine does not allow user and network namespaces" \
         "(unshare -rnm)"; exit 77
  fi
  set -e
  # shellcheck source=weights.sh
  source "$here/weights.sh"
  "$training" --smoke --print-weights >"$workdir/single.log" 2>&1 \
    || { cat "$workdir/single.log"; exit 1; }
  want=$(weights_of "$workdir/single.log")
  set +e
  VARSYNC_HOSTS_INSIDE=1 unshare -rnm --propagation private \
    bash "$0" "$training" "$workdir"
  status=$?
  [ $status -eq 0 ] || exit $status # 77: skipped inside
  for r in 0 1 2 3; do
    log="$workdir/rank$r.log"
    grep -q '^training: converged, all checks passed' "$log" \
      || { cat "$log"; echo "FAILED: rank $r"; exit 1; }
    same_weights "$want" "$(weights_of "$log")" "rank $r of 4 on 2 hosts"
    grep -q 'collectives over Gloo (no shared memory' "$log" \
      || { cat "$log"; echo "FAILED: rank $r did not fall back to Gloo"; exit 1; }
  done
  grep -q 'cannot join the rendezvous at 10.99.0.1:.*cluster token' \
    "$workdir/intruder.log" \
    || { cat "$workdir/intruder.log"; echo "FAILED: the intruder was not refused"; exit 1; }
  grep -q 'refused 10.99.0.2:.*did not prove the cluster token' \
    "$workdir/rank0.log" \
    || { cat "$workdir/rank0.log"; echo "FAILED: process 0 did not log the refusal"; exit 1; }
  echo "training across 2 hosts x 2 processes: the single-process weights"
  exit 0
fi

# Inside the namespaces (root there, nowhere else): two hosts. A machine
# that refuses a step of the set-up skips the test; what fails after it
# fails the test.
setup() {
  mkdir -p /run/netns &&
    mount -t tmpfs varsync-netns /run/netns &&
    ip netns add h0 && ip netns add h1 &&
    ip link add v0 type veth peer name v1 &&
    ip link set v0 netns h0 && ip link set v1 netns h1 &&
    ip -n h0 addr add 10.99.0.1/24 dev v0 &&
    ip -n h1 addr add 10.99.0.2/24 dev v1 &&
    ip -n h0 link set lo up && ip -n h1 link set lo up &&
    ip -n h0 link set v0 up && ip -n h1 link set v1 up &&
    ip netns exec h1 true
}
if ! setup_log=$(setup 2>&1); then
  echo "SKIPPED: the two-host network could not be set up here: $setup_log"
  exit 77
fi
if ip netns exec h0 tc qdisc add dev v0 root netem delay 1ms 2>/dev/null \
   && ip netns exec h1 tc qdisc add dev v1 root netem delay 1ms 2>/dev/null; then
  echo "netem: 1 ms each way between the hosts"
else
  echo "netem is not available here (no sch_netem): no added delay"
fi
set +e
port=$(( 20000 + RANDOM % 10000 ))
token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null' EXIT
# rank 4 is the intruder: another token, from the second host.
for r in 0 1 2 3 4; do
  host=h$(( r < 4 ? r / 2 : 1 ))
  addr=10.99.0.$(( r < 4 ? r / 2 + 1 : 2 ))
  rank=$(( r < 4 ? r : 3 ))
  key=$token
  log="$workdir/rank$r.log"
  if [ $r -eq 4 ]; then
    key=another-token-$token
    log="$workdir/intruder.log"
  fi
  # Each process gets a /dev/shm of its own, as on separate hosts: rank 0's
  # shared memory segment cannot be opened elsewhere, so the automatic
  # transport falls back to Gloo over the link.
  ip netns exec "$host" unshare -m sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh \
    env VARSYNC_RANK=$rank VARSYNC_WORLD_SIZE=4 \
    VARSYNC_LOCAL_RANK=$(( r % 2 )) VARSYNC_RENDEZVOUS=10.99.0.1:$port \
    VARSYNC_BIND="$addr" VARSYNC_TIMEOUT_MS=20000 VARSYNC_LOG_LEVEL=info \
    VARSYNC_CLUSTER_TOKEN="$key" \
    timeout -s KILL 240 "$training" --smoke --print-weights \
    >"$log" 2>&1 &
  pids+=($!)
done
status=0
for r in 0 1 2 3; do
  if ! wait "${pids[$r]}"; then
    status=1
    echo "== rank $r (host h$(( r / 2 ))) failed:"
    cat "$workdir/rank$r.log"
  fi
done
if wait "${pids[4]}"; then
  status=1
  echo "== the intruder (another token) joined:"
  cat "$workdir/intruder.log"
fi
# The processes talked across the link, not through a loopback.
crossed=$(ip netns exec h1 cat /sys/class/net/v1/statistics/rx_bytes)
echo "bytes that reached host h1 over its link: $crossed"
if [ "$status" -eq 0 ] && [ "$crossed" -lt 100000 ]; then
  echo "FAILED: only $crossed bytes crossed between the hosts"; status=1
fi
exit $status
