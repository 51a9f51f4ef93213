#!/bin/bash
# pidns.sh - ranks of one node that each run in a pid namespace of their
# own, as in a container per task (unshare --pid here; Apptainer's --pid,
# or a runtime that gives every task its own namespace): a pid published
# by one means nothing to the other.  Before the pid namespace went into
# every record that carries a pid, two such ranks with different pids
# failed in hvd_init ("cannot connect to rank 1: ... Endpoint timeout", or
# "rank 0 failed: its process (pid 2 on this node) is gone").  Now: the
# collectives run and are right on 2 nodes x 2 ranks, every rank says how
# many node-mates it watches through the network, and a rank killed
# inside a collective is still named by the others on both nodes.  An
# elastic job of 2 x 2 ranks in such namespaces (the agreement's member
# records and the new world's records carry the namespace too) goes on
# at size 3 after a rank is killed, as elastic_kill.sh's does without.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"
. "$top_srcdir/tests/slurm/elastic_lib.sh"

coll_check_require
if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
	skip_all "unshare --pid is not allowed here (needs root or user namespaces)"
fi

plan 17
slurm_workdir >/dev/null
wd=$hvdt_workdir
err=$hvdt_workdir/stderr

# Each task: a pid namespace of its own, and 25 sleepers per local rank
# started first, so that node-mates' pids differ (rank with local id 0:
# pid 2, local id 1: pid 27); pid 1, the shell, takes them along when the
# rank ends.
# shellcheck disable=SC2016 # the task's shell expands it
wrap=(unshare --pid --fork --mount-proc bash -c
	'for ((i = 0; i < 25 * SLURM_LOCALID; i++)); do sleep 300 & done
	"$@"; rc=$?; exit $rc' wrap)

out=$(HOROVOD_LOG_LEVEL=debug run_timeout "$HVD_TEST_TIMEOUT" \
	srun -Q --mpi=pmix -N2 -n4 --ntasks-per-node=2 "${wrap[@]}" \
	"$CHECK" 2>"$err")
check_run "srun -N2 -n4, a pid namespace per rank" "$out" ||
	diag "$(grep -v 'debug' "$err" | head -n 20)"
said=$(grep -c 'debug: 1 rank(s) of this node run in another pid namespace: watched through the network, not their pids$' "$err")
is "$said" 4 "each of the 4 ranks watches its node-mate through the network" ||
	diag "$(grep 'namespace' "$err")"
nodes=$(grep -c 'info: rank [0-3] of 4, node [01] of 2 .*local [01] of 2' "$err")
is "$nodes" 4 "... and still counts it on its node (local rank of 2)" ||
	diag "$(grep 'info: rank' "$err")"

# The node's collectives go through its shared memory all the same:
# traced on one node, every allreduce of the world ran on it.
out=$(HOROVOD_LOG_LEVEL=trace run_timeout "$HVD_TEST_TIMEOUT" \
	srun -Q --mpi=pmix -N1 -n2 "${wrap[@]}" "$CHECK" 2>"$err")
check_run "srun -N1 -n2 in pid namespaces" "$out"
shm=$(grep -c 'trace: allreduce ctx 1: .*: shm$' "$err")
other=$(grep 'trace: allreduce ctx 1: ' "$err" | grep -vc ': shm$')
ok $((shm > 0 && other == 0 ? 0 : 1)) \
	"... its world allreduces ran in shared memory ($shm, $other otherwise)"

# A /dev/shm of each rank's own (Apptainer's --containall): the segment
# of local rank 0 is not there for rank 1; both say so and go through UCX.
out=$(run_timeout "$HVD_TEST_TIMEOUT" srun -Q --mpi=pmix -N1 -n2 \
	unshare --pid --fork --mount-proc bash -c \
	'mount -t tmpfs -o size=64m tmpfs /dev/shm || exit 99; exec "$@"' \
	wrap "$CHECK" 2>"$err")
check_run "a /dev/shm per rank" "$out" || diag "$(head -n 10 "$err")"
warned=$(grep 'warning: shared memory unavailable' "$err" | grep -o '\[[01]\]' | sort -u | wc -l)
is "$warned" 2 "... both ranks warn that shared memory is unavailable" ||
	diag "$(head -n 10 "$err")"

# Rank 1 (node 1) dies inside an allreduce; ranks 0, 2 and 3 name it.
# Its node-mate, rank 0, cannot see its pid: the network says it.
start=$(date +%s)
out=$(HOROVOD_PEER_TIMEOUT=10 run_timeout 90 srun -Q --mpi=pmix -N2 -n4 \
	--ntasks-per-node=2 "${wrap[@]}" "$CHECK" kill 1 2>/dev/null)
took=$(($(date +%s) - start))
named=$(grep -c 'HVD_ERR_PEER_FAILED after .*rank 1 failed' <<<"$out")
is "$named" 3 "killed rank 1: the 3 survivors on both nodes name it" ||
	diag "$out"
ok $((took < 60 ? 0 : 1)) "the step ended in ${took}s"

# The elastic job.  The ranks print their pids as their namespaces see
# them; the kill needs the pid seen from here: the elastic_train process
# whose environment carries this run's tag and the rank's SLURM_PROCID.
host_pid() { # TAG RANK
	local p env
	for p in $(pgrep -x elastic_train); do
		env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
		grep -qx "HVDT_TAG=$1" <<<"$env" &&
			grep -qx "SLURM_PROCID=$2" <<<"$env" && echo "$p" && return
	done
}
if ! slurm_has_horovod; then
	skip 8 "srun has no --horovod (plugin not in plugstack.conf)"
elif [[ ! -x $EL_PROG ]]; then
	skip 8 "$EL_PROG is not built"
else
	cd "$wd" || bail_out "no $wd"
	E=(--no-kill --kill-on-bad-exit=0 --horovod=elastic -N2
		--ntasks-per-node=2 "${wrap[@]}")
	el_ref_ok "$wd/eref" "2 x 2 tasks, a pid namespace each" "${E[@]}"
	out=$wd/ekill
	tag=pidns$$
	HVDT_TAG=$tag el_start "$out" "${E[@]}"
	el_wait_step "$out" 20
	el_pids=
	for r in 0 1 2 3; do el_pids="$el_pids $(host_pid "$tag" "$r")"; done
	victim=$(host_pid "$tag" 1)
	el_killed_at=$(el_now)
	if [[ -n $victim ]]; then kill -9 "$victim"; else diag "no pid for rank 1 (of:$el_pids)"; fi
	el_finish "$out"
	ok "$el_returned" "elastic, 2 x 2 in pid namespaces, task 1 killed: srun returns (status $el_st)"
	el_checks "$out" 3 "elastic in pid namespaces"
	diag "kill -> training at size 3 (s):$el_times"
fi
