/*
 * auth.c - the job's key, the tag key derived from it and the MAC of the
 * failure notices (net/auth.h says what they protect).
 *
 * The tag key is SipHash-2-4 of a fixed string under the job key, so
 * that a tag key learned by watching the traffic does not give away the
 * MAC key.  A notice is taken only when its MAC verifies, its ranks are
 * in the job and its sequence number is above the last one taken from
 * its reporter: a recorded notice played again is dropped.
 */
#include "config.h"

#include "net/auth.h"
#include "net/siphash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define NOTICE_MAGIC 0x4e445648u /* "HVDN" */

uint64_t auth_tag_key;
static uint8_t job_key[AUTH_KEY_BYTES];

hvd_status_t auth_draw_key(uint8_t key[AUTH_KEY_BYTES])
{
	size_t got = 0;

	while (got < AUTH_KEY_BYTES) {
		ssize_t r = getrandom(key + got, AUTH_KEY_BYTES - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return hvd_error(HVD_ERR_BOOTSTRAP,
					 "hvd: getrandom failed (%s): cannot "
					 "draw the job's key",
					 r < 0 ? strerror(errno) : "no bytes");
		got += (size_t)r;
	}
	return HVD_OK;
}

void auth_set_key(const uint8_t key[AUTH_KEY_BYTES])
{
	static const char what[] = "hvd tag key v1";

	memcpy(job_key, key, AUTH_KEY_BYTES);
	auth_tag_key = siphash24(job_key, what, sizeof(what) - 1);
}

void auth_get_key(uint8_t key[AUTH_KEY_BYTES])
{
	memcpy(key, job_key, AUTH_KEY_BYTES);
}

void auth_clear(void)
{
	/* volatile: a plain memset of memory no longer read is dropped */
	volatile uint8_t *k = job_key;

	for (size_t i = 0; i < AUTH_KEY_BYTES; i++)
		k[i] = 0;
	auth_tag_key = 0;
}

int auth_msg_mac(uint64_t tag, const void *msg, size_t len, uint64_t *mac)
{
	static const char what[12] = "hvd memb v1";
	uint8_t small[256], *b = small;
	size_t n = sizeof(what) + 8 + len;

	if (n > sizeof(small)) {
		b = malloc(n);
		if (!b)
			return -1;
	}
	memcpy(b, what, sizeof(what));
	for (int i = 0; i < 8; i++)
		b[sizeof(what) + (size_t)i] = (uint8_t)(tag >> (8 * i));
	if (len)
		memcpy(b + sizeof(what) + 8, msg, len);
	*mac = siphash24(job_key, b, n);
	if (b != small)
		free(b);
	return 0;
}

static uint64_t notice_mac(const struct auth_notice *m)
{
	uint8_t b[24];

	/* the fields in a fixed order and byte order, not the struct */
	for (int i = 0; i < 4; i++) {
		b[i] = (uint8_t)(m->magic >> (8 * i));
		b[4 + i] = (uint8_t)((uint32_t)m->dead >> (8 * i));
		b[8 + i] = (uint8_t)((uint32_t)m->reporter >> (8 * i));
		b[12 + i] = (uint8_t)(m->seq >> (8 * i));
		b[16 + i] = (uint8_t)(m->how >> (8 * i));
		b[20 + i] = (uint8_t)(m->zero >> (8 * i));
	}
	return siphash24(job_key, b, sizeof(b));
}

void auth_notice_seal(struct auth_notice *m, int dead, int reporter,
		      uint32_t seq, unsigned how)
{
	memset(m, 0, sizeof(*m));
	m->magic = NOTICE_MAGIC;
	m->dead = dead;
	m->reporter = reporter;
	m->seq = seq;
	m->how = how;
	m->mac = notice_mac(m);
}

int auth_notice_open(const struct auth_notice *m, size_t len, int n, int me,
		     uint32_t *last_seq, const char **why)
{
	if (len != sizeof(*m) || m->magic != NOTICE_MAGIC) {
		*why = "not a failure notice of this libhvd (length or magic)";
		return -1;
	}
	/* compared as a whole word: no early exit on the first byte */
	if ((notice_mac(m) ^ m->mac) != 0) {
		*why = "its MAC does not verify under the job's key";
		return -1;
	}
	if (m->reporter < 0 || m->reporter >= n || m->reporter == me ||
	    m->dead < 0 || m->dead >= n) {
		*why = "it names ranks outside the job";
		return -1;
	}
	if (m->how > AUTH_NOTICE_HOW_MAX || m->zero) {
		*why = "it says how the rank is known gone in no way this "
		       "libhvd knows";
		return -1;
	}
	if (m->seq <= last_seq[m->reporter]) {
		*why = "its sequence number was already seen (a replay)";
		return -1;
	}
	last_seq[m->reporter] = m->seq;
	return 0;
}
