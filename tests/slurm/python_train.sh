#!/bin/bash
# README's main job, smaller: the PyTorch example (contrib/examples/
# train.py) under srun --horovod with checkpoints on two nodes; a second
# run of the same job directory resumes from the last checkpoint.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"
. "$top_srcdir/tests/python/lib.sh"
py_require
slurm_has_horovod || skip_all "srun has no --horovod (the plugin is not loaded)"
case $top_builddir in
/tmp/*) skip_all "the build tree is under /tmp, which the nodes do not share" ;;
esac
plan 3
dir=$(slurm_workdir)/ckpt
TRAIN=$top_srcdir/contrib/examples/train.py
job() { # steps
	run_timeout "$PY_LIMIT" srun -Q --mpi=pmix -N2 -n2 --ntasks-per-node=1 \
		--horovod=ckpt-every=25,ckpt-keep=2,ckpt-dir="$dir" \
		"$HVD_PYTHON" "$TRAIN" --steps "$1" --print-every 25
}
out=$(job 50 2>&1)
st=$?
like "$out" 'train.py: done: 50 steps .*test accuracy' \
	"srun --horovod -N2: train.py runs 50 steps (status $st)"
[[ $st == 0 ]] || diag "$(tail -n 20 <<<"$out")"
out=$(job 75 2>&1)
like "$out" 'resuming at step 50' "a second run resumes from the checkpoint of step 50"
like "$out" 'train.py: done: 75 steps \(25 in this run' "and runs only the 25 steps left"
