//! Hand-written SVG: the few shapes the charts need, a scale with round ticks, and one fixed
//! colour and marker per protocol. Written here rather than through a plotting library so
//! the layout rules hold by construction: legends sit outside every plotting area, panels
//! share one style, and each protocol looks the same in every chart.

use std::fmt::Write;

/// Escapes text for SVG and HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A marker shape, so series stay apart without colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    /// ●
    Circle,
    /// ■
    Square,
    /// ▲
    Triangle,
    /// ◆
    Diamond,
    /// ▼
    TriangleDown,
    /// ✚
    Cross,
}

/// How a series is drawn: colour and marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// CSS colour.
    pub colour: &'static str,
    /// Marker shape.
    pub marker: Marker,
}

/// The Okabe–Ito colours (distinct under the common colour-vision deficiencies), each
/// protocol with its own colour and marker in every chart of every report.
const PROTOCOL_STYLES: [(&str, Style); 5] = [
    (
        "h1",
        Style {
            colour: "#E69F00",
            marker: Marker::Circle,
        },
    ),
    (
        "h1-tls",
        Style {
            colour: "#CC79A7",
            marker: Marker::TriangleDown,
        },
    ),
    (
        "h2",
        Style {
            colour: "#0072B2",
            marker: Marker::Square,
        },
    ),
    (
        "h2c",
        Style {
            colour: "#56B4E9",
            marker: Marker::Diamond,
        },
    ),
    (
        "h3",
        Style {
            colour: "#009E73",
            marker: Marker::Triangle,
        },
    ),
];

/// Styles for series that are not one of the five protocols, in order of appearance.
const OTHER_STYLES: [Style; 6] = [
    Style {
        colour: "#D55E00",
        marker: Marker::Cross,
    },
    Style {
        colour: "#000000",
        marker: Marker::Circle,
    },
    Style {
        colour: "#999999",
        marker: Marker::Square,
    },
    Style {
        colour: "#8C6D00",
        marker: Marker::Diamond,
    },
    Style {
        colour: "#D55E00",
        marker: Marker::Triangle,
    },
    Style {
        colour: "#000000",
        marker: Marker::TriangleDown,
    },
];

/// The style of each series label, the protocols' fixed, the others' by order.
pub fn styles(labels: &[String]) -> Vec<Style> {
    let mut other = 0;
    labels
        .iter()
        .map(|l| match PROTOCOL_STYLES.iter().find(|(p, _)| p == l) {
            Some((_, s)) => *s,
            None => {
                let s = OTHER_STYLES[other % OTHER_STYLES.len()];
                other += 1;
                s
            }
        })
        .collect()
}

/// The fixed style of a protocol label (None for other labels).
pub fn protocol_style(label: &str) -> Option<Style> {
    PROTOCOL_STYLES
        .iter()
        .find(|(p, _)| *p == label)
        .map(|(_, s)| *s)
}

/// Writes a marker centred at (x, y) with half-size `r`.
pub fn marker(o: &mut String, m: Marker, x: f64, y: f64, r: f64, colour: &str, extra: &str) {
    let _ = match m {
        Marker::Circle => write!(o, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" fill=\"{colour}\"{extra}/>"),
        Marker::Square => write!(
            o,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"{extra}/>",
            x - r * 0.9,
            y - r * 0.9,
            r * 1.8,
            r * 1.8
        ),
        Marker::Triangle => write!(
            o,
            "<path d=\"M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" fill=\"{colour}\"{extra}/>",
            y - r * 1.15,
            x + r * 1.1,
            y + r * 0.8,
            x - r * 1.1,
            y + r * 0.8
        ),
        Marker::TriangleDown => write!(
            o,
            "<path d=\"M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" fill=\"{colour}\"{extra}/>",
            y + r * 1.15,
            x + r * 1.1,
            y - r * 0.8,
            x - r * 1.1,
            y - r * 0.8
        ),
        Marker::Diamond => write!(
            o,
            "<path d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\" fill=\"{colour}\"{extra}/>",
            y - r * 1.2,
            x + r * 1.2,
            y + r * 1.2,
            x - r * 1.2
        ),
        Marker::Cross => write!(
            o,
            "<path d=\"M{:.1} {y:.1}H{:.1}M{x:.1} {:.1}V{:.1}\" stroke=\"{colour}\" stroke-width=\"2.5\"{extra}/>",
            x - r,
            x + r,
            y - r,
            y + r
        ),
    };
}

/// Writes a text element.
pub fn text(o: &mut String, x: f64, y: f64, anchor: &str, size: f64, s: &str, extra: &str) {
    let _ = write!(
        o,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" font-size=\"{size}\"{extra}>{}</text>",
        esc(s)
    );
}

/// Writes a line.
pub fn line(o: &mut String, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, extra: &str) {
    let _ = write!(
        o,
        "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\"{extra}/>"
    );
}

/// A linear scale from a data range onto pixels, with round ticks.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Data at the start of the range.
    pub lo: f64,
    /// Data at the end of the range.
    pub hi: f64,
    /// Pixel of `lo`.
    pub p0: f64,
    /// Pixel of `hi`.
    pub p1: f64,
}

impl Scale {
    /// Pixel of a data value.
    pub fn at(&self, v: f64) -> f64 {
        if self.hi == self.lo {
            return (self.p0 + self.p1) / 2.0;
        }
        self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)
    }

    /// Round tick values inside the range, about `n` of them.
    pub fn ticks(&self, n: usize) -> Vec<f64> {
        nice_ticks(self.lo, self.hi, n)
    }
}

/// Round values (1, 2, 2.5 or 5 × 10^k steps) between `lo` and `hi`, about `n` of them.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater)
        || !lo.is_finite()
        || !hi.is_finite()
    {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil();
    let mut out = Vec::new();
    for i in 0..50 {
        // Multiples of the step, rounded so 0.6 is not 0.6000000000000001.
        let v = ((first + i as f64) * step * 1e9).round() / 1e9;
        if v > hi + step * 1e-9 {
            break;
        }
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
    }
    out
}

/// The top of a y range that starts at zero: the data maximum with a little headroom,
/// rounded up to a tick.
pub fn nice_max(max: f64) -> f64 {
    if max.is_nan() || max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let t = nice_ticks(0.0, max * 1.05, 5);
    let step = if t.len() > 1 { t[1] - t[0] } else { max };
    (max * 1.05 / step).ceil() * step
}

/// A tick label: short, no trailing zeros.
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside() {
        assert_eq!(nice_ticks(0.0, 1.0, 5), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        let t = nice_ticks(0.0, 437.0, 5);
        assert_eq!(t.first(), Some(&0.0));
        assert!(
            t.windows(2).all(|w| (w[1] - w[0] - 100.0).abs() < 1e-9),
            "{t:?}"
        );
        assert_eq!(nice_max(0.95), 1.0);
        assert_eq!(tick_label(25000.0), "25k");
        assert_eq!(tick_label(0.25), "0.25");
    }

    #[test]
    fn every_protocol_has_its_own_colour_and_marker() {
        let labels: Vec<String> = ["h1", "h1-tls", "h2", "h2c", "h3", "nginx"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let s = styles(&labels);
        for i in 0..s.len() {
            for j in 0..i {
                assert!(
                    s[i].colour != s[j].colour || s[i].marker != s[j].marker,
                    "{i} {j}"
                );
            }
        }
        for i in 0..5 {
            for j in 0..i {
                assert_ne!(s[i].colour, s[j].colour);
                assert_ne!(s[i].marker, s[j].marker);
            }
        }
    }
}
