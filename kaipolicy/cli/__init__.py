"""The `kaipolicy` command line: one module per subcommand."""
