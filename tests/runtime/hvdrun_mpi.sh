#!/bin/sh
# Open MPI 4.1 programs run under hvdrun (hvd-bench compares against
# MPI_Allreduce in the same run): rank/size from hvdrun's PMIx, collectives
# over pml ob1 and ucx, MPI_Abort.
. "$(dirname "$0")/hvdrun_lib.sh"

MPIPROG=$top_builddir/tests/runtime/hvdrun_mpi
if [ ! -x "$MPIPROG" ]; then
	echo "1..0 # SKIP OpenMPI not found at configure time (no $MPIPROG)"
	exit 0
fi
plan 6

# Open MPI wants no oversubscription warnings nor a shared-memory check.
export OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

for pml in ob1 ucx; do
	for np in 1 3; do
		OMPI_MCA_pml=$pml timeout -k 10 "$LIMIT" "$HVDRUN" -np $np "$MPIPROG" \
			>"$OUT/o" 2>"$OUT/e"
		rc=$?
		n=$(grep -c "^mpi rank [0-9]*/$np: ok$" "$OUT/o")
		is "$rc:$n" "0:$np" "Open MPI, pml $pml, $np ranks: rank, size, allreduce, allgather"
		[ "$rc:$n" = "0:$np" ] || diag_file "$OUT/e"
	done
done

t0=$(now_ms)
timeout -k 10 "$LIMIT" "$HVDRUN" -np 3 "$MPIPROG" abort 1 >"$OUT/o" 2>"$OUT/e"
rc=$?
ms=$(($(now_ms) - t0))
is "$rc" "6" "MPI_Abort(6) on rank 1: hvdrun exits 6 (in $ms ms)"
grep -q '^hvdrun: rank 1 (pid [0-9]*) called PMIx_Abort with status 6' \
	"$OUT/e"
ok $? "MPI_Abort: the rank is named"
[ $? -eq 0 ] || diag_file "$OUT/e"
done_testing
