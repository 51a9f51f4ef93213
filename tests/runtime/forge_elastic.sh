#!/bin/bash
# forge_elastic.sh - a process outside the job, as nobody, that can reach
# the worker of an elastic world's rank 0 (the one a newcomer writes to:
# its address is in the rendezvous file, and over TCP little more than an
# IP and a port anyone on the node can connect to) forges the agreement's
# messages (forge_attacker DIR memb): a decision that leaves every rank
# but 0 out, a removal, a proposal reporting a live rank gone, the same
# of the epoch before and a stale decision, a join request with a wrong
# token.  They are sent before a rank is killed, so they wait in the
# worker's queue when the survivors re-form (the join request is read at
# the commits before it, by rank 0's join desk).  4 ranks of elastic_train
# under hvdrun --elastic; rank 3 is killed first (epoch 0 -> 1), the
# attack goes to the world of epoch 1, then rank 2 is killed (1 -> 2).
# The job must go on and finish at size 2 as an unattacked run does, and
# with the tag key (as if read off the wire) the forged messages reach
# the probes and must be dropped for their MAC, each kind logged.
set -u
. "$(dirname "$0")/../tap.sh"
. "$(dirname "$0")/stacks_lib.sh"

: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
BIN=$top_builddir/tests/runtime
HVDRUN=$top_builddir/runtime/hvdrun
TOL=${ELASTIC_ACC_TOL:-0.02}

if [[ $(id -u) != 0 ]] || ! command -v setpriv >/dev/null; then
	skip_all "needs root and setpriv to run the attacker as nobody"
fi
[[ -x $HVDRUN ]] || skip_all "hvdrun is not built (elastic needs its --elastic)"
plan 13

T=$(mktemp -d "${TMPDIR:-/var/tmp}/forge-el.XXXXXX")
# FORGE_KEEP=1 keeps the jobs' output in $T
[[ -n ${FORGE_KEEP:-} ]] || trap 'rm -rf "$T"' EXIT
chmod 0755 "$T"

# start NAME: 4 ranks of elastic_train (4 epochs) in the background.
# At info, so that a rank taken for gone is logged ("elastic: rank N is
# out: WHY", which the checks below look for) and a failure shows why.
start() {
	local d=$T/$1
	mkdir -p "$d"
	chmod 0777 "$d"
	(
		env HVD_SHM=0 HOROVOD_LOG_LEVEL=info HOROVOD_ELASTIC_DIR="$d/rdv" \
			HOROVOD_ELASTIC_TIMEOUT=10 ELASTIC_STEP_MS=25 \
			timeout 120 "$HVDRUN" --elastic -np 4 \
			"$BIN/elastic_train" 4 >"$d/out" 2>"$d/err"
		echo $? >"$d/status"
	) &
	job=$!
	stacks_later 100 "$d/out"
}

pid_of() { # pid_of NAME RANK: the pid a rank printed at its start
	for _ in $(seq 200); do
		p=$(awk -v r="$2" '$1 == "start" && $3 == r { print $7; exit }' \
			"$T/$1/out" 2>/dev/null)
		[[ -n $p ]] && { echo "$p"; return; }
		sleep 0.05
	done
}

wait_for() { # wait_for NAME AWK-CONDITION: a line of out matches, or 30 s
	for _ in $(seq 600); do
		[[ -e $T/$1/status ]] && return 1
		awk "$2 { f = 1 } END { exit !f }" "$T/$1/out" 2>/dev/null &&
			return 0
		sleep 0.05
	done
	return 1
}

# run NAME MODE: MODE none, plain (forged tags) or keyed (the tag key known)
run() {
	local name=$1 mode=$2 d=$T/$1 p0 p2 p3
	start "$name"
	p0=$(pid_of "$name" 0)
	p2=$(pid_of "$name" 2)
	p3=$(pid_of "$name" 3)
	if [[ $mode != none ]]; then
		wait_for "$name" '$1 == "step" && $2 >= 5' && kill -9 "$p3"
		# the world of epoch 1 (the rendezvous file is rewritten)
		wait_for "$name" '$1 == "reset" && $2 == "epoch" && $3 == 1'
		for _ in $(seq 100); do
			"$BIN/forge_attacker" "$d" leak "$d/rdv" \
				"${SLURM_JOB_ID:-local}" \
				${mode/plain/} 2>>"$d/attacker" &&
				[[ $(cat "$d/epoch") == 1 ]] && break
			sleep 0.05
		done
		echo "$p0" >"$d/pid0"
		chmod 0644 "$d"/maddr "$d"/epoch "$d"/pid0
		UCX_TLS=tcp,self timeout 60 setpriv --reuid=nobody \
			--regid=nogroup --clear-groups \
			"$BIN/forge_attacker" "$d" memb >>"$d/attacker" 2>&1 ||
			echo "attacker status $?" >>"$d/attacker"
		# The join request is read by rank 0's join desk at a commit
		# (every step), on this world's worker, which the re-forming
		# replaces: let two commits pass before the kill (killed at
		# once, under CI's load, no commit came in between and the
		# request went with the old worker, unread).
		s=$(awk '$1 == "step" { n = $2 } END { print n + 0 }' "$d/out")
		wait_for "$name" "\$1 == \"step\" && \$2 >= $((s + 3))"
		kill -9 "$p2"
	fi
	wait "$job"
	stacks_stop
}

acc_of() { awk '$1 == "done" { print $9 }' "$T/$1/out"; }

# fine NAME SIZE RESETS: status 0, done at SIZE after RESETS re-formings,
# every epoch's samples seen once, the reference's accuracy within TOL
fine() {
	local d=$T/$1
	[[ $(cat "$d/status") == 0 ]] &&
		awk -v s="$2" -v r="$3" '$1 == "done" && $3 == s && $7 == r { f = 1 }
			END { exit !f }' "$d/out" &&
		[[ $(awk '$1 == "epoch" && $3 == "seen-once" && $4 == $6' \
			"$d/out" | wc -l) == 4 ]] &&
		awk -v a="$(acc_of "$1")" -v b="$ref" -v t="$TOL" \
			'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= t) }'
}

check() { # check NAME STATUS DESCRIPTION
	local d=$T/$1
	ok "$2" "$3"
	[[ $2 == 0 ]] && return
	diag "job status $(cat "$d/status" 2>/dev/null)"
	[[ -s $d/out.stacks ]] && diag_file "$d/out.stacks" 150
	grep -E '^(done|reset|too-few)' "$d/out" | tail -n 6 |
		while read -r l; do diag "$l"; done
	head -n 10 "$d/attacker" 2>/dev/null |
		while read -r l; do diag "attacker: $l"; done
	grep -E 'elastic|hvdrun|HVD-' "$d/err" | grep -v tag_match | tail -n 20 |
		while read -r l; do diag "stderr: $l"; done
}

ref=
run ref none
[[ $(cat "$T/ref/status") == 0 ]]
check ref $? "an unattacked run: 4 ranks finish"
ref=$(acc_of ref)
fine ref 4 0
check ref $? "... every epoch seen once, accuracy $ref"

run plain plain
fine plain 2 2
check plain $? "forged agreement messages on plain tags from nobody, 2 kills: finishes at size 2, accuracy $(acc_of plain)"
grep -q 'messages sent (0 refused)' "$T/plain/attacker"
check plain $? "the attacker reached rank 0's worker: $(grep -o '[0-9]* messages sent' "$T/plain/attacker")"
! grep -q 'elastic: rank 1 is out' "$T/plain/err"
check plain $? "... and rank 1 was never taken for gone"

run keyed keyed
fine keyed 2 2
check keyed $? "the same on the keyed tags (the tag key known, not the job's key): finishes at size 2, accuracy $(acc_of keyed)"
grep -q 'messages sent (0 refused), with the tag key' "$T/keyed/attacker"
check keyed $? "the attacker reached rank 0's worker with the tag key"
for what in decision removal proposal 'join request'; do
	n=$(grep -c "elastic: dropped a $what message.*MAC does not verify" \
		"$T/keyed/err")
	[[ $n -ge 1 ]]
	check keyed $? "rank 0 dropped and logged the forged ${what}s: $n"
done
! grep -q 'elastic: rank 1 is out\|refused a join request' "$T/keyed/err"
check keyed $? "... none of them got past the MAC (no rank taken for gone, no join request seen)"
n=$(grep -c 'elastic: dropped a' "$T/plain/err" "$T/ref/err" | awk -F: '{ s += $2 } END { print s + 0 }')
is "$n" 0 "no genuine message was dropped (plain and unattacked runs)"
done_testing
