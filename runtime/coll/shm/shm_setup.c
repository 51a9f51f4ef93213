/*
 * shm_setup.c - making and attaching the shared-memory segment of a
 * node-local group (shm_group_create / shm_group_destroy in shm.h).
 *
 * Local rank 0 creates the POSIX object (O_EXCL, mode 0600) under a name
 * with 128 random bits in it, with the layout parameters it read from the
 * environment written into the header, and broadcasts the random part to
 * the others; they attach and take the layout from the header (so members
 * with different environments still agree); after a barrier rank 0
 * unlinks the name, so nothing is left in /dev/shm even if the job is
 * killed.  Every member takes part in the broadcast and the barrier even
 * after a failure, and all of them fail if one could not attach.
 *
 * /dev/shm is shared by every user of the node.  With a name anyone could
 * predict, another user could create it first and the members would map
 * that user's file and trust its header (writes past the mapping, an
 * munmap of a size the header chose, SIGBUS when the owner shrinks it).
 * Now nobody can know the name before rank 0 made the object, and a
 * member still maps only a regular file of its own uid with mode 0600
 * whose header's parameters are within the creator's bounds and whose
 * size is the layout's (shm_segment_check, unit-tested with crafted
 * headers in tests/unit/test_shm.c).
 */
#include "config.h"

#include "coll/shm/shm.h"
#include "coll/shm/shm_group.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static int online_cpus(void)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	if (sched_getaffinity(0, sizeof(set), &set) == 0 &&
	    CPU_COUNT(&set) > 0 && (n <= 0 || CPU_COUNT(&set) < n)) {
		/* bound ranks: count what the node offers, not this mask */
		return n > 0 ? (int)n : CPU_COUNT(&set);
	}
	return n > 0 ? (int)n : 1;
}

/* "/hvd-<uid>-<key>-<token>": the key tells an admin whose segment it is,
 * the 128 random bits of the token make the name unguessable, so that no
 * other user can create it first (the creator opens it O_EXCL). */
static void make_name(char *out, size_t len, const char *key,
		      const unsigned char token[SHM_TOKEN])
{
	static const char hex[] = "0123456789abcdef";
	size_t j;

	j = (size_t)snprintf(out, len, "/hvd-%d-", (int)getuid());
	for (const char *p = key; *p && j + 1 < len && j < 180; p++)
		out[j++] = (*p == '/' || *p == ' ') ? '_' : *p;
	if (j + 2 + 2 * SHM_TOKEN < len) {
		out[j++] = '-';
		for (int i = 0; i < SHM_TOKEN; i++) {
			out[j++] = hex[token[i] >> 4];
			out[j++] = hex[token[i] & 15];
		}
	}
	out[j] = '\0';
}

static hvd_status_t draw_token(unsigned char token[SHM_TOKEN])
{
	size_t got = 0;

	while (got < SHM_TOKEN) {
		ssize_t r = getrandom(token + got, SHM_TOKEN - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return hvd_error(HVD_ERR_TRANSPORT,
					 "shared memory: getrandom failed: %s",
					 r < 0 ? strerror(errno) : "no bytes");
		got += (size_t)r;
	}
	return HVD_OK;
}

static hvd_status_t map_segment(shm_group_t *g, int fd, size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, fd, 0);

	if (p == MAP_FAILED)
		return hvd_error(HVD_ERR_TRANSPORT,
				 "shared memory: mmap of %s (%zu bytes) "
				 "failed: %s",
				 g->name, size, strerror(errno));
	g->base = p;
	g->size = size;
	return HVD_OK;
}

/* Offsets of the parts of the segment; 0 when a size overflows. */
static size_t layout_size(size_t n, size_t nbuf, size_t chunk, size_t small,
			  size_t *small_off, size_t *slot_off)
{
	size_t ctl_off = 4096, a, b, c;

	if (__builtin_mul_overflow(n, sizeof(struct shm_ctl), &a) ||
	    __builtin_add_overflow(a, ctl_off + 4095, &a))
		return 0;
	*small_off = a / 4096 * 4096;
	if (__builtin_mul_overflow(n, 2 * small, &b) ||
	    __builtin_add_overflow(b, *small_off + 4095, &b))
		return 0;
	*slot_off = b / 4096 * 4096;
	if (__builtin_mul_overflow(n, nbuf, &c) ||
	    __builtin_mul_overflow(c, chunk, &c) ||
	    __builtin_add_overflow(c, *slot_off, &c))
		return 0;
	return c;
}

void shm_layout(shm_group_t *g)
{
	size_t small_off = 0, slot_off = 0;

	g->size = layout_size((size_t)g->n, (size_t)g->nbuf, g->chunk,
			      g->small_max, &small_off, &slot_off);
	g->hdr = (struct shm_header *)g->base;
	g->ctl = (struct shm_ctl *)(g->base + 4096);
	g->small = g->base + small_off;
	g->slots = g->base + slot_off;
}

void shm_params(int n, long nbuf, size_t chunk, size_t small,
		struct shm_header *h)
{
	size_t sn = (size_t)n;

	if (nbuf < SHM_NBUF_MIN)
		nbuf = SHM_NBUF_MIN;
	if (nbuf > SHM_NBUF_MAX)
		nbuf = SHM_NBUF_MAX;
	/* each region at least 256 bytes, a multiple of 64 */
	if (chunk < sn * 256)
		chunk = sn * 256;
	for (;;) {
		size_t prod;

		if (chunk <= sn * 256 ||
		    (!__builtin_mul_overflow(sn * (size_t)nbuf, chunk, &prod) &&
		     prod <= SHM_MAX_SEGMENT))
			break;
		chunk /= 2;
	}
	chunk = chunk / (sn * 64) * (sn * 64);
	if (small > SHM_SMALL_MAX)
		small = SHM_SMALL_MAX;
	small = ALIGN_UP(small, 64);
	memset(h, 0, sizeof(*h));
	h->n = (uint32_t)n;
	h->nbuf = (uint32_t)nbuf;
	h->chunk = chunk;
	h->small_max = small;
	h->size = layout_size(sn, (size_t)nbuf, chunk, small, &(size_t){0},
			      &(size_t){0});
}

int shm_header_check(const struct shm_header *h, int n, char *why,
		     size_t whylen)
{
	size_t sn = (size_t)n, total, prod;

	if (h->magic != SHM_MAGIC) {
		snprintf(why, whylen, "no segment header (magic %#llx)",
			 (unsigned long long)h->magic);
		return -1;
	}
	if (n < 1 || h->n != (uint32_t)n) {
		snprintf(why, whylen, "made for %u members, this group has %d",
			 h->n, n);
		return -1;
	}
	/* The bounds shm_params() gives every segment it makes. */
	if (h->nbuf < SHM_NBUF_MIN || h->nbuf > SHM_NBUF_MAX) {
		snprintf(why, whylen, "%u pipeline buffers, expected %d to %d",
			 h->nbuf, SHM_NBUF_MIN, SHM_NBUF_MAX);
		return -1;
	}
	if (h->chunk < sn * 128 || h->chunk % (sn * 64) ||
	    (h->chunk > sn * 256 &&
	     (__builtin_mul_overflow(sn * h->nbuf, h->chunk, &prod) ||
	      prod > SHM_MAX_SEGMENT))) {
		snprintf(why, whylen,
			 "pipeline buffers of %llu bytes, not a multiple of "
			 "%zu within the %lu-byte segment limit",
			 (unsigned long long)h->chunk, sn * 64,
			 (unsigned long)SHM_MAX_SEGMENT);
		return -1;
	}
	if (h->small_max > SHM_SMALL_MAX || h->small_max % 64) {
		snprintf(why, whylen,
			 "small buffers of %llu bytes, expected a multiple of "
			 "64 up to %lu",
			 (unsigned long long)h->small_max,
			 (unsigned long)SHM_SMALL_MAX);
		return -1;
	}
	total = layout_size(sn, h->nbuf, h->chunk, h->small_max, &(size_t){0},
			    &(size_t){0});
	if (!total || h->size != total) {
		snprintf(why, whylen,
			 "its header gives %llu bytes, its layout %zu",
			 (unsigned long long)h->size, total);
		return -1;
	}
	return 0;
}

int shm_segment_check(int fd, int n, struct shm_header *h, char *why,
		      size_t whylen)
{
	struct stat sb;
	ssize_t r;

	if (fstat(fd, &sb) != 0) {
		snprintf(why, whylen, "fstat failed: %s", strerror(errno));
		return -1;
	}
	/* Only a file this user made (mode 0600: the creator's fchmod) can
	 * be this group's: anything else was put there by someone else, who
	 * could rewrite or shrink it (SIGBUS) under us. */
	if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & 07777) != 0600) {
		snprintf(why, whylen,
			 "%s owned by uid %u with mode %04o, expected a "
			 "regular file of uid %u with mode 0600",
			 S_ISREG(sb.st_mode) ? "a file" : "not a regular file,",
			 (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777),
			 (unsigned)geteuid());
		return -1;
	}
	r = pread(fd, h, sizeof(*h), 0);
	if (r != (ssize_t)sizeof(*h)) {
		snprintf(why, whylen, "%lld bytes, shorter than its header",
			 (long long)sb.st_size);
		return -1;
	}
	if (shm_header_check(h, n, why, whylen) != 0)
		return -1;
	if ((uint64_t)sb.st_size != h->size) {
		snprintf(why, whylen, "%lld bytes, its header says %llu",
			 (long long)sb.st_size, (unsigned long long)h->size);
		return -1;
	}
	return 0;
}

static hvd_status_t create_segment(shm_group_t *g)
{
	hvd_status_t st;
	int e;
	/* glibc's shm_open adds O_NOFOLLOW and O_CLOEXEC */
	int fd = shm_open(g->name, O_CREAT | O_EXCL | O_RDWR, 0600);

	if (fd < 0)
		return hvd_error(HVD_ERR_TRANSPORT,
				 "shared memory: shm_open(%s) failed: %s "
				 "(is /dev/shm mounted and writable?)",
				 g->name, strerror(errno));
	/* exactly 0600 whatever the umask: what the members check */
	if (fchmod(fd, 0600) != 0) {
		st = hvd_error(HVD_ERR_TRANSPORT,
			       "shared memory: fchmod(%s, 0600) failed: %s",
			       g->name, strerror(errno));
		goto err_unlink;
	}
	/* Take the pages now, not only the size: on a /dev/shm without
	 * room for the whole segment (a container's 64 MB, or one filled by
	 * other jobs), a merely sized file maps fine and the first rank to
	 * touch a page past the room dies of SIGBUS.  Allocated, it fails
	 * here, and the node's collectives go through UCX instead. */
	e = posix_fallocate(fd, 0, (off_t)g->size);
	if (e != 0) {
		st = hvd_error(HVD_ERR_TRANSPORT,
			       "shared memory: no room for %s's %zu bytes: "
			       "%s (is /dev/shm large enough? free it, or "
			       "lower HOROVOD_SHM_CHUNK)",
			       g->name, g->size, strerror(e));
		goto err_unlink;
	}
	st = map_segment(g, fd, g->size);
	if (st != HVD_OK)
		goto err_unlink;
	close(fd);
	shm_layout(g);
	g->hdr->n = (uint32_t)g->n;
	g->hdr->nbuf = (uint32_t)g->nbuf;
	g->hdr->chunk = g->chunk;
	g->hdr->small_max = g->small_max;
	g->hdr->size = g->size;
	__atomic_store_n(&g->hdr->magic, SHM_MAGIC, __ATOMIC_RELEASE);
	return HVD_OK;

err_unlink:
	close(fd);
	shm_unlink(g->name);
	return st;
}

/* The layout is recomputed from the header's parameters, each bounded
 * as the creator bounds it, and mapped at the size the file has, which
 * must be that layout's: a header can no longer make us write past the
 * mapping or unmap more than we mapped. */
static hvd_status_t attach_segment(shm_group_t *g)
{
	struct shm_header h;
	char why[200];
	int fd = shm_open(g->name, O_RDWR, 0600);
	hvd_status_t st;

	if (fd < 0)
		return hvd_error(HVD_ERR_TRANSPORT,
				 "shared memory: cannot open %s made by local "
				 "rank 0: %s",
				 g->name, strerror(errno));
	if (shm_segment_check(fd, g->n, &h, why, sizeof(why)) != 0) {
		close(fd);
		return hvd_error(HVD_ERR_TRANSPORT,
				 "shared memory: refusing /dev/shm%s: %s; "
				 "it is not the segment local rank 0 made",
				 g->name, why);
	}
	g->nbuf = (int)h.nbuf;
	g->chunk = h.chunk;
	g->small_max = h.small_max;
	st = map_segment(g, fd, h.size);
	close(fd);
	if (st != HVD_OK)
		return st;
	shm_layout(g);
	return HVD_OK;
}

/* What local rank 0 tells the others: whether it made the segment, and
 * the random part of its name. */
struct shm_hello {
	int32_t ok;
	unsigned char token[SHM_TOKEN];
};

hvd_status_t shm_group_create(const char *key, int local_rank, int local_size,
			      shm_barrier_fn barrier, shm_bcast_fn bcast,
			      void *arg, shm_group_t **out)
{
	struct shm_hello hello;
	shm_group_t *g;
	hvd_status_t st, st2;
	long spin;

	if (!key || !barrier || !bcast || !out || local_size < 1 ||
	    local_rank < 0 || local_rank >= local_size)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "shm_group_create: bad arguments (rank %d of "
				 "%d)",
				 local_rank, local_size);
	g = calloc(1, sizeof(*g));
	if (!g)
		return hvd_error(HVD_ERR_NO_MEMORY, "shm_group_create: out of "
						    "memory");
	g->rank = local_rank;
	g->n = local_size;
	g->timeout = hvd_env_double("HOROVOD_PEER_TIMEOUT", 60.0);
	g->nt_min = hvd_env_size("HOROVOD_SHM_STREAM", 64u << 20);
	{
		const char *v = getenv("HOROVOD_SHM_SHARE");

		g->share_policy = !v || !*v || !strcmp(v, "auto") ? -1
				  : !strcmp(v, "stream")	    ? 1
				  : !strcmp(v, "cache")		    ? 0
								    : -2;
		if (g->share_policy == -2) {
			hvd_log(HVD_LOG_WARNING,
				"HOROVOD_SHM_SHARE=%s: expected auto, cache or "
				"stream; using auto",
				v);
			g->share_policy = -1;
		}
		g->share_mode = g->share_policy == 1;
		g->share_now = g->share_mode;
	}
	if (g->timeout <= 0)
		g->timeout = 60.0;
	g->oversub = local_size > online_cpus();
	spin = hvd_env_long("HOROVOD_SHM_SPIN", g->oversub ? 16 : 256);
	g->spin = spin < 0 ? 0 : (unsigned)spin;
	g->spin_now = g->spin;

	memset(&hello, 0, sizeof(hello));
	if (local_rank == 0) {
		struct shm_header h;

		shm_params(local_size, hvd_env_long("HOROVOD_SHM_NBUF", 4),
			   hvd_env_size("HOROVOD_SHM_CHUNK", 1 << 20),
			   hvd_env_size("HOROVOD_SHM_SMALL", 32 << 10), &h);
		g->nbuf = (int)h.nbuf;
		g->chunk = h.chunk;
		g->small_max = h.small_max;
		g->size = h.size;
		g->base = NULL;
		st = draw_token(hello.token);
		if (st == HVD_OK) {
			make_name(g->name, sizeof(g->name), key, hello.token);
			st = create_segment(g);
		}
		hello.ok = st == HVD_OK;
	} else {
		st = HVD_OK;
	}
	/* Every member takes part in the broadcast and the barrier, even
	 * after a failure, so that nobody waits forever for it.  The others
	 * learn the name only from local rank 0, after it made the object:
	 * nobody else can know it before. */
	st2 = bcast(arg, &hello, sizeof(hello));
	if (st == HVD_OK && st2 != HVD_OK)
		st = hvd_error_prefix(st2, "shared memory: set-up broadcast");
	if (st == HVD_OK && local_rank != 0) {
		if (!hello.ok) {
			st = hvd_error(HVD_ERR_TRANSPORT,
				       "shared memory: local rank 0 could not "
				       "make the segment; see its error");
		} else {
			make_name(g->name, sizeof(g->name), key, hello.token);
			st = attach_segment(g);
		}
	}
	if (st == HVD_OK) {
		g->ctl[local_rank].pidns = hvd_pidns();
		__atomic_store_n(&g->ctl[local_rank].pid, (int64_t)getpid(),
				 __ATOMIC_RELEASE);
		__atomic_add_fetch(&g->hdr->attached, 1, __ATOMIC_ACQ_REL);
	}
	st2 = barrier(arg);
	if (st == HVD_OK && st2 != HVD_OK)
		st = hvd_error_prefix(st2, "shared memory: set-up barrier");
	if (local_rank == 0 && g->base)
		shm_unlink(g->name); /* all attached: nothing left behind */
	if (st == HVD_OK &&
	    __atomic_load_n(&g->hdr->attached, __ATOMIC_ACQUIRE) !=
		(uint32_t)local_size)
		st = hvd_error(HVD_ERR_TRANSPORT,
			       "shared memory: only %u of %d local ranks "
			       "attached to %s; see the others' errors",
			       g->hdr->attached, local_size, g->name);
	if (st != HVD_OK) {
		shm_group_destroy(g);
		return st;
	}
	hvd_log(HVD_LOG_DEBUG,
		"shared memory: %s, %d members, %d x %zu-byte pipeline "
		"buffers each, small <= %zu bytes, spin %u",
		g->name, g->n, g->nbuf, g->chunk, g->small_max, g->spin);
	*out = g;
	return HVD_OK;
}

void shm_group_destroy(shm_group_t *g)
{
	if (!g)
		return;
	if (g->base)
		munmap(g->base, g->size);
	free(g);
}
