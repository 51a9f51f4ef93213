/*
 * shm_impl.h - what shm.c (the collectives) and shm_setup.c (the segment)
 * share: the segment layout, the group, and the flag primitives.  See the
 * comment at the top of shm.c for the design.
 */
#ifndef HVD_SHM_IMPL_H
#define HVD_SHM_IMPL_H

#include "coll/shm/shm.h"

#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#pragma GCC visibility push(hidden)

#define SHM_MAGIC 0x68766473686d3031ull /* "hvdshm01" */
#define SHM_LINE 128
#define SHM_INLINE 48 /* inline payload in the 64-byte small flag line */
#define SHM_MAX_SEGMENT (256ul << 20)
#define SHM_PREFETCH 4096 /* bytes of the next small buffer to reclaim */
#define SHM_YIELDS 16	  /* sched_yield()s between spinning and sleeping */

#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

struct shm_header {
	uint64_t magic;
	uint32_t n;
	uint32_t nbuf;
	uint64_t chunk;	    /* bytes of one pipeline buffer of one member */
	uint64_t small_max; /* bytes of one small buffer                  */
	uint64_t size;	    /* of the whole segment                       */
	uint32_t attached;  /* members that mapped it                     */
	uint32_t dead;	    /* 1 + local rank of a member seen dead       */
};

/* A flag: its owner's sequence number, the number of peers asleep on it
 * (futex), and for the small path the payload itself, so that a peer
 * that sees the flag has the data in the same cache line. */
struct shm_flag {
	_Alignas(SHM_LINE) uint64_t seq;
	uint32_t sleepers;
	uint32_t pad;
	unsigned char data[SHM_INLINE];
};

struct shm_ctl {
	struct shm_flag in, red, done, small0, small1;
	_Alignas(SHM_LINE) int64_t pid;
};

struct shm_group {
	char name[256];
	unsigned char *base;
	size_t size;
	struct shm_header *hdr;
	struct shm_ctl *ctl;
	unsigned char *small;
	unsigned char *slots;
	int rank, n, nbuf;
	size_t chunk, small_max;
	size_t nt_min;	   /* outputs from this size are streamed  */
	/* How data that peers read is written into the segment: through
	 * the caches (0) or streamed to memory (1), chosen per call by
	 * measurement (shm.c, share_mode_begin). */
	int share_policy;   /* HOROVOD_SHM_SHARE: -1 auto, 0, 1 */
	int share_mode;	    /* the better one measured so far */
	int share_now;	    /* the running call's */
	int share_probe;    /* probe the other mode at the next call */
	int share_slow;	    /* calls in a row at half the usual speed */
	unsigned share_calls;
	unsigned share_next;	 /* the call of the next probe */
	unsigned share_interval; /* calls between probes */
	int share_class;    /* the running call's size class */
	double share_bw[2][8]; /* recent GB/s in each mode and size class */
	double share_t0;
	uint64_t step;	   /* pipeline steps done by this group */
	uint64_t sseq;	   /* small calls done by this group   */
	unsigned spin;	   /* pause iterations before yielding */
	unsigned spin_now; /* the same, for the running collective */
	int oversub;	   /* more members than the node has CPUs */
	double timeout;	   /* HOROVOD_PEER_TIMEOUT             */
	hvd_status_t failed;
	char failmsg[256];
	const char *what; /* name of the running collective, for errors */
};

static inline uint64_t load_acq(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline long futex(uint32_t *addr, int op, uint32_t val,
			 const struct timespec *ts)
{
	/* not FUTEX_PRIVATE: the word is shared between processes */
	return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

/* The futex word: the low half of the 64-bit sequence number. */
static inline uint32_t *futex_word(struct shm_flag *f)
{
	return (uint32_t *)&f->seq + (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
}

/* Publish v.  The store and the load of sleepers are both sequentially
 * consistent, as are the sleeper's increment and its re-check of seq: so
 * either the sleeper sees v or the publisher sees the sleeper. */
static inline void publish(struct shm_flag *f, uint64_t v)
{
	__atomic_store_n(&f->seq, v, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&f->sleepers, __ATOMIC_SEQ_CST))
		futex(futex_word(f), FUTEX_WAKE, INT32_MAX, NULL);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static inline void prefetch_w(const void *p)
{
#if defined(__x86_64__)
	__asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

/* Lay the segment out for g->n, g->nbuf, g->chunk, g->small_max at
 * g->base (when set) and compute g->size. */
void shm_layout(shm_group_t *g);

#pragma GCC visibility pop

#endif /* HVD_SHM_IMPL_H */
