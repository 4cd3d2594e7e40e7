"""Built-ins that rules call: fair share over the queue tree, GPU-sharing choice, topology."""
