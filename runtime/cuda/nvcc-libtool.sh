#!/bin/sh
# nvcc-libtool.sh NVCC ARGS... - run nvcc under "libtool --mode=compile".
# libtool adds host-compiler flags for position-independent code (-fPIC,
# -DPIC) that nvcc does not take itself: hand -fPIC to the host compiler.
nvcc=$1
shift
for a in "$@"; do
	shift
	case $a in
	-fPIC | -fpic) set -- "$@" "--compiler-options=$a" ;;
	*) set -- "$@" "$a" ;;
	esac
done
exec "$nvcc" "$@"
