//! Network profile names, checked with `hxlab link`'s own lookup (hxlab_link::profiles) so an
//! experiment naming an unknown or ambiguous profile is refused before anything runs, with
//! the link's own list of names.

/// Checks a profile name as `hxlab link --profile` will read it; the error is the link's
/// one-line explanation (unknown, with the known names; or ambiguous, with the choices).
pub fn check(name: &str) -> Result<(), String> {
    hxlab_link::profiles::find(name)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Every profile name the link knows, qualified by family (`chrome-legacy:Regular 2G`).
pub fn all() -> Vec<String> {
    hxlab_link::profiles::all()
        .iter()
        .map(|p| p.qualified_name())
        .collect()
}
