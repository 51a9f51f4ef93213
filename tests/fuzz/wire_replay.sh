#!/bin/sh
# Replay the fuzz corpus of the engine's wire decoder (TAP).  A crash found
# by `make fuzz-wire` goes into corpus/wire/ once fixed; the seeds come from
# `fuzz/fuzz_wire --write-seeds DIR`.
exec ./fuzz/fuzz_wire "${top_srcdir:-../..}"/tests/fuzz/corpus/wire/*
