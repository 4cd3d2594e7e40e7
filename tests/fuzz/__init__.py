"""Random-scenario fuzzing: a seeded generator of schema-valid scenarios and the invariants every
simulation of one must keep (`generate`, `properties`, `minimise`)."""
