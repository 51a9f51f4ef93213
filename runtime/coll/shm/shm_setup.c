/*
 * shm_setup.c - making and attaching the shared-memory segment of a
 * node-local group (shm_group_create / shm_group_destroy in shm.h).
 *
 * Local rank 0 creates the POSIX object with the layout parameters it
 * read from the environment and writes them into the header; the others
 * attach after a barrier and take the layout from the header (so members
 * with different environments still agree); after a second barrier rank 0
 * unlinks the name, so nothing is left in /dev/shm even if the job is
 * killed.  Every member takes part in both barriers even after a failure,
 * and all of them fail if one could not attach.
 */
#include "config.h"

#include "coll/shm/shm_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

static void make_name(char *out, size_t len, const char *key)
{
	size_t j = 0;

	j = (size_t)snprintf(out, len, "/hvd-%d-", (int)getuid());
	for (const char *p = key; *p && j + 1 < len && j < 200; p++)
		out[j++] = (*p == '/' || *p == ' ') ? '_' : *p;
	out[j] = '\0';
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

void shm_layout(shm_group_t *g)
{
	size_t ctl_off = 4096;
	size_t small_off =
	    ALIGN_UP(ctl_off + (size_t)g->n * sizeof(struct shm_ctl), 4096);
	size_t slot_off =
	    ALIGN_UP(small_off + (size_t)g->n * 2 * g->small_max, 4096);

	g->hdr = (struct shm_header *)g->base;
	g->ctl = (struct shm_ctl *)(g->base + ctl_off);
	g->small = g->base + small_off;
	g->slots = g->base + slot_off;
	g->size = slot_off + (size_t)g->n * g->nbuf * g->chunk;
}

static hvd_status_t create_segment(shm_group_t *g)
{
	int fd, tries;
	hvd_status_t st;

	for (tries = 0;; tries++) {
		fd = shm_open(g->name, O_CREAT | O_EXCL | O_RDWR, 0600);
		if (fd >= 0 || errno != EEXIST || tries > 0)
			break;
		/* left behind by a crashed job with the same key */
		hvd_log(HVD_LOG_INFO, "shared memory: removing stale %s",
			g->name);
		shm_unlink(g->name);
	}
	if (fd < 0)
		return hvd_error(HVD_ERR_TRANSPORT,
				 "shared memory: shm_open(%s) failed: %s "
				 "(is /dev/shm mounted and writable?)",
				 g->name, strerror(errno));
	if (ftruncate(fd, (off_t)g->size) != 0) {
		st = hvd_error(HVD_ERR_TRANSPORT,
			       "shared memory: cannot size %s to %zu bytes: "
			       "%s (is /dev/shm large enough? lower "
			       "HOROVOD_SHM_CHUNK)",
			       g->name, g->size, strerror(errno));
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

static hvd_status_t attach_segment(shm_group_t *g)
{
	struct shm_header h;
	struct stat sb;
	int fd = shm_open(g->name, O_RDWR, 0600);
	hvd_status_t st;

	if (fd < 0)
		return hvd_error(HVD_ERR_TRANSPORT,
				 "shared memory: cannot open %s made by local "
				 "rank 0: %s",
				 g->name, strerror(errno));
	if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < sizeof(h)) {
		close(fd);
		return hvd_error(HVD_ERR_TRANSPORT,
				 "shared memory: %s is empty or unreadable",
				 g->name);
	}
	st = map_segment(g, fd, (size_t)sb.st_size);
	close(fd);
	if (st != HVD_OK)
		return st;
	memcpy(&h, g->base, sizeof(h));
	if (__atomic_load_n(&((struct shm_header *)g->base)->magic,
			    __ATOMIC_ACQUIRE) != SHM_MAGIC ||
	    h.n != (uint32_t)g->n || h.size != (uint64_t)sb.st_size) {
		munmap(g->base, (size_t)sb.st_size);
		g->base = NULL;
		return hvd_error(HVD_ERR_TRANSPORT,
				 "shared memory: %s does not match this group "
				 "(%u members, expected %d): two jobs with the "
				 "same key?",
				 g->name, h.n, g->n);
	}
	g->nbuf = (int)h.nbuf;
	g->chunk = h.chunk;
	g->small_max = h.small_max;
	shm_layout(g);
	return HVD_OK;
}

hvd_status_t shm_group_create(const char *key, int local_rank, int local_size,
			      shm_barrier_fn barrier, void *barrier_arg,
			      shm_group_t **out)
{
	shm_group_t *g;
	hvd_status_t st, st2;
	long spin;

	if (!key || !barrier || !out || local_size < 1 || local_rank < 0 ||
	    local_rank >= local_size)
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
	make_name(g->name, sizeof(g->name), key);
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

	if (local_rank == 0) {
		size_t chunk = hvd_env_size("HOROVOD_SHM_CHUNK", 1 << 20);
		long nbuf = hvd_env_long("HOROVOD_SHM_NBUF", 4);
		size_t small = hvd_env_size("HOROVOD_SHM_SMALL", 32 << 10);

		if (nbuf < 2)
			nbuf = 2;
		if (nbuf > 64)
			nbuf = 64;
		/* each region at least 256 bytes, a multiple of 64 */
		if (chunk < (size_t)local_size * 256)
			chunk = (size_t)local_size * 256;
		while (chunk > (size_t)local_size * 256 &&
		       (size_t)local_size * nbuf * chunk > SHM_MAX_SEGMENT)
			chunk /= 2;
		chunk = chunk / ((size_t)local_size * 64) *
			((size_t)local_size * 64);
		if (small > (16u << 20))
			small = 16u << 20;
		small = ALIGN_UP(small, 64);
		g->nbuf = (int)nbuf;
		g->chunk = chunk;
		g->small_max = small;
		g->base = NULL;
		/* the size shm_layout() computes from these */
		{
			size_t ctl_off = 4096;
			size_t small_off = ALIGN_UP(
			    ctl_off + (size_t)g->n * sizeof(struct shm_ctl),
			    4096);
			size_t slot_off = ALIGN_UP(
			    small_off + (size_t)g->n * 2 * g->small_max, 4096);
			g->size = slot_off + (size_t)g->n * g->nbuf * g->chunk;
		}
		st = create_segment(g);
	} else {
		st = HVD_OK;
	}
	/* every member takes part in both barriers, even after a failure,
	 * so that nobody waits forever for it */
	st2 = barrier(barrier_arg);
	if (st == HVD_OK && st2 != HVD_OK)
		st = hvd_error_prefix(st2, "shared memory: set-up barrier");
	if (st == HVD_OK && local_rank != 0)
		st = attach_segment(g);
	if (st == HVD_OK) {
		__atomic_store_n(&g->ctl[local_rank].pid, (int64_t)getpid(),
				 __ATOMIC_RELEASE);
		__atomic_add_fetch(&g->hdr->attached, 1, __ATOMIC_ACQ_REL);
	}
	st2 = barrier(barrier_arg);
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
