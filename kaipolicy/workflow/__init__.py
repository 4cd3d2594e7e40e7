"""The policy workflow around the engine: `kaipolicy test` suites, `explain`, `diff`.

Everything here runs scenarios through `kaipolicy.simulate` and reads the audit log; nothing
here takes part in a scheduling cycle.
"""
