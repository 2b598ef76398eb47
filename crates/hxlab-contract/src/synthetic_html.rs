//! [`SyntheticHtml`]: the one generator of the synthetic page, for both places that serve
//! it — `hxlab serve`'s `/page` endpoint (built per request, with push and 103 Early Hints)
//! and the static page that `hxlab page --synthetic` and the lab's browser workload write
//! under `/static/`. Both are async scripts of `/bytes/SIZE`; they differ only where the
//! origin spends the delay, which [`PageDelay`] names.

use std::time::Duration;

/// Where the origin spends a synthetic page's delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PageDelay {
    /// On the document: `/page?delay=` holds the HTML back and its resources come at once.
    /// The page titles itself "hxlab page".
    Document,
    /// On each resource: every script is `/bytes/SIZE?delay=MS`. The page titles itself
    /// "hxlab synthetic page" and says the delay.
    EachResource(Duration),
}

/// The synthetic page: `n` async scripts of `size` bytes. Scripts, not images: a browser
/// reads a script to its end, while it abandons an image it cannot decode after a few KiB
/// (which would cut the transfer short and under-count time).
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticHtml<'a> {
    /// Sub-resources.
    pub n: u64,
    /// Bytes each.
    pub size: u64,
    /// Where the origin waits.
    pub delay: PageDelay,
    /// An origin (`https://host:port`) for the odd resources; None: all on the page's own.
    pub second_origin: Option<&'a str>,
    /// How long the browser may cache each resource (`max_age=`, seconds); None: not
    /// cacheable.
    pub max_age_s: Option<u64>,
}

impl SyntheticHtml<'_> {
    /// The static page of `n` resources of `size` bytes, each delayed `delay` at the origin,
    /// all on the page's own origin and not cacheable.
    pub fn each_delayed(n: u64, size: u64, delay: Duration) -> SyntheticHtml<'static> {
        SyntheticHtml {
            n,
            size,
            delay: PageDelay::EachResource(delay),
            second_origin: None,
            max_age_s: None,
        }
    }

    /// `hxlab serve`'s `/page` of `n` resources of `size` bytes: the delay on the document,
    /// all resources on the page's own origin and not cacheable.
    pub fn document_delayed(n: u64, size: u64) -> SyntheticHtml<'static> {
        SyntheticHtml {
            delay: PageDelay::Document,
            ..SyntheticHtml::each_delayed(n, size, Duration::ZERO)
        }
    }

    /// The resources' URLs (paths on the page's origin, or absolute on the second one),
    /// not HTML-escaped: what a push or a `Link` header names.
    pub fn resources(&self) -> Vec<String> {
        let mut query = String::new();
        if let PageDelay::EachResource(d) = self.delay {
            query.push_str(&format!("delay={}&", millis(d)));
        }
        if let Some(s) = self.max_age_s {
            query.push_str(&format!("max_age={s}&"));
        }
        (0..self.n)
            .map(|i| {
                let base = match self.second_origin {
                    Some(o) if i % 2 == 1 => o,
                    _ => "",
                };
                format!("{base}/bytes/{}?{query}r={i}", self.size)
            })
            .collect()
    }

    /// The HTML document.
    pub fn html(&self) -> String {
        let (n, size) = (self.n, self.size);
        let resources = self.resources();
        let mut html = String::with_capacity(300 + resources.len() * 70);
        match self.delay {
            PageDelay::Document => html.push_str(&format!(
                "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>hxlab page</title></head><body>\n\
                 <p>{n} resources of {size} bytes</p>\n"
            )),
            PageDelay::EachResource(d) => html.push_str(&format!(
                "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>hxlab synthetic page</title></head><body>\n\
                 <h1>hxlab synthetic page</h1>\n<p>{n} resources of {size} bytes, each delayed {} ms at the origin</p>\n",
                millis(d)
            )),
        }
        for url in &resources {
            let src = url.replace('&', "&amp;");
            html.push_str(&format!("<script async src=\"{src}\"></script>\n"));
        }
        html.push_str("</body></html>\n");
        html
    }
}

/// A delay in milliseconds as the origin's `delay=` parameter reads it (fractions kept).
fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_static_page_asks_for_every_resource_with_its_delay() {
        let html = SyntheticHtml::each_delayed(3, 100, Duration::from_millis(20)).html();
        assert_eq!(html.matches("<script async").count(), 3);
        assert!(
            html.contains("src=\"/bytes/100?delay=20&amp;r=2\""),
            "{html}"
        );
        assert!(
            html.contains("<title>hxlab synthetic page</title>"),
            "{html}"
        );
    }

    #[test]
    fn the_static_page_with_two_origins_and_a_cache_lifetime() {
        let page = SyntheticHtml {
            second_origin: Some("https://b.hxlab.test:1"),
            max_age_s: Some(60),
            ..SyntheticHtml::each_delayed(2, 10, Duration::from_micros(1500))
        };
        assert_eq!(
            page.html(),
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>hxlab synthetic page</title></head><body>\n\
             <h1>hxlab synthetic page</h1>\n<p>2 resources of 10 bytes, each delayed 1.5 ms at the origin</p>\n\
             <script async src=\"/bytes/10?delay=1.5&amp;max_age=60&amp;r=0\"></script>\n\
             <script async src=\"https://b.hxlab.test:1/bytes/10?delay=1.5&amp;max_age=60&amp;r=1\"></script>\n\
             </body></html>\n"
        );
    }

    #[test]
    fn the_endpoint_page_names_its_resources_without_a_delay() {
        let page = SyntheticHtml::document_delayed(2, 1000);
        assert_eq!(page.resources(), ["/bytes/1000?r=0", "/bytes/1000?r=1"]);
        assert_eq!(
            page.html(),
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>hxlab page</title></head><body>\n\
             <p>2 resources of 1000 bytes</p>\n\
             <script async src=\"/bytes/1000?r=0\"></script>\n\
             <script async src=\"/bytes/1000?r=1\"></script>\n\
             </body></html>\n"
        );
    }
}
