"""The chaos suite: fault injection, a recorded workload, and the checks of its history."""
