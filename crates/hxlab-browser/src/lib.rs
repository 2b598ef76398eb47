//! hxlab-browser: page loads in headless Chromium over the DevTools protocol.
