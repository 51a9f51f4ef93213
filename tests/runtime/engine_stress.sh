#!/bin/sh
# 8 threads x 1000 random async ops (random names, sizes, types, kinds,
# submission orders) on 4 ranks; then the cache-off, tiny-cache and
# fusion-off variants on 3 ranks.  Results must be exact on every rank.
. "$(dirname "$0")/engine_lib.sh"

have_launcher || { echo "1..0 # SKIP no hvdrun or mpirun"; exit 0; }
plan 4
run() {	# run DESCRIPTION NP THREADS OPS WINDOW
	desc=$1
	shift
	engine_run "$1" "$TESTS_BIN/engine_stress" "$2" "$3" "$4" \
		> "$TMP/out" 2>&1
	rc=$?
	grep -q '^ok 1' "$TMP/out"
	found=$?
	[ $rc -eq 0 ] && [ $found -eq 0 ]
	ok $? "$desc"
	[ $rc -eq 0 ] && [ $found -eq 0 ] || diag_file "$TMP/out" 30
}
run "8 threads x 1000 random ops, 4 ranks" 4 8 1000 16
ENGINE_ENV=HOROVOD_CACHE_CAPACITY=0
run "cache off (HOROVOD_CACHE_CAPACITY=0), 3 ranks" 3 4 300 8
ENGINE_ENV=HOROVOD_CACHE_CAPACITY=8
run "8-entry cache: constant evictions, 3 ranks" 3 4 300 8
ENGINE_ENV=HOROVOD_FUSION_THRESHOLD=0
run "fusion off, 3 ranks" 3 4 300 8
done_testing
