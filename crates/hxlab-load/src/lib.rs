//! hxlab-load: the load generator; one Driver per protocol, one recorder.
