"""A PyTorch Lightning callback that draws each epoch of an Opacus training from the odometer and
stops the training at the first epoch the odometer refuses.

PyTorch Lightning #20854 asks for "a callback that stops the training when the Differential
Privacy budget has been spent". :class:`EpochBudgetCallback` is that callback for a
``LightningModule`` trained with Opacus (``PrivacyEngine.make_private`` in
``configure_optimizers``, as Opacus' own Lightning example does, and a ``DPDataLoader``, e.g.
from ``opacus.lightning.DPLightningDataModule``). It drives an
:class:`~odometer_client.adapters.opacus.EpochGuard`:

- ``on_train_start``: the guard is made on the trainer's ``DPOptimizer`` (the one optimizer with
  Opacus' ``add_noise``) and its training loader, with Lightning's ``accumulate_grad_batches``
  as the guard's ``accumulation`` and Lightning's batches per epoch (``limit_train_batches``
  included) as the epoch's steps. From then on every optimizer step nothing reserved is refused
  before its noise is drawn and before the parameters change (the guard's ``add_noise``).
- ``on_train_epoch_start``: epoch ``trainer.current_epoch`` is registered before any of its
  batches runs, one ``dp_sgd`` as the guard declares it. A refusal (the odometer's 409) sets
  ``trainer.should_stop``, so Lightning leaves the epoch before its first batch; the refusal is
  kept as ``callback.refused`` (an :class:`~odometer_client.adapters.opacus.EpochRefused`: the
  409's ``summary``, what would fit ``instead``) and logged at WARNING on this module's logger
  with the refusal's summary. Where Lightning would not stop (``min_epochs`` or ``min_steps`` not
  reached) the refusal is raised instead, ending ``trainer.fit`` with it. Any other error of the
  registration (transport, a 422) is raised: nothing of the epoch was allowed, so nothing runs.
- ``on_train_batch_start``: an epoch Lightning resumed in its middle (a checkpoint saved
  mid-epoch: Lightning does not call ``on_train_epoch_start`` again) is registered before its
  next batch; a refusal there is raised.
- **resuming from a checkpoint is not charged twice**: the registration's idempotency key is the
  dataset, ``run`` and the epoch's number (:func:`~odometer_client.adapters.opacus.
  idempotency_key`), and Lightning restores ``current_epoch`` from the checkpoint, so an epoch
  the crashed run registered gets the same invocation back (``trainer.fit(model,
  ckpt_path=…)`` with the same ``run``). Its steps run again with fresh noise: sound when
  nothing the crashed run computed after its checkpoint was released (else a new ``run``).

Even where Lightning trains on after the refusal (a custom loop, another callback clearing
``should_stop``), the guard refuses every step nothing reserved
(:class:`~odometer_client.adapters.opacus.StepRefused`): no unreserved step draws noise or
updates a parameter. Steps declared but not run (an epoch that Lightning ends early) are charged
all the same: the registration is made before the epoch, for its whole length.

One process, one device: the callback reads the trainer's one ``DPOptimizer``; a distributed
training (several processes, each with its own loader and noise) is not declared by it.

Nothing of Lightning, Opacus or PyTorch is imported here until the class is first asked for
(``from odometer_client.adapters.lightning import EpochBudgetCallback`` imports
``pytorch_lightning``, or ``lightning.pytorch`` where only that is installed, to subclass its
``Callback``). Tested with pytorch-lightning 2.6 and opacus 1.6.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from odometer_client.adapters.opacus import Accumulation, EpochGuard, EpochRefused

log = logging.getLogger(__name__)


def _dp_optimizer(optimizers: Any) -> Any:
    """The one ``DPOptimizer`` among the trainer's optimizers."""
    found = [
        o
        for o in optimizers
        if callable(getattr(o, "add_noise", None)) and hasattr(o, "noise_multiplier")
    ]
    if len(found) != 1:
        raise TypeError(
            f"EpochBudgetCallback needs exactly one Opacus DPOptimizer among the trainer's "
            f"optimizers, found {len(found)}: call PrivacyEngine.make_private in "
            "configure_optimizers and return its optimizer"
        )
    return found[0]


def _batches(trainer: Any, data_loader: Any) -> int | None:
    """The batches Lightning runs an epoch, where that is fewer than the loader has."""
    limit = getattr(trainer, "num_training_batches", None)
    if isinstance(limit, int) and 0 < limit < len(data_loader):
        return limit
    return None


class _EpochBudget:
    """The callback's logic, without Lightning (see the module)."""

    def __init__(
        self,
        client: Any,
        dataset: Any,
        *,
        run: str,
        sample_rate: float | None = None,
        accumulation: int | None = None,
        accumulation_bound: Accumulation = "opacus",
        delta: Any = None,
        assume_poisson: bool = False,
        optimizer: Any = None,
        data_loader: Any = None,
    ) -> None:
        if not isinstance(run, str) or not run:
            raise ValueError("name the run: run='…' labels this training")
        super().__init__()
        self.client = client
        self.dataset = dataset
        self.run = run
        self.sample_rate = sample_rate
        self.accumulation = accumulation
        self.accumulation_bound: Accumulation = accumulation_bound
        self.delta = delta
        self.assume_poisson = assume_poisson
        self.optimizer = optimizer
        self.data_loader = data_loader
        #: the guard on the trainer's ``DPOptimizer`` (made at ``on_train_start``)
        self.guard: EpochGuard | None = None
        #: the odometer's refusal that stopped the training, if one did
        self.refused: EpochRefused | None = None

    # ------------------------------------------------------------------ Lightning's hooks
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        optimizer = self.optimizer or _dp_optimizer(trainer.optimizers)
        loader = self.data_loader if self.data_loader is not None else trainer.train_dataloader
        accumulation = self.accumulation
        if accumulation is None:
            accumulation = int(getattr(trainer, "accumulate_grad_batches", 1) or 1)
        self.refused = None
        self.guard = EpochGuard(
            self.client,
            self.dataset,
            optimizer,
            loader,
            run=self.run,
            sample_rate=self.sample_rate,
            accumulation=accumulation,
            accumulation_bound=self.accumulation_bound,
            delta=self.delta,
            assume_poisson=self.assume_poisson,
            batches=_batches(trainer, loader),
        )

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        guard = self._guard()
        epoch = int(trainer.current_epoch)
        try:
            guard.reserve_epoch(epoch)
        except EpochRefused as exc:
            self.refused = exc
            log.warning("training stopped before epoch %d: %s", epoch, exc)
            if not _can_stop(trainer):
                raise
            trainer.should_stop = True

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        guard = self._guard()
        epoch = int(trainer.current_epoch)
        if epoch in guard.invocations or self.refused is not None:
            return
        try:  # an epoch resumed in its middle: Lightning did not call on_train_epoch_start
            guard.reserve_epoch(epoch)
        except EpochRefused as exc:
            self.refused = exc
            log.warning("training stopped in epoch %d: %s", epoch, exc)
            raise

    def _guard(self) -> EpochGuard:
        if self.guard is None:
            raise RuntimeError("EpochBudgetCallback: on_train_start has not run")
        return self.guard

    @property
    def invocations(self) -> dict[int, Any]:
        """Epoch → its admitted invocation (empty before the training starts)."""
        return {} if self.guard is None else dict(self.guard.invocations)


def _can_stop(trainer: Any) -> bool:
    """Whether Lightning stops when ``should_stop`` is set now (``min_epochs`` and
    ``min_steps`` reached)."""
    fit_loop = getattr(trainer, "fit_loop", None)
    min_epochs = getattr(fit_loop, "min_epochs", None)
    if min_epochs and int(trainer.current_epoch) < min_epochs:
        return False
    min_steps = getattr(getattr(fit_loop, "epoch_loop", None), "min_steps", None)
    return not (min_steps and int(getattr(trainer, "global_step", 0)) < min_steps)


def _lightning_callback() -> type:
    for name in ("pytorch_lightning", "lightning.pytorch"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        base: type = module.Callback
        return base
    raise ImportError(
        "EpochBudgetCallback needs PyTorch Lightning: pip install pytorch-lightning (with the "
        "PyTorch of your choice) or lightning"
    )


_BUILT: dict[str, type] = {}


def _build() -> type:
    base = _lightning_callback()
    return type(
        "EpochBudgetCallback",
        (_EpochBudget, base),
        {
            "__doc__": (
                "A Lightning ``Callback`` that registers each epoch with the odometer before it "
                "runs and stops the training at the first epoch refused (see "
                ":mod:`odometer_client.adapters.lightning`).\n\n"
                "``client`` an ``OdometerClient``, ``dataset`` a dataset or its id, ``run`` the "
                "training's label; ``sample_rate``, ``accumulation_bound``, ``delta`` and "
                "``assume_poisson`` as for ``EpochGuard``; ``accumulation`` defaults to the "
                "trainer's ``accumulate_grad_batches``; ``optimizer`` and ``data_loader`` "
                "default to the trainer's ``DPOptimizer`` and training loader."
            ),
            "__module__": __name__,
            "state_key": property(lambda self: f"EpochBudgetCallback[run={self.run!r}]"),
        },
    )


def __getattr__(name: str) -> Any:
    """``EpochBudgetCallback``, built (importing Lightning) when first asked for."""
    if name == "EpochBudgetCallback":
        if name not in _BUILT:
            _BUILT[name] = _build()
        return _BUILT[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
