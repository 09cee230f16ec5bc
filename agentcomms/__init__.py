"""agentcomms: durable two-way communication between AI coding agents and their humans."""

__version__ = "0.1.0"
