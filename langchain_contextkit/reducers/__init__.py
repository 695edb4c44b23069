"""Trajectory reducers: trim an agent's own working trajectory, per paradigm."""

__all__: list[str] = []
