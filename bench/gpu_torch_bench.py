#!/usr/bin/env python3
"""The peer for bench/gpu_bench: the same MLP (784-256-128-10, ReLU, softmax
cross-entropy, Adam 0.001) and batch in PyTorch on the GPU, examples/s.

    python3 bench/gpu_torch_bench.py [batch]
"""
import benchargs  # bench/ is the script's own folder, first on sys.path
benchargs.check(__doc__, (), (), 1)
import sys
import time

import torch

B = int(sys.argv[1]) if len(sys.argv) > 1 else 64
if not torch.cuda.is_available():
    print("no CUDA device: skipped")
    sys.exit(77)
dev = torch.device("cuda")
x = torch.randint(0, 256, (60000, 784), dtype=torch.uint8, device=dev)
y = torch.randint(0, 10, (60000,), device=dev)
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                            torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)
loss_fn = torch.nn.CrossEntropyLoss()


def step(s):
    i = (s * B) % (60000 - B)
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x[i:i + B].float() / 255), y[i:i + B])
    loss.backward()
    opt.step()


for s in range(50):
    step(s)
torch.cuda.synchronize()
t0 = time.perf_counter()
steps = 2000
for s in range(steps):
    step(s)
torch.cuda.synchronize()
print("PyTorch %s on %s, batch %d: %.0f examples/s" % (torch.__version__, torch.cuda.get_device_name(0), B,
                                                      steps * B / (time.perf_counter() - t0)))
