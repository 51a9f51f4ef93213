/*
 * engine/core/wire.h - the coordinator's messages as byte strings: a
 * growing write buffer, a bounded read cursor, and the encoding of
 * requests and responses (wire.c says how).  A decoder never trusts a
 * length: a truncated or malformed message marks the reader bad.
 */
#ifndef HVD_ENGINE_CORE_WIRE_H
#define HVD_ENGINE_CORE_WIRE_H

#include "engine/core/request.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

struct wbuf {
	uint8_t *data;
	size_t len, cap;
	int oom; /* a write failed: the buffer is incomplete */
};
struct rbuf {
	const uint8_t *p, *end;
	int bad;
};
void wbuf_free(struct wbuf *w);
void wire_put_req(struct wbuf *w, const struct eng_req *r);
void wire_put_resp(struct wbuf *w, const struct eng_resp *r);
/* 0 on success, -1 on a malformed or truncated message. */
int wire_get_req(struct rbuf *b, struct eng_req *r);
int wire_get_resp(struct rbuf *b, struct eng_resp *r);
void wire_put_u32(struct wbuf *w, uint32_t v);
uint32_t wire_get_u32(struct rbuf *b);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_CORE_WIRE_H */
