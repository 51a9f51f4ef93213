#!/bin/sh
# launch.sh - run N ranks of a program under a PMIx server:
#
#	launch.sh -np N [--grace S] PROGRAM [ARGS...]
#	launch.sh --which          prints "hvdrun PATH" or "mpirun PATH"
#
# hvdrun when it is built (runtime/hvdrun in the build tree), otherwise
# OpenMPI's mpirun (also a PMIx server).  HVD_LAUNCHER=hvdrun|mpirun
# forces one.  --grace S: seconds a rank may live after the launcher
# starts stopping the job (the killed-rank test lets survivors report).
set -u

: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
hvdrun=$top_builddir/runtime/hvdrun

which_launcher() {
	case ${HVD_LAUNCHER:-auto} in
	hvdrun) echo "hvdrun $hvdrun" ;;
	mpirun) echo "mpirun $(command -v mpirun)" ;;
	*)
		if [ -x "$hvdrun" ]; then
			echo "hvdrun $hvdrun"
		elif command -v mpirun >/dev/null 2>&1; then
			echo "mpirun $(command -v mpirun)"
		else
			echo "none"
		fi
		;;
	esac
}

if [ "${1:-}" = "--which" ]; then
	which_launcher
	exit 0
fi
if [ "${1:-}" != "-np" ] || [ $# -lt 3 ]; then
	echo "usage: launch.sh -np N [--grace S] PROGRAM [ARGS...]" >&2
	exit 2
fi
np=$2
shift 2
grace=
if [ "${1:-}" = "--grace" ]; then
	grace=$2
	shift 2
fi
set -- "$@"
launcher=$(which_launcher)
case $launcher in
hvdrun*)
	exec "$hvdrun" -np "$np" ${grace:+--grace "$grace"} -- "$@"
	;;
mpirun*)
	# Root in containers and CI; more ranks than cores here.  The
	# sigkill timeout plays the part of hvdrun's --grace.
	exec mpirun --allow-run-as-root --oversubscribe -np "$np" \
		--mca btl self,vader,tcp \
		${grace:+--mca odls_base_sigkill_timeout "$grace"} "$@"
	;;
*)
	echo "launch.sh: neither hvdrun ($hvdrun) nor mpirun found" >&2
	exit 127
	;;
esac
