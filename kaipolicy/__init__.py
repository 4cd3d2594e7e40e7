"""kaipolicy: KAI Scheduler's scheduling cycle as a declarative policy engine."""

__version__ = "0.1.0"
