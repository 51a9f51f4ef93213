/*
 * _fast.c - hvd._fast, the binding's fast path into libhvd's engine.
 *
 * The binding talks to libhvd through ctypes (hvd/_lib.py); this small
 * CPython extension only replaces the two calls of an operation's hot path,
 * submit and wait, whose ctypes overhead (argument conversion, a handle
 * object, a byref) was measured at twice the C API's whole 4-byte allreduce
 * (16 us against 9 us on two ranks).  It does not link libhvd: hvd/_lib.py
 * hands it the addresses of the functions it loaded (setup()), so the same
 * library serves both paths and the build tree needs no rpath.  It uses the
 * limited API (abi3), so one build serves every Python 3 from 3.7 on, and
 * never touches torch: tensors arrive as plain addresses.
 *
 * Waits release the GIL; libhvd never calls back into Python.
 */
#define Py_LIMITED_API 0x03070000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The parts of hvd.h this module uses (it is built without it: the
 * addresses come from hvd._lib, and the layout is ABI-stable). */
typedef struct hvd_handle *hvd_handle_t;
typedef struct {
	int32_t pset;
	double prescale;
	double postscale;
	int priority;
	int compress_fp16;
	int group;
	void *callback;
	void *callback_arg;
	const int64_t *shape;
	int ndims;
} hvd_opts_t;
#define MAX_DIMS 32 /* HVD_MAX_DIMS */

typedef int (*reduce_fn)(const char *, const void *, void *, size_t, int,
			 int, const hvd_opts_t *, hvd_handle_t *);
typedef int (*move_fn)(const char *, const void *, void *, size_t, int,
		       const hvd_opts_t *, hvd_handle_t *);
typedef int (*bcast_fn)(const char *, void *, size_t, int, int,
			const hvd_opts_t *, hvd_handle_t *);
typedef int (*handle_fn)(hvd_handle_t);

static reduce_fn f_allreduce, f_reducescatter;
static move_fn f_allgather, f_alltoall;
static bcast_fn f_broadcast;
static handle_fn f_wait, f_test;

enum { K_ALLREDUCE, K_ALLGATHER, K_BROADCAST, K_ALLTOALL, K_REDUCESCATTER };

static PyObject *setup(PyObject *self, PyObject *args)
{
	unsigned long long a[7];

	if (!PyArg_ParseTuple(args, "KKKKKKK", &a[0], &a[1], &a[2], &a[3],
			      &a[4], &a[5], &a[6]))
		return NULL;
	f_allreduce = (reduce_fn)(uintptr_t)a[0];
	f_allgather = (move_fn)(uintptr_t)a[1];
	f_broadcast = (bcast_fn)(uintptr_t)a[2];
	f_alltoall = (move_fn)(uintptr_t)a[3];
	f_reducescatter = (reduce_fn)(uintptr_t)a[4];
	f_wait = (handle_fn)(uintptr_t)a[5];
	f_test = (handle_fn)(uintptr_t)a[6];
	Py_RETURN_NONE;
}

/* Parses submit's arguments and submits; 0 or a status (with *h). */
static int do_submit(PyObject *args, hvd_handle_t *hp, int *failed)
{
	int kind, dtype, arg, pset, group, st = -1;
	const char *name;
	unsigned long long send, recv, count;
	double pre, post;
	hvd_opts_t o, *op = NULL;
	hvd_handle_t h = NULL;
	PyObject *shape = NULL;
	int64_t dims[MAX_DIMS];
	Py_ssize_t nd = 0;

	*failed = 1;
	if (!PyArg_ParseTuple(args, "iyKKKiiiddi|O", &kind, &name, &send,
			      &recv, &count, &dtype, &arg, &pset, &pre, &post,
			      &group, &shape))
		return -1;
	if (!f_wait) {
		PyErr_SetString(PyExc_RuntimeError,
				"hvd._fast: setup() was not called");
		return -1;
	}
	if (shape && shape != Py_None) {
		if (!PyTuple_Check(shape) ||
		    (nd = PyTuple_Size(shape)) > MAX_DIMS) {
			PyErr_SetString(PyExc_ValueError,
					"hvd._fast: shape: a tuple of at most "
					"32 ints");
			return -1;
		}
		for (Py_ssize_t i = 0; i < nd; i++) {
			dims[i] = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
			if (dims[i] == -1 && PyErr_Occurred())
				return -1;
		}
	}
	if (pset || pre != 1.0 || post != 1.0 || group || nd) {
		memset(&o, 0, sizeof(o));
		o.pset = pset;
		o.prescale = pre;
		o.postscale = post;
		o.group = group;
		o.shape = nd ? dims : NULL;
		o.ndims = (int)nd;
		op = &o;
	}
	switch (kind) {
	case K_ALLREDUCE:
		st = f_allreduce(name, (const void *)(uintptr_t)send,
				 (void *)(uintptr_t)recv, (size_t)count, dtype,
				 arg, op, &h);
		break;
	case K_REDUCESCATTER:
		st = f_reducescatter(name, (const void *)(uintptr_t)send,
				     (void *)(uintptr_t)recv, (size_t)count,
				     dtype, arg, op, &h);
		break;
	case K_ALLGATHER:
		st = f_allgather(name, (const void *)(uintptr_t)send,
				 (void *)(uintptr_t)recv, (size_t)count, dtype,
				 op, &h);
		break;
	case K_ALLTOALL:
		st = f_alltoall(name, (const void *)(uintptr_t)send,
				(void *)(uintptr_t)recv, (size_t)count, dtype,
				op, &h);
		break;
	case K_BROADCAST:
		st = f_broadcast(name, (void *)(uintptr_t)recv, (size_t)count,
				 dtype, arg, op, &h);
		break;
	default:
		PyErr_SetString(PyExc_ValueError, "hvd._fast: unknown kind");
		return -1;
	}
	*failed = 0;
	*hp = h;
	return st;
}

/* submit(kind, name, send, recv, count, dtype, op_or_root, pset, prescale,
 *        postscale, group[, shape]) -> handle (int > 0), or -status on failure
 * (hvd_last_error() of this thread has the message). */
static PyObject *submit(PyObject *self, PyObject *args)
{
	hvd_handle_t h = NULL;
	int failed, st = do_submit(args, &h, &failed);

	if (failed)
		return NULL;
	if (st)
		return PyLong_FromLong(-(long)st);
	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)h);
}

/* run(same arguments) -> status: submit, then wait with the GIL
 * released (the synchronous operations: one call instead of two). */
static PyObject *run(PyObject *self, PyObject *args)
{
	hvd_handle_t h = NULL;
	int failed, st = do_submit(args, &h, &failed);

	if (failed)
		return NULL;
	if (st)
		return PyLong_FromLong((long)st);
	Py_BEGIN_ALLOW_THREADS
	st = f_wait(h);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong((long)st);
}

/* wait(handle) -> status, the GIL released while it waits. */
static PyObject *wait_handle(PyObject *self, PyObject *arg)
{
	unsigned long long h = PyLong_AsUnsignedLongLong(arg);
	int st;

	if (PyErr_Occurred())
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	st = f_wait((hvd_handle_t)(uintptr_t)h);
	Py_END_ALLOW_THREADS
	return PyLong_FromLong(st);
}

/* test(handle) -> status (1: in progress). */
static PyObject *test_handle(PyObject *self, PyObject *arg)
{
	unsigned long long h = PyLong_AsUnsignedLongLong(arg);

	if (PyErr_Occurred())
		return NULL;
	return PyLong_FromLong(f_test((hvd_handle_t)(uintptr_t)h));
}

static PyMethodDef methods[] = {
	{"setup", setup, METH_VARARGS, "setup(addresses of the hvd_* calls)"},
	{"submit", submit, METH_VARARGS,
	 "submit(kind, name, send, recv, count, dtype, op_or_root, pset, "
	 "prescale, postscale, group[, shape]) -> handle, or -status"},
	{"run", run, METH_VARARGS,
	 "run(the arguments of submit) -> status, once the operation is done"},
	{"wait", wait_handle, METH_O, "wait(handle) -> status"},
	{"test", test_handle, METH_O, "test(handle) -> status"},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT, "hvd._fast",
	"The binding's fast path into libhvd's engine (submit, wait).", -1,
	methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fast(void);

PyMODINIT_FUNC PyInit__fast(void)
{
	return PyModule_Create(&module);
}
