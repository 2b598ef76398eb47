//! hxlab-serve: the origin server (h1, h1+TLS, h2, h2c, h3), its routes and push.
