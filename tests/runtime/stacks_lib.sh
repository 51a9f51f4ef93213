# stacks_lib.sh - sourced by the elastic tests: the stacks of ranks that
# hang, for the log.

# stacks_later SECONDS FILE: a watcher in the background that, after
# SECONDS, writes FILE.stacks: the stack of every thread (gdb, where it is
# installed) of each process that printed "start ... pid P" to FILE and is
# still alive.  A run its timeout is about to end then says where it
# waited.  The watcher's pid goes to $watcher: stacks_stop kills it.
stacks_later() {
	command -v gdb >/dev/null 2>&1 || { watcher=; return; }
	(
		trap 'kill ${s:-} 2>/dev/null; exit 0' TERM
		sleep "$1" &
		s=$!
		wait "$s"
		for p in $(awk '$1 == "start" { for (i = 2; i < NF; i++)
			if ($i == "pid") print $(i + 1) }' "$2" 2>/dev/null); do
			kill -0 "$p" 2>/dev/null || continue
			echo "=== pid $p"
			timeout 30 gdb -q -batch -nx -p "$p" \
				-ex 'thread apply all bt 25' 2>&1 |
				grep -E '^(#|Thread)'
		done >"$2.stacks"
	) >/dev/null 2>&1 &
	watcher=$!
}

stacks_stop() {
	[ -n "${watcher:-}" ] && kill "$watcher" 2>/dev/null
	watcher=
}
