"""The in-memory model of one cycle: resources, nodes, tasks, jobs, queues, the snapshot.

Imports nothing else from kaipolicy; everything above builds on it.
"""
