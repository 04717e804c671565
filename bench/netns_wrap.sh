#!/bin/sh
# Runs an MPI rank inside the network namespace of its host (netns_bench.py).
exec ip netns exec "zt-h${OMPI_COMM_WORLD_RANK}" "$@"
