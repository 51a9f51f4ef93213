#!/bin/sh
# Regenerate the build system: ./autogen.sh && ./configure && make
set -e
cd "$(dirname "$0")"
mkdir -p build-aux m4
autoreconf --force --install --warnings=all,no-portability
# automake installs tap-driver.sh only on request; take the one it ships.
for d in /usr/share/automake-*; do
	if [ -f "$d/tap-driver.sh" ]; then
		cp -f "$d/tap-driver.sh" build-aux/tap-driver.sh
		break
	fi
done
test -f build-aux/tap-driver.sh || { echo "autogen.sh: automake's tap-driver.sh not found (apt-get install automake)" >&2; exit 1; }
echo "autogen.sh: now run ./configure"
