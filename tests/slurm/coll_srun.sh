#!/bin/bash
# coll_srun.sh - the collectives under srun --mpi=pmix on two nodes of the
# mini-cluster: coll_check with 2 ranks per node (hierarchical allreduce:
# shared memory within a node, UCX between them), the same with the flat
# UCX algorithms only, an uneven 2+1 placement, and a rank killed on one
# node while the others (on both nodes) must name it.  Last, the CPUs the
# ranks count as theirs: those of their affinity masks, not the machine's.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

coll_check_require

plan 11
slurm_workdir >/dev/null
err=$hvdt_workdir/stderr

out=$(HOROVOD_LOG_LEVEL=trace run_timeout "$HVD_TEST_TIMEOUT" \
	srun -Q --mpi=pmix -N2 -n4 --ntasks-per-node=2 "$CHECK" 2>"$err")
check_run "srun -N2 -n4: coll_check" "$out"
hier=$(grep -c 'allreduce ctx 1: .*: hier$' "$err")
nodes=$(grep -c 'info: rank [0-3] of 4, node [01] of 2 .*local [01] of 2, cross [01] of 2' \
	"$err")
ok $(( hier > 0 && nodes == 4 ? 0 : 1 )) \
	"4 ranks saw 2 nodes x 2 ($nodes did); allreduce ran hierarchical ($hier calls on rank 0..3)"

out=$(HVD_SHM=0 HOROVOD_HIERARCHICAL_ALLREDUCE=0 run_timeout \
	"$HVD_TEST_TIMEOUT" srun -Q --mpi=pmix -N2 -n4 --ntasks-per-node=2 \
	"$CHECK" 2>&1)
check_run "srun -N2 -n4, UCX only (HVD_SHM=0)" "$out"

out=$(run_timeout "$HVD_TEST_TIMEOUT" srun -Q --mpi=pmix -N2 -n3 \
	--distribution=block "$CHECK" 2>&1)
check_run "srun -N2 -n3 (uneven nodes: flat algorithms)" "$out"

# Job start-up, several times over: the first messages of the engine
# thread and of the blocking collectives once raced with the endpoints'
# wireup (both ranks then waited 60 s for each other; 1 ckpt_signal.sh in
# 4 on a loaded machine).  Short jobs and a short peer timeout: a hang
# fails in seconds.
TRAIN=$top_builddir/contrib/examples/train
if [[ -x $TRAIN ]]; then
	good=0
	for i in 1 2 3 4 5 6; do
		out=$(HOROVOD_PEER_TIMEOUT=20 run_timeout 60 srun --mpi=pmix \
			-N2 -n2 "$TRAIN" --steps 40 --sleep-ms 2 \
			--ckpt-dir "$hvdt_workdir/ck$i" --ckpt-every 0 2>&1)
		if grep -q '^train: done: 40 steps' <<<"$out"; then
			good=$((good + 1))
		else
			diag "start $i: $(tail -n 5 <<<"$out")"
		fi
	done
	is "$good" 6 "6 short 2-node training jobs in a row start and finish"
else
	skip "$TRAIN not built"
fi

# Rank 1 (node 1) dies inside an allreduce; ranks 0, 2 and 3 name it.
start=$(date +%s)
out=$(HOROVOD_PEER_TIMEOUT=10 run_timeout 90 srun -Q --mpi=pmix -N2 -n4 \
	--ntasks-per-node=2 "$CHECK" kill 1 2>/dev/null)
took=$(($(date +%s) - start))
named=$(grep -c 'HVD_ERR_PEER_FAILED after .*rank 1 failed' <<<"$out")
is "$named" 3 "killed rank 1: the 3 survivors on both nodes name it" ||
	diag "$out"
ok $(( took < 60 ? 0 : 1 )) "the step ended in ${took}s"

# Two ranks confined to one CPU (as by a cgroup narrower than the node):
# the ranks must count the CPUs they may run on, not the machine's, or
# each spins for its time slice while the other holds the data it waits
# for.  taskset stands in for the cgroup (task/none here); the mask is
# what a cgroup's cpuset would leave.
out=$(HOROVOD_LOG_LEVEL=debug run_timeout "$HVD_TEST_TIMEOUT" srun -Q \
	--mpi=pmix -N1 -n2 taskset -c 0 "$CHECK" 2>"$err")
check_run "srun -N1 -n2, both ranks on CPU 0: coll_check" "$out"
said=$(grep -c 'debug: 2 ranks of the job on this machine, on 1 CPU they may use; the job is crowded$' "$err")
is "$said" 2 "... both ranks count 1 CPU and call the job crowded" ||
	diag "$(grep 'CPU' "$err")"

# One rank on CPU 0, the other on CPU 1: each mask has one CPU, and the
# ranks must count their union, 2, and not call the job crowded.
if (($(nproc) >= 2)); then
	out=$(HOROVOD_LOG_LEVEL=debug run_timeout "$HVD_TEST_TIMEOUT" srun -Q \
		--mpi=pmix -N1 -n2 bash -c 'exec taskset -c "$SLURM_LOCALID" "$0"' \
		"$CHECK" 2>"$err")
	check_run "srun -N1 -n2, ranks on CPUs 0 and 1: coll_check" "$out"
	said=$(grep -c 'debug: 2 ranks of the job on this machine, on 2 CPUs they may use$' "$err")
	is "$said" 2 "... both ranks count the 2 CPUs of their masks together" ||
		diag "$(grep 'CPU' "$err")"
else
	skip "one CPU here ($(nproc)): no two CPUs to put the ranks on"
	skip "one CPU here: no union of two masks to count"
fi
