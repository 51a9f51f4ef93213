/*
 * bench_gloo.cc - hvd-bench's Gloo peer: gloo::AllreduceRingChunked (what
 * PyTorch's Gloo backend runs for CPU tensors) over Gloo's TCP transport on
 * loopback, on the same buffers.  Rendezvous through a FileStore in a
 * directory hvd-bench creates under /var/tmp and shares with libhvd's
 * broadcast.  Built only with Gloo (HVD_HAVE_GLOO).
 */
#include "config.h"

#include "tools/bench/bench.h"

#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

namespace
{

std::shared_ptr<gloo::rendezvous::Context> context;

template <typename T> const gloo::ReductionFunction<T> *reduction(hvd_op_t op)
{
	switch (op) {
	case HVD_PRODUCT:
		return gloo::ReductionFunction<T>::product;
	case HVD_MIN:
		return gloo::ReductionFunction<T>::min;
	case HVD_MAX:
		return gloo::ReductionFunction<T>::max;
	default:
		return gloo::ReductionFunction<T>::sum;
	}
}

/* Seconds of each run; setting the algorithm up (buffer registration
 * with the peers) stays outside the timed loop. */
template <typename T>
void run_typed(const struct bench_case *c, int iters, double *times)
{
	std::vector<T *> ptrs{static_cast<T *>(c->recv)};
	gloo::AllreduceRingChunked<T> algo(
	    context, ptrs, static_cast<int>(c->count), reduction<T>(c->op));
	auto t0 = std::chrono::steady_clock::now();

	for (int i = 0; i < iters; i++) {
		algo.run();
		auto t1 = std::chrono::steady_clock::now();
		times[i] = std::chrono::duration<double>(t1 - t0).count();
		t0 = t1;
	}
}

} // namespace

extern "C" int bench_gloo_init(int rank, int size, const char *dir)
{
	try {
		gloo::transport::tcp::attr attr;

		attr.hostname = "127.0.0.1";
		auto dev = gloo::transport::tcp::CreateDevice(attr);
		gloo::rendezvous::FileStore store(dir);

		context =
		    std::make_shared<gloo::rendezvous::Context>(rank, size);
		context->connectFullMesh(store, dev);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "hvd-bench: Gloo set-up in %s: %s\n", dir,
			     e.what());
		context.reset();
		return -1;
	}
	return 0;
}

extern "C" int bench_gloo_supported(const struct bench_case *c)
{
	if (!context || c->coll != BENCH_ALLREDUCE ||
	    c->count > static_cast<size_t>(1) << 30)
		return 0;
	return c->dtype != HVD_BFLOAT16;
}

extern "C" int bench_gloo_run(const struct bench_case *c, int iters,
			      double *times)
{
	try {
		switch (c->dtype) {
		case HVD_UINT8:
			run_typed<uint8_t>(c, iters, times);
			break;
		case HVD_INT8:
			run_typed<int8_t>(c, iters, times);
			break;
		case HVD_INT32:
			run_typed<int32_t>(c, iters, times);
			break;
		case HVD_INT64:
			run_typed<int64_t>(c, iters, times);
			break;
		case HVD_FLOAT16:
			run_typed<gloo::float16>(c, iters, times);
			break;
		case HVD_FLOAT64:
			run_typed<double>(c, iters, times);
			break;
		default:
			run_typed<float>(c, iters, times);
			break;
		}
	} catch (const std::exception &e) {
		std::fprintf(stderr, "hvd-bench: Gloo allreduce: %s\n",
			     e.what());
		return -1;
	}
	return 0;
}

extern "C" void bench_gloo_finalize(void) { context.reset(); }
