"""Keeping a run's processes alive: the supervisor and the restart policy it applies."""

from .heartbeat import HeartbeatWatch
from .policy import RestartBudget, RestartPolicy
from .supervisor import DEAD, READY, RESTARTING, STARTING, STATES, STOPPED, Instance, Supervisor

__all__ = ["DEAD", "READY", "RESTARTING", "STARTING", "STATES", "STOPPED", "HeartbeatWatch", "Instance", "RestartBudget", "RestartPolicy", "Supervisor"]
