# lib.sh - shared by the Python binding's tests (sourced by
# tests/python/*.sh and tests/slurm/python_*.sh).
#
# py_require            skip the whole test unless the binding, torch and
#                       pytest are there; set up PYTHONPATH, HVD_LIBHVD
# py_pytest LABEL NP LAUNCHER... -- FILES... [-- PYTEST ARGS]
#                       every rank runs one pytest session over FILES
#                       (tests/python/); prints the merged TAP
#                       (tapmerge.py), and the log when anything failed
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir/build}"
# (the Slurm tests source tests/slurm/lib.sh first, with the same helpers)
type skip_all >/dev/null 2>&1 || . "$top_srcdir/tests/tap.sh"
PYTESTS=$top_srcdir/tests/python
HVDRUN=$top_builddir/runtime/hvdrun
# The test files every launch runs (test_mpi.py and test_ddp.py only where
# they apply).
PY_CORE="test_basics.py test_ops.py test_grad.py test_optimizer.py
	test_functions.py test_psets.py test_errors.py test_adasum.py
	test_sync_bn.py test_checkpoint.py test_elastic_api.py"
# Seconds one launch may take (ranks import torch: seconds each on a busy
# machine).
PY_LIMIT=${HVD_PY_TEST_TIMEOUT:-300}

py_require() {
	[ -n "${HVD_PYTHON:-}" ] ||
		skip_all "the Python binding is not built (configure --without-python)"
	# An instrumented libhvd cannot be loaded into an interpreter that is
	# not (the sanitizer's runtime must come first); the plain build's
	# run covers the binding.
	[ -z "${HVD_SANITIZED:-}" ] ||
		skip_all "libhvd is built with ${HVD_SANITIZED}, which $HVD_PYTHON cannot load"
	"$HVD_PYTHON" -c 'import torch, pytest' 2>/dev/null ||
		skip_all "$HVD_PYTHON lacks torch or pytest (Debian: apt-get install python3-torch python3-pytest)"
	PYTHONPATH=$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}
	HVD_LIBHVD=$top_builddir/runtime/.libs/libhvd.so.0
	# the C fast path when it is built (hvd/_lib.py falls back to ctypes)
	HVD_FAST=$top_builddir/python/.libs/_fast.abi3.so
	[ -f "$HVD_FAST" ] || HVD_FAST=0
	# No bytecode in the source tree (read-only under distcheck); one
	# thread per rank, as on a shared 2-core machine.
	PYTHONDONTWRITEBYTECODE=1
	OMP_NUM_THREADS=1
	# test_psets.py adds and removes sets
	HOROVOD_DYNAMIC_PROCESS_SETS=1
	export PYTHONPATH HVD_LIBHVD HVD_FAST PYTHONDONTWRITEBYTECODE OMP_NUM_THREADS \
		HOROVOD_DYNAMIC_PROCESS_SETS
	# Under the build tree, not /tmp: the mini-cluster's nodes have their
	# own /tmp.
	mkdir -p "$top_builddir/tests/python"
	OUT=$(mktemp -d "$top_builddir/tests/python/out.XXXXXX") || exit 1
	trap 'rm -rf "$OUT"' EXIT
}

py_pytest() {
	label=$1 np=$2
	shift 2
	launcher=
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		launcher="$launcher '$1'"
		shift
	done
	shift
	files=
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do
		files="$files '$PYTESTS/$1'"
		shift
	done
	[ $# -gt 0 ] && shift
	res=$OUT/results.$label
	rm -rf "$res"
	mkdir -p "$res"
	HVD_TEST_RESULTS=$res HVD_TEST_NP=$np
	export HVD_TEST_RESULTS HVD_TEST_NP
	eval "timeout -k 10 $PY_LIMIT $launcher \"\$HVD_PYTHON\" -m pytest -q \
		-p no:cacheprovider -o addopts= --rootdir \"\$PYTESTS\" $files \"\$@\"" \
		>"$OUT/log.$label" 2>&1
	rc=$?
	"$HVD_PYTHON" "$PYTESTS/tapmerge.py" "$res" "$np" "$label" "$rc" \
		>"$OUT/tap.$label"
	cat "$OUT/tap.$label"
	if grep -q '^not ok' "$OUT/tap.$label"; then
		diag "$label: end of the launch's output:"
		tail -n 60 "$OUT/log.$label" | sed 's/^/# /'
	else
		grep 'session [0-9.]* s$' "$OUT/log.$label" | sed 's/^/# /'
	fi
}
