#!/bin/sh
# hvd-bench's own check (-c 1) on 3 ranks: every type with every reduction
# of the allreduce and the reducescatter, and the collectives that move
# data, through shared memory and through UCX alone.  Each rank
# regenerates every rank's input and checks the result itself, so a wrong
# result of libhvd or a wrong expectation of hvd-bench's fails here.
# Three ranks: a product of three 24-bit integers wraps in 64 bits, where
# a check that went through a double lost the low bits the int32 result
# keeps (hvd-bench reported 23,826 wrong values that were right).  Eight
# ranks: float inputs of -3..3 made products up to 3^8, which float16 and
# bfloat16 round differently in different orders; products now take
# -2, -1, 1 and 2.
. "$(dirname "$0")/hvdrun_lib.sh"

BENCH=$top_builddir/runtime/hvd-bench
if [ ! -x "$BENCH" ]; then
	echo "1..0 # SKIP hvd-bench not built (no $BENCH)"
	exit 0
fi

TYPES="uint8 int8 int32 int64 float16 bfloat16 float32 float64"
NP=3
plan 10

# run NAME ENV COLL OPS: one hvd-bench -c 1 run a type of TYPES and a
# reduction of OPS, 8 B to 1 MiB (the small path and the pipeline); one
# TAP line for all of them, naming the runs that found wrong values.
run() {
	name=$1 env=$2 coll=$3 ops=$4 bad= n=0
	for t in $TYPES; do
		for r in $ops; do
			n=$((n + 1))
			env $env timeout -k 10 "$LIMIT" "$HVDRUN" -np $NP \
				"$BENCH" -o "$coll" -d "$t" -r "$r" -b 8 -e 1M \
				-f 8 -n 1 -w 0 -c 1 >"$OUT/o" 2>&1
			rc=$?
			if [ $rc -ne 0 ] ||
				! grep -q '^# Out of bounds values : 0 OK$' \
					"$OUT/o"; then
				bad="$bad $t/$r(exit $rc)"
				cp "$OUT/o" "$OUT/bad"
			fi
		done
	done
	[ -z "$bad" ]
	ok $? "$name: $n runs, 8 B-1 MiB, every value right${bad:+; wrong:$bad}"
	[ -z "$bad" ] || diag_file "$OUT/bad"
}

for via in shm ucx; do
	env=HVD_SHM=1
	[ $via = ucx ] && env=HVD_SHM=0
	run "allreduce, $NP ranks ($via), every type and reduction" "$env" \
		allreduce "sum prod min max avg"
	run "reducescatter, $NP ranks ($via), every type, sum and prod" "$env" \
		reducescatter "sum prod"
done
TYPES="uint8 float16 float64"
for coll in allgather broadcast alltoall; do
	run "$coll, 3 ranks, uint8 float16 float64" "" $coll sum
done
TYPES="int32 int64"
run "allreduce, 3 ranks (ucx), the ring forced: int32 and int64 products" \
	"HVD_SHM=0 HVD_ALLREDUCE_ALGO=ring" allreduce prod
TYPES="float16 bfloat16"
NP=8
for coll in allreduce reducescatter; do
	run "$coll, 8 ranks, float16 and bfloat16 products" "" $coll prod
done
done_testing
