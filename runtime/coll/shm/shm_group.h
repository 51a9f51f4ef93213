/*
 * shm_group.h - what the shared-memory files share: the segment layout, the
 * group, the flag primitives and waiting, how data for peers is written,
 * and the pipeline.  shm.c (small path, collectives) opens with the
 * design; shm_setup.c makes the segment, shm_group.c, shm_share.c and
 * shm_pipe.c hold the rest.
 */
#ifndef HVD_SHM_GROUP_H
#define HVD_SHM_GROUP_H

#include "base/base.h"
#include "kernels/kernels.h"

#include <sched.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#pragma GCC visibility push(hidden)

/* The same typedef as shm.h's (C11 allows it twice): this header stands
 * apart from shm.h, the collectives' contract, which needs none of it. */
typedef struct shm_group shm_group_t;

#define SHM_MAGIC 0x68766473686d3031ull /* "hvdshm01" */
#define SHM_LINE 128
#define SHM_INLINE 48 /* inline payload in the 64-byte small flag line */
#define SHM_MAX_SEGMENT (256ul << 20)
#define SHM_NBUF_MIN 2
#define SHM_NBUF_MAX 64
#define SHM_SMALL_MAX (16ul << 20)
#define SHM_TOKEN 16 /* random bytes in the segment's name */
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
	uint64_t pidns; /* hvd_pidns(): where pid means something */
	uint32_t away;  /* waiting on the network (shm_away) */
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
	/* a failure elsewhere (may be NULL): shm.h's shm_check_fn */
	hvd_status_t (*check)(void *arg, char *why, size_t len);
	void *check_arg;
	hvd_status_t failed;
	char failmsg[640];
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

static inline void prefetch_w(const void *p)
{
#if defined(__x86_64__)
	__asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

/* ------------------------------------------------------------ waiting */

/* Error exit: records the message, marks the group failed. */
hvd_status_t shm_fail(shm_group_t *g, hvd_status_t st, const char *fmt, ...)
    HVD_PRINTF(3, 4);
/* The slow part of a wait (shm_group.c). */
hvd_status_t shm_wait_slow(shm_group_t *g, struct shm_flag *f, uint64_t want,
			   int peer);

static inline hvd_status_t wait_ge(shm_group_t *g, struct shm_flag *f,
				   uint64_t want, int peer)
{
	unsigned i;

	if (load_acq(&f->seq) >= want)
		return HVD_OK;
	for (i = 0; i < g->spin_now; i++) {
		hvd_cpu_relax();
		if (load_acq(&f->seq) >= want)
			return HVD_OK;
	}
	/* The peer may be waiting for this very CPU (unbound ranks, a busy
	 * node): hand it over a few times before going to sleep. */
	for (i = 0; i < SHM_YIELDS; i++) {
		sched_yield();
		if (load_acq(&f->seq) >= want)
			return HVD_OK;
	}
	return shm_wait_slow(g, f, want, peer);
}

/* Spin longer for bigger steps: a peer that is a few microseconds behind
 * on a 32 KiB step is normal, and putting the waiter to sleep would make
 * it late for the next step (a futex wake-up costs ~10 us).  About 2.5 us
 * of polling per KiB, nothing extra when the node is oversubscribed. */
static inline void set_budget(shm_group_t *g, size_t bytes)
{
	g->spin_now = g->spin + (g->oversub ? 0 : (unsigned)(bytes / 16));
}

/* Wait until field f of every other member reached want. */
#define WAIT_ALL(g, f, want)                                                   \
	do {                                                                   \
		for (int q_ = 0; q_ < (g)->n; q_++) {                          \
			hvd_status_t st_;                                      \
			if (q_ == (g)->rank)                                   \
				continue;                                      \
			st_ = wait_ge((g), &(g)->ctl[q_].f, (want), q_);       \
			if (st_ != HVD_OK)                                     \
				return st_;                                    \
		}                                                              \
	} while (0)

static inline hvd_status_t check(shm_group_t *g, const char *what)
{
	g->what = what;
	if (g->failed)
		return hvd_error(g->failed, "%s", g->failmsg);
	return HVD_OK;
}

/* -------------------------------------------- data for peers, pipeline */

/* Choose, and after the call measure, how this call writes the data its
 * peers read (shm_share.c). */
void shm_share_begin(shm_group_t *g, size_t bytes);
void shm_share_end(shm_group_t *g, size_t bytes);

static inline void copy_share(shm_group_t *g, void *dst, const void *src, size_t n)
{
	if (g->share_now)
		hvd_copy_stream(dst, src, n);
	else
		hvd_copy(dst, src, n);
}

/* Publish s in f after data for the peers written in this call's mode:
 * streamed stores are ordered before the flag by a fence. */
static inline void publish_shared(shm_group_t *g, struct shm_flag *f, uint64_t s)
{
	if (g->share_now)
		hvd_stream_fence();
	publish(f, s);
}

/* Region p (data for slice p) of member r's pipeline buffer b. */
static inline unsigned char *region(shm_group_t *g, int r, uint64_t b, int p,
				    size_t rbytes)
{
	return g->slots + ((size_t)r * g->nbuf + b) * g->chunk +
	       (size_t)p * rbytes;
}

enum pipe_kind { PIPE_ALLREDUCE, PIPE_REDUCE_SCATTER, PIPE_ALLGATHER };

/* The large-message pipeline (shm_pipe.c): allreduce, reduce-scatter
 * (recv holds the own slice) or allgather of slices (send unused). */
hvd_status_t shm_pipeline(shm_group_t *g, enum pipe_kind kind,
			  const unsigned char *send, unsigned char *recv,
			  size_t count, hvd_dtype_t dtype, hvd_op_t op,
			  double scale);

/* Lay the segment out for g->n, g->nbuf, g->chunk, g->small_max at
 * g->base (when set) and compute g->size. */
void shm_layout(shm_group_t *g);
/* The creator's parameters for n members from the knobs' values, bounded
 * (nbuf 2..64, chunk a multiple of n*64 shrunk to keep the pipeline
 * buffers within SHM_MAX_SEGMENT, small up to SHM_SMALL_MAX), and the
 * segment's size: a header with magic 0 and nothing attached. */
void shm_params(int n, long nbuf, size_t chunk, size_t small,
		struct shm_header *h);
/* 0 when h could have come from shm_params() for n members (magic set);
 * else -1 and why says what is wrong. */
int shm_header_check(const struct shm_header *h, int n, char *why,
		     size_t whylen);
/* 0 when fd is a regular file of this effective uid, mode exactly 0600,
 * whose header (read into h) passes shm_header_check and whose size is
 * the header's; else -1 and why. */
int shm_segment_check(int fd, int n, struct shm_header *h, char *why,
		      size_t whylen);

#pragma GCC visibility pop

#endif /* HVD_SHM_GROUP_H */
