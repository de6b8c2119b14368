"""The pytest face: the plugin's hook implementations, the collected nodes, options, the hooks users
implement, the per-session state, the scheduler that runs items concurrently, and the terminal report."""
