/*
 * bootstrap_blob.c - the pure part of the bootstrap: the record each rank
 * publishes through PMIx, encoded and decoded, and the rank layout
 * computed from every rank's record.  No PMIx here, so that the unit
 * test and the fuzz harness (tests/fuzz/fuzz_bootstrap.c) call it alone.
 *
 * A record is read from another process: decoding checks every length
 * against the bytes there are before it copies anything.
 */
#include "config.h"

#include "net/bootstrap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOB_MAGIC 0x48564432u /* "HVD2" */

struct blob_hdr {
	uint32_t magic;
	int32_t pmix_local_rank;
	int32_t pid;
	uint32_t key_len;
	uint32_t addr_len;
	uint32_t zero; /* no hidden padding: the bytes are the record */
	uint64_t pidns;
};
_Static_assert(sizeof(struct blob_hdr) == 32, "a record's header is 32 bytes");

void *bootstrap_blob_encode(const struct bootstrap_peer *p, size_t *len)
{
	struct blob_hdr h;
	size_t klen = strnlen(p->node_key, sizeof(p->node_key) - 1);
	unsigned char *buf;

	if (p->addr_len > UINT32_MAX)
		return NULL;
	memset(&h, 0, sizeof(h));
	h.magic = BLOB_MAGIC;
	h.pmix_local_rank = p->pmix_local_rank;
	h.pid = (int32_t)p->pid;
	h.pidns = p->pidns;
	h.key_len = (uint32_t)klen;
	h.addr_len = (uint32_t)p->addr_len;
	buf = malloc(sizeof(h) + klen + p->addr_len);
	if (!buf)
		return NULL;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), p->node_key, klen);
	if (p->addr_len)
		memcpy(buf + sizeof(h) + klen, p->addr, p->addr_len);
	*len = sizeof(h) + klen + p->addr_len;
	return buf;
}

hvd_status_t bootstrap_blob_decode(const void *bytes, size_t size,
				   struct bootstrap_peer *p)
{
	const unsigned char *b = bytes;
	struct blob_hdr h;

	memset(p, 0, sizeof(*p));
	if (!b || size < sizeof(h))
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "malformed: %zu bytes, shorter than its "
				 "header (another libhvd version?)",
				 size);
	memcpy(&h, b, sizeof(h));
	if (h.magic != BLOB_MAGIC)
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "malformed: magic %#x, expected %#x (another "
				 "libhvd version?)",
				 h.magic, BLOB_MAGIC);
	if (h.zero || h.key_len >= sizeof(p->node_key) ||
	    size != sizeof(h) + (size_t)h.key_len + (size_t)h.addr_len ||
	    memchr(b + sizeof(h), '\0', h.key_len))
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "malformed: %zu bytes for a %u-byte node key "
				 "and a %u-byte address",
				 size, h.key_len, h.addr_len);
	memcpy(p->node_key, b + sizeof(h), h.key_len);
	p->node_key[h.key_len] = '\0';
	p->node_key_len = (int)h.key_len;
	p->pmix_local_rank = h.pmix_local_rank;
	p->pid = (pid_t)h.pid;
	p->pidns = h.pidns;
	p->addr_len = h.addr_len;
	p->addr = malloc(h.addr_len ? h.addr_len : 1);
	if (!p->addr)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	memcpy(p->addr, b + sizeof(h) + h.key_len, h.addr_len);
	return HVD_OK;
}

void bootstrap_peers_free(struct bootstrap_peer *peers, int n)
{
	if (!peers)
		return;
	for (int r = 0; r < n; r++)
		free(peers[r].addr);
	free(peers);
}

/* ------------------------------------------------------- pure layout */

hvd_status_t bootstrap_layout(struct hvd_world *w, const char *const *keys,
			      const int *pmix_lr)
{
	int n = w->size, nodes = 0, use_pmix = 1;
	int *first = NULL, *lsize = NULL, *seen = NULL;

	w->node_of = calloc((size_t)n, sizeof(int));
	w->local_rank_of = calloc((size_t)n, sizeof(int));
	first = calloc((size_t)n, sizeof(int)); /* first rank of node i */
	lsize = calloc((size_t)n, sizeof(int));
	if (!w->node_of || !w->local_rank_of || !first || !lsize)
		goto err_nomem;

	for (int r = 0; r < n; r++) {
		int id = -1;

		for (int i = 0; i < nodes && id < 0; i++)
			if (strcmp(keys[first[i]], keys[r]) == 0)
				id = i;
		if (id < 0) {
			id = nodes++;
			first[id] = r;
		}
		w->node_of[r] = id;
		w->local_rank_of[r] = lsize[id]++;
	}
	w->num_nodes = nodes;

	/* Prefer PMIx's local ranks (they may follow a cyclic or arbitrary
	 * distribution) when they are a permutation on every node. */
	seen = calloc((size_t)n, sizeof(int));
	if (!seen)
		goto err_nomem;
	/* first[] becomes each node's offset in seen[] (prefix sums). */
	for (int i = 0, off = 0; i < nodes; i++) {
		first[i] = off;
		off += lsize[i];
	}
	for (int r = 0; r < n && use_pmix; r++) {
		int lr = pmix_lr ? pmix_lr[r] : -1, id = w->node_of[r];

		if (lr < 0 || lr >= lsize[id]) {
			use_pmix = 0;
			break;
		}
		if (seen[first[id] + lr]++)
			use_pmix = 0;
	}
	if (use_pmix)
		for (int r = 0; r < n; r++)
			w->local_rank_of[r] = pmix_lr[r];

	w->node_id = w->node_of[w->rank];
	w->local_rank = w->local_rank_of[w->rank];
	w->local_size = lsize[w->node_id];
	w->cross_rank = 0;
	w->cross_size = 0;
	for (int r = 0; r < n; r++) {
		if (w->local_rank_of[r] != w->local_rank)
			continue;
		w->cross_size++;
		if (w->node_of[r] < w->node_id)
			w->cross_rank++;
	}
	free(seen);
	free(first);
	free(lsize);
	return HVD_OK;

err_nomem:
	free(seen);
	free(first);
	free(lsize);
	free(w->node_of);
	free(w->local_rank_of);
	w->node_of = w->local_rank_of = NULL;
	return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory computing "
					    "the rank layout of %d ranks", n);
}

