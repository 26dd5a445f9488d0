# TEMPORARY until app/charging.py moves here
from app.charging import ChargeTooExpensive, ChargeWorkers, ChargeWorkersBusy

__all__ = ["ChargeTooExpensive", "ChargeWorkers", "ChargeWorkersBusy"]
