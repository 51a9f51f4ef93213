#!/bin/sh
# SIGTERM/SIGINT sent to hvdrun reach every rank; ranks that ignore them are
# killed after --grace; ranks die with a SIGKILLed hvdrun.
. "$(dirname "$0")/hvdrun_lib.sh"

plan 8

# wait_lines FILE PATTERN N: wait (up to 30 s) until FILE has N lines
# matching PATTERN.
wait_lines() {
	i=0
	while [ $i -lt 300 ]; do
		n=$(grep -c -- "$2" "$1" 2>/dev/null)
		[ "${n:-0}" -ge "$3" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	echo "# timed out waiting for $3 lines matching '$2' in $1"
}

# A sanitizer build's ranks take seconds to finalize and exit: give them
# the time (hvdrun's default grace would SIGKILL them, exit 137), and the
# grace check below three times its bound.
grace=
max_ms=8000
if [ -n "${HVD_SANITIZED:-}" ]; then
	grace="--grace 30"
	max_ms=24000
fi
for sig in TERM INT; do
	case $sig in TERM) num=15 ;; INT) num=2 ;; esac
	# The redirection below happens in the background child: the last
	# round's "waiting" lines must not be there for wait_lines to see.
	rm -f "$OUT/o" "$OUT/e"
	# shellcheck disable=SC2086 # $grace: no option or two words
	timeout -k 10 "$LIMIT" "$HVDRUN" -np 3 $grace --tag-output "$CLIENT" \
		--wait-term >"$OUT/o" 2>"$OUT/e" &
	pid=$!
	wait_lines "$OUT/o" 'waiting$' 3
	kill -$sig $pid
	wait $pid
	rc=$?
	is "$rc" "$((128 + num))" "SIG$sig to hvdrun: exit 128+$num"
	n=$(grep -c "^\[\([0-2]\)\] rank \1 got signal $num$" "$OUT/o")
	is "$n" "3" "SIG$sig reached all 3 ranks"
	[ "$n" = 3 ] || { diag_file "$OUT/o" 40; diag_file "$OUT/e" 40; }
done

# A rank that ignores SIGTERM (and its child) is SIGKILLed after --grace.
rm -f "$OUT/o" "$OUT/e"
t0=$(now_ms)
timeout -k 10 "$LIMIT" "$HVDRUN" -np 2 --grace 1 sh -c \
	'trap "" TERM; echo ready; sleep 30; echo survived' \
	>"$OUT/o" 2>"$OUT/e" &
pid=$!
wait_lines "$OUT/o" '^ready$' 2
kill -TERM $pid
wait $pid
rc=$?
ms=$(($(now_ms) - t0))
ok $([ $rc -eq 143 ] && [ $ms -lt $max_ms ] && echo 0 || echo 1) \
	"ranks ignoring SIGTERM are killed after --grace 1 (exit $rc, $ms ms)"
has_kill=$(grep -c 'still running after 1 s; killing' "$OUT/e")
is "$has_kill:$(grep -c survived "$OUT/o")" "1:0" \
	"the kill is reported and the rank's child died with it"

# hvdrun SIGKILLed: its ranks do not outlive it.  (Not under timeout(1): the
# SIGKILL must reach hvdrun itself; `sleep 30` bounds the run.)
rm -f "$OUT/o" "$OUT/e"
(exec "$HVDRUN" -np 2 sh -c 'echo "pid $$"; exec sleep 30' \
	>"$OUT/o" 2>"$OUT/e") &
pid=$!
wait_lines "$OUT/o" '^pid ' 2
pids=$(sed -n 's/^pid //p' "$OUT/o" | tr '\n' ' ')
kill -KILL $pid
wait $pid 2>/dev/null
sleep 0.5
alive=0
for p in $pids; do
	# A zombie is dead (this container's init may not reap orphans).
	st=$(sed -n 's/^[0-9]* ([^)]*) \(.\).*/\1/p' "/proc/$p/stat" 2>/dev/null)
	[ -n "$st" ] && [ "$st" != Z ] && alive=$((alive + 1))
done
is "$alive" "0" "ranks ($pids) die with a SIGKILLed hvdrun"
rm -rf "$T"/hvdrun.*	# a SIGKILLed hvdrun cannot clean up

is "$(leftovers)" "0" "no server directory left in TMPDIR"
done_testing
