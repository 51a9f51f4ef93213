#!/bin/bash
# The modulefiles, tested with Debian's real lmod and environment-modules
# (the two packages conflict, so they are installed one after the other).
# Usage: tests/install/modules.sh PREFIX     (slurm-horovod installed there)
# Needs root (apt-get).  Prints TAP.
set -u
prefix=${1:?usage: modules.sh PREFIX}
version=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/hvd.pc" 2>/dev/null)
n=0 failed=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi; }

# A clean environment without the install prefix, so that only the module
# can make the tools and library visible.
clean_env() {
	env -i HOME="$HOME" TERM=dumb PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# One module system: $1 = name, $2 = init script, $3 = module tree.
check_system() {
	local name=$1 init=$2 tree=$3 out other
	# A second version of the module, for the conflict check.
	other=$(mktemp -d /var/tmp/hvd-modtest.XXXXXX)
	mkdir -p "$other/horovod"
	for f in "$tree"/horovod/*; do
		case $f in
		*.lua) sed "s/$version/9.9.9/g" "$f" > "$other/horovod/9.9.9.lua" ;;
		*) sed "s/$version/9.9.9/g" "$f" > "$other/horovod/9.9.9" ;;
		esac
	done
	out=$(clean_env bash -c '
		set -u
		. "'"$init"'" >/dev/null 2>&1
		before=$(env | grep -E "^(PATH|LD_LIBRARY_PATH|PKG_CONFIG_PATH|MANPATH|CPATH|PYTHONPATH)=" | sort)
		[ "$(command -v hvdrun)" = "'"$prefix"'/bin/hvdrun" ] && echo "LEAK hvdrun visible before load"
		module use "'"$tree"'"
		before=$(env | grep -E "^(PATH|LD_LIBRARY_PATH|PKG_CONFIG_PATH|MANPATH|CPATH|PYTHONPATH)=" | sort)
		module load horovod 2>&1 || echo "LOADFAIL"
		[ "$(command -v hvdrun)" = "'"$prefix"'/bin/hvdrun" ] && echo "HVDRUN ok"
		timeout 120 hvdrun -np 2 hvd-bench -e 1M -n 5 -w 1 >/dev/null 2>&1 && echo "BENCH ok"
		pkg-config --cflags --libs hvd | grep -q -- "-lhvd" && echo "PKGCONFIG ok"
		case ":${MANPATH:-}:" in *"'"$prefix"'/share/man"*) echo "MANPATH ok";; esac
		case ":${CPATH:-}:" in *"'"$prefix"'/include"*) echo "CPATH ok";; esac
		module help horovod 2>&1 | grep -q "hvdrun -np" && echo "HELP ok"
		# the Python binding (when it was built): hvd in the site
		# directory, horovod.torch (hvd.torch) through the module
		if [ -d "'"$prefix"'/share/slurm-horovod/python/horovod" ]; then
			timeout 120 python3 -c "import horovod.torch as h, hvd.torch as t; assert h is t" 2>&1 && echo "PYTHON ok"
		else
			echo "PYTHON ok (built without the binding)"
		fi
		module unload horovod 2>&1
		# Two versions never load together: a second one is refused or
		# swapped in (the copy under $other is the same module as 9.9.9).
		module use "'"$other"'"
		module load horovod/'"$version"' >/dev/null 2>&1
		module load horovod/9.9.9 >/dev/null 2>&1
		[ "$(module -t list 2>&1 | grep -c "^horovod/")" = 1 ] && echo "CONFLICT ok"
		module unload horovod >/dev/null 2>&1
		module unuse "'"$other"'"
		after=$(env | grep -E "^(PATH|LD_LIBRARY_PATH|PKG_CONFIG_PATH|MANPATH|CPATH|PYTHONPATH)=" | sort)
		[ "$before" = "$after" ] && echo "RESTORED ok" || { echo "RESTORED differs:"; diff <(echo "$before") <(echo "$after"); }
	' 2>&1)
	echo "$out" | sed 's/^/# /'
	rm -rf "$other"
	for what in HVDRUN BENCH PKGCONFIG MANPATH CPATH HELP PYTHON CONFLICT RESTORED; do
		echo "$out" | grep -q "^$what ok"
		ok $? "$name: $what after module load horovod"
	done
	echo "$out" | grep -q LEAK
	ok $((! $?)) "$name: hvdrun not visible before the module is loaded"
}

export DEBIAN_FRONTEND=noninteractive
echo "1..20"
if [ -z "$version" ]; then
	echo "Bail out! no hvd.pc under $prefix/lib/pkgconfig: install first"
	exit 1
fi
apt-get remove -y environment-modules >/dev/null 2>&1
apt-get install -y --no-install-recommends lmod >/dev/null 2>&1
check_system lmod /usr/share/lmod/lmod/init/bash "$prefix/share/slurm-horovod/modulefiles/lmod"
apt-get remove -y lmod >/dev/null 2>&1
apt-get install -y --no-install-recommends environment-modules >/dev/null 2>&1
check_system environment-modules /usr/share/modules/init/bash "$prefix/share/slurm-horovod/modulefiles/tcl"
exit $((failed > 0))
