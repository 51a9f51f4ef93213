/*
 * cpuset.c - see cpuset.h.
 */
#include "cpuset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cpuset_zero(struct cpuset *s) { memset(s, 0, sizeof(*s)); }

void cpuset_set(struct cpuset *s, unsigned cpu)
{
	if (cpu < CPUSET_MAX_CPUS)
		s->w[cpu / 64] |= 1ULL << (cpu % 64);
}

int cpuset_isset(const struct cpuset *s, unsigned cpu)
{
	return cpu < CPUSET_MAX_CPUS && (s->w[cpu / 64] >> (cpu % 64)) & 1;
}

int cpuset_count(const struct cpuset *s)
{
	int n = 0;

	for (size_t i = 0; i < CPUSET_MAX_CPUS / 64; i++)
		n += __builtin_popcountll(s->w[i]);
	return n;
}

void cpuset_and(struct cpuset *d, const struct cpuset *a,
		const struct cpuset *b)
{
	for (size_t i = 0; i < CPUSET_MAX_CPUS / 64; i++)
		d->w[i] = a->w[i] & b->w[i];
}

int cpuset_subset(const struct cpuset *a, const struct cpuset *b)
{
	for (size_t i = 0; i < CPUSET_MAX_CPUS / 64; i++)
		if (a->w[i] & ~b->w[i])
			return 0;
	return 1;
}

int cpuset_format(const struct cpuset *s, char *buf, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return -1;
	buf[0] = '\0';
	for (unsigned c = 0; c < CPUSET_MAX_CPUS; c++) {
		unsigned e = c;
		int w;

		if (!cpuset_isset(s, c))
			continue;
		while (e + 1 < CPUSET_MAX_CPUS && cpuset_isset(s, e + 1))
			e++;
		if (e == c)
			w = snprintf(buf + n, len - n, "%s%u", n ? "," : "", c);
		else
			w = snprintf(buf + n, len - n, "%s%u-%u", n ? "," : "",
				     c, e);
		if (w < 0 || (size_t)w >= len - n)
			return -1;
		n += (size_t)w;
		c = e;
	}
	return 0;
}

int cpuset_parse(const char *str, struct cpuset *s)
{
	const char *p = str;

	cpuset_zero(s);
	while (*p) {
		char *end;
		unsigned long a = strtoul(p, &end, 10), b = a;

		if (end == p || a >= CPUSET_MAX_CPUS)
			return -1;
		p = end;
		if (*p == '-') {
			b = strtoul(++p, &end, 10);
			if (end == p || b >= CPUSET_MAX_CPUS || b < a)
				return -1;
			p = end;
		}
		for (unsigned long c = a; c <= b; c++)
			cpuset_set(s, (unsigned)c);
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	return 0;
}
