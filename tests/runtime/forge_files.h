/*
 * forge_files.h - how forge_victim and forge_attacker hand each other
 * what the test script passes on (addresses, the tag key, the epoch): a
 * file DIR/NAME, written whole and made 0644 so that the other side,
 * running as another user, can read it.  Header-only, for the two test
 * programs.
 */
#ifndef HVD_TESTS_FORGE_FILES_H
#define HVD_TESTS_FORGE_FILES_H

#include <stdio.h>
#include <sys/stat.h>

/* 0, or -1 with the reason on stderr. */
static inline int forge_write_file(const char *dir, const char *name,
				   const void *b, size_t n)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "wb");
	if (!f || fwrite(b, 1, n, f) != n) {
		perror(p);
		if (f)
			fclose(f);
		return -1;
	}
	fchmod(fileno(f), 0644);
	return fclose(f);
}

#endif
