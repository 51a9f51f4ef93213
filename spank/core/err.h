/*
 * err.h - the one way the pure cores report an error: a message into the
 * caller's buffer (which may be NULL when the caller only wants the status).
 */
#ifndef SPANK_CORE_ERR_H
#define SPANK_CORE_ERR_H

#include <stddef.h>

/* Room for an error message (the message itself is cut to fit). */
#define ERR_LEN 256

void err_set(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* SPANK_CORE_ERR_H */
