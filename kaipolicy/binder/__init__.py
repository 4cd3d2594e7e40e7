"""The binder (`kaipolicy binder`): carries out the scheduler's BindRequests on the cluster."""
