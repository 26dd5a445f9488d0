"""Opacus training that draws each epoch's budget from the odometer before the epoch runs.

Opacus keeps a privacy accountant for one process and forgets it afterwards (Opacus #117:
"restart it from a saved state so that privacy spent is tracked properly"). Here the
odometer's ledger is that state. :class:`EpochGuard` is attached to a ``DPOptimizer`` (what
``PrivacyEngine.make_private`` returns) and its data loader:

- **each epoch is registered before it runs** (:meth:`EpochGuard.reserve_epoch`), as one
  ``dp_sgd`` declaration — ``steps`` Poisson-subsampled Gaussian steps of noise multiplier σ at
  rate q — with the numbers Opacus' own accountant hook records for the same steps:

  ==========================  ===================================================================
  noise multiplier σ          ``optimizer.noise_multiplier`` (noise std / clipping norm), read
                              **down** to 17 digits
  sample rate                 the rate Opacus' hook was made with (``PrivacyEngine`` passes
                              ``1/len(data_loader)``; the ``DPDataLoader`` samples each record
                              with that probability), times the number of batches accumulated
                              into one step (``accumulation``), read **up**; the hook records
                              ``sample_rate × optimizer.accumulated_iterations`` per step
  steps                       ⌈len(data_loader) / accumulation⌉ optimizer steps per epoch
  ==========================  ===================================================================

  A refusal (409) raises :class:`EpochRefused` (a ``BudgetExceeded`` with the refusal's
  ``summary`` and ``instead``): nothing was charged and no step of that epoch may run.
  :meth:`EpochGuard.reserve_epochs` registers several epochs as one ``dp_sgd``: a ``basic``
  dataset then charges one PLD for them, and an ``rdp`` dataset's PLD branch states them as
  one, which can admit a run whose epochs one by one are refused.
- **a step nothing reserved is refused before its noise is drawn and before the parameters
  change.** The guard takes the place of the optimizer's ``add_noise`` (``DPOptimizer.pre_step``
  calls it after clipping, before its step hook and before the wrapped optimizer's ``step``):
  a step beyond the steps reserved, with a smaller noise multiplier than declared, or with
  more accumulated batches than declared, raises :class:`StepRefused` after clearing every
  parameter's ``grad``, ``grad_sample`` and ``summed_grad``, so neither the clipped sum nor
  the non-private gradient of the backward pass is left to be applied. Steps Opacus skips
  (virtual steps of ``BatchMemoryManager``) draw no noise and use no reservation.
- **a resumed run is not charged twice**: each epoch's registration carries an idempotency
  key derived from the dataset, the ``run`` label and the epoch's number
  (:func:`idempotency_key`), so a run restarted from a checkpoint that registers an epoch the
  crashed run had already registered gets the same invocation back (one ledger entry). The
  steps of that epoch run again with fresh noise: this is sound as long as nothing the crashed
  run computed after its checkpoint (parameters, gradients) was released; otherwise give a new
  ``run`` label. Registering the epoch again with other numbers (another σ, rate or length)
  under the same label is the server's 422 ``IdempotencyKeyReused``.
- **the training plan as the dataset's workload**: :func:`workload` states "``epochs`` epochs
  of this ``dp_sgd``" as an ``rdp`` dataset's ``accounting.workload``, so the dataset's Rényi
  orders are chosen for the run (docs/accounting.md, *Declared workload*).

**Poisson sampling and gradient accumulation.** ``dp_sgd`` declares Poisson sampling: the guard
needs the ``DPDataLoader`` that ``make_private(..., poisson_sampling=True)`` (the default)
returns, whose batches take each record with probability q. A loader of shuffled fixed-size
batches (``poisson_sampling=False``) is accounted by Opacus as if it were Poisson; the guard
takes one only with ``assume_poisson=True``, which states that assumption. With Poisson
sampling Opacus 1.6 refuses to accumulate two batches into one step (a record could be in both);
large logical batches go through ``BatchMemoryManager``, whose physical batches are skipped
steps (no noise, no reservation) and whose logical step is one step at rate q, as Opacus' hook
records it (``accumulation=1``, the default).

With ``assume_poisson`` loaders Opacus does accumulate: its hook records a step over k batches as
one step at rate k·q (``sample_rate × accumulated_iterations``), and ``accumulation=k`` declares
the same (the default ``accumulation_bound="opacus"``), with ⌈len(loader)/k⌉ steps an epoch.
This is a theorem under the assumption ``assume_poisson`` states, not only Opacus' convention:
the k batches of one step are disjoint (one pass of a shuffled loader), so the step releases
Σ_{x ∈ B_1 ∪ … ∪ B_k} clip(∇ℓ(x)) + N(0, σ²C²), the Gaussian mechanism of sensitivity C (one
record changes one clipped term) on the subsample B_1 ∪ … ∪ B_k, which takes each record with
probability k·|B|/n = k·q. Modelled as Poisson at that rate — what ``assume_poisson`` states for
every batch, here for their union — each step is the Poisson-subsampled Gaussian of rate k·q and
noise multiplier σ (Abadi et al. 2016; Mironov–Talwar–Zhang 2019), whose composition over the
steps is what ``dp_sgd(σ, k·q, steps)`` charges. ``accumulation_bound="split"`` declares instead
what post-processing gives without disjointness: the step's noise N(0, σ²C²) is the sum of k
independent N(0, σ²C²/k), so the step is a function of k subsampled Gaussians of rate q and
noise multiplier σ/√k, declared as k·steps ``dp_sgd`` steps of σ/√k. It holds for overlapping
(Poisson) batches too, but it is never the tighter one: the leading term of the RDP of a
subsampled Gaussian, 2q²α/σ² a step, is the same for both (k steps of q²k/σ² against one of
k²q²/σ²), and the higher terms grow as σ/√k falls. Measured with dp_accounting's PLD at δ = 10⁻⁵:
σ = 1.1, q = 1/8, 8 batches, k = 2: 3.58 (k·q) against 5.24 (split); σ = 1, q = 0.01, 1,000
batches: k = 2, 2.77 against 4.48; k = 4, 4.19 against 13.36; k = 8, 6.23 against 41.40;
σ = 2, k = 4: 1.37 against 1.83. Hence the default is k·q, the rate Opacus' own hook uses, and
the guard refuses it for Poisson batches (a ``DPDataLoader``, whose k batches may share a record:
that record's k clipped gradients would make the step's sensitivity up to k·C), where only
``accumulation_bound="split"`` holds.

Nothing of Opacus or PyTorch is imported here: the guard reads and writes the optimizer's
attributes. Opacus 1.5–1.6 (``pip install opacus`` with a PyTorch of your choice).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from collections.abc import Callable
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any, Final, Literal

from odometer_client.adapters._refused import AdapterRefused
from odometer_client.declarations import DOWN, UP, Mechanism, dp_sgd
from odometer_client.errors import BudgetExceeded

Accumulation = Literal["opacus", "split"]

_ONE: Final = Decimal(1)


class EpochRefused(AdapterRefused):
    """The odometer refused the epoch (409): nothing was charged, no step of it may run.

    ``summary`` and ``requested``/``remaining`` are the refusal's; ``instead`` the declaration
    that would fit now, when the server says one (``None`` otherwise); ``epoch`` and
    ``declared`` the epoch refused and its declaration."""

    def __init__(self, refusal: BudgetExceeded, epoch: int, declared: Mechanism) -> None:
        what = f"epoch {epoch}"
        super().__init__(refusal, declared, what=what, so="none of its steps may run")
        self.epoch = epoch


class StepRefused(RuntimeError):
    """A step the odometer did not admit: no noise was drawn, the parameters are unchanged,
    and the step's gradients were cleared."""


# ---------------------------------------------------------------------------- declarations
def _float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"Opacus' {what} is not a number: {value!r}")
    f = float(value)
    if not math.isfinite(f) or f <= 0:
        raise ValueError(f"Opacus' {what} is {f!r}: no finite guarantee to declare")
    return f


def _exact(value: Any, what: str) -> Decimal | None:
    """A ``Decimal`` given as such (already exact), checked; ``None`` for anything else."""
    if not isinstance(value, Decimal):
        return None
    if not value.is_finite() or value <= 0:
        raise ValueError(f"the {what} is {value}: no finite guarantee to declare")
    return value


def noise_multiplier_down(value: Any) -> Decimal:
    """Opacus' noise multiplier (a float) read down to 17 digits: never more noise than
    Opacus adds (a ``Decimal`` is taken as it is)."""
    exact = _exact(value, "noise multiplier")
    if exact is not None:
        return exact
    return DOWN.create_decimal_from_float(_float(value, "noise multiplier")).normalize(DOWN)


def sample_rate_up(value: Any) -> Decimal:
    """Opacus' sample rate (a float) read up to 17 digits: never a smaller rate than the
    ``DPDataLoader`` samples with (a ``Decimal`` is taken as it is)."""
    rate = _exact(value, "sample rate")
    if rate is None:
        rate = UP.create_decimal_from_float(_float(value, "sample rate")).normalize(UP)
    if rate > _ONE:
        raise ValueError(f"a sample rate above 1 ({rate}) is not a sampling probability")
    return rate


def steps_per_epoch(batches: int, accumulation: int = 1) -> int:
    """Optimizer steps in an epoch of ``batches`` batches, ``accumulation`` batches per step
    (rounded up: a last, shorter group of batches is a step too)."""
    if isinstance(batches, bool) or not isinstance(batches, int) or batches < 1:
        raise ValueError(f"an epoch needs at least one batch, got {batches!r}")
    _check_accumulation(accumulation)
    return -(-batches // accumulation)


def _check_accumulation(accumulation: int) -> None:
    if isinstance(accumulation, bool) or not isinstance(accumulation, int) or accumulation < 1:
        raise ValueError(f"accumulation must be a positive integer, got {accumulation!r}")


def declaration(
    noise_multiplier: Any,
    sample_rate: Any,
    steps: int,
    *,
    accumulation: int = 1,
    accumulation_bound: Accumulation = "opacus",
    delta: Any = None,
) -> Mechanism:
    """The ``dp_sgd`` declaration of ``steps`` optimizer steps of a ``DPOptimizer`` with
    ``noise_multiplier`` σ, each over ``accumulation`` batches Poisson-sampled at
    ``sample_rate`` q (Opacus' floats; σ read down, q up):

    - ``accumulation_bound="opacus"``: ``dp_sgd(σ, k·q, steps)``, as Opacus' accountant hook
      records it (``sample_rate × accumulated_iterations``); k·q above 1 is a ``ValueError``;
    - ``"split"``: ``dp_sgd(σ/√k, q, k·steps)`` (σ/√k read down), the post-processing bound
      (see the module).

    ``delta`` is the δ at which a ``basic`` dataset converts the run (its default otherwise)."""
    _check_accumulation(accumulation)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    sigma = noise_multiplier_down(noise_multiplier)
    rate = sample_rate_up(sample_rate)
    k = Decimal(accumulation)
    if accumulation_bound == "opacus":
        step_rate = UP.multiply(rate, k).normalize(UP)
        if step_rate > _ONE:
            raise ValueError(
                f"{accumulation} batches at rate {rate} make a step rate {step_rate} above 1: "
                "accumulate fewer batches"
            )
        return dp_sgd(sigma, step_rate, steps, delta=delta)
    if accumulation_bound == "split":
        # Decimal's sqrt rounds half-even whatever the context says: σ/√k is read down and
        # then checked exactly (s²·k ≤ σ²), stepping down while it is above
        split_sigma = DOWN.divide(sigma, Context(prec=40).sqrt(k))
        while Fraction(split_sigma) ** 2 * accumulation > Fraction(sigma) ** 2:
            split_sigma = DOWN.next_minus(split_sigma)
        split_sigma = split_sigma.normalize(DOWN)
        return dp_sgd(split_sigma, rate, steps * accumulation, delta=delta)
    raise ValueError(f"accumulation_bound must be 'opacus' or 'split', got {accumulation_bound!r}")


def workload(
    noise_multiplier: Any,
    sample_rate: Any,
    epoch_steps: int,
    epochs: int,
    *,
    accumulation: int = 1,
    accumulation_bound: Accumulation = "opacus",
) -> list[dict[str, Any]]:
    """The training plan — ``epochs`` epochs of ``epoch_steps`` steps, each epoch one
    :func:`declaration` — as an ``rdp`` dataset's ``accounting.workload``:
    ``client.create_dataset(name, ε, δ, accounting={"mode": "rdp", "workload": workload(…)})``.
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    epoch = declaration(
        noise_multiplier,
        sample_rate,
        epoch_steps,
        accumulation=accumulation,
        accumulation_bound=accumulation_bound,
    )
    return [{"mechanism": epoch.to_json(), "count": epochs}]


def idempotency_key(dataset_id: str, run: str, epoch: int, count: int = 1) -> str:
    """The registration key of epoch ``epoch`` (of the ``count`` epochs from ``epoch`` on,
    registered as one): a digest of the dataset, the ``run`` label and the epochs, so a resumed
    run registering epochs already registered gets the same invocation."""
    if not isinstance(run, str) or not run:
        raise ValueError("name the run: run='…' labels this training (see the module)")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch must be an integer ≥ 0, got {epoch!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    document: dict[str, Any] = {"dataset": dataset_id, "run": run, "epoch": epoch}
    if count > 1:
        document["epochs"] = count
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return "opacus-" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hook_sample_rate(optimizer: Any) -> float | None:
    """The sample rate Opacus' accountant hook on ``optimizer`` was made with
    (``PrivacyEngine.make_private`` attaches ``accountant.get_optimizer_hook_fn(sample_rate=…)``),
    or ``None`` when the optimizer has no such hook."""
    hook = getattr(optimizer, "step_hook", None)
    if hook is None or not callable(hook):
        return None
    try:
        rate = inspect.getclosurevars(hook).nonlocals.get("sample_rate")
    except TypeError:  # not a Python function (a builtin, a partial)
        return None
    return float(rate) if isinstance(rate, int | float) and not isinstance(rate, bool) else None


def training_sample_rate(optimizer: Any, data_loader: Any, sample_rate: Any = None) -> float:
    """The sample rate of a training: ``sample_rate`` if given, else the rate of Opacus'
    accountant hook on ``optimizer``, else the loader's ``sample_rate`` (a ``DPDataLoader``),
    else 1/len(loader), as ``PrivacyEngine.make_private`` computes it."""
    rate = sample_rate
    if rate is None:
        rate = hook_sample_rate(optimizer)
    if rate is None:
        rate = getattr(data_loader, "sample_rate", None)
    if rate is None:
        rate = 1 / len(data_loader)
    return _float(rate, "sample rate")


def training_workload(
    optimizer: Any,
    data_loader: Any,
    epochs: int,
    *,
    sample_rate: Any = None,
    accumulation: int = 1,
    accumulation_bound: Accumulation = "opacus",
) -> list[dict[str, Any]]:
    """The :func:`workload` of ``epochs`` epochs of this ``DPOptimizer`` on ``data_loader``,
    as :class:`EpochGuard` will register them (declare it when creating the dataset)."""
    return workload(
        noise_multiplier_down(optimizer.noise_multiplier),
        training_sample_rate(optimizer, data_loader, sample_rate),
        steps_per_epoch(len(data_loader), accumulation),
        epochs,
        accumulation=accumulation,
        accumulation_bound=accumulation_bound,
    )


# ---------------------------------------------------------------------------- the guard
class EpochGuard:
    """Registers each epoch of a ``DPOptimizer``'s training with the odometer and refuses any
    step nothing reserved (see the module).

    ``client`` an ``OdometerClient``, ``dataset`` a dataset or its id, ``optimizer`` the
    ``DPOptimizer``, ``data_loader`` the loader ``make_private`` returned (its length is the
    number of batches per epoch), ``run`` the training's label. ``sample_rate`` defaults to
    the rate of Opacus' accountant hook on the optimizer, else the loader's ``sample_rate``,
    else 1/len(loader) (as ``make_private`` computes it); ``accumulation`` the batches
    accumulated into one optimizer step; ``delta`` the conversion δ of a ``basic`` dataset;
    ``assume_poisson`` accepts a loader of fixed-size batches as Opacus' accountant does;
    ``batches`` is the number of batches an epoch runs where the loop stops before the loader's
    end (Lightning's ``limit_train_batches``; default ``len(data_loader)``; the sample rate is
    the loader's either way). The guard is installed at once: until an epoch is reserved, every
    step is refused. A new guard on the same optimizer replaces the one before (whose
    reservations no longer serve)."""

    def __init__(
        self,
        client: Any,
        dataset: Any,
        optimizer: Any,
        data_loader: Any,
        *,
        run: str,
        sample_rate: float | None = None,
        accumulation: int = 1,
        accumulation_bound: Accumulation = "opacus",
        delta: Any = None,
        assume_poisson: bool = False,
        batches: int | None = None,
    ) -> None:
        if getattr(data_loader, "sample_rate", None) is None and not assume_poisson:
            raise ValueError(
                "the data loader does not sample Poisson batches (make_private(..., "
                "poisson_sampling=True) returns a DPDataLoader that does); dp_sgd declares "
                "Poisson sampling: pass assume_poisson=True to declare Opacus' own assumption"
            )
        if not callable(getattr(optimizer, "add_noise", None)) or not hasattr(
            optimizer, "noise_multiplier"
        ):
            raise TypeError(
                "EpochGuard needs Opacus' DPOptimizer (what PrivacyEngine.make_private returns)"
            )
        _check_accumulation(accumulation)
        poisson = getattr(data_loader, "sample_rate", None) is not None
        if poisson and accumulation > 1 and accumulation_bound == "opacus":
            raise ValueError(
                f"{accumulation} Poisson batches a step may share a record (a step's sensitivity "
                "up to that many clipped gradients): the rate k·q holds for disjoint batches "
                "only. Use BatchMemoryManager for large Poisson batches, or declare "
                "accumulation_bound='split'"
            )
        idempotency_key("-", run, 0)  # the label's check
        self.client = client
        self.dataset_id: str = dataset if isinstance(dataset, str) else str(dataset.id)
        self.optimizer = optimizer
        self.run = run
        self.accumulation = accumulation
        self.accumulation_bound: Accumulation = accumulation_bound
        self.delta = delta
        self.sample_rate: float = training_sample_rate(optimizer, data_loader, sample_rate)
        self.batches_per_epoch: int = len(data_loader) if batches is None else batches
        self.steps_per_epoch = steps_per_epoch(self.batches_per_epoch, accumulation)
        #: the noise multiplier the reservations were made for (σ, read down)
        self.noise_multiplier = noise_multiplier_down(optimizer.noise_multiplier)
        #: steps reserved and not yet taken
        self.remaining = 0
        #: steps taken under a reservation
        self.steps_taken = 0
        #: epoch → its admitted invocation
        self.invocations: dict[int, Any] = {}
        self._blocks: dict[int, int] = {}  # first epoch of a registration → its epochs
        self._add_noise: Callable[[], Any] = optimizer.add_noise
        earlier = getattr(optimizer.__dict__.get("add_noise"), "__self__", None)
        if isinstance(earlier, EpochGuard):  # a new guard replaces the optimizer's last one
            self._add_noise = earlier._add_noise
        optimizer.add_noise = self._guarded_add_noise

    def declaration(self, steps: int | None = None) -> Mechanism:
        """The declaration of ``steps`` optimizer steps (default: an epoch's)."""
        return declaration(
            self.noise_multiplier,
            self.sample_rate,
            self.steps_per_epoch if steps is None else steps,
            accumulation=self.accumulation,
            accumulation_bound=self.accumulation_bound,
            delta=self.delta,
        )

    def workload(self, epochs: int) -> list[dict[str, Any]]:
        """The plan of ``epochs`` epochs of this training, as an ``rdp`` workload."""
        return workload(
            self.noise_multiplier,
            self.sample_rate,
            self.steps_per_epoch,
            epochs,
            accumulation=self.accumulation,
            accumulation_bound=self.accumulation_bound,
        )

    def reserve_epoch(self, epoch: int) -> Any:
        """Register epoch ``epoch`` (numbered from 0) before it runs and allow its steps.
        Raises :class:`EpochRefused` on a refusal (nothing allowed). Registering an epoch this
        guard already registered allows nothing more; a resumed run's new guard gets the
        crashed run's invocation back and allows the epoch's steps again (see the module)."""
        return self.reserve_epochs(epoch, 1)

    def reserve_epochs(self, first: int, count: int) -> Any:
        """Register the ``count`` epochs from ``first`` on as one ``dp_sgd`` of count × the
        epoch's steps, and allow them. One declaration of the whole run can be admitted where
        its epochs one by one are not (a ``basic`` dataset charges one PLD for the run, an
        ``rdp`` dataset's PLD branch states it as one), but a refusal then stops the run
        before it starts. A resumed run registers the same block again (same ``first`` and
        ``count``) to get the same invocation; a block that overlaps another this guard
        registered is a ``ValueError``."""
        epochs = range(first, first + count)
        key = idempotency_key(self.dataset_id, self.run, first, count)
        if any(e in self.invocations for e in epochs):
            if self._blocks.get(first) == count and all(e in self.invocations for e in epochs):
                return self.invocations[first]
            raise ValueError(
                f"epochs {first}…{first + count - 1} overlap epochs this guard registered"
            )
        declared = self.declaration(count * self.steps_per_epoch)
        if noise_multiplier_down(self.optimizer.noise_multiplier) != self.noise_multiplier:
            raise ValueError(
                "the optimizer's noise multiplier changed since the guard was made: make a "
                "new guard (under a new run label) for the new noise"
            )
        try:
            invocation = self.client.register(self.dataset_id, declared, idempotency_key=key)
        except BudgetExceeded as exc:
            raise EpochRefused(exc, first, declared) from exc
        for epoch in epochs:
            self.invocations[epoch] = invocation
        self._blocks[first] = count
        self.remaining += count * self.steps_per_epoch  # optimizer steps, whatever the bound
        return invocation

    def detach(self) -> None:
        """Give the optimizer its own ``add_noise`` back (steps are no longer guarded)."""
        if self.optimizer.__dict__.get("add_noise") == self._guarded_add_noise:
            del self.optimizer.add_noise

    # ------------------------------------------------------------------ the step check
    def _refuse(self, why: str) -> None:
        for p in self.optimizer.params:
            p.grad = None
            p.grad_sample = None
            p.summed_grad = None
        raise StepRefused(f"step refused before its noise was drawn: {why}")

    def _guarded_add_noise(self) -> Any:
        optimizer = self.optimizer
        if self.remaining <= 0:
            self._refuse(
                "no step is reserved (call reserve_epoch before the epoch runs; an epoch the "
                "odometer refused allows none)"
            )
        if noise_multiplier_down(optimizer.noise_multiplier) < self.noise_multiplier:
            self._refuse(
                f"the noise multiplier {optimizer.noise_multiplier!r} is below the "
                f"{self.noise_multiplier} reserved"
            )
        batches = optimizer.accumulated_iterations
        if batches > self.accumulation:
            self._refuse(
                f"{batches} batches accumulated into one step where {self.accumulation} "
                "were reserved"
            )
        self.remaining -= 1
        self.steps_taken += 1
        return self._add_noise()
