#!/bin/bash
# The Python binding's pytest suite under srun --horovod on two nodes of the
# mini-cluster (one rank per node: ranks talk over UCX between the nodes),
# torch.distributed env:// included.
. "${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/slurm/lib.sh"
. "$top_srcdir/tests/python/lib.sh"
py_require
slurm_has_horovod || skip_all "srun has no --horovod (the plugin is not loaded)"
case $top_builddir in
/tmp/*) skip_all "the build tree is under /tmp, which the nodes do not share" ;;
esac
# shellcheck disable=SC2086 # the file list is words
py_pytest srun-N2 2 srun -Q --mpi=pmix --horovod -N2 -n2 --ntasks-per-node=1 \
	-- $PY_CORE test_ddp.py
