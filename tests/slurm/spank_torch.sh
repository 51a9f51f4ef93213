#!/bin/bash
# torch.distributed under srun --horovod with init_method="env://" and no
# torchrun: a real gloo allreduce on 2 nodes of the mini-cluster (whose node
# names do not resolve: MASTER_ADDR must be the NodeAddr), and two steps of
# one job at the same time on the same nodes, each meeting only its own
# ranks (MASTER_PORT differs).  spank_torch_netns.sh does the same with a
# network namespace per node and Slurm's reserved ports.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"
. "$top_srcdir/tests/slurm/spank_torch_lib.sh"

slurm_has_horovod || skip_all "srun has no --horovod (plugin not in plugstack.conf)"
torch_ok || skip_all "$TORCH_PY has no torch (Debian: apt-get install python3-torch)"
plan 8
wd=$(slurm_workdir)
torch_script "$wd"
T=$HVD_TEST_TIMEOUT

# --- one step, 4 ranks on 2 nodes
out=$(cd "$wd" && run_timeout "$T" srun -Q -N2 -n4 --mpi=pmix --horovod \
	"$TORCH_PY" allreduce.py a 2>&1)
ok $? "srun -N2 -n4 --horovod python3 allreduce.py (env://) ran" || diag "$out"
is "$(torch_lines a "$out")" "$(torch_expect a 4)" \
	"every rank got the sum [10, 100] of 4 ranks"
addr=$(node_addr node1)
is "$(torch_addrs a "$out" | sed 's/:[0-9]*$//')" "$addr" \
	"MASTER_ADDR is node1's NodeAddr ($addr), for every rank"
getent hosts node1 >/dev/null &&
	diag "note: node1 resolves here, so this does not show the NodeAddr is needed"

# --- two steps of one job at the same time on the same two nodes
out=$(cd "$wd" && run_timeout "$T" salloc -Q -N2 -n4 bash -c '
	srun -Q --overlap -N2 -n2 --horovod '"$TORCH_PY"' allreduce.py b c &
	srun -Q --overlap -N2 -n2 --horovod '"$TORCH_PY"' allreduce.py c b &
	wait' 2>&1)
is "$(torch_lines b "$out")" "$(torch_expect b 2)" \
	"step b: both ranks got the sum of 2, not 4" || diag "$out"
is "$(torch_lines c "$out")" "$(torch_expect c 2)" \
	"step c: both ranks got the sum of 2" || diag "$out"
pb=$(torch_addrs b "$out")
pc=$(torch_addrs c "$out")
ok "$([[ -n $pb && -n $pc && $pb != "$pc" ]] && echo 0 || echo 1)" \
	"the two steps have different MASTER_PORTs ($pb, $pc)"
ok "$([[ -e $wd/b.up && -e $wd/c.up ]] && echo 0 || echo 1)" \
	"... and they ran at the same time (each waited for the other)"

# --- the hand-over variable stays out of the program's environment
out=$(run_timeout "$T" srun -Q -N1 -n1 --horovod env 2>&1)
is "$(grep -c '^HOROVOD_SPANK_' <<<"$out")" 0 \
	"srun's HOROVOD_SPANK_MASTER_ADDR is removed from the task"
exit 0
