#!/bin/sh
# Device buffers through libhvd's public API and engine, under hvdrun.
# HVD_GPU_RANKS ranks (default 1; tests/gpu/run uses one per GPU).  The
# program itself skips without a GPU.
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
HVDRUN=${HVDRUN:-$top_builddir/runtime/hvdrun}
PROG=$top_builddir/tests/gpu/test_cuda_hvd
if [ ! -x "$PROG" ]; then
	echo "1..0 # SKIP $PROG not built"
	exit 0
fi
if [ ! -x "$HVDRUN" ]; then
	echo "1..0 # SKIP $HVDRUN not built"
	exit 0
fi
exec timeout 180 "$HVDRUN" -np "${HVD_GPU_RANKS:-1}" "$PROG"
