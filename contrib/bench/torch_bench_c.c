/*
 * torch_bench_c.c - the C side of contrib/bench/torch-bench: the C API's
 * 4-byte asynchronous allreduce latency, measured in the same processes
 * and the same run as the Python binding's (torch-bench loads this module
 * with ctypes and calls tb_c_latency, whose loop runs entirely in C).
 * The loop is hvd-bench --grads's: ranks aligned by hvd_barrier before
 * each op, one named op on a warm response cache, hvd_wait.
 */
#include <hvd.h>

#include <time.h>

int tb_c_latency(int n, double *seconds);

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fills seconds[0..n-1]; returns 0, or the hvd_status_t that failed. */
int tb_c_latency(int n, double *seconds)
{
	for (int i = -50; i < n; i++) {
		float v = 1;
		hvd_handle_t h;
		hvd_status_t st;
		double t0;

		if ((st = hvd_barrier()) != HVD_OK)
			return (int)st;
		t0 = now();
		st = hvd_allreduce_async("torch-bench/c-latency", HVD_IN_PLACE, &v,
					 1, HVD_FLOAT32, HVD_SUM, NULL, &h);
		if (st != HVD_OK || (st = hvd_wait(h)) != HVD_OK)
			return (int)st;
		if (i >= 0)
			seconds[i] = now() - t0;
	}
	return 0;
}
