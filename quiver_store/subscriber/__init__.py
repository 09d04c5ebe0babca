"""Subscribers, the shared ack log and per-subscriber progress (see docs/formats.md, "Ack log")."""

from .hub import SubscriberHub
from .registry import SubscriberRegistry, validate_name
from .state import Outcome
from .subscription import Delivery, Subscription

__all__ = ["Delivery", "Outcome", "SubscriberHub", "SubscriberRegistry", "Subscription", "validate_name"]
