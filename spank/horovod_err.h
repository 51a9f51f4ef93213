/*
 * horovod_err.h - the one way the plugin's pure cores report an error: a
 * message into the caller's buffer (which may be NULL when the caller only
 * wants the status).
 */
#ifndef HOROVOD_ERR_H
#define HOROVOD_ERR_H

#include <stddef.h>

void hvd_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* HOROVOD_ERR_H */
