/*
 * cpuset.h - a set of CPUs (OS indices) as a plain bit array, so that the
 * hint computation needs neither hwloc nor glibc's cpu_set_t.
 */
#ifndef SPANK_CORE_CPUSET_H
#define SPANK_CORE_CPUSET_H

#include <stddef.h>
#include <stdint.h>

#define CPUSET_MAX_CPUS 2048

struct cpuset {
	uint64_t w[CPUSET_MAX_CPUS / 64];
};

void cpuset_zero(struct cpuset *s);
void cpuset_set(struct cpuset *s, unsigned cpu);
int cpuset_isset(const struct cpuset *s, unsigned cpu);
int cpuset_count(const struct cpuset *s);
void cpuset_and(struct cpuset *d, const struct cpuset *a,
		const struct cpuset *b);
int cpuset_subset(const struct cpuset *a, const struct cpuset *b);
/* "0-3,8,10-11"; 0 or -1 when it does not fit.  Parse accepts the same. */
int cpuset_format(const struct cpuset *s, char *buf, size_t len);
int cpuset_parse(const char *str, struct cpuset *s);

#endif /* SPANK_CORE_CPUSET_H */
