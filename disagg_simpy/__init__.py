"""disagg_simpy: why and when an LLM service should split prompt reading from reply writing."""

__version__ = "0.1.0"
