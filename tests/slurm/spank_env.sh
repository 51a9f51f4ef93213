#!/bin/bash
# shellcheck disable=SC2016 # the single-quoted $VARs are for the tasks
# srun --horovod on the mini-cluster: every task's environment for block,
# cyclic and uneven (-n3 on 2 nodes) layouts; user variables kept.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

slurm_has_horovod || skip_all "srun has no --horovod (plugin not in plugstack.conf)"
plan 16

# One line per task: the variables that matter, in a fixed order.
show='echo "$SLURM_PROCID $HOROVOD_RANK $HOROVOD_SIZE $HOROVOD_LOCAL_RANK'
show+=' $HOROVOD_LOCAL_SIZE $HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE'
show+=' $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $SLURMD_NODENAME"'

# --- block: srun --horovod -N2 -n4 env, each task's lines that matter.
# Not env's whole output: once a task has exited, slurmstepd forwards what
# is left of its output in 1024-byte pieces cut anywhere
# (SLURM_IO_MAX_MSG_LEN; line buffering is ignored at end of file), and
# srun writes the pieces of 4 tasks as they come, so another task's line
# could land in the middle of one (CI once saw 3 HOROVOD_RANK lines of 4).
# A few short lines leave in one piece.
out=$(run_timeout "$HVD_TEST_TIMEOUT" srun -Q --horovod -N2 -n4 \
	bash -c 'env | grep -E "^(HOROVOD_RANK|MASTER_ADDR|MASTER_PORT)="' 2>&1)
ok $? "srun --horovod -N2 -n4 env ran" || diag "$out"
is "$(grep -c '^HOROVOD_RANK=' <<<"$out")" 4 "every task has HOROVOD_RANK"
is "$(grep '^HOROVOD_RANK=' <<<"$out" | sort | tr '\n' ' ')" \
	"HOROVOD_RANK=0 HOROVOD_RANK=1 HOROVOD_RANK=2 HOROVOD_RANK=3 " \
	"ranks 0..3 once each"
addr=$(run_timeout 30 scontrol show node node1 | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
is "$(grep '^MASTER_ADDR=' <<<"$out" | sort -u)" "MASTER_ADDR=$addr" \
	"MASTER_ADDR is the NodeAddr of node1 (rank 0's), the same for all"
like "$(grep '^MASTER_PORT=' <<<"$out" | sort -u | wc -l)" '^1$' \
	"one MASTER_PORT for the step"
like "$(grep '^MASTER_PORT=' <<<"$out" | head -1)" \
	'^MASTER_PORT=(1[5-9]|2[0-9]|30)[0-9]{3}$' "MASTER_PORT in 15000-30999"

out=$(run_timeout "$HVD_TEST_TIMEOUT" srun -Q --horovod -N2 -n4 bash -c "$show" 2>&1 | sort -n)
is "$out" "0 0 4 0 2 0 2 0 4 0 2 node1
1 1 4 1 2 0 2 1 4 1 2 node1
2 2 4 0 2 1 2 2 4 0 2 node2
3 3 4 1 2 1 2 3 4 1 2 node2" "block: ranks, local and cross ranks, PyTorch names"

# --- cyclic
out=$(run_timeout "$HVD_TEST_TIMEOUT" srun -Q --horovod -N2 -n4 -m cyclic bash -c "$show" 2>&1 | sort -n)
is "$out" "0 0 4 0 2 0 2 0 4 0 2 node1
1 1 4 0 2 1 2 1 4 0 2 node2
2 2 4 1 2 0 2 2 4 1 2 node1
3 3 4 1 2 1 2 3 4 1 2 node2" "cyclic: local rank follows the node, cross rank too"

# --- uneven: -n3 on 2 nodes; local rank 1 exists on node1 only.  The
# hostfile fixes which node gets two tasks: with block (or plane) it
# depends on what other tests' jobs left free on node1 at that moment.
wd=$(slurm_workdir)
printf 'node1\nnode1\nnode2\n' >"$wd/hosts"
out=$(SLURM_HOSTFILE=$wd/hosts run_timeout "$HVD_TEST_TIMEOUT" srun -Q --horovod \
	-n3 -m arbitrary bash -c "$show" 2>&1 | sort -n)
is "$out" "0 0 3 0 2 0 2 0 3 0 2 node1
1 1 3 1 2 0 1 1 3 1 2 node1
2 2 3 0 1 1 2 2 3 0 1 node2" "-n3: cross size 1 for local rank 1, local size 1 on node2"

# --- network hints on a node without HCA: TCP, never lo/docker/virbr.
out=$(run_timeout "$HVD_TEST_TIMEOUT" srun -Q --horovod -N1 -n1 env 2>&1)
like "$(grep '^NCCL_IB_DISABLE=' <<<"$out")" '^NCCL_IB_DISABLE=1$' \
	"no ACTIVE port here: NCCL_IB_DISABLE=1"
like "$(grep '^NCCL_SOCKET_IFNAME=' <<<"$out")" '^NCCL_SOCKET_IFNAME==' \
	"NCCL_SOCKET_IFNAME set, exact form"
is "$(grep -E '^NCCL_SOCKET_IFNAME==(lo|docker|virbr)' <<<"$out")" "" \
	"... and not lo, docker*, virbr*"

# --- knobs, and what the user set stays.
out=$(NCCL_IB_DISABLE=0 HOROVOD_CYCLE_TIME=7 run_timeout "$HVD_TEST_TIMEOUT" \
	srun -Q --horovod=fusion-mb=2,cycle-ms=0.5,log=info,hierarchical=on -N1 -n1 \
	bash -c 'echo "$NCCL_IB_DISABLE $HOROVOD_CYCLE_TIME $HOROVOD_FUSION_THRESHOLD $HOROVOD_LOG_LEVEL $HOROVOD_HIERARCHICAL_ALLREDUCE"' 2>&1)
is "$out" "0 7 2097152 info 1" "user's NCCL_IB_DISABLE and HOROVOD_CYCLE_TIME kept; knobs set"

# --- verbose says why, per task, on stderr.
out=$(run_timeout "$HVD_TEST_TIMEOUT" srun -Q --horovod=verbose -N1 -n1 true 2>&1)
like "$out" 'horovod: rank 0: HOROVOD_RANK=0 \(' "verbose prints the variables"
out=$(HOROVOD_SIZE=99 run_timeout "$HVD_TEST_TIMEOUT" srun -Q --horovod=verbose -N1 -n1 true 2>&1)
like "$out" 'HOROVOD_SIZE=99 \[kept\] \(set by the user' "verbose says a user value was kept"

# --- without --horovod nothing is set.
out=$(run_timeout "$HVD_TEST_TIMEOUT" srun -Q -N1 -n1 bash -c 'echo "${HOROVOD_RANK-unset}"' 2>&1)
is "$out" unset "no --horovod: no variables"
exit 0
