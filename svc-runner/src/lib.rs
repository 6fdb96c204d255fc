//! svc-runner: performs one execution for the controller, then exits.
