#!/usr/bin/env bash
# Runs MPI jobs over three test hosts: network namespaces joined by a
# bridge (10.77.0.1-3, each with its own host name), made and torn down
# here. Open MPI reaches each "host" through an rsh agent script that
# enters the namespace instead of ssh. Skips (exit 77), saying why, where
# the machine does not allow network namespaces.
#
# Usage: netns.sh MPIRUN MPI_TESTS
set -uo pipefail
mpirun=$1
tests=$2
prefix="tg$$"
net=10.77.$(( $$ % 200 + 20 ))  # a subnet of this run's own
work=$(mktemp -d)

cleanup() {
  for i in 1 2 3; do ip netns del "${prefix}h$i" 2>/dev/null; done
  ip link del "${prefix}br" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

if [[ $(id -u) != 0 ]] || ! ip netns add "${prefix}h1" 2>/dev/null; then
  echo "SKIP: network namespaces are not available here (needs root with CAP_NET_ADMIN and iproute2)"
  exit 77
fi

set -e
ip link add "${prefix}br" type bridge
ip addr add "$net.254/24" dev "${prefix}br"
ip link set "${prefix}br" up
for i in 1 2 3; do
  [[ $i == 1 ]] || ip netns add "${prefix}h$i"
  ip link add "${prefix}v$i" type veth peer name "${prefix}p$i"
  ip link set "${prefix}p$i" netns "${prefix}h$i"
  ip link set "${prefix}v$i" master "${prefix}br" up
  ip netns exec "${prefix}h$i" ip addr add "$net.$i/24" dev "${prefix}p$i"
  ip netns exec "${prefix}h$i" ip link set "${prefix}p$i" up
  ip netns exec "${prefix}h$i" ip link set lo up
  echo "$net.$i slots=1" >>"$work/hosts"
done

# The rsh agent: `agent [options] HOST command...` runs the command inside
# HOST's namespace, under a host name of its own.
cat >"$work/agent" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
n=\${host##*.}
exec ip netns exec ${prefix}h\$n unshare --uts sh -c "hostname testhost\$n; \$*"
AGENT
chmod +x "$work/agent"
set +e

run() {
  "$mpirun" --allow-run-as-root --timeout 90 --hostfile "$work/hosts" -np 3 \
    --mca plm_rsh_agent "$work/agent" \
    --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24" --mca btl tcp,self \
    -x ASAN_OPTIONS -x LSAN_OPTIONS "$@"
}

status=0
# (mpirun's own warnings go to stderr: only the ranks' output counts.)
names=$(run hostname 2>"$work/hostname.err" | sort | tr '\n' ' ')
if [[ $names != "testhost1 testhost2 testhost3 " ]]; then
  echo "FAIL: expected one rank on each test host, got: $names"
  cat "$work/hostname.err"
  exit 1
fi
echo "ranks on: $names"
run "$tests" "[mpi_placement],[mpi_outputs],[mpi_failure],[mpi_cancel],[mpi_gather]" --order decl || status=1
exit $status
