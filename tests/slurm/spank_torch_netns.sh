#!/bin/bash
# shellcheck disable=SC2154 # lib.sh sets oc_dir, oc_out, oc_plugin
# torch.distributed env:// under srun --horovod on a cluster of its own where
# each node has its own network namespace and address (minicluster --netns)
# and slurmctld reserves ports per step (MpiParams=ports=): MASTER_ADDR is
# the NodeAddr of the node that runs rank 0 (also when that is not the first
# node: -m arbitrary), gloo goes over the node's interface, and two jobs'
# steps on the same nodes at the same time get different reserved
# MASTER_PORTs.
hvdt_own_cluster=1
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"
. "$top_srcdir/tests/slurm/spank_torch_lib.sh"

own_cluster_require --netns --plugin
torch_ok || skip_all "$TORCH_PY has no torch (Debian: apt-get install python3-torch)"
own_cluster_visible
plan 11
T=$HVD_TEST_TIMEOUT

# The configuration is written by the first start; the port range is
# added to it and read again by every daemon (scontrol reconfigure).
own_cluster_dir torch
dir=$oc_dir
st=0
own_cluster_start --netns --plugin "$oc_plugin" || st=$?
out=$oc_out
if [[ $st == 0 ]]; then
	echo "MpiParams=ports=21000-21999" >>"$dir/slurm.conf"
	out+=$(run_timeout 60 scontrol reconfigure 2>&1) || st=$?
fi
for ((i = 0; i < 50 && st == 0; i++)); do
	run_timeout 20 scontrol show config 2>/dev/null |
		grep -q 'MpiParams *= *ports=21000-21999' && break
	sleep 0.2
done
ok $st "a 2-node cluster with --netns and MpiParams=ports" || {
	diag "$out"
	exit 0
}
wd=$dir/jobs/torch
mkdir -p "$wd"
chmod 755 "$dir/jobs" "$wd"
torch_script "$wd"
a1=$(node_addr node1)
a2=$(node_addr node2)
diag "node1 $a1, node2 $a2"

out=$(cd "$wd" && run_timeout "$T" srun -Q -N2 -n4 --mpi=pmix --horovod \
	"$TORCH_PY" allreduce.py a 2>&1)
is "$(torch_lines a "$out")" "$(torch_expect a 4)" \
	"4 ranks in two namespaces: the sum of 4 on every rank" || diag "$out"
addr=$(torch_addrs a "$out")
is "${addr%:*}" "$a1" "MASTER_ADDR is node1's own address"
like "${addr#*:}" '^21[0-9]{3}$' "MASTER_PORT is one of the reserved ports (${addr#*:})"

# Rank 0 on the second node: its address, not the first node's.
printf 'node2\nnode1\nnode1\nnode2\n' >"$wd/hosts"
out=$(cd "$wd" && SLURM_HOSTFILE=$wd/hosts run_timeout "$T" srun -Q -n4 \
	-m arbitrary --mpi=pmix --horovod "$TORCH_PY" allreduce.py b 2>&1)
is "$(torch_lines b "$out")" "$(torch_expect b 4)" \
	"-m arbitrary with rank 0 on node2: the sum of 4" || diag "$out"
addr=$(torch_addrs b "$out")
is "${addr%:*}" "$a2" "MASTER_ADDR is node2's address"

out=$(run_timeout "$T" srun -Q -N1 -n1 --horovod env 2>&1)
is "$(sed -n 's/^GLOO_SOCKET_IFNAME=//p' <<<"$out")" eth0 \
	"GLOO_SOCKET_IFNAME=eth0, the node's interface (gloo would take 127.0.1.1)"

# Two jobs, each a step on both nodes, at the same time.
( cd "$wd" && run_timeout "$T" srun -Q -N2 -n2 --mpi=pmix --horovod \
	"$TORCH_PY" allreduce.py c d >"$wd/c.out" 2>&1 ) &
( cd "$wd" && run_timeout "$T" srun -Q -N2 -n2 --mpi=pmix --horovod \
	"$TORCH_PY" allreduce.py d c >"$wd/d.out" 2>&1 ) &
wait
out=$(cat "$wd/c.out" "$wd/d.out")
is "$(torch_lines c "$out")" "$(torch_expect c 2)" "job c: the sum of its 2 ranks" ||
	diag "$out"
is "$(torch_lines d "$out")" "$(torch_expect d 2)" "job d: the sum of its 2 ranks" ||
	diag "$out"
pc=$(torch_addrs c "$out")
pd=$(torch_addrs d "$out")
ok "$([[ -n $pc && -n $pd && ${pc#*:} != "${pd#*:}" ]] && echo 0 || echo 1)" \
	"two jobs on the same nodes at once: different reserved MASTER_PORTs ($pc, $pd)"
ok "$([[ -e $wd/c.up && -e $wd/d.up ]] && echo 0 || echo 1)" \
	"... and they ran at the same time"
exit 0
