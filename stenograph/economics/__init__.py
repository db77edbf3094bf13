"""What model calls cost: a simulation of Anthropic's prompt cache and a price table.

``simulate(requests, prices)`` runs request sequences through a simulated cache;
``Ledger`` collects a replay's calls and prices them as recorded and with the preset.
"""

from .cache import CallCost, PromptCache, Request, Segment, simulate
from .ledger import Call, Economics, Ledger
from .prices import ModelPrice, PriceError, PriceTable, load_prices
from .segments import Segmenter, Sizer

__all__ = [
    "Call",
    "CallCost",
    "Economics",
    "Ledger",
    "ModelPrice",
    "PriceError",
    "PriceTable",
    "PromptCache",
    "Request",
    "Segment",
    "Segmenter",
    "Sizer",
    "load_prices",
    "simulate",
]
