/*
 * net/siphash.h - SipHash-2-4 (Aumasson and Bernstein, 2012), a keyed
 * pseudorandom function with a 128-bit key and a 64-bit output: the MAC of
 * the failure notices and the derivation of the job's tag key (net/auth.h).
 * Pure; checked against the reference vectors in tests/unit/test_auth.c.
 */
#ifndef HVD_NET_SIPHASH_H
#define HVD_NET_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

uint64_t siphash24(const uint8_t key[16], const void *msg, size_t len);

#pragma GCC visibility pop

#endif /* HVD_NET_SIPHASH_H */
