/*
 * engine/timeline.h - the Chrome trace writer (timeline.c,
 * doc/timeline.md), written by rank 0's engine thread only.
 */
#ifndef HVD_ENGINE_TIMELINE_H
#define HVD_ENGINE_TIMELINE_H

#include "engine/core/namemap.h"
#include "engine/core/wire.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

struct timeline {
	int fd;
	int mark_cycles;
	double t0;
	struct namemap pids; /* tensor name -> pid (intptr) */
	char **names;	     /* owned keys */
	int nnames, capnames;
	struct wbuf buf;
	int first_event;
};
hvd_status_t timeline_open(struct timeline *t, const char *path,
			   int mark_cycles);
int timeline_active(const struct timeline *t);
void timeline_begin(struct timeline *t, const char *tensor, const char *what);
void timeline_end(struct timeline *t, const char *tensor, const char *dtype,
		  uint64_t count);
void timeline_instant(struct timeline *t, const char *tensor,
		      const char *what); /* X event of zero duration */
void timeline_mark_cycle(struct timeline *t);
/* Writes out what is buffered (one write per cycle). */
void timeline_flush(struct timeline *t);
/* Closes the JSON array and the file. */
void timeline_close(struct timeline *t);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_TIMELINE_H */
