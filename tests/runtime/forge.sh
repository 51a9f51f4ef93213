#!/bin/bash
# forge.sh - a process outside the job, as nobody, that knows a rank's UCX
# worker address (as anyone on the node can reach the worker's TCP port)
# sends forged failure notices and data into a running 3-rank job
# (forge_attacker, forge_victim): the job carries on and its results are
# right.  And a real failure is still announced: a killed rank makes every
# survivor fail fast, and no notice between the ranks is dropped.
set -u
. "$(dirname "$0")/../tap.sh"

: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
BIN=$top_builddir/tests/runtime
LAUNCH=$top_srcdir/tests/runtime/launch.sh

if [[ $(id -u) != 0 ]] || ! command -v setpriv >/dev/null; then
	skip_all "needs root and setpriv to run the attacker as nobody"
fi
if [[ $("$LAUNCH" --which) == none ]]; then
	skip_all "no PMIx launcher (hvdrun or mpirun)"
fi
plan 7

T=$(mktemp -d "${TMPDIR:-/var/tmp}/forge.XXXXXX")
# FORGE_KEEP=1 keeps the jobs' output in $T
[[ -n ${FORGE_KEEP:-} ]] || trap 'rm -rf "$T"' EXIT
chmod 0755 "$T"

# attack NAME MODE [VAR=value...]: a 3-rank job attacked by MODE
attack() {
	local name=$1 mode=$2 d=$T/$1
	shift 2
	mkdir -p "$d"
	chmod 0777 "$d"
	# UCX within the node, so that the job's own messages are UCX's too
	env HVD_SHM=0 HOROVOD_PEER_TIMEOUT=30 "$@" timeout 120 "$LAUNCH" \
		-np 3 --grace 3 "$BIN/forge_victim" "$d" attacked \
		>"$d/out" 2>"$d/err" &
	local job=$!
	for ((i = 0; i < 600; i++)); do
		[[ -e $d/ready ]] && break
		sleep 0.1
	done
	if [[ ! -e $d/ready ]]; then
		echo "the job never got ready" >"$d/attacker"
		touch "$d/go" "$d/done"
	else
		UCX_TLS=tcp,self timeout 60 setpriv --reuid=nobody \
			--regid=nogroup --clear-groups \
			"$BIN/forge_attacker" "$d" "$mode" >"$d/attacker" 2>&1 ||
			echo "attacker status $?" >>"$d/attacker"
		touch "$d/go" "$d/done"
	fi
	wait "$job"
	echo $? >"$d/status"
}

# job_fine NAME: exit 0, three ranks with no wrong result and no error
job_fine() {
	local d=$T/$1
	[[ $(cat "$d/status") == 0 ]] &&
		[[ $(grep -c ' 0 wrong, HVD_OK' "$d/out") == 3 ]]
}

# check NAME STATUS DESCRIPTION: a TAP result, and what the job and the
# attacker printed when it failed
check() {
	local d=$T/$1
	ok "$2" "$3"
	[[ $2 == 0 ]] && return
	diag "job status $(cat "$d/status" 2>/dev/null)"
	grep -v tag_match "$d/out" | head -n 10 | while read -r l; do diag "$l"; done
	head -n 10 "$d/attacker" | while read -r l; do diag "attacker: $l"; done
	# (UCX warns about every unmatched message at finalize: not those)
	grep -v tag_match "$d/err" | tail -n 8 | while read -r l; do diag "stderr: $l"; done
}

attack notices notice
job_fine notices
check notices $? "forged failure notices from nobody (old and new forms, plain tags): the job carries on, results right"
grep -q 'messages sent (0 refused)' "$T/notices/attacker"
check notices $? "the attacker reached the worker: $(grep -o '[0-9]* messages sent' "$T/notices/attacker")"

attack tagkey notice FORGE_GIVE_TAG_KEY=1
job_fine tagkey
check tagkey $? "forged notices on the keyed tag (the tag key known, not the job's key): the job carries on"
grep -q 'dropped a failure notice.*MAC does not verify' "$T/tagkey/err"
check tagkey $? "rank 1 logs the notices it dropped: $(grep -c 'dropped a failure notice' "$T/tagkey/err") lines"

attack data data
job_fine data
check data $? "data on the tags of the next 4096 collectives from nobody: results right"

# A real failure: rank 3 of 4 dies inside an allreduce.
d=$T/kill
mkdir -p "$d"
start=$(date +%s)
HVD_SHM=0 HOROVOD_PEER_TIMEOUT=60 HOROVOD_LOG_LEVEL=debug timeout 120 \
	"$LAUNCH" -np 4 --grace 4 "$BIN/forge_victim" "$d" kill \
	>"$d/out" 2>"$d/err"
took=$(($(date +%s) - start))
named=$(grep -c 'HVD_ERR_PEER_FAILED after 0\.[0-9]* s: .*rank 3 failed' "$d/out")
is "$named" 3 "a killed rank: the 3 survivors fail in under a second naming it (job ${took}s)"
[[ $named == 3 ]] || grep -v tag_match "$d/out" | head -n 10 |
	while read -r l; do diag "$l"; done
dropped=$(grep -c 'dropped a failure notice' "$d/err")
taken=$(grep -c 'failure notice [0-9]* from rank' "$d/err")
is "$dropped" 0 "no notice between the ranks was dropped ($taken taken in)"
done_testing
