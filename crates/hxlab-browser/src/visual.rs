//! Visual metrics from the frames the browser painted: visual progress per frame, Speed
//! Index, the time the page became visually complete, and a filmstrip.
//!
//! Visual progress follows the idea of WebPageTest and speedline: per colour channel, a
//! histogram of the frame's pixels (near-white pixels left out, so the empty page's
//! background does not count as content). A frame's progress is how much of the distance
//! between the first frame's histograms (before anything was painted) and the last frame's
//! (the page as it ends up) it has covered, summed over every bin of the three channels:
//! `Σ min(|cur − first|, |last − first|) / Σ |last − first|`. Speed Index is the area above
//! the progress curve, `∫ (1 − progress(t)) dt` from the navigation start to the last frame,
//! in ms: a page that shows everything at once at 800 ms scores 800, one that shows half of
//! it at 200 ms and the rest at 800 ms scores 200 + 0.5 × 600 = 500.

use base64::Engine;
use hxlab_core::page::{FilmstripFrame, MAX_FILMSTRIP_FRAMES};

/// A pixel whose three channels are all at least this is "white" and not counted.
const WHITE: u8 = 250;

/// Filmstrip intervals tried in turn until the strip has at most [`MAX_FILMSTRIP_FRAMES`].
const FILMSTRIP_INTERVALS_MS: [f64; 8] = [
    100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 30000.0,
];

/// One frame the browser sent (`Page.screencastFrame`), as captured.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CapturedFrame {
    /// When the frame was painted, ms after the navigation started (negative: before it).
    pub at_ms: f64,
    /// The JPEG, base64 as the browser sent it.
    pub jpeg_base64: String,
}

/// What the frames of one page load add up to.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct VisualMetrics {
    /// Speed Index, ms.
    pub speed_index_ms: Option<f64>,
    /// The first frame that differs from the blank start, ms.
    pub first_visual_change_ms: Option<f64>,
    /// The first frame from which on progress stays at 100 %, ms.
    pub visually_complete_ms: Option<f64>,
    /// The filmstrip.
    pub filmstrip: Vec<FilmstripFrame>,
    /// Frames that could not be decoded (left out of the figures).
    pub undecodable: usize,
}

/// Per-channel colour histograms of one frame, near-white pixels left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    counts: Box<[[u32; 256]; 3]>,
}

impl Histogram {
    /// The histograms of packed RGB pixels (3 bytes each; a trailing partial pixel is ignored).
    pub fn from_rgb(rgb: &[u8]) -> Histogram {
        let mut counts = Box::new([[0u32; 256]; 3]);
        for px in rgb.chunks_exact(3) {
            if px.iter().all(|&c| c >= WHITE) {
                continue;
            }
            for (channel, &value) in px.iter().enumerate() {
                counts[channel][usize::from(value)] += 1;
            }
        }
        Histogram { counts }
    }

    /// Decodes a JPEG and takes its histograms; `None` if it does not decode.
    pub fn from_jpeg(jpeg: &[u8]) -> Option<Histogram> {
        let mut decoder = jpeg_decoder::Decoder::new(jpeg);
        let pixels = decoder.decode().ok()?;
        let info = decoder.info()?;
        match info.pixel_format {
            jpeg_decoder::PixelFormat::RGB24 => Some(Histogram::from_rgb(&pixels)),
            jpeg_decoder::PixelFormat::L8 => {
                let rgb: Vec<u8> = pixels.iter().flat_map(|&l| [l, l, l]).collect();
                Some(Histogram::from_rgb(&rgb))
            }
            _ => None,
        }
    }
}

/// Visual progress of `current` between `first` and `last`, from 0 to 1. When the first and
/// the last frame look the same, every frame is complete (1).
pub fn visual_progress(current: &Histogram, first: &Histogram, last: &Histogram) -> f64 {
    let (mut matched, mut total) = (0u64, 0u64);
    for channel in 0..3 {
        for bin in 0..256 {
            let f = i64::from(first.counts[channel][bin]);
            let to_current = (i64::from(current.counts[channel][bin]) - f).unsigned_abs();
            let to_last = (i64::from(last.counts[channel][bin]) - f).unsigned_abs();
            matched += to_current.min(to_last);
            total += to_last;
        }
    }
    if total == 0 {
        1.0
    } else {
        matched as f64 / total as f64
    }
}

/// Speed Index in ms from (time ms, progress 0..1) points sorted by time: the area above the
/// progress curve from 0 to the last point, progress holding its value between points and
/// being 0 before the first. Points before 0 count as painted at 0. `None` without points.
pub fn speed_index(points: &[(f64, f64)]) -> Option<f64> {
    let mut area = 0.0;
    let (mut t_prev, mut p_prev) = (0.0f64, 0.0f64);
    for &(t, p) in points {
        let t = t.max(0.0);
        area += (t - t_prev).max(0.0) * (1.0 - p_prev.clamp(0.0, 1.0));
        t_prev = t_prev.max(t);
        p_prev = p;
    }
    (!points.is_empty()).then_some(area)
}

/// The visual metrics of captured frames (sorted by time). The frame shown when the
/// navigation started is the last one painted at or before 0 (without one: a blank white
/// page, which every load here starts from); the last frame is the page as it ended up.
pub(crate) fn analyse(frames: &[CapturedFrame]) -> VisualMetrics {
    let engine = base64::engine::general_purpose::STANDARD;
    let mut decoded: Vec<(&CapturedFrame, Histogram)> = Vec::new();
    let mut undecodable = 0;
    for f in frames {
        match engine
            .decode(f.jpeg_base64.as_bytes())
            .ok()
            .and_then(|b| Histogram::from_jpeg(&b))
        {
            Some(h) => decoded.push((f, h)),
            None => undecodable += 1,
        }
    }
    // Frames before the navigation show the previous page: only the latest of them counts.
    // Without one, the tab showed what every load here starts from: about:blank, all white.
    let start = decoded.iter().rposition(|(f, _)| f.at_ms <= 0.0);
    let decoded = &decoded[start.unwrap_or(0)..];
    let blank = Histogram::from_rgb(&[]);
    let first = match start {
        Some(_) => &decoded[0].1,
        None => &blank,
    };
    let Some((_, last)) = decoded.last() else {
        return VisualMetrics {
            undecodable,
            ..VisualMetrics::default()
        };
    };
    let points: Vec<(f64, f64)> = decoded
        .iter()
        .map(|(f, h)| (f.at_ms.max(0.0), visual_progress(h, first, last)))
        .collect();
    let first_visual_change_ms = decoded
        .iter()
        .find(|(_, h)| h != first)
        .map(|(f, _)| f.at_ms.max(0.0));
    let complete_from = points
        .iter()
        .rposition(|&(_, p)| p < 1.0)
        .map_or(0, |i| i + 1);
    let visually_complete_ms = points.get(complete_from).map(|&(t, _)| t);
    let shown: Vec<(&CapturedFrame, f64)> = decoded
        .iter()
        .zip(&points)
        .map(|((f, _), &(_, p))| (*f, p))
        .collect();
    let end_ms = visually_complete_ms.unwrap_or(0.0);
    VisualMetrics {
        speed_index_ms: speed_index(&points),
        first_visual_change_ms,
        visually_complete_ms,
        filmstrip: filmstrip(&shown, end_ms),
        undecodable,
    }
}

/// The filmstrip: at each tick of a fixed interval from 0 to the first tick at or after
/// `end_ms`, the last frame painted by then; a tick is kept only when it shows a different
/// frame than the tick before (plus the first). The interval is the shortest of
/// [`FILMSTRIP_INTERVALS_MS`] that keeps at most [`MAX_FILMSTRIP_FRAMES`].
fn filmstrip(shown: &[(&CapturedFrame, f64)], end_ms: f64) -> Vec<FilmstripFrame> {
    let mut strip = Vec::new();
    for interval in FILMSTRIP_INTERVALS_MS {
        strip.clear();
        let ticks = (end_ms.max(0.0) / interval).ceil() as usize;
        let mut previous: Option<usize> = None;
        for k in 0..=ticks {
            let time_ms = k as f64 * interval;
            let Some(i) = shown.iter().rposition(|(f, _)| f.at_ms.max(0.0) <= time_ms) else {
                continue;
            };
            if previous == Some(i) {
                continue;
            }
            previous = Some(i);
            let (frame, progress) = shown[i];
            strip.push(FilmstripFrame {
                time_ms,
                painted_ms: frame.at_ms.max(0.0),
                progress_pct: (progress * 1000.0).round() / 10.0,
                jpeg_base64: frame.jpeg_base64.clone(),
            });
            if strip.len() > MAX_FILMSTRIP_FRAMES {
                break;
            }
        }
        if strip.len() <= MAX_FILMSTRIP_FRAMES {
            break;
        }
    }
    strip.truncate(MAX_FILMSTRIP_FRAMES);
    strip
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` pixels, the first `dark` of them black, the rest white.
    fn rgb(n: usize, dark: usize) -> Vec<u8> {
        (0..n)
            .flat_map(|i| if i < dark { [0, 0, 0] } else { [255, 255, 255] })
            .collect()
    }

    #[test]
    fn progress_is_the_share_of_the_histogram_distance_covered() {
        let blank = Histogram::from_rgb(&rgb(100, 0));
        let half = Histogram::from_rgb(&rgb(100, 25));
        let full = Histogram::from_rgb(&rgb(100, 50));
        assert_eq!(visual_progress(&blank, &blank, &full), 0.0);
        assert_eq!(visual_progress(&half, &blank, &full), 0.5);
        assert_eq!(visual_progress(&full, &blank, &full), 1.0);
        // Overshooting the final picture does not count beyond it.
        let more = Histogram::from_rgb(&rgb(100, 80));
        assert_eq!(visual_progress(&more, &blank, &full), 1.0);
        // Nothing ever changed: complete.
        assert_eq!(visual_progress(&blank, &blank, &blank), 1.0);
        // Near-white pixels are background.
        assert_eq!(Histogram::from_rgb(&[251, 252, 250]), blank);
    }

    #[test]
    fn speed_index_is_the_area_above_the_progress_curve() {
        // 0 → 50 % at 100 ms → 100 % at 300 ms: 100 × 1 + 200 × 0.5.
        assert_eq!(
            speed_index(&[(0.0, 0.0), (100.0, 0.5), (300.0, 1.0)]),
            Some(200.0)
        );
        // Everything at once at 800 ms.
        assert_eq!(speed_index(&[(-20.0, 0.0), (800.0, 1.0)]), Some(800.0));
        // Nothing before the first frame is painted.
        assert_eq!(speed_index(&[(400.0, 1.0)]), Some(400.0));
        assert_eq!(speed_index(&[]), None);
    }

    // Decoding real JPEGs is covered end to end by the Chromium tests (crates/hxlab/tests).
    fn frame(at_ms: f64, jpeg: &[u8]) -> CapturedFrame {
        CapturedFrame {
            at_ms,
            jpeg_base64: base64::engine::general_purpose::STANDARD.encode(jpeg),
        }
    }

    #[test]
    fn undecodable_frames_are_counted_and_left_out() {
        let m = analyse(&[frame(0.0, b"not a jpeg"), frame(10.0, b"\xff\xd8\xff")]);
        assert_eq!(m.undecodable, 2);
        assert_eq!(m.speed_index_ms, None);
        assert!(m.filmstrip.is_empty());
    }

    /// Two frames Chromium's screencast sent for hxlab's synthetic page: about:blank, then
    /// the page with its heading.
    const BLANK: &str = include_str!("testdata/frame-blank.jpg.b64");
    const PAGE: &str = include_str!("testdata/frame-page.jpg.b64");

    fn real(at_ms: f64, b64: &str) -> CapturedFrame {
        CapturedFrame {
            at_ms,
            jpeg_base64: b64.trim().to_string(),
        }
    }

    #[test]
    fn real_frames_decode_and_give_the_speed_index() {
        let m = analyse(&[
            real(-12.0, BLANK),
            real(-3.0, BLANK),
            real(150.0, PAGE),
            real(400.0, PAGE),
        ]);
        assert_eq!(m.undecodable, 0);
        assert_eq!(m.speed_index_ms, Some(150.0));
        assert_eq!(m.first_visual_change_ms, Some(150.0));
        assert_eq!(m.visually_complete_ms, Some(150.0));
        let strip: Vec<(f64, f64)> = m
            .filmstrip
            .iter()
            .map(|f| (f.time_ms, f.progress_pct))
            .collect();
        assert_eq!(strip, vec![(0.0, 0.0), (200.0, 100.0)]);
        // No frame before the navigation: the start is a blank white page.
        let m = analyse(&[real(80.0, PAGE)]);
        assert_eq!(m.speed_index_ms, Some(80.0));
        let blank = Histogram::from_jpeg(
            &base64::engine::general_purpose::STANDARD
                .decode(BLANK.trim())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(blank, Histogram::from_rgb(&[]), "about:blank is all white");
    }

    fn shown(times: &[f64]) -> Vec<CapturedFrame> {
        times
            .iter()
            .map(|&t| CapturedFrame {
                at_ms: t,
                jpeg_base64: format!("frame-at-{t}"),
            })
            .collect()
    }

    #[test]
    fn the_filmstrip_keeps_one_frame_per_change_at_fixed_ticks() {
        let frames = shown(&[-5.0, 130.0, 160.0, 420.0]);
        let with_progress: Vec<(&CapturedFrame, f64)> =
            frames.iter().zip([0.0, 0.3, 0.6, 1.0]).collect();
        let strip = filmstrip(&with_progress, 420.0);
        let ticks: Vec<(f64, &str)> = strip
            .iter()
            .map(|f| (f.time_ms, f.jpeg_base64.as_str()))
            .collect();
        assert_eq!(
            ticks,
            vec![
                (0.0, "frame-at--5"),
                (200.0, "frame-at-160"),
                (500.0, "frame-at-420")
            ]
        );
        assert_eq!(strip[1].progress_pct, 60.0);
        // A long load widens the interval instead of growing the strip.
        let many = shown(&(0..300).map(|i| f64::from(i) * 50.0).collect::<Vec<_>>());
        let with_progress: Vec<(&CapturedFrame, f64)> = many.iter().map(|f| (f, 0.5)).collect();
        let strip = filmstrip(&with_progress, 15_000.0);
        assert!(strip.len() <= MAX_FILMSTRIP_FRAMES && strip.len() > 10);
        assert_eq!(strip[1].time_ms, 500.0);
    }
}
