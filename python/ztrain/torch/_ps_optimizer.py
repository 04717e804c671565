"""ParameterServerOptimizer: a PyTorch model trained against ztrain's
parameter servers, which hold the model and apply the pushed gradients with
their own optimizer."""
import json
import sys
import weakref

import torch

import ztrain as _zt
from ztrain import _native


def _init_scale(shape):
    """The servers' initial range for a parameter of this shape: Glorot
    uniform for weights (fan_in x fan_out), zeros for biases and scalars."""
    if len(shape) < 2:
        return 0.0
    fan_in = 1
    for d in shape[1:]:
        fan_in *= d
    return (6.0 / (fan_in + shape[0])) ** 0.5


def _describe_mlp(module):
    """{"kind": "mlp", ...} for an nn.Sequential of Linear and ReLU layers
    ending with a Linear (the model ztrain's evaluator scores), else None."""
    if not isinstance(module, torch.nn.Sequential) or not len(module):
        return None
    sizes, expect_linear = [], True
    for layer in module:
        if isinstance(layer, torch.nn.Linear) and expect_linear and layer.bias is not None:
            if sizes and sizes[-1] != layer.in_features:
                return None
            sizes += [layer.in_features] if not sizes else []
            sizes.append(layer.out_features)
            expect_linear = False
        elif isinstance(layer, torch.nn.ReLU) and not expect_linear:
            expect_linear = True
        else:
            return None
    return None if expect_linear else {"kind": "mlp", "sizes": sizes, "layout": "out-in"}


class ParameterServerOptimizer(torch.optim.Optimizer):
    """Trains a model whose parameters live on the job's parameter servers.

        opt = ztrain.torch.ParameterServerOptimizer(model, optimizer="adam", lr=1e-3)
        for x, y in data:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()          # push the gradients, pull the fresh values

    params: the model (an nn.Module), its named_parameters() or its
    parameters(). Every worker declares them in the same order. The
    servers hold each one split across them, start it from the seed
    (uniform Glorot for weights, zeros for biases: the model's own initial
    values are replaced, so every worker starts alike), and apply the
    pushed gradients with their own optimizer: "sgd", "momentum", "adam" or
    "adagrad" (lr, momentum, betas, eps).

    Asynchronous by default: each worker's push is applied as it arrives.
    sync=True averages the pushes of every worker for a step before the
    next pull; max_staleness=K lets a worker run at most K steps ahead of
    the slowest.

    Checkpoints: the chief (rank 0) writes the servers' model in ztrain's
    format every checkpoint_steps steps (and whenever checkpoint() is
    called) under AIP_CHECKPOINT_DIR, keeping the newest keep_checkpoints,
    and announces each to the job's evaluators, which score an
    nn.Sequential of Linear and ReLU layers. A checkpoint that cannot be
    written (a full disk) is said to the job at once (job.json's events,
    `ztrain status`); a periodic one is then skipped with a warning and
    training goes on. On a stop (a preemption, a cancel: ZtrainStopped
    left uncaught, or ztrain.run_on_stop()) the chief saves the step it
    reached, within the grace. Restarted parameter servers
    restore their shards from the newest checkpoint (or a newer snapshot of
    their own); `resumed_step` is that checkpoint's step (0: none), where a
    restarted job's workers continue. `steps` counts the steps taken.

    A parameter server lost in mid-training (killed, its host lost) is
    restarted by ztrain; the calls in flight are sent again, and step()
    returns once it answers. ZtrainTimeout after ZT_PS_TIMEOUT_MS of
    silence."""

    def __init__(self, params, optimizer="adam", lr=1e-3, momentum=0.9, betas=(0.9, 0.999), eps=1e-7, seed=1,
                 sync=False, max_staleness=None, checkpoint_steps=0, keep_checkpoints=5):
        from ztrain import _ps
        model = params if isinstance(params, torch.nn.Module) else None
        items = list(params.named_parameters() if model is not None else params)
        pairs = [it if isinstance(it, tuple) else ("param.%d" % i, it) for i, it in enumerate(items)]
        pairs = [(n, p) for n, p in pairs if p.requires_grad]
        if not pairs:
            raise ValueError("ztrain.torch.ParameterServerOptimizer: no parameters that require gradients")
        for n, p in pairs:
            if p.dtype != torch.float32:
                raise TypeError("ztrain.torch.ParameterServerOptimizer: parameter %s is %s; the parameter "
                                "servers hold float32" % (n, p.dtype))
            if not p.is_contiguous():
                raise ValueError("ztrain.torch.ParameterServerOptimizer: parameter %s is not contiguous" % n)
        super().__init__([p for _, p in pairs], dict(lr=lr))
        self.names = [n for n, _ in pairs]
        self._zt_params = [p for _, p in pairs]
        described = _describe_mlp(model)
        self._zt_model = json.dumps(described) if described else None
        self._zt_sync = bool(sync) or max_staleness is not None
        self.checkpoint_steps, self.keep_checkpoints = int(checkpoint_steps), int(keep_checkpoints)
        j = _zt.init()
        self.rank = j.rank
        self._zt_client = _ps.Client(j.paramservers, j.rank, j.size,
                                     [(n, p.numel(), _init_scale(p.shape)) for n, p in pairs],
                                     optimizer=optimizer, lr=lr, momentum=momentum, betas=betas, eps=eps,
                                     seed=seed, sync=sync, max_staleness=max_staleness)
        # CUDA parameters go through pinned host copies; CPU ones are read and written in place
        self._zt_host = [torch.empty(p.shape, dtype=torch.float32, pin_memory=True) if p.is_cuda else None
                         for p in self._zt_params]
        self._zt_grads = [None] * len(self._zt_params)
        self.resumed_step, _ = _ps.latest_checkpoint()
        self.steps = self.resumed_step
        self._zt_saved = self.resumed_step
        self._zt_pull(self.steps)
        if self.rank == 0:  # a stop saves the step reached, so that a restart resumes there
            ref = weakref.WeakMethod(self._zt_save_on_stop)
            _zt.on_stop(lambda: ref() and ref()())

    def _zt_pull(self, step):
        c = self._zt_client
        c.set_step(step)
        for i, p in enumerate(self._zt_params):
            c.pull(i, (self._zt_host[i] if p.is_cuda else p).data_ptr())
        c.wait()
        for i, p in enumerate(self._zt_params):
            if p.is_cuda:
                with torch.no_grad():
                    p.copy_(self._zt_host[i], non_blocking=True)

    @torch.no_grad()
    def step(self, closure=None):
        """Pushes every gradient (parameters without one push zeros in sync
        and bounded-staleness modes, nothing when asynchronous), then pulls
        the servers' fresh values into the parameters."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        c = self._zt_client
        held = []
        for i, p in enumerate(self._zt_params):
            g = p.grad
            if g is None:
                if not self._zt_sync:
                    continue
                g = torch.zeros_like(p)
            if g.is_cuda:
                self._zt_host[i].copy_(g)  # synchronous: the host copy is whole before it is pushed
                g = self._zt_host[i]
            elif g.dtype != torch.float32 or not g.is_contiguous():
                g = g.to(torch.float32).contiguous()
            held.append(g)  # alive and untouched until the servers have it (wait)
            c.push(i, g.data_ptr(), self.steps)
        self._zt_pull(self.steps + 1)
        del held
        self.steps += 1
        if self.checkpoint_steps > 0 and self.steps % self.checkpoint_steps == 0:
            self.checkpoint(_periodic=True)
        return loss

    def checkpoint(self, final=False, _periodic=False, _timeout_ms=None):
        """On the chief: writes the servers' model at the current step as a
        checkpoint (final: AIP_MODEL_DIR, the newest one kept), announces it
        to the evaluators and returns its folder. None on other workers.
        A failure is said to the job (an event) and raised."""
        if self.rank != 0:
            return None
        try:
            path = self._zt_client.checkpoint(self.steps, self._zt_model, final=final,
                                              keep=1 if final else self.keep_checkpoints, timeout_ms=_timeout_ms)
        except _zt.ZtrainStopped:
            raise
        except _zt.ZtrainError as e:
            _zt.report_checkpoint_error(self.steps, e)
            if not _periodic:
                raise
            sys.stderr.write("ztrain: checkpoint at step %d skipped: %s\n" % (self.steps, e))
            return None
        self._zt_saved = max(self._zt_saved, self.steps)
        if not _zt.announce_checkpoint(self.steps, path) and _native.env("COORDINATOR"):
            sys.stderr.write("ztrain: checkpoint at step %d written but not announced\n" % self.steps)
        return path

    def _zt_save_on_stop(self):
        if self.steps <= self._zt_saved:  # the stop came just after a checkpoint of this step
            if self.steps > self.resumed_step:
                sys.stderr.write("ztrain: stopping at step %d: saved already, to resume from\n" % self.steps)
            return
        sys.stderr.write("ztrain: stopping at step %d: saving it to resume from\n" % self.steps)
        grace = _native.knob_int("ZT_STOP_GRACE_MS") // 2  # the save fits the grace before SIGKILL
        self.checkpoint(_timeout_ms=min(grace, self._zt_client.timeout_ms))

    def close(self):
        """Disconnects from the servers (at exit by itself)."""
        self._zt_client.close()
