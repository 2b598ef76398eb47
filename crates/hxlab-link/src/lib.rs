//! hxlab-link: packet-level link emulation; a sans-IO `model` and a `shell` (netns, TUN, relay).
