//! hxlab-lab: experiment specs, matrix expansion, the runner and built-in scenarios.
