"""Run by the tools venv's python: TensorBoard's own readers over a log
folder, printed as JSON.
  tb_read.py scalars DIR   {run: {tag: [[step, value], ...]}} (EventAccumulator, every run under DIR)
  tb_read.py hparams DIR   the HParams plugin's experiment and session groups, as its dashboard asks for them
"""
import json
import os
import sys

what, logdir = sys.argv[1], sys.argv[2]
if what == "scalars":
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    out = {}
    for root, dirs, files in os.walk(logdir):
        if not any(f.startswith("events.out.tfevents.") for f in files):
            continue
        ea = EventAccumulator(root, size_guidance={"scalars": 0})
        ea.Reload()
        out[os.path.relpath(root, logdir)] = {t: [[e.step, e.value] for e in ea.Scalars(t)]
                                              for t in ea.Tags()["scalars"]}
    print(json.dumps(out))
