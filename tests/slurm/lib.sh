# shellcheck shell=bash
# tests/slurm/lib.sh: sourced by every Slurm test (tests/slurm/*.sh).
#
#	#!/bin/bash
#	. "${top_srcdir:-$(dirname "$0")/../..}/tests/slurm/lib.sh"
#	plan 2
#	out=$(run_timeout 60 srun -N2 -n4 hostname)
#	ok $? "srun ran"
#	is "$(wc -l <<<"$out")" 4 "four tasks"
#
# Finds the mini-cluster (contrib/minicluster, directory HVD_MINICLUSTER_DIR,
# default /var/tmp/hvd-minicluster), points SLURM_CONF at it (and
# UCX_NET_DEVICES at a stable interface: hvdt_pin_ucx), and when it is
# not running prints "1..0 # SKIP ..." and exits 0, so that make check passes
# on machines without a cluster.  HVD_REQUIRE_MINICLUSTER=1 (set by
# contrib/run-tests once it has started the cluster) turns that skip into a
# failure.
#
# TAP helpers: plan, ok, is, like, run_ok, diag, skip, bail_out.
# Slurm helpers: run_timeout, slurm_workdir, job_state, wait_job,
# slurm_has_horovod; coll_check_require and check_run for the collectives'
# checker.  A cluster of the test's own (below, "a cluster of its
# own"): own_cluster_require, own_cluster_visible, own_cluster_dir,
# own_cluster_start.  Helpers use the prefix hvdt_ for their own globals.
# lib.sh sets an EXIT trap (hvdt_at_exit: plan check, the test's own
# clusters stopped, work directory cleanup); a test that needs its own
# calls hvdt_at_exit from it.

if [[ -z ${top_srcdir:-} ]]; then
	top_srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fi
if [[ -z ${top_builddir:-} ]]; then
	top_builddir=$top_srcdir
fi
export top_srcdir top_builddir

HVD_MINICLUSTER_DIR=${HVD_MINICLUSTER_DIR:-/var/tmp/hvd-minicluster}
export HVD_MINICLUSTER_DIR
MINICLUSTER=$top_srcdir/contrib/minicluster/minicluster
# Seconds a Slurm command may take before a test calls it hung.
HVD_TEST_TIMEOUT=${HVD_TEST_TIMEOUT:-120}

hvdt_n=0
hvdt_failed=0
hvdt_planned=

# ---------------------------------------------------------------- TAP

plan() { # N
	hvdt_planned=$1
	echo "1..$1"
}

diag() { # message... (each line becomes a TAP comment)
	local line
	while IFS= read -r line; do
		echo "# $line"
	done <<<"$*"
}

ok() { # status description: status 0 passes
	local st=$1
	shift
	hvdt_n=$((hvdt_n + 1))
	if [[ $st == 0 ]]; then
		echo "ok $hvdt_n - $*"
		return 0
	fi
	echo "not ok $hvdt_n - $*"
	hvdt_failed=$((hvdt_failed + 1))
	return 1
}

is() { # got expected description
	local got=$1 want=$2
	shift 2
	if [[ $got == "$want" ]]; then
		ok 0 "$@"
		return 0
	fi
	ok 1 "$@"
	diag "expected: '$want'"
	diag "     got: '$got'"
	return 1
}

like() { # got extended-regex description
	local got=$1 re=$2
	shift 2
	if [[ $got =~ $re ]]; then
		ok 0 "$@"
		return 0
	fi
	ok 1 "$@"
	diag "expected to match: $re"
	diag "got: $got"
	return 1
}

# run_ok description command...: passes when the command exits 0 within
# HVD_TEST_TIMEOUT; on failure its output goes into the log as comments.
run_ok() {
	local desc=$1 out st=0
	shift
	out=$(run_timeout "$HVD_TEST_TIMEOUT" "$@" 2>&1) || st=$?
	ok "$st" "$desc" && return 0
	diag "command: $*"
	diag "exit status: $st"
	[[ -n $out ]] && diag "$out"
	return 1
}

skip() { # [count] reason: count tests skipped (default 1)
	local count=1 i
	if [[ $# -gt 1 && $1 =~ ^[0-9]+$ ]]; then
		count=$1
		shift
	fi
	for ((i = 0; i < count; i++)); do
		hvdt_n=$((hvdt_n + 1))
		echo "ok $hvdt_n # SKIP $*"
	done
}

skip_all() { # reason: the whole test, before plan
	echo "1..0 # SKIP $*"
	exit 0
}

bail_out() { # reason
	echo "Bail out! $*"
	exit 1
}

# At exit, say so when fewer tests ran than planned (the driver fails the
# test anyway; the comment tells which ones are missing).
hvdt_at_exit() {
	hvdt_own_cluster_stop
	if [[ -n $hvdt_planned && $hvdt_n -ne $hvdt_planned && $hvdt_planned -ne 0 ]]; then
		diag "planned $hvdt_planned tests but ran $hvdt_n"
	fi
	if [[ -n ${hvdt_workdir:-} && -d $hvdt_workdir ]]; then
		if [[ $hvdt_failed -eq 0 && -z ${HVD_KEEP_WORKDIR:-} ]]; then
			rm -rf "$hvdt_workdir"
		else
			diag "work directory kept: $hvdt_workdir"
		fi
	fi
}
trap hvdt_at_exit EXIT

# ---------------------------------------------------------------- Slurm

# run_timeout seconds command...: like timeout(1), plus a comment when the
# command hung; exit status 124 (or 137 when TERM did not end it) then, as
# timeout(1).  A command that exits 137 by itself (srun, when a task was
# SIGKILLed) before the time is up did not hang: no comment then.
run_timeout() {
	local secs=$1 st=0 t0=$SECONDS
	shift
	timeout --kill-after=10 "$secs" "$@" || st=$?
	if [[ $st == 124 || $st == 137 ]] && ((SECONDS - t0 >= secs)); then
		diag "timed out after ${secs}s: $*" >&2
	fi
	return "$st"
}

# slurm_workdir: make (once) and print a directory every node can see, for
# job scripts and their output.  Not under /tmp: each node has its own.
# Removed at exit unless a test failed or HVD_KEEP_WORKDIR is set.
slurm_workdir() {
	if [[ -z ${hvdt_workdir:-} ]]; then
		mkdir -p "$HVD_MINICLUSTER_DIR/jobs"
		hvdt_workdir=$(mktemp -d "$HVD_MINICLUSTER_DIR/jobs/$(basename "$0" .sh).XXXXXX")
		chmod 755 "$hvdt_workdir"
	fi
	echo "$hvdt_workdir"
}

# coll_check_require: CHECK, the collectives' checker (tests/runtime/
# coll_check), or skip the whole test: not built, or in a build tree under
# /tmp, which the nodes do not share.
coll_check_require() {
	CHECK=$top_builddir/tests/runtime/coll_check
	[[ -x $CHECK ]] || skip_all "$CHECK not built"
	case $CHECK in
	/tmp/*) skip_all "the build tree is under /tmp, which the nodes do not share" ;;
	esac
}

# check_run NAME OUTPUT: one result, that coll_check's TAP (rank 0's) in
# OUTPUT is complete and without failures; else its other lines as
# comments, and status 1.
check_run() {
	local name=$1 out=$2 planned passed
	planned=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' <<<"$out")
	passed=$(grep -c '^ok ' <<<"$out")
	if [[ -n $planned && $passed == "$planned" ]] &&
		! grep -q '^not ok' <<<"$out"; then
		ok 0 "$name: $passed/$planned checks passed"
	else
		ok 1 "$name: ${passed}/${planned:-?} checks passed"
		diag "$(grep -v '^ok ' <<<"$out" | head -n 30)"
		return 1
	fi
}

# job_state jobid: PENDING, RUNNING, COMPLETED, FAILED, ... (no accounting
# here: slurmctld remembers a finished job for MinJobAge seconds).
job_state() {
	run_timeout 30 scontrol -o show job "$1" 2>/dev/null |
		sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# wait_job jobid [seconds]: wait until the job has ended; prints its final
# state; fails when it did not end in time.
wait_job() {
	local id=$1 secs=${2:-$HVD_TEST_TIMEOUT} state deadline
	deadline=$((SECONDS + secs))
	while :; do
		state=$(job_state "$id")
		case $state in
		PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED | RESIZING | "") ;;
		*)
			echo "$state"
			return 0
			;;
		esac
		if ((SECONDS >= deadline)); then
			diag "job $id still ${state:-unknown} after ${secs}s" >&2
			echo "${state:-UNKNOWN}"
			run_timeout 20 scancel "$id" >/dev/null 2>&1 || true
			return 1
		fi
		sleep 0.5
	done
}

# slurm_has_horovod: true when srun offers --horovod (plugin loaded).
slurm_has_horovod() {
	run_timeout 30 srun --help 2>&1 | grep -q -- '--horovod'
}

# ---------------------------------------------------------------- a cluster of its own
# A test that needs a cluster of its own (a node taken down, a site's
# slurm.conf, nodes in network namespaces) sets hvdt_own_cluster=1 before
# sourcing this file, then:
#
#	own_cluster_require --netns --plugin	# skips: not root, no ip, ...
#	... its own skip_all checks ...
#	own_cluster_visible			# skips: build directory under /tmp
#	plan N
#	own_cluster_dir torch			# oc_dir=/var/tmp/hvd-mc-torch.XXXXXX
#	own_cluster_start --netns --plugin "$oc_plugin"
#	ok $? "a 2-node cluster with --netns" || { diag "$oc_out"; exit 0; }
#
# Every cluster lives in a directory of its own under /var/tmp (the nodes
# cannot see /tmp), named after the test and made unique by mktemp:
# minicluster picks the ports of a directory other than the default from a
# block its name's checksum chooses, so two tests that start clusters at
# the same time (make -j2) do not race for the same ports.  At exit
# (hvdt_at_exit) every such cluster is stopped, a daemon that stop left
# behind is ended by pid, and the directory is removed, or kept with a
# comment when a test failed.

declare -ga hvdt_oc_dirs=()
declare -gA hvdt_oc_pids=()

# own_cluster_require [--netns] [--plugin] [PROGRAM...]: skip_all unless
# this can start Slurm daemons (root), with --netns the nodes can have
# namespaces (ip), every PROGRAM is installed, and with --plugin the
# build's SPANK plugin exists (its path in oc_plugin).  Before plan.
own_cluster_require() {
	local netns=no plugin=no progs=() p
	for p; do
		case $p in
		--netns) netns=yes ;;
		--plugin) plugin=yes ;;
		*) progs+=("$p") ;;
		esac
	done
	[[ $(id -u) == 0 ]] || skip_all "starting Slurm daemons needs root"
	if [[ $netns == yes ]]; then
		command -v ip >/dev/null || skip_all "ip not installed (iproute2): no --netns"
	fi
	for p in "${progs[@]}"; do
		command -v "$p" >/dev/null || [[ -x /usr/sbin/$p ]] ||
			skip_all "$p not installed (contrib/debian-deps.txt)"
	done
	oc_plugin=$top_builddir/spank/.libs/horovod.so
	if [[ $plugin == yes ]]; then
		[[ -f $oc_plugin ]] || skip_all "no $oc_plugin (built without Slurm)"
	fi
}

# own_cluster_visible: skip_all when the build directory is under /tmp,
# which each node has its own of: the nodes would not find the test's
# programs.  Before plan.
own_cluster_visible() {
	case $(pwd -P) in
	/tmp | /tmp/*) skip_all "the build directory is under /tmp, which the nodes cannot see" ;;
	esac
}

# own_cluster_dir NAME: a new cluster directory /var/tmp/hvd-mc-NAME.XXXXXX
# (mode 755: the tasks, as any user, read what the test puts there) in
# oc_dir, stopped and removed at exit.  Each test its own NAME.
own_cluster_dir() {
	oc_dir=$(mktemp -d "/var/tmp/hvd-mc-$1.XXXXXX") ||
		bail_out "cannot make a cluster directory in /var/tmp"
	chmod 755 "$oc_dir"
	hvdt_oc_dirs+=("$oc_dir")
}

# own_cluster_start [PREFIX... --] START-OPTIONS...: PREFIX... minicluster
# start --dir $oc_dir START-OPTIONS (again: brings back what is down);
# its output in oc_out, its status returned.  Points SLURM_CONF and
# HVD_MINICLUSTER_DIR at the cluster (and UCX_NET_DEVICES, hvdt_pin_ucx),
# and notes its daemons, for the end.
# PREFIX: a command to run minicluster under (taskset -c 1, run_timeout
# 120).
# shellcheck disable=SC2034 # oc_out is the caller's to read
own_cluster_start() {
	local prefix=() st=0 i
	for ((i = 1; i <= $#; i++)); do
		if [[ ${!i} == -- ]]; then
			prefix=("${@:1:i-1}")
			set -- "${@:i+1}"
			break
		fi
	done
	oc_out=$("${prefix[@]}" "$MINICLUSTER" start --dir "$oc_dir" "$@" 2>&1) || st=$?
	hvdt_oc_pids[$oc_dir]+=" $(cat "$oc_dir"/run/*.pid 2>/dev/null | tr '\n' ' ')"
	SLURM_CONF=$oc_dir/slurm.conf
	HVD_MINICLUSTER_DIR=$oc_dir
	export SLURM_CONF HVD_MINICLUSTER_DIR
	hvdt_pin_ucx "$SLURM_CONF"
	return "$st"
}

# hvdt_pin_ucx CONF: when CONF's nodes are this machine's own network
# namespace (not minicluster --netns) and the test has not chosen,
# UCX_NET_DEVICES names the interface of this machine's default route
# (else lo), as the SPANK plugin would.  Left to choose, UCX (and the TCP
# lane) may take the bridge of another test's --netns cluster (hvb*); its
# address goes when that test stops its cluster, and the job's connections
# with it: every rank then fails at HOROVOD_PEER_TIMEOUT, "nothing of its
# waits here unmatched".  Under --netns each node has its own eth0 and
# nothing else to take; a value this file set is taken back there.
hvdt_pin_ucx() {
	local dev
	if grep -qs '^# minicluster: netns$' "$1"; then
		if [[ -n ${hvdt_ucx_pinned:-} ]]; then
			unset UCX_NET_DEVICES hvdt_ucx_pinned
		fi
		return 0
	fi
	[[ -z ${UCX_NET_DEVICES+set} ]] || return 0
	dev=$(awk '$2 == "00000000" && $1 != "Iface" { print $1; exit }' /proc/net/route 2>/dev/null)
	UCX_NET_DEVICES=${dev:-lo}
	hvdt_ucx_pinned=1
	export UCX_NET_DEVICES
}

# own_cluster_alloc SALLOC-OPTIONS...: one allocation on the cluster for
# every step of the test (a job per step waits for the nodes to leave
# COMPLETING in between), its id in job; bails out without one.
own_cluster_alloc() {
	job=$(run_timeout 60 salloc "$@" --no-shell 2>&1 |
		sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
	[[ -n $job ]] || bail_out "salloc gave no allocation"
}

# own_cluster_netns_tag DIR: the tag in the names minicluster --netns
# gives DIR's namespaces (hvd-TAG-nodeK), bridge and veths.
own_cluster_netns_tag() {
	printf '%s' "$(realpath -m "$1")" | md5sum | cut -c1-4
}

# netns_sever DIR add|del [PAIRS]: on DIR's --netns cluster, each node's
# neighbour entries for the other node of each pair K-J (all three pairs
# of a 3-node cluster by default) point at a MAC nobody has (add), or are
# taken away (del).  Packets between them vanish and no reset comes, as
# when a switch port, a cable or a node's kernel dies; srun's own traffic
# goes by the host bridge and is not cut.
netns_sever() {
	local tag p k j a=()
	tag=$(own_cluster_netns_tag "$1")
	for k in 1 2 3; do
		a[k]=$(ip -n "hvd-$tag-node$k" -4 -o addr show eth0 2>/dev/null |
			awk '{ sub("/.*", "", $4); print $4 }')
	done
	for p in ${3:-1-2 1-3 2-3}; do
		k=${p%-*} j=${p#*-}
		if [[ $2 == add ]]; then
			ip -n "hvd-$tag-node$k" neigh replace "${a[j]}" \
				lladdr 02:00:00:00:00:97 dev eth0 nud permanent &&
				ip -n "hvd-$tag-node$j" neigh replace "${a[k]}" \
					lladdr 02:00:00:00:00:97 dev eth0 nud permanent || return 1
		else
			ip -n "hvd-$tag-node$k" neigh del "${a[j]}" dev eth0 >/dev/null 2>&1
			ip -n "hvd-$tag-node$j" neigh del "${a[k]}" dev eth0 >/dev/null 2>&1
		fi
	done
	return 0
}

# At exit: stop each cluster of the test's own.  A slurmd removes its pid
# file as it begins to shut down, so stop may not wait for the end of one
# that then hangs: what still runs with the directory in its command line
# is ended by pid, then stop again takes the namespaces down.
hvdt_own_cluster_stop() {
	local d p i left
	for d in "${hvdt_oc_dirs[@]}"; do
		"$MINICLUSTER" stop --dir "$d" >/dev/null 2>&1
		left=no
		for p in ${hvdt_oc_pids[$d]:-}; do
			for ((i = 0; i < 50; i++)); do
				grep -qs -- "$d" "/proc/$p/cmdline" || break
				left=yes
				((i == 0)) && kill -TERM "$p" 2>/dev/null
				((i == 40)) && kill -KILL "$p" 2>/dev/null
				sleep 0.2
			done
		done
		[[ $left == no ]] || "$MINICLUSTER" stop --dir "$d" >/dev/null 2>&1
		if [[ $hvdt_failed != 0 ]]; then
			diag "cluster directory kept: $d"
		else
			rm -rf "$d"
		fi
	done
	hvdt_oc_dirs=()
}

# ---------------------------------------------------------------- find it
# A test that runs clusters of its own sets hvdt_own_cluster=1 before
# sourcing this file, and gets the helpers without the shared cluster.
if [[ ${hvdt_own_cluster:-0} == 1 ]]; then
	return 0
fi

hvdt_not_up() { # reason
	if [[ ${HVD_REQUIRE_MINICLUSTER:-0} == 1 ]]; then
		bail_out "$1 (HVD_REQUIRE_MINICLUSTER=1)"
	fi
	skip_all "$1"
}

if [[ ! -x $MINICLUSTER ]]; then
	hvdt_not_up "$MINICLUSTER not found"
fi
if ! "$MINICLUSTER" status >/dev/null 2>&1; then
	if [[ -s $HVD_MINICLUSTER_DIR/run/slurmctld.pid ]]; then
		# Up but unhealthy (a node drained by an earlier failure, a
		# slurmd that died): start is idempotent and repairs that.
		if ! hvdt_out=$("$MINICLUSTER" start 2>&1); then
			diag "$hvdt_out"
			hvdt_not_up "mini-cluster in $HVD_MINICLUSTER_DIR is unhealthy and would not recover (see the comments above)"
		fi
	else
		hvdt_not_up "mini-cluster not running (start it: contrib/minicluster/minicluster start)"
	fi
fi
SLURM_CONF=$HVD_MINICLUSTER_DIR/slurm.conf
export SLURM_CONF
hvdt_pin_ucx "$SLURM_CONF"
case $(pwd -P) in
/tmp | /tmp/*)
	# Each node mounts its own /tmp: it would not find the test's files.
	hvdt_not_up "the build directory $(pwd -P) is under /tmp, which the mini-cluster's nodes cannot see; build under /var/tmp or \$HOME"
	;;
esac
