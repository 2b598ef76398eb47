//! hxlab-report: exporters (markdown, csv, json, html with SVG charts) over RunResults.
