"""Declarations from the DP libraries analysts already use.

- :mod:`odometer_client.adapters.opendp`: an OpenDP measurement and its ``d_in``;
- :mod:`odometer_client.adapters.dp_accounting`: a ``dp_accounting`` ``DpEvent``;
- :mod:`odometer_client.adapters.pipelinedp`: PipelineDP budget accountants that register the
  pipeline at ``compute_budgets()``, before any noise is drawn.
- :mod:`odometer_client.adapters.tumult`: a Tumult Analytics Session whose ``evaluate``
  registers each query before it is measured.
- :mod:`odometer_client.adapters.opacus`: a guard on an Opacus ``DPOptimizer`` that registers
  each epoch before it runs and refuses a step nothing reserved before its noise is drawn.
- :mod:`odometer_client.adapters.lightning`: a PyTorch Lightning callback that drives that guard
  and stops the trainer before the first epoch the odometer refuses.

The first two import their library when they are imported (``pip install
'privacy-odometer-client[opendp]'`` or ``[dp-accounting]``); the PipelineDP adapter imports
PipelineDP when an accountant is first used (``[pipelinedp]``), the Tumult adapter Tumult
Analytics only in ``OdometerSession.from_dataframe``, the Opacus adapter neither Opacus nor
PyTorch (it works on the optimizer's attributes), the Lightning adapter Lightning only when
``EpochBudgetCallback`` is first asked for; this package imports none.
"""
