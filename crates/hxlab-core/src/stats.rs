//! Statistics over repetitions: median, mean, stdev, bootstrap confidence intervals, and the
//! Mann-Whitney U test. Deterministic: the bootstrap uses a fixed-seed generator.

use crate::SplitMix64;

/// Arithmetic mean; NaN for an empty slice.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample standard deviation (n-1); 0 for fewer than two values.
pub fn stdev(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// Median (mean of the two middle values for an even count); NaN for an empty slice.
pub fn median(xs: &[f64]) -> f64 {
    quantile(xs, 0.5)
}

/// Linear-interpolated quantile (type 7, as R and NumPy default); NaN for an empty slice.
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Percentile-bootstrap confidence interval of `statistic` at `level` (e.g. 0.95).
pub fn bootstrap_ci(
    xs: &[f64],
    level: f64,
    resamples: usize,
    statistic: fn(&[f64]) -> f64,
) -> (f64, f64) {
    if xs.len() < 2 {
        let v = statistic(xs);
        return (v, v);
    }
    let mut rng = SplitMix64::new(0x005E_ED0F_4A1B);
    let mut stats = Vec::with_capacity(resamples);
    let mut sample = vec![0.0; xs.len()];
    for _ in 0..resamples {
        for s in sample.iter_mut() {
            *s = xs[rng.below(xs.len())];
        }
        stats.push(statistic(&sample));
    }
    let alpha = (1.0 - level) / 2.0;
    (quantile(&stats, alpha), quantile(&stats, 1.0 - alpha))
}

/// Bootstrap CI of the ratio of medians `median(a) / median(b)`.
pub fn ratio_ci(a: &[f64], b: &[f64], level: f64, resamples: usize) -> (f64, f64) {
    if a.is_empty() || b.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = SplitMix64::new(0xA11CE);
    let mut ratios = Vec::with_capacity(resamples);
    let mut sa = vec![0.0; a.len()];
    let mut sb = vec![0.0; b.len()];
    for _ in 0..resamples {
        for s in sa.iter_mut() {
            *s = a[rng.below(a.len())];
        }
        for s in sb.iter_mut() {
            *s = b[rng.below(b.len())];
        }
        ratios.push(median(&sa) / median(&sb));
    }
    let alpha = (1.0 - level) / 2.0;
    (quantile(&ratios, alpha), quantile(&ratios, 1.0 - alpha))
}

/// Two-sided Mann-Whitney U test with the normal approximation (tie-corrected).
/// Returns (U of `a`, p-value).
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> (f64, f64) {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return (f64::NAN, 1.0);
    }
    let mut all: Vec<(f64, usize)> = a
        .iter()
        .map(|&x| (x, 0))
        .chain(b.iter().map(|&x| (x, 1)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut ranks = vec![0.0; n];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for r in ranks.iter_mut().take(j + 1).skip(i) {
            *r = avg;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let r1: f64 = all
        .iter()
        .zip(&ranks)
        .filter(|(x, _)| x.1 == 0)
        .map(|(_, r)| r)
        .sum();
    let u1 = r1 - n1 * (n1 + 1.0) / 2.0;
    let mu = n1 * n2 / 2.0;
    let nn = n1 + n2;
    let sigma = (n1 * n2 / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)))).sqrt();
    if sigma == 0.0 {
        return (u1, 1.0);
    }
    let z = ((u1 - mu).abs() - 0.5).max(0.0) / sigma;
    (u1, (2.0 * (1.0 - normal_cdf(z))).clamp(0.0, 1.0))
}

/// Standard normal CDF via the complementary error function (Abramowitz-Stegun 7.1.26).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let y = t
        * (-x * x - 1.26551223
            + t * (1.00002368
                + t * (0.37409196
                    + t * (0.09678418
                        + t * (-0.18628806
                            + t * (0.27886807
                                + t * (-1.13520398
                                    + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
            .exp();
    if x >= 0.0 {
        y
    } else {
        2.0 - y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&xs), 5.0);
        assert!((stdev(&xs) - 2.138089935).abs() < 1e-6);
        assert_eq!(median(&xs), 4.5);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.25), 1.75);
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-4);
    }

    #[test]
    fn mann_whitney_separates_and_ties() {
        let a: Vec<f64> = (0..10).map(|i| i as f64).collect();
        let b: Vec<f64> = (0..10).map(|i| 100.0 + i as f64).collect();
        let (u, p) = mann_whitney_u(&a, &b);
        assert_eq!(u, 0.0);
        assert!(p < 0.001, "p = {p}");
        let (_, p_same) = mann_whitney_u(&a, &a);
        assert!(p_same > 0.9);
    }

    #[test]
    fn bootstrap_brackets_median() {
        let xs: Vec<f64> = (1..=50).map(|i| i as f64).collect();
        let (lo, hi) = bootstrap_ci(&xs, 0.95, 2000, median);
        assert!(
            lo < 25.5 && 25.5 < hi && lo > 15.0 && hi < 36.0,
            "{lo} {hi}"
        );
        let (rlo, rhi) = ratio_ci(&xs, &xs, 0.95, 500);
        assert!(rlo <= 1.0 && rhi >= 1.0);
    }
}
