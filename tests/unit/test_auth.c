/*
 * test_auth.c - the job's key and what is made of it (runtime/net/auth.c,
 * siphash.c): SipHash-2-4 against the 64 reference vectors (key 00..0f,
 * message 00..n-1), the tag key, and the failure notices' checks: a
 * notice sealed under the job's key opens once; one with a wrong MAC, a
 * changed field, another job's key, a replayed or older sequence number,
 * ranks outside the job or the wrong length does not.
 */
#include "config.h"

#include "net/auth.h"
#include "net/siphash.h"
#include "tap.h"

#include <stdint.h>
#include <string.h>

static const uint64_t vectors[64] = {
    0x726fdb47dd0e0e31ull, 0x74f839c593dc67fdull, 0x0d6c8009d9a94f5aull,
    0x85676696d7fb7e2dull, 0xcf2794e0277187b7ull, 0x18765564cd99a68dull,
    0xcbc9466e58fee3ceull, 0xab0200f58b01d137ull, 0x93f5f5799a932462ull,
    0x9e0082df0ba9e4b0ull, 0x7a5dbbc594ddb9f3ull, 0xf4b32f46226bada7ull,
    0x751e8fbc860ee5fbull, 0x14ea5627c0843d90ull, 0xf723ca908e7af2eeull,
    0xa129ca6149be45e5ull, 0x3f2acc7f57c29bdbull, 0x699ae9f52cbe4794ull,
    0x4bc1b3f0968dd39cull, 0xbb6dc91da77961bdull, 0xbed65cf21aa2ee98ull,
    0xd0f2cbb02e3b67c7ull, 0x93536795e3a33e88ull, 0xa80c038ccd5ccec8ull,
    0xb8ad50c6f649af94ull, 0xbce192de8a85b8eaull, 0x17d835b85bbb15f3ull,
    0x2f2e6163076bcfadull, 0xde4daaaca71dc9a5ull, 0xa6a2506687956571ull,
    0xad87a3535c49ef28ull, 0x32d892fad841c342ull, 0x7127512f72f27cceull,
    0xa7f32346f95978e3ull, 0x12e0b01abb051238ull, 0x15e034d40fa197aeull,
    0x314dffbe0815a3b4ull, 0x027990f029623981ull, 0xcadcd4e59ef40c4dull,
    0x9abfd8766a33735cull, 0x0e3ea96b5304a7d0ull, 0xad0c42d6fc585992ull,
    0x187306c89bc215a9ull, 0xd4a60abcf3792b95ull, 0xf935451de4f21df2ull,
    0xa9538f0419755787ull, 0xdb9acddff56ca510ull, 0xd06c98cd5c0975ebull,
    0xe612a3cb9ecba951ull, 0xc766e62cfcadaf96ull, 0xee64435a9752fe72ull,
    0xa192d576b245165aull, 0x0a8787bf8ecb74b2ull, 0x81b3e73d20b49b6full,
    0x7fa8220ba3b2eceaull, 0x245731c13ca42499ull, 0xb78dbfaf3a8d83bdull,
    0xea1ad565322a1a0bull, 0x60e61c23a3795013ull, 0x6606d7e446282b93ull,
    0x6ca4ecb15c5f91e1ull, 0x9f626da15c9625f3ull, 0xe51b38608ef25f57ull,
    0x958a324ceb064572ull,
};

static int opens(const struct auth_notice *m, size_t len, uint32_t *last)
{
	const char *why = NULL;

	return auth_notice_open(m, len, 4, 1, last, &why) == 0;
}

int main(void)
{
	uint8_t key[16], msg[64], k1[16], k2[16];
	uint32_t last[4] = {0};
	struct auth_notice m, x;
	uint64_t t1, t2;
	int bad = 0;

	plan(16);
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 64; i++)
		msg[i] = (uint8_t)i;
	for (int n = 0; n < 64; n++)
		if (siphash24(key, msg, (size_t)n) != vectors[n]) {
			if (!bad++)
				diag("length %d: %016llx, want %016llx", n,
				     (unsigned long long)siphash24(key, msg,
								   (size_t)n),
				     (unsigned long long)vectors[n]);
		}
	ok(bad == 0, "SipHash-2-4: the 64 reference vectors (%d wrong)", bad);

	ok(auth_draw_key(k1) == HVD_OK && auth_draw_key(k2) == HVD_OK &&
		   memcmp(k1, k2, 16) != 0,
	   "two keys drawn differ");
	auth_set_key(k1);
	t1 = auth_tag_key;
	auth_set_key(k2);
	t2 = auth_tag_key;
	ok(t1 != 0 && t2 != 0 && t1 != t2 && auth_tag(5) == (5 ^ t2),
	   "each key gives its own tag key, XORed into tags");

	/* rank 1 of 4 takes notices from ranks 0, 2 and 3 */
	auth_set_key(k1);
	auth_notice_seal(&m, 3, 0, 1, 2);
	ok(opens(&m, sizeof(m), last) && last[0] == 1,
	   "a sealed notice opens, its sequence number is kept");
	ok(!opens(&m, sizeof(m), last), "the same notice again: a replay");
	auth_notice_seal(&x, 2, 0, 1, 0);
	ok(!opens(&x, sizeof(x), last),
	   "another notice with an old sequence number is refused");
	auth_notice_seal(&x, 2, 0, 2, 0);
	ok(opens(&x, sizeof(x), last), "the next sequence number opens");

	auth_notice_seal(&x, 3, 2, 1, 0);
	x.mac ^= 1;
	ok(!opens(&x, sizeof(x), last), "one bit of the MAC flipped: refused");
	auth_notice_seal(&x, 3, 2, 1, 0);
	x.dead = 0;
	ok(!opens(&x, sizeof(x), last), "the dead rank changed: refused");
	auth_notice_seal(&x, 3, 2, 1, 0);
	x.seq = 7;
	ok(!opens(&x, sizeof(x), last), "the sequence number changed: refused");

	auth_notice_seal(&x, 3, 2, 1, 0);
	x.how = 2;
	ok(!opens(&x, sizeof(x), last), "how it is known changed (no "
					"progress made dead): refused");
	auth_notice_seal(&x, 3, 2, 1, AUTH_NOTICE_HOW_MAX + 1);
	ok(!opens(&x, sizeof(x), last),
	   "a how beyond the known ones, its MAC right: refused");

	auth_set_key(k2);
	auth_notice_seal(&x, 3, 2, 1, 0);
	auth_set_key(k1);
	ok(!opens(&x, sizeof(x), last), "sealed under another job's key: "
					"refused");

	auth_notice_seal(&x, 3, 1, 1, 0);
	ok(!opens(&x, sizeof(x), last), "claiming to come from this rank: "
					"refused");
	auth_notice_seal(&x, 4, 2, 1, 0);
	ok(!opens(&x, sizeof(x), last) && (auth_notice_seal(&x, 3, 9, 1, 0),
					   !opens(&x, sizeof(x), last)),
	   "ranks outside the job: refused");
	auth_notice_seal(&x, 3, 2, 1, 0);
	ok(!opens(&x, 8, last) && !opens(&x, sizeof(x) - 1, last) &&
		   opens(&x, sizeof(x), last),
	   "the old 8-byte notice and a short one refused, the full one "
	   "opens");
	auth_clear();
	return done_testing();
}
