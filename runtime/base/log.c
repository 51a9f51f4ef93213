/*
 * log.c - "hvd: [rank] level: message" lines on stderr, filtered by
 * HOROVOD_LOG_LEVEL (read once).
 */
#include "config.h"

#include "base/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#define LOGBUF 1024

static int log_level = -1;
static int log_rank = -1;

static const char *const level_names[] = {"trace",   "debug", "info",
					  "warning", "error", "fatal"};

static int log_threshold(void)
{
	if (log_level < 0) {
		const char *v = getenv("HOROVOD_LOG_LEVEL");
		int level = HVD_LOG_WARNING;

		if (v && *v) {
			for (int i = 0; i <= HVD_LOG_FATAL; i++)
				if (strcasecmp(v, level_names[i]) == 0)
					level = i;
			if (strcasecmp(v, "warn") == 0)
				level = HVD_LOG_WARNING;
		}
		log_level = level;
	}
	return log_level;
}

int hvd_log_enabled(enum hvd_log_level level)
{
	return (int)level >= log_threshold();
}

void hvd_log_set_rank(int rank)
{
	log_rank = rank;
}

void hvd_log(enum hvd_log_level level, const char *fmt, ...)
{
	char msg[LOGBUF];
	va_list ap;

	if (!hvd_log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_rank >= 0)
		fprintf(stderr, "hvd: [%d] %s: %s\n", log_rank,
			level_names[level], msg);
	else
		fprintf(stderr, "hvd: %s: %s\n", level_names[level], msg);
}
