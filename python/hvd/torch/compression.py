"""Gradient compression: Horovod's Compression.none and Compression.fp16.

A compressor turns a tensor into what travels (compress returns it with a
context) and turns the reduced result back (decompress).
"""

import torch


class Compressor(object):
    """What a compressor provides (both static methods)."""

    @staticmethod
    def compress(tensor):
        """-> (tensor to send, context for decompress)"""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        """-> the tensor as the caller wants it back"""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends the tensor as it is (the default)."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 and come back in their own
    type; other types are left alone."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx.is_floating_point:
            return tensor.type(ctx)
        return tensor


class Compression(object):
    """The compression algorithms: ``none`` (default) and ``fp16``."""
    none = NoneCompressor
    fp16 = FP16Compressor
