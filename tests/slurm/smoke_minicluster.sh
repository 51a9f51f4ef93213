#!/bin/bash
# shellcheck disable=SC2154 # lib.sh sets oc_dir
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# contrib/minicluster itself, on throwaway clusters of its own (not the
# shared one): start is idempotent, a daemon that cannot start is reported
# with its log, stop ends exactly its daemons, --netns gives each node an
# address of its own.
hvdt_own_cluster=1
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

own_cluster_require slurmctld slurmd srun unshare gcc
plan 14
T=$HVD_TEST_TIMEOUT
MC=$MINICLUSTER

# Its starts and stops are what it tests: own_cluster_dir only for the
# directories and their end.
own_cluster_dir test
dir=$oc_dir

pids() { cat "$1"/run/*.pid 2>/dev/null | sort | tr '\n' ' '; }

run_ok "start --nodes 2 --plugin none" \
	"$MC" start --dir "$dir" --nodes 2 --plugin none
run_ok "status: up" "$MC" status --dir "$dir"
before=$(pids "$dir")
run_ok "start again (idempotent)" "$MC" start --dir "$dir"
is "$(pids "$dir")" "$before" "the second start left the daemons alone"

out=$(SLURM_CONF=$dir/slurm.conf run_timeout "$T" srun -N2 -n2 \
	bash -c 'echo $SLURMD_NODENAME' 2>&1 | sort | tr '\n' ' ')
is "$out" "node1 node2 " "a job runs on it"

# A required plugin whose init fails in slurmd keeps slurmd from starting.
cat >"$dir/bad.c" <<'C'
#include <stddef.h>
#include <slurm/spank.h>
SPANK_PLUGIN(horovod, 1);
int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_SLURMD) {
		slurm_error("horovod: failing on purpose in slurmd");
		return -1;
	}
	return 0;
}
C
gcc -shared -fPIC -o "$dir/bad.so" "$dir/bad.c" 2>&1 | while read -r l; do diag "$l"; done
st=0
out=$(HVD_MINICLUSTER_WAIT=20 run_timeout "$T" "$MC" plugin "$dir/bad.so" \
	--dir "$dir" 2>&1) || st=$?
ok $((st == 0)) "a slurmd that cannot start fails the command (exit $st)"
like "$out" "failing on purpose in slurmd" "the error shows the end of slurmd's log" ||
	diag "$out"
run_ok "status says it is down" bash -c "! '$MC' status --dir '$dir'"

before=$(pids "$dir")
run_ok "stop" "$MC" stop --dir "$dir"
alive=
for p in $before; do
	[[ -d /proc/$p ]] && [[ $(awk '/^State:/ {print $2}' "/proc/$p/status") != Z ]] &&
		alive="$alive $p"
done
is "$alive" "" "every daemon it started has exited"
run_ok "status after stop: exit status 1" bash -c "! '$MC' status --dir '$dir'"

# --- --netns
if ! command -v ip >/dev/null; then
	skip 3 "ip not installed (iproute2): --netns not tested"
	exit 0
fi
own_cluster_dir test
dir2=$oc_dir
run_ok "start --netns" "$MC" start --dir "$dir2" --netns --plugin none
out=$(SLURM_CONF=$dir2/slurm.conf run_timeout "$T" srun -N2 -n2 \
	bash -c 'echo "$SLURMD_NODENAME $(ip -4 -o addr show eth0 | awk "{print \$4}")"' 2>&1 |
	sort | tr '\n' ' ')
prefix=$(sed -n 's/^NodeName=node1 .*NodeAddr=\([0-9.]*\)\.1 .*/\1/p' "$dir2/slurm.conf")
is "$out" "node1 $prefix.1/24 node2 $prefix.2/24 " \
	"each node has its own address on eth0"
"$MC" stop --dir "$dir2" >/dev/null 2>&1
tag=$(own_cluster_netns_tag "$dir2")
is "$(ip netns list | grep -c "hvd-$tag-")" 0 "stop removed the namespaces"
exit 0
