#!/bin/sh
# The Python binding under OpenMPI's mpirun (the launcher Kubernetes' MPI
# Operator uses), 2 ranks, with mpi4py: process sets from communicators,
# hvd.init(comm).
. "$(dirname "$0")/lib.sh"
py_require
command -v mpirun >/dev/null 2>&1 || skip_all "OpenMPI's mpirun not found (Debian: apt-get install openmpi-bin)"
"$HVD_PYTHON" -c 'import mpi4py' 2>/dev/null ||
	skip_all "$HVD_PYTHON lacks mpi4py (Debian: apt-get install python3-mpi4py)"
# Root in containers and CI, more ranks than cores, no shared-memory
# single-copy check (as tests/runtime/launch.sh).
# shellcheck disable=SC2086 # the file list is words
py_pytest mpirun-np2 2 mpirun --allow-run-as-root --oversubscribe -np 2 \
	--mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none \
	-x PYTHONPATH -x HVD_LIBHVD -x HVD_FAST -x PYTHONDONTWRITEBYTECODE -x OMP_NUM_THREADS \
	-x HOROVOD_DYNAMIC_PROCESS_SETS -x HVD_TEST_RESULTS -x HVD_TEST_NP \
	-- $PY_CORE test_mpi.py
