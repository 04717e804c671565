#!/usr/bin/env python3
"""A program written for PyTorch-style launchers (torch.distributed,
torchrun): it reads MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and torchrun's
LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK, and does a real rendezvous over
TCP (rank 0 listens, every other rank reports in, rank 0 answers with the sum
of ranks). It needs nothing but the standard library."""
import json
import os
import socket
import sys
import time

addr = os.environ["MASTER_ADDR"]
port = int(os.environ["MASTER_PORT"])
world = int(os.environ["WORLD_SIZE"])
rank = int(os.environ["RANK"])
local_rank = int(os.environ["LOCAL_RANK"])
local_world = int(os.environ["LOCAL_WORLD_SIZE"])
node = int(os.environ["GROUP_RANK"])
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
print("rank %d of %d (%s #%d), local rank %d of %d on node %d, master %s:%d" % (
    rank, world, task["type"], task["index"], local_rank, local_world, node, addr, port), flush=True)
if not (0 <= local_rank < local_world <= world):
    sys.exit("LOCAL_RANK=%d, LOCAL_WORLD_SIZE=%d do not fit WORLD_SIZE=%d" % (local_rank, local_world, world))

if rank == 0:
    srv = socket.create_server((addr, port))
    srv.settimeout(60)
    peers, total = [], 0
    while len(peers) < world - 1:
        conn, _ = srv.accept()
        total += int(conn.recv(16).decode())
        peers.append(conn)
    for conn in peers:
        conn.sendall(str(total).encode())
    for conn in peers:  # each has reported the sum before the primary ends the job
        conn.recv(2)
        conn.close()
    print("rendezvous complete: sum of ranks = %d (expected %d)" % (total, world * (world - 1) // 2),
          flush=True)
    sys.exit(0 if total == world * (world - 1) // 2 else 1)
else:
    deadline = time.monotonic() + 60
    while True:
        try:
            s = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    s.sendall(str(rank).encode())
    print("rank %d got sum %s from rank 0" % (rank, s.recv(16).decode()), flush=True)
    s.sendall(b"ok")
