/*
 * namemap.c - a string -> pointer hash map (open addressing, linear
 * probing, tombstones) for the engine's name tables.  Keys are not copied:
 * callers use the value's own name as its key, so an entry lives exactly
 * as long as its value.
 */
#include "config.h"

#include "engine/core/namemap.h"

#include <stdlib.h>
#include <string.h>

#define TOMB ((const char *)1)

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ULL;
	}
	return h ? h : 1;
}

void namemap_init(struct namemap *m) { memset(m, 0, sizeof(*m)); }

void namemap_free(struct namemap *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

static struct namemap_slot *find(const struct namemap *m, const char *key,
				 uint64_t h)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct namemap_slot *s = &m->slots[i];

		if (!s->key)
			return NULL;
		if (s->key != TOMB && s->hash == h && strcmp(s->key, key) == 0)
			return s;
	}
}

void *namemap_get(const struct namemap *m, const char *key)
{
	struct namemap_slot *s = find(m, key, hash_str(key));

	return s ? s->val : NULL;
}

static hvd_status_t grow(struct namemap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct namemap_slot *old = m->slots, *slots;
	size_t oldcap = m->cap;

	if (m->n * 4 < m->cap)
		cap = m->cap; /* mostly tombstones: rehash in place size */
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (size_t i = 0; i < oldcap; i++) {
		size_t j;

		if (!old[i].key || old[i].key == TOMB)
			continue;
		for (j = old[i].hash & (cap - 1); slots[j].key;
		     j = (j + 1) & (cap - 1))
			;
		slots[j] = old[i];
	}
	free(old);
	m->slots = slots;
	m->cap = cap;
	m->tomb = 0;
	return HVD_OK;
}

hvd_status_t namemap_put(struct namemap *m, const char *key, void *val)
{
	uint64_t h = hash_str(key);
	struct namemap_slot *s = find(m, key, h);
	size_t i;

	if (s) {
		s->key = key;
		s->val = val;
		return HVD_OK;
	}
	if ((m->n + m->tomb + 1) * 4 >= m->cap * 3 && grow(m) != HVD_OK)
		return HVD_ERR_NO_MEMORY;
	for (i = h & (m->cap - 1); m->slots[i].key && m->slots[i].key != TOMB;
	     i = (i + 1) & (m->cap - 1))
		;
	if (m->slots[i].key == TOMB)
		m->tomb--;
	m->slots[i].key = key;
	m->slots[i].val = val;
	m->slots[i].hash = h;
	m->n++;
	return HVD_OK;
}

void *namemap_del(struct namemap *m, const char *key)
{
	struct namemap_slot *s = find(m, key, hash_str(key));
	void *val;

	if (!s)
		return NULL;
	val = s->val;
	s->key = TOMB;
	s->val = NULL;
	m->n--;
	m->tomb++;
	return val;
}
