#!/bin/bash
# The shape of spank/ (doc/design.md, "SPANK plugin"): who may include and
# call whom.
#   core/    includes only core/ headers (and the system's); never plugin/
#            or tools/; its files form no cycle, by includes nor by calls.
#   plugin/  includes its own headers and core/ ones ("core/opt.h").
#   tools/   includes core/ ones.
# The call graph comes from the built objects (nm): a core object that
# calls a function of another core object depends on it.  Prints the core's
# floors (a file's floor is one more than the highest floor it depends on).
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/spank
bld=${top_builddir:-../..}/spank
n=0
fails=0
ok() { # status description
	n=$((n + 1))
	if [[ $1 == 0 ]]; then echo "ok $n - $2"; return 0; fi
	echo "not ok $n - $2"
	fails=$((fails + 1))
	return 1
}
diag() { # message... (each line a TAP comment)
	local line
	while IFS= read -r line; do echo "# $line"; done <<<"$*"
}
echo "1..6"

# includes FILE: the quoted includes of a file, one per line ("config.h",
# the build's autoconf header, is everyone's).
includes() {
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1" | grep -vx config.h
}

# --- 1-3: include rules per folder
bad=
for f in "$src"/core/*.[ch]; do
	while read -r inc; do
		[[ -z $inc ]] && continue
		if [[ $inc == */* || ! -f $src/core/$inc ]]; then
			bad+="core/$(basename "$f") includes \"$inc\""$'\n'
		fi
	done < <(includes "$f")
done
[[ -z $bad ]]
ok $? "core/ includes only core/ headers" || diag "$bad"

bad=
for f in "$src"/plugin/*.[ch]; do
	while read -r inc; do
		[[ -z $inc ]] && continue
		if [[ $inc == core/* && -f $src/$inc ]] ||
			[[ $inc != */* && -f $src/plugin/$inc ]]; then
			continue
		fi
		bad+="plugin/$(basename "$f") includes \"$inc\""$'\n'
	done < <(includes "$f")
done
[[ -z $bad ]]
ok $? "plugin/ includes its own headers and core/ ones" || diag "$bad"

bad=
for f in "$src"/tools/*.[ch]; do
	while read -r inc; do
		[[ -z $inc ]] && continue
		if [[ $inc == core/* && -f $src/$inc ]] ||
			[[ $inc != */* && -f $src/tools/$inc ]]; then
			continue
		fi
		bad+="tools/$(basename "$f") includes \"$inc\""$'\n'
	done < <(includes "$f")
done
[[ -z $bad ]]
ok $? "tools/ includes its own headers and core/ ones" || diag "$bad"

# --- 4: no cycle among core files by includes (module = file stem)
edges=$(for f in "$src"/core/*.[ch]; do
	m=$(basename "$f")
	m=${m%.*}
	includes "$f" | sed 's/\.h$//' | awk -v m="$m" '$1 != m { print m, $1 }'
done | sort -u)
# acyclic EDGES: prints the floors ("module floor") or the modules left on
# a cycle ("cycle: a b c"); status 1 on a cycle.
acyclic() {
	awk '
	{ dep[$1] = dep[$1] " " $2; mod[$1] = 1; mod[$2] = 1 }
	END {
		left = 0
		for (m in mod) left++
		while (left > 0) {
			progress = 0
			for (m in mod) {
				if (m in floor) continue
				n = split(dep[m], d, " "); f = 0; ready = 1
				for (i = 1; i <= n; i++) {
					if (!(d[i] in floor)) { ready = 0; break }
					if (floor[d[i]] + 1 > f) f = floor[d[i]] + 1
				}
				if (ready) { floor[m] = f; left--; progress = 1 }
			}
			if (!progress) break
		}
		if (left > 0) {
			s = "cycle:"
			for (m in mod) if (!(m in floor)) s = s " " m
			print s
			exit 1
		}
		for (m in floor) print m, floor[m]
	}' <<<"$1"
}
out=$(acyclic "$edges")
ok $? "core/ files include each other without a cycle" || diag "$out"

# --- 5: no cycle among core objects by calls
objdir=$bld/core/.libs
[[ -d $objdir ]] || objdir=$bld/core
objs=("$objdir"/*.o)
if [[ ! -e ${objs[0]} ]] || ! command -v nm >/dev/null; then
	echo "ok 5 # SKIP no objects in $objdir or no nm (build spank/ first)"
	echo "ok 6 # SKIP no objects"
	exit 0
fi
calls=$(for o in "${objs[@]}"; do
	m=$(basename "$o" .o)
	nm --defined-only -g "$o" | awk -v m="$m" 'NF == 3 { print "def", $3, m }'
	nm -u "$o" | awk -v m="$m" '{ print "use", $NF, m }'
done | awk '
	$1 == "def" { owner[$2] = $3; next }
	{ use[NR] = $2; user[NR] = $3 }
	END { for (i in use) if ((use[i] in owner) && owner[use[i]] != user[i]) print user[i], owner[use[i]] }' | sort -u)
out=$(acyclic "$calls")
if ok $? "core/ objects call each other without a cycle"; then
	diag "core floors (calls): $(sort -k2n -k1 <<<"$out" | awk '{ printf "%s%s=%s", sep, $1, $2; sep = " " }')"
else
	diag "$out"
fi

# --- 6: the plugin's exports are the SPANK entry points only
so=$bld/.libs/horovod.so
if [[ -f $so ]]; then
	got=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort | tr '\n' ' ')
	want="plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_init_post_opt slurm_spank_local_user_init slurm_spank_task_init slurm_spank_user_init spank_plugin_version "
	[[ $got == "$want" ]]
	ok $? "horovod.so exports only its SPANK entry points" || diag "exports: $got"
else
	echo "ok 6 # SKIP no $so (built without Slurm)"
fi
exit 0
