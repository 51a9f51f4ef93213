#!/bin/bash
# Debian packages from the `make dist` tarball: build them with
# dpkg-buildpackage, install them, and run the smoke job against the
# installed files (plugin from the package, hvdrun from /usr/bin).
# Usage: tests/install/debian.sh TARBALL     Needs root.  Prints TAP.
set -u
tarball=$(readlink -f "${1:?usage: debian.sh slurm-horovod-VERSION.tar.gz}")
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
work=/var/tmp/hvd-debian
n=0 failed=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi; }

echo "1..8"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends debhelper dpkg-dev fakeroot >/dev/null 2>&1
ok $? "debhelper installed"
rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xzf "$tarball"
src=$(echo "$work"/slurm-horovod-*/)
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -us -uc -b) > "$work/build.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -30 "$work/build.log" | sed 's/^/# /'
ok $rc "dpkg-buildpackage -us -uc -b from the dist tarball"
ls "$work"/*.deb 2>/dev/null | sed 's/^/# /'
[ "$(ls "$work"/*.deb 2>/dev/null | grep -cE '/(libhvd0|libhvd-dev|slurm-horovod-tools|slurm-horovod-plugin)_')" = 4 ]
ok $? "four packages: libhvd0, libhvd-dev, slurm-horovod-tools, slurm-horovod-plugin"
dpkg-deb -f "$work"/slurm-horovod-plugin_*.deb Depends | sed 's/^/# Depends: /'
slurm_version=$(dpkg-query -W -f='${Version}' libslurm-dev)
dpkg-deb -f "$work"/slurm-horovod-plugin_*.deb Depends | grep -qF "(= $slurm_version)"
ok $? "the plugin depends on exactly Slurm $slurm_version"
apt-get install -y "$work"/*.deb > "$work/install.log" 2>&1
rc=$?
[ $rc = 0 ] || tail -20 "$work/install.log" | sed 's/^/# /'
ok $rc "packages install"
plugin=$(dpkg -L slurm-horovod-plugin | grep '/horovod\.so$')
out=$(timeout 120 /usr/bin/hvdrun -np 2 /usr/bin/hvd-bench -b 8 -e 64K -n 5 -w 1 -c 1 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
ok $rc "installed hvdrun runs installed hvd-bench"
# The Python binding from its package (python3-hvd), with the packaged
# hvdrun and libhvd.
out=$(timeout 180 /usr/bin/hvdrun -np 2 /usr/bin/python3 -c 'import torch, hvd.torch as hvd
hvd.init()
print("python3-hvd", hvd.allreduce(torch.ones(1), op=hvd.Sum).item(), hvd.library_path() if hasattr(hvd, "library_path") else "")' 2>&1)
echo "$out" | sed 's/^/# /'
[ "$(echo "$out" | grep -c '^python3-hvd 2.0')" = 2 ]
ok $? "python3-hvd: hvd.torch allreduce on 2 ranks under the packaged hvdrun"
# Smoke job on the mini-cluster with the packaged plugin.
mc="$srcdir/contrib/minicluster/minicluster"
if [ -n "$plugin" ] && "$mc" start --plugin "$plugin" >/dev/null 2>&1; then
	eval "$("$mc" env)"
	out=$(timeout 120 srun --horovod -N2 -n4 --mpi=pmix printenv HOROVOD_RANK 2>&1 | sort | tr '\n' ' ')
	echo "# $out"
	[ "$out" = "0 1 2 3 " ]
	ok $? "srun --horovod with the packaged plugin sets HOROVOD_RANK 0..3"
else
	ok 1 "mini-cluster starts with the packaged plugin ($plugin)"
fi
exit $((failed > 0))
