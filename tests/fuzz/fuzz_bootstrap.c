/*
 * Fuzz target for the bootstrap's pure parsers (runtime/net/
 * bootstrap_blob.c): the address record each rank publishes through PMIx,
 * and the rank layout computed from every rank's record.  The first byte
 * says which:
 *
 *   even: the rest is one record, decoded with bootstrap_blob_decode;
 *         accepted, its node key is NUL-terminated with the length it
 *         says, and encoding it gives the input bytes back;
 *   odd:  a job: byte 1 gives the size (1-64), byte 2 this rank, byte 3
 *         whether PMIx local ranks are given; then per rank a node byte
 *         (one of 8 node keys, or a key taken from the input) and a local
 *         rank byte (-1..127).  bootstrap_layout's answer must be a layout:
 *         node ids in order of first appearance and equal exactly for
 *         equal keys, local ranks a permutation on each node (PMIx's when
 *         they are one), cross ranks and sizes as Horovod defines them.
 *
 * libFuzzer:  make -C tests fuzz-bootstrap (clang -fsanitize=fuzzer,...)
 * replay:     built with -DHVD_FUZZ_MAIN and replay.c (replay.h), one TAP
 *             result per file named on the command line (the corpus
 *             replay of make check); --write-seeds DIR writes the seed
 *             corpus into DIR.
 */
#include "config.h"

#include "net/bootstrap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char summary[128];

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "fuzz_bootstrap: %s:%d: %s\n",         \
				__FILE__, __LINE__, #c);                       \
			abort();                                               \
		}                                                              \
	} while (0)

static void blob(const uint8_t *d, size_t n)
{
	struct bootstrap_peer p;
	size_t len = 0;
	void *again;

	if (bootstrap_blob_decode(d, n, &p) != HVD_OK) {
		CHECK(p.addr == NULL);
		snprintf(summary, sizeof(summary), "record refused");
		return;
	}
	CHECK(p.node_key_len >= 0 &&
	      (size_t)p.node_key_len < sizeof(p.node_key) &&
	      strlen(p.node_key) == (size_t)p.node_key_len);
	again = bootstrap_blob_encode(&p, &len);
	CHECK(again && len == n && memcmp(again, d, n) == 0);
	snprintf(summary, sizeof(summary),
		 "record: %d-byte node key, %zu-byte address",
		 p.node_key_len, p.addr_len);
	free(again);
	free(p.addr);
}

static void layout(const uint8_t *d, size_t n)
{
	static const char *const names[8] = {"a#0", "b#1", "c#2", "vm#0",
					     "vm#1", "a#1", "x",  ""};
	struct hvd_world w;
	const char *keys[64];
	char own[64][8];
	int lr[64], size, use_lr, first[64], nodes = 0;

	if (n < 3)
		return;
	memset(&w, 0, sizeof(w));
	size = 1 + d[0] % 64;
	w.size = size;
	w.rank = d[1] % size;
	use_lr = d[2] & 1;
	d += 3;
	n -= 3;
	for (int r = 0; r < size; r++) {
		uint8_t k = r * 2 < (int)n ? d[r * 2] : (uint8_t)r;
		uint8_t l = r * 2 + 1 < (int)n ? d[r * 2 + 1] : 0xff;

		if (k & 0x80) { /* a key of the input's own bytes */
			for (int i = 0; i < 7; i++)
				own[r][i] = (char)(1 + (k + i) % 3);
			own[r][k % 7] = '\0';
			keys[r] = own[r];
		} else {
			keys[r] = names[k % 8];
		}
		lr[r] = (int)(int8_t)l;
	}
	CHECK(bootstrap_layout(&w, keys, use_lr ? lr : NULL) == HVD_OK);

	/* node ids: in order of first appearance, equal iff keys equal */
	for (int r = 0; r < size; r++) {
		int id = w.node_of[r];

		CHECK(id >= 0 && id < w.num_nodes && id <= nodes);
		if (id == nodes)
			first[nodes++] = r;
		CHECK(strcmp(keys[first[id]], keys[r]) == 0);
		for (int i = 0; i < nodes; i++)
			CHECK(i == id || strcmp(keys[first[i]], keys[r]) != 0);
	}
	CHECK(nodes == w.num_nodes);
	/* local ranks: a permutation of 0..k-1 on each node */
	for (int id = 0; id < nodes; id++) {
		int k = 0, seen[64] = {0};

		for (int r = 0; r < size; r++) {
			if (w.node_of[r] != id)
				continue;
			k++;
			CHECK(w.local_rank_of[r] >= 0 &&
			      w.local_rank_of[r] < size);
			CHECK(!seen[w.local_rank_of[r]]++);
		}
		for (int i = 0; i < k; i++)
			CHECK(seen[i] == 1);
		if (id == w.node_id)
			CHECK(w.local_size == k);
	}
	/* PMIx's local ranks are kept when they are a permutation on every
	 * node */
	if (use_lr) {
		int perm = 1;

		for (int id = 0; id < nodes && perm; id++) {
			int seen[64] = {0}, k = 0;

			for (int r = 0; r < size; r++)
				if (w.node_of[r] == id)
					k++;
			for (int r = 0; r < size && perm; r++)
				if (w.node_of[r] == id &&
				    (lr[r] < 0 || lr[r] >= k || seen[lr[r]]++))
					perm = 0;
		}
		for (int r = 0; perm && r < size; r++)
			CHECK(w.local_rank_of[r] == lr[r]);
	}
	CHECK(w.node_id == w.node_of[w.rank] &&
	      w.local_rank == w.local_rank_of[w.rank]);
	{
		int cs = 0, cr = 0;

		for (int r = 0; r < size; r++)
			if (w.local_rank_of[r] == w.local_rank) {
				cs++;
				cr += w.node_of[r] < w.node_id;
			}
		CHECK(w.cross_size == cs && w.cross_rank == cr &&
		      cr < cs);
	}
	snprintf(summary, sizeof(summary),
		 "layout: %d ranks on %d nodes, rank %d local %d/%d cross "
		 "%d/%d",
		 size, nodes, w.rank, w.local_rank, w.local_size, w.cross_rank,
		 w.cross_size);
	free(w.node_of);
	free(w.local_rank_of);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	summary[0] = '\0';
	if (size < 1)
		return 0;
	if (data[0] & 1)
		layout(data + 1, size - 1);
	else
		blob(data + 1, size - 1);
	return 0;
}

#ifdef HVD_FUZZ_MAIN
#include "replay.h"

static int write_seed(const char *dir, const char *name, const void *b,
		      size_t n)
{
	return fuzz_write_seed(dir, name, b, n, NULL, 0);
}

static int write_seeds(const char *dir)
{
	struct bootstrap_peer p;
	unsigned char buf[512], addr[200];
	/* srun -N2 -n4 block, cyclic with PMIx local ranks, the
	 * mini-cluster's two nodes of one host, one rank */
	static const unsigned char block[] = {1, 3, 3, 0, 0, 0xff, 0, 0xff,
					      1, 0xff, 1, 0xff};
	static const unsigned char cyclic[] = {1, 3, 2, 1, 0, 0, 1, 0,
					       0, 1, 1, 1};
	static const unsigned char mini[] = {1, 3, 0, 1, 3, 0, 3, 1,
					     4, 0, 4, 1};
	static const unsigned char one[] = {1, 0, 0, 0, 0, 0};
	void *rec;
	size_t len;
	int bad = 0;

	memset(&p, 0, sizeof(p));
	snprintf(p.node_key, sizeof(p.node_key), "node17#3");
	p.node_key_len = 8;
	p.pmix_local_rank = 1;
	p.pid = 4242;
	for (size_t i = 0; i < sizeof(addr); i++)
		addr[i] = (unsigned char)(i * 37);
	p.addr = addr;
	p.addr_len = sizeof(addr);
	rec = bootstrap_blob_encode(&p, &len);
	if (!rec || len + 1 > sizeof(buf))
		return 1;
	buf[0] = 0;
	memcpy(buf + 1, rec, len);
	bad |= write_seed(dir, "record", buf, len + 1);
	bad |= write_seed(dir, "record-short", buf, len); /* one byte short */
	free(rec);
	bad |= write_seed(dir, "layout-block", block, sizeof(block));
	bad |= write_seed(dir, "layout-cyclic", cyclic, sizeof(cyclic));
	bad |= write_seed(dir, "layout-minicluster", mini, sizeof(mini));
	bad |= write_seed(dir, "layout-one", one, sizeof(one));
	return bad;
}

static const char *replay_summary(void)
{
	return summary;
}

const struct fuzz_replay fuzz_replay = {
    .summary = replay_summary,
    .write_seeds = write_seeds,
};
#endif
