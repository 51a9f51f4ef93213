#!/bin/bash
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# The CPUs a task really runs on in a job (Cpus_allowed_list of the task
# itself) against what the plugin says (HOROVOD_CPU_LIST) and what hvd-topo
# computes for the topology the nodes really have (the nodes of the
# mini-cluster are this machine): cpu-bind=numa binds the task to exactly
# its hint, cpu-bind=none leaves the task's mask as Slurm gave it.
# spank_site.sh checks that the binding stays inside a narrower mask.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

slurm_has_horovod || skip_all "srun has no --horovod (plugin not in plugstack.conf)"
topo=$top_builddir/spank/hvd-topo
[[ -x $topo ]] || skip_all "no $topo"
plan 7
T=$HVD_TEST_TIMEOUT

# What hvd-topo says each of N local ranks gets: "LR LIST" lines.
predict() { # local-size
	"$topo" --local-size "$1" | awk '
		/^local rank [0-9]+:$/ { lr = $3; sub(":", "", lr) }
		/^  HOROVOD_CPU_LIST=/ { sub("^  HOROVOD_CPU_LIST=", ""); print lr, $0 }'
}
# Each task: "NODE LR ALLOWED HINT", sorted.
show='echo "$SLURMD_NODENAME $SLURM_LOCALID $(awk "/^Cpus_allowed_list:/ { print \$2 }" /proc/self/status) ${HOROVOD_CPU_LIST-unset}"'

want2=$(predict 2)
diag "hvd-topo for 2 local ranks here: $(tr '\n' ';' <<<"$want2")"
[[ -n $want2 ]]
ok $? "hvd-topo predicts a CPU list for each local rank"

out=$(run_timeout "$T" srun -Q --horovod -N2 -n4 bash -c "$show" 2>&1 | sort)
bad=$(awk '$3 != $4' <<<"$out")
is "$bad" "" "cpu-bind=numa (default): every task runs on exactly its HOROVOD_CPU_LIST" ||
	diag "$out"
got=$(awk '{ print $2, $4 }' <<<"$out" | sort -u)
is "$got" "$(sort <<<"$want2")" "... which is what hvd-topo computes for each local rank" ||
	diag "$out"
is "$(grep -c . <<<"$out")" 4 "... for all 4 tasks on both nodes"

# Without --horovod: the mask Slurm gives (task/none here: the daemon's),
# on the node the second step then runs on too (-N1 alone may pick
# another node, whose name would differ).
plain=$(run_timeout "$T" srun -Q -N1 -n2 bash -c "$show" 2>&1 | sort)
node=$(awk 'NR == 1 { print $1 }' <<<"$plain")
out=$(run_timeout "$T" srun -Q --horovod=cpu-bind=none -N1 -n2 \
	${node:+-w "$node"} bash -c "$show" 2>&1 | sort)
is "$(awk '{ print $1, $2, $3 }' <<<"$out")" "$(awk '{ print $1, $2, $3 }' <<<"$plain")" \
	"cpu-bind=none: the task's mask is left as Slurm gave it" || diag "$out" "$plain"
is "$(awk '{ print $2, $4 }' <<<"$out")" "$want2" "... and HOROVOD_CPU_LIST is still the hint"

all=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status)
if [[ $(awk '{ print $2 }' <<<"$want2" | sort -u) == "$all" ]]; then
	diag "on this machine every local rank's list is all its CPUs ($all): one"
	diag "NUMA node and no GPU, so binding and the inherited mask look the"
	diag "same; multi-NUMA and GPU layouts are checked on real machines'"
	diag "topologies in unit/test_spank_hints and hvd_topo.sh"
fi
# The plugin's verbose report agrees with what the task reads.
out=$(run_timeout "$T" srun -Q --horovod=verbose -N1 -n1 bash -c "$show" 2>&1)
like "$out" 'HOROVOD_CPU_LIST=[0-9,-]+ \(CPUs of .*the task is bound to them \(cpu-bind=numa\)\)' \
	"verbose says the task is bound, and to what"
exit 0
