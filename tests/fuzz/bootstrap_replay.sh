#!/bin/sh
# Replay the fuzz corpus of the bootstrap's record and layout parsers
# (TAP).  A crash found by `make fuzz-bootstrap` goes into
# corpus/bootstrap/ once fixed; the seeds come from
# `fuzz/fuzz_bootstrap --write-seeds DIR`.
exec ./fuzz/fuzz_bootstrap "${top_srcdir:-../..}"/tests/fuzz/corpus/bootstrap/*
