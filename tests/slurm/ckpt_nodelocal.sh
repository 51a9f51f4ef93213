#!/bin/bash
# ckpt_nodelocal.sh - a checkpoint directory that is not the same directory
# on every node is refused at open.  Only rank 0 writes the manifest and
# renames, so with a node-local path (/tmp, /var/tmp on a real cluster) the
# ranks of the other nodes could never restore.  Each slurmd of the
# mini-cluster runs in its own mount namespace with a private /tmp: a path
# under /tmp is one path, two directories - the real thing.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"

TRAIN=$top_builddir/contrib/examples/train
[[ -x $TRAIN ]] || skip_all "$TRAIN not built"
plan 6
wd=$(slurm_workdir)
cd "$wd" || bail_out "cannot cd to $wd"
local_ck=/tmp/hvd-ckpt-nodelocal.$$
cleanup() {
	run_timeout 30 srun -N2 -n2 rm -rf "$local_ck" >/dev/null 2>&1
	hvdt_at_exit
}
trap cleanup EXIT

out=$(run_timeout "$HVD_TEST_TIMEOUT" srun --mpi=pmix -N2 -n2 "$TRAIN" \
	--steps 20 --ckpt-every 10 --ckpt-dir "$local_ck" 2>&1)
rc=$?
ok $((rc == 0)) "a node-local directory on 2 nodes: the run fails at open (exit $rc)"
like "$out" "$local_ck is not the same directory on every node: node2 \(rank 1\) sees another one than rank 0 on node1" \
	"the error names the nodes"
like "$out" "only rank 0 commits checkpoints.*use a directory on a file system every node shares" \
	"and says why and what to do"
files=$(run_timeout 30 srun --quiet -N2 -n2 bash -c \
	"echo \$(ls $local_ck 2>/dev/null | grep -c '^step-')" 2>/dev/null)
is "$(awk '{ n++; s += $1 } END { print n " nodes, " s " checkpoints" }' <<<"$files")" \
	"2 nodes, 0 checkpoints" "no checkpoint was written on either node"

out=$(run_timeout "$HVD_TEST_TIMEOUT" srun --mpi=pmix -N2 -n2 "$TRAIN" \
	--steps 20 --ckpt-every 10 --ckpt-dir "$wd/shared-ck" 2>&1)
ok $? "a directory both nodes share passes the same check"
out=$(run_timeout "$HVD_TEST_TIMEOUT" srun --mpi=pmix -N2 -n2 "$TRAIN" \
	--steps 30 --ckpt-every 10 --ckpt-dir "$wd/shared-ck" 2>&1)
like "$out" "resumed from checkpoint step 20 " "and a second run on both nodes resumes from it"
