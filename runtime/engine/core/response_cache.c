/*
 * response_cache.c - the response cache: each (name, parameters) that has
 * been negotiated once gets a bit, so that a repeat step is agreed by one
 * small bitwise allreduce instead of a round trip through the coordinator.
 *
 * Invariant: every rank performs the same puts, touches and erases in the
 * same order (they follow the response list every rank executes), so the
 * name <-> bit mapping is identical everywhere without ever being sent.
 * Bits are reused lowest-first, and an entry evicted for capacity (LRU)
 * hands its bit to the newcomer, so the vector stays as short as the
 * number of live entries.
 */
#include "config.h"

#include "engine/core/response_cache.h"

#include <stdlib.h>
#include <string.h>

hvd_status_t rc_init(struct rcache *c, int capacity)
{
	memset(c, 0, sizeof(*c));
	c->capacity = capacity > 0 ? capacity : 0;
	hvd_list_init(&c->lru);
	namemap_init(&c->names);
	if (!c->capacity)
		return HVD_OK;
	c->by_bit = calloc((size_t)c->capacity, sizeof(*c->by_bit));
	c->free_bits = calloc((size_t)c->capacity, sizeof(*c->free_bits));
	if (!c->by_bit || !c->free_bits) {
		rc_free(c);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	return HVD_OK;
}

void rc_free(struct rcache *c)
{
	for (int i = 0; i < c->nbits; i++)
		if (c->by_bit && c->by_bit[i]) {
			eng_resp_free(&c->by_bit[i]->resp);
			free(c->by_bit[i]);
		}
	free(c->by_bit);
	free(c->free_bits);
	namemap_free(&c->names);
	memset(c, 0, sizeof(*c));
}

struct rc_entry *rc_entry_at(const struct rcache *c, int bit)
{
	return bit >= 0 && bit < c->nbits ? c->by_bit[bit] : NULL;
}

int rc_lookup(const struct rcache *c, const char *name,
	      const struct eng_params *p, int set_rank, int *bit)
{
	const struct rc_entry *e;
	const struct eng_params *q;
	uint64_t count;

	if (!c->capacity)
		return RC_MISS;
	e = namemap_get(&c->names, name);
	if (!e)
		return RC_MISS;
	*bit = e->bit;
	q = &e->resp.p;
	count = q->count;
	if (q->kind == EK_ALLGATHER)
		count = set_rank >= 0 && (uint32_t)set_rank < e->resp.ncounts
			    ? e->resp.counts[set_rank]
			    : UINT64_MAX;
	if (q->kind != p->kind || q->dtype != p->dtype || q->op != p->op ||
	    q->flags != p->flags || q->root != p->root || q->pset != p->pset ||
	    count != p->count || q->prescale != p->prescale ||
	    q->postscale != p->postscale || q->shape != p->shape)
		return RC_INVALID;
	return RC_HIT;
}

void rc_touch(struct rcache *c, int bit)
{
	struct rc_entry *e = rc_entry_at(c, bit);

	if (e)
		hvd_list_move_front(&c->lru, &e->lru);
}

void rc_erase(struct rcache *c, int bit)
{
	struct rc_entry *e = rc_entry_at(c, bit);
	int i;

	if (!e)
		return;
	hvd_list_remove(&e->lru);
	namemap_del(&c->names, e->resp.name);
	eng_resp_free(&e->resp);
	free(e);
	c->by_bit[bit] = NULL;
	c->count--;
	/* Keep the free stack sorted so the lowest bit is reused first
	 * (identical on every rank, and keeps the vector short). */
	for (i = c->nfree; i > 0 && c->free_bits[i - 1] < bit; i--)
		c->free_bits[i] = c->free_bits[i - 1];
	c->free_bits[i] = bit;
	c->nfree++;
	while (c->nbits > 0 && !c->by_bit[c->nbits - 1]) {
		/* drop trailing free bits from the vector */
		int last = c->nbits - 1, j;

		for (j = 0; j < c->nfree && c->free_bits[j] != last; j++)
			;
		if (j < c->nfree) {
			memmove(&c->free_bits[j], &c->free_bits[j + 1],
				(size_t)(c->nfree - j - 1) *
				    sizeof(*c->free_bits));
			c->nfree--;
		}
		c->nbits--;
	}
}

int rc_put(struct rcache *c, const struct eng_resp *r, void **evicted)
{
	struct rc_entry *e;
	int bit;

	if (evicted)
		*evicted = NULL;
	if (!c->capacity)
		return -1;
	e = namemap_get(&c->names, r->name);
	if (e) {
		/* Same name, new parameters (after an invalidation race)
		 * or a refresh: replace in place, keep the bit. */
		struct eng_resp copy;

		if (eng_resp_copy(&copy, r) != HVD_OK)
			return -1;
		namemap_del(&c->names, e->resp.name);
		eng_resp_free(&e->resp);
		e->resp = copy;
		namemap_put(&c->names, e->resp.name, e);
		rc_touch(c, e->bit);
		return e->bit;
	}
	e = calloc(1, sizeof(*e));
	if (!e || eng_resp_copy(&e->resp, r) != HVD_OK) {
		free(e);
		return -1;
	}
	if (c->count == c->capacity) {
		struct rc_entry *old = hvd_list_entry(hvd_list_last(&c->lru),
						      struct rc_entry, lru);

		if (!c->warned_evict) {
			hvd_log(HVD_LOG_WARNING,
				"a response was evicted from the cache, which "
				"costs a coordinator round trip per step; "
				"raise HOROVOD_CACHE_CAPACITY above %d",
				c->capacity);
			c->warned_evict = 1;
		}
		bit = old->bit;
		if (evicted)
			*evicted = old->pending;
		hvd_list_remove(&old->lru);
		namemap_del(&c->names, old->resp.name);
		eng_resp_free(&old->resp);
		free(old);
		c->count--;
	} else if (c->nfree) {
		bit = c->free_bits[--c->nfree];
	} else {
		bit = c->nbits++;
	}
	e->bit = bit;
	c->by_bit[bit] = e;
	c->count++;
	if (namemap_put(&c->names, e->resp.name, e) != HVD_OK) {
		c->by_bit[bit] = NULL;
		c->count--;
		eng_resp_free(&e->resp);
		free(e);
		return -1;
	}
	hvd_list_push_front(&c->lru, &e->lru);
	return bit;
}
