#!/bin/sh
# The include/call-direction check of doc/design.md ("Layers"): which
# layer may use which, read from the sources' #include lines and from the
# symbols of the objects this build made (tests/unit/layers.py).
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${top_builddir:-$srcdir/build}
if ! command -v python3 >/dev/null 2>&1 || ! command -v nm >/dev/null 2>&1; then
	echo "1..0 # SKIP python3 and nm (binutils) are needed"
	exit 0
fi
exec python3 "$srcdir/tests/unit/layers.py" "$srcdir" "$builddir"
