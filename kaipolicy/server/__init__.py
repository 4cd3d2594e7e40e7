"""`kaipolicy run`, the scheduler process: the loop, hot reload of the rule bundle, leader
election, the HTTP endpoints, and writing each cycle's decisions to the cluster."""
