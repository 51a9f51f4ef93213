#!/bin/bash
# The RPM spec: parsed by Debian's rpm (rpmspec --parse) with and without the
# CUDA switch, and a source RPM built from the `make dist` tarball.
# Usage: tests/install/rpm.sh TARBALL     Prints TAP.
set -u
tarball=$(readlink -f "${1:?usage: rpm.sh slurm-horovod-VERSION.tar.gz}")
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
spec=$srcdir/contrib/slurm-horovod.spec
top=/var/tmp/hvd-rpmbuild
n=0 failed=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi; }
echo "1..4"
command -v rpmspec >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rpm >/dev/null 2>&1
rpmspec --parse "$spec" > /dev/null
ok $? "rpmspec --parse"
rpmspec --parse --with cuda "$spec" | grep -q -- '--with-cuda='
ok $? "rpmspec --parse --with cuda switches the GPU path on"
version=$(rpmspec -q --srpm --qf '%{VERSION}' "$spec" 2>/dev/null)
case "$tarball" in *"slurm-horovod-$version.tar.gz") ok 0 "spec version $version matches the tarball";;
	*) ok 1 "spec version $version matches the tarball $tarball";; esac
rm -rf "$top" && mkdir -p "$top/SOURCES"
cp "$tarball" "$top/SOURCES/"
rpmbuild --define "_topdir $top" --nodeps -bs "$spec" > "$top/log" 2>&1
rc=$?
sed 's/^/# /' "$top/log" | tail -3
ok $rc "rpmbuild -bs makes a source RPM"
exit $((failed > 0))
