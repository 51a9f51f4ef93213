#!/usr/bin/env python3
"""lane_forge.py - someone on the network at a rank's TCP lane port.

    lane_forge.py HOST PORT GO SECONDS

tests/slurm/coll_netns.sh runs it against rank 1 of a 2-node job that
waits (coll_check after GO) before its first collective, so every
connection here comes before rank 0's own.  It opens more connections that
say nothing than the rank keeps waiting for a hello (net/lane.c's
LANE_PENDING, 64), and connections that say something false: noise, hellos
of rank 0 with made-up MACs, a hello from the rank itself and from a rank
the job does not have, a hello cut short, a megabyte of noise.  Then it
creates GO, and waits up to SECONDS for the rank to close every
connection that spoke.  One line per kind of connection:

    forged NAME: closed after S s, 0 bytes back
    idle: N of M closed, 0 bytes back

and exit status 0 when every speaking connection was closed and no
connection ever got a byte back (a rank writes nothing to a connection
that has not proved it is a rank of the job).
"""
import os
import select
import socket
import struct
import sys
import time

MAGIC = 0x4C445648  # "HVDL"
VERSION = 1
IDLE = 80           # more than LANE_PENDING


def hello(src, dst, mac):
    return struct.pack("<QQQQ", MAGIC | (VERSION << 32),
                       (src & 0xFFFFFFFF) | ((dst & 0xFFFFFFFF) << 32),
                       mac, 0)


def connect(host, port):
    s = socket.create_connection((host, port), timeout=10)
    s.setblocking(False)
    return s


def main():
    host, port, go, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
        float(sys.argv[4])
    forged = [
        ("32 bytes of noise", os.urandom(32)),
        ("a hello of rank 0 with a MAC of zeros", hello(0, 1, 0)),
        ("a hello of rank 0 with a random MAC",
         hello(0, 1, struct.unpack("<Q", os.urandom(8))[0])),
        ("a hello of rank 1 to itself", hello(1, 1, 0)),
        ("a hello of rank 7 (no such rank)", hello(7, 1, 0)),
        ("a hello of rank -1", hello(-1, 1, 0)),
        ("a megabyte of noise", os.urandom(1 << 20)),
    ]
    idle = [connect(host, port) for _ in range(IDLE)]
    cut = connect(host, port)
    cut.send(hello(0, 1, 0)[:16])   # then nothing: waits with the idle
    idle.append(cut)
    speak = []
    for name, data in forged:
        s = connect(host, port)
        try:
            s.sendall(data[:65536])
        except (BlockingIOError, ConnectionError):
            pass
        speak.append([name, s, data[65536:], None, 0])
    with open(go, "w"):
        pass
    t0 = time.monotonic()
    back = {}
    while time.monotonic() - t0 < limit:
        live = [e for e in speak if e[3] is None]
        if not live:
            break
        for e in live:
            if e[2]:
                try:
                    n = e[1].send(e[2])
                    e[2] = e[2][n:]
                except BlockingIOError:
                    pass
                except ConnectionError:
                    e[2] = b""
        r, _, _ = select.select([e[1] for e in live], [], [], 0.2)
        for e in live:
            if e[1] not in r:
                continue
            try:
                d = e[1].recv(65536)
            except BlockingIOError:
                continue
            except ConnectionError:
                d = b""
            if d:
                e[4] += len(d)
            else:
                e[3] = time.monotonic() - t0
    status = 0
    for name, s, _, closed, nback in speak:
        if closed is None or nback:
            status = 1
        print("forged %s: %s, %d bytes back" % (
            name, "closed after %.1f s" % closed if closed is not None
            else "still open after %.0f s" % limit, nback))
        s.close()
    nclosed = nback = 0
    for s in idle:
        try:
            d = s.recv(65536)
            if d:
                nback += len(d)
            else:
                nclosed += 1
        except BlockingIOError:
            pass
        except ConnectionError:
            nclosed += 1
        s.close()
    if nback:
        status = 1
    print("idle: %d of %d closed, %d bytes back" % (nclosed, len(idle), nback))
    return status


if __name__ == "__main__":
    sys.exit(main())
