/* err.c - see err.h. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>

void err_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
