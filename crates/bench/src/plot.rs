//! Figures, each written as SVG and PNG: the ladder's bar charts and `glass scale`'s lines.
//!
//! The ladder's ([`ladder_figures`]):
//!
//! - `staircase` (the 2008 paper's Figures 1 and 7): instructions per New-Order and per
//!   Payment at each rung, log scale, labelled with what each rung removed;
//! - `breakdown-new-order`, `breakdown-payment` (Figures 5 and 6): per rung, instructions
//!   stacked by operation;
//! - `instructions-vs-time` (Figure 8): per rung, the share of rung 0's instructions it
//!   removed beside the share of rung 0's time.
//!
//! `glass scale`'s ([`line_figure`], drawn from [`Lines`]): throughput against threads on
//! log-log axes, a solid line with markers per configuration (with error bars when several
//! rounds give a range) and its linear line, dashed in the same colour.
//!
//! Both kinds are a [`Figure`], which [`write_figure`] draws once per back-end, so that every
//! figure shares the size, palette, font and tick labels.
//!
//! Text needs a TrueType font: DejaVu Sans is loaded from [`FONT_PATH`] at run time. Without
//! it no figure can lay out its labels; the figures are skipped with a note and the tables
//! are still written.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::ladder::measure::Phase;
use crate::ladder::report::{instructions, removed_shares};
use crate::ladder::LadderResult;

/// The font the figures use.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

const SIZE: (u32, u32) = (1400, 760);
/// Ten distinct colours, grey last (the operation breakdown's "other" is its tenth series).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
];

/// Registers the font once; `Err` says why figures cannot be drawn.
fn font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let bytes = std::fs::read(FONT_PATH).map_err(|e| {
                format!("font {FONT_PATH} not readable ({e}); install fonts-dejavu-core")
            })?;
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{FONT_PATH} is not a usable TrueType font"))
        })
        .clone()
}

/// One bar chart: a value per (series, category), grouped side by side or stacked.
struct Bars<'a> {
    title: &'a str,
    y_label: &'a str,
    categories: Vec<String>,
    series: Vec<(String, Vec<f64>)>,
    stacked: bool,
    log: bool,
}

/// Something drawn the same way on every back-end (SVG, PNG).
trait Figure {
    fn draw<DB: DrawingBackend>(&self, area: DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static;
}

impl Figure for Bars<'_> {
    fn draw<DB: DrawingBackend>(&self, area: DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        draw_bars(area, self)
    }
}

fn draw_bars<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    chart: &Bars<'_>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("{e:?}");
    area.fill(&WHITE).map_err(err)?;
    let n = chart.categories.len().max(1);
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for i in 0..n {
        let values = chart.series.iter().filter_map(|(_, v)| v.get(i).copied());
        if chart.stacked {
            let sum: f64 = values.filter(|v| *v > 0.0).sum();
            hi = hi.max(sum);
            lo = lo.min(0.0);
        } else {
            for v in values {
                hi = hi.max(v);
                lo = lo.min(v);
            }
        }
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let categories = chart.categories.clone();
    let x_fmt = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < categories.len() {
            categories[i as usize].clone()
        } else {
            String::new()
        }
    };
    let mut builder = ChartBuilder::on(&area);
    builder
        .caption(chart.title, ("sans-serif", 26))
        .margin(20)
        .x_label_area_size(70)
        .y_label_area_size(110);
    let x_range = -0.5f64..(n as f64 - 0.5);
    let series_count = chart.series.len().max(1);
    let width = 0.8;
    let bar = |i: usize, s: usize| -> (f64, f64) {
        if chart.stacked {
            (i as f64 - width / 2.0, i as f64 + width / 2.0)
        } else {
            let w = width / series_count as f64;
            let left = i as f64 - width / 2.0 + w * s as f64;
            (left, left + w)
        }
    };
    if chart.log {
        let lo = chart
            .series
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .filter(|v| *v > 0.0)
            .fold(f64::MAX, f64::min)
            .min(hi)
            / 2.0;
        let mut ctx = builder
            .build_cartesian_2d(x_range, (lo..hi * 2.0).log_scale())
            .map_err(err)?;
        ctx.configure_mesh()
            .x_labels(n)
            .x_label_formatter(&x_fmt)
            .y_desc(chart.y_label)
            .y_label_formatter(&|v: &f64| tick_label(*v))
            .label_style(("sans-serif", 15))
            .disable_x_mesh()
            .draw()
            .map_err(err)?;
        for (s, (name, values)) in chart.series.iter().enumerate() {
            let color = PALETTE[s % PALETTE.len()];
            ctx.draw_series(
                values
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| **v > 0.0)
                    .map(|(i, v)| {
                        let (l, r) = bar(i, s);
                        Rectangle::new([(l, lo), (r, *v)], color.filled())
                    }),
            )
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        }
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 16))
            .draw()
            .map_err(err)?;
    } else {
        // Side-by-side bars get a quarter of the range as headroom, so that the legend in
        // the top right corner has a band of its own above them (stacked bars fall from left
        // to right along the ladder, and leave it free).
        let top = (hi - lo) * if chart.stacked { 0.05 } else { 0.25 };
        let pad = (hi - lo) * 0.05;
        let mut ctx = builder
            .build_cartesian_2d(
                x_range,
                (lo.min(0.0) - if lo < 0.0 { pad } else { 0.0 })..hi + top,
            )
            .map_err(err)?;
        ctx.configure_mesh()
            .x_labels(n)
            .x_label_formatter(&x_fmt)
            .y_desc(chart.y_label)
            .y_label_formatter(&|v: &f64| tick_label(*v))
            .label_style(("sans-serif", 15))
            .disable_x_mesh()
            .draw()
            .map_err(err)?;
        let mut base = vec![0.0f64; n];
        for (s, (name, values)) in chart.series.iter().enumerate() {
            let color = PALETTE[s % PALETTE.len()];
            let rects: Vec<_> = values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let (l, r) = bar(i, s);
                    let (y0, y1) = if chart.stacked {
                        let y0 = base[i];
                        base[i] += v.max(0.0);
                        (y0, base[i])
                    } else {
                        (0.0, *v)
                    };
                    Rectangle::new([(l, y0), (r, y1)], color.filled())
                })
                .collect();
            ctx.draw_series(rects)
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
                });
        }
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 16))
            .draw()
            .map_err(err)?;
    }
    area.present().map_err(err)?;
    Ok(())
}

/// A y-axis tick: thousands as "20 K", whole numbers without a fraction ("45", not "45.0"),
/// the rest with one decimal.
fn tick_label(v: f64) -> String {
    let number = |x: f64| {
        let decimals = usize::from((x - x.round()).abs() >= 1e-9);
        format!("{x:.decimals$}")
    };
    if v.abs() >= 1000.0 {
        format!("{} K", number(v / 1000.0))
    } else {
        number(v)
    }
}

/// Writes `dir/name.svg` and `dir/name.png`.
fn write_figure(dir: &Path, name: &str, figure: &impl Figure) -> Result<(), String> {
    let svg = dir.join(format!("{name}.svg"));
    figure
        .draw(SVGBackend::new(&svg, SIZE).into_drawing_area())
        .map_err(|e| format!("{}: {e}", svg.display()))?;
    let png = dir.join(format!("{name}.png"));
    figure
        .draw(BitMapBackend::new(&png, SIZE).into_drawing_area())
        .map_err(|e| format!("{}: {e}", png.display()))?;
    Ok(())
}

/// Whether figures can be drawn; if not, says why on stderr (the caller skips its figures
/// and still writes its tables).
fn font_or_note() -> bool {
    match font() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("note: figures skipped: {why}");
            false
        }
    }
}

fn rung_names(result: &LadderResult) -> Vec<String> {
    result
        .rungs
        .iter()
        .map(|r| format!("{} {}", r.rung, r.switch.as_deref().unwrap_or("full")))
        .collect()
}

/// Draws every figure of the ladder into `dir`; returns the names written. A missing font
/// skips the figures with a note on stderr instead of failing the run.
pub fn ladder_figures(result: &LadderResult, dir: &Path) -> anyhow::Result<Vec<String>> {
    if !font_or_note() {
        return Ok(Vec::new());
    }
    let mut written = Vec::new();
    let names = rung_names(result);
    let have = |p: Phase| result.config.phases.contains(&p);

    let mut stairs = Vec::new();
    for p in [Phase::NewOrder, Phase::Payment, Phase::Mix] {
        if have(p) && (p != Phase::Mix || result.config.phases.len() == 1) {
            let v: Vec<f64> = instructions(result, p)
                .iter()
                .map(|v| v.unwrap_or(0.0))
                .collect();
            stairs.push((format!("{} instructions per transaction", p.name()), v));
        }
    }
    let charts: Vec<(String, Bars<'_>)> = {
        let mut c = vec![(
            "staircase".to_string(),
            Bars {
                title: "Instructions per transaction as components are removed (Figures 1, 7)",
                y_label: "instructions per transaction (log)",
                categories: names.clone(),
                series: stairs,
                stacked: false,
                log: true,
            },
        )];
        for (p, file, title) in [
            (
                Phase::NewOrder,
                "breakdown-new-order",
                "New-Order instructions by operation (Figure 5)",
            ),
            (
                Phase::Payment,
                "breakdown-payment",
                "Payment instructions by operation (Figure 6)",
            ),
        ] {
            if !have(p) {
                continue;
            }
            let ops = crate::callgrind::Operation::ALL;
            let series = ops
                .iter()
                .enumerate()
                .map(|(j, op)| {
                    let v = result
                        .rungs
                        .iter()
                        .map(|r| {
                            r.phase(p)
                                .and_then(|m| m.by_operation.get(j))
                                .map_or(0.0, |(_, v)| *v)
                        })
                        .collect();
                    (op.name().to_string(), v)
                })
                .collect();
            c.push((
                file.to_string(),
                Bars {
                    title,
                    y_label: "instructions per transaction",
                    categories: names.clone(),
                    series,
                    stacked: true,
                    log: false,
                },
            ));
        }
        let shares = removed_shares(result);
        c.push((
            "instructions-vs-time".to_string(),
            Bars {
                title: "Share of rung 0 removed by each rung: instructions vs time (Figure 8)",
                y_label: "share of rung 0 (%)",
                categories: shares.iter().map(|(k, _, _)| names[*k].clone()).collect(),
                series: vec![
                    (
                        "instructions".to_string(),
                        shares
                            .iter()
                            .map(|(_, i, _)| i.unwrap_or(0.0) * 100.0)
                            .collect(),
                    ),
                    (
                        "time".to_string(),
                        shares
                            .iter()
                            .map(|(_, _, t)| t.unwrap_or(0.0) * 100.0)
                            .collect(),
                    ),
                ],
                stacked: false,
                log: false,
            },
        ));
        c
    };
    for (name, chart) in &charts {
        write_figure(dir, name, chart).map_err(|e| anyhow::anyhow!("draw {name}: {e}"))?;
        written.push(name.clone());
    }
    Ok(written)
}

/// One line of a [`Lines`] figure.
#[derive(Clone, Debug)]
pub struct Line {
    /// The legend's text.
    pub name: String,
    /// (x, y) in order of x.
    pub points: Vec<(f64, f64)>,
    /// Per point, the lowest and highest y measured, drawn as an error bar; empty for none.
    pub ranges: Vec<(f64, f64)>,
    /// Index into the palette: a measured line and its reference line share a colour.
    pub color: usize,
    /// A reference line: dashed, without markers.
    pub dashed: bool,
}

/// A line chart on log-log axes: a line of constant slope there is a power law, so linear
/// scaling (`y = c·x`) is a straight line whatever `c`, and lines a thousand times apart
/// (in memory, on disk) share one figure. The x axis is labelled at powers of two.
#[derive(Clone, Debug)]
pub struct Lines {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
}

/// The share of the plot's height above the highest value, left to the legend.
const LEGEND_BAND: f64 = 0.3;

impl Figure for Lines {
    fn draw<DB: DrawingBackend>(&self, area: DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("{e:?}");
        area.fill(&WHITE).map_err(err)?;
        // x is drawn as log2(x) on a linear axis, so that its ticks fall on powers of two.
        let xs = || {
            self.lines
                .iter()
                .flat_map(|l| l.points.iter().map(|(x, _)| *x))
                .filter(|x| *x > 0.0)
        };
        let x_lo = xs().fold(f64::INFINITY, f64::min);
        let x_hi = xs().fold(0.0f64, f64::max);
        let (x_lo, x_hi) = if x_lo <= x_hi {
            (x_lo.log2(), x_hi.log2())
        } else {
            (0.0, 0.0)
        };
        let ys = || {
            self.lines
                .iter()
                .flat_map(|l| {
                    let points = l.points.iter().map(|(_, y)| *y);
                    points.chain(l.ranges.iter().flat_map(|(low, high)| [*low, *high]))
                })
                .filter(|y| y.is_finite() && *y > 0.0)
        };
        let y_lo = ys().fold(f64::INFINITY, f64::min);
        let y_hi = ys().fold(0.0f64, f64::max);
        let (y_lo, y_hi) = if y_lo <= y_hi {
            (y_lo / 1.5, y_hi * 1.5)
        } else {
            (1.0, 10.0)
        };
        let span = (y_hi / y_lo).log10();
        let y_top = y_hi * 10f64.powf(span * LEGEND_BAND / (1.0 - LEGEND_BAND));
        let mut ctx = ChartBuilder::on(&area)
            .caption(&self.title, ("sans-serif", 26))
            .margin(20)
            .x_label_area_size(70)
            .y_label_area_size(110)
            .build_cartesian_2d(x_lo - 0.25..x_hi + 0.25, (y_lo..y_top).log_scale())
            .map_err(err)?;
        let x_fmt = |x: &f64| {
            if (x - x.round()).abs() < 1e-6 {
                format!("{}", 2f64.powf(x.round()))
            } else {
                String::new()
            }
        };
        ctx.configure_mesh()
            .x_labels((x_hi - x_lo).ceil() as usize + 2)
            .x_label_formatter(&x_fmt)
            .x_desc(format!("{} (log scale)", self.x_label))
            .y_desc(format!("{} (log scale)", self.y_label))
            .y_label_formatter(&|v: &f64| tick_label(*v))
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(err)?;
        let on_axes = |points: &[(f64, f64)]| -> Vec<(f64, f64)> {
            points
                .iter()
                .filter(|(x, y)| *x > 0.0 && *y > 0.0)
                .map(|(x, y)| (x.log2(), *y))
                .collect()
        };
        for line in &self.lines {
            let color = PALETTE[line.color % PALETTE.len()];
            let points = on_axes(&line.points);
            if line.dashed {
                ctx.draw_series(DashedLineSeries::new(points, 10, 7, color.stroke_width(2)))
                    .map_err(err)?
                    .label(line.name.as_str())
                    .legend(move |(x, y)| {
                        // Two dashes, as on the figure.
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (6, 0)], color.stroke_width(2))
                            + PathElement::new(vec![(10, 0), (16, 0)], color.stroke_width(2))
                    });
            } else {
                ctx.draw_series(LineSeries::new(points.clone(), color.stroke_width(3)))
                    .map_err(err)?
                    .label(line.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(3))
                    });
                ctx.draw_series(points.iter().map(|p| Circle::new(*p, 5, color.filled())))
                    .map_err(err)?;
                ctx.draw_series(
                    line.points
                        .iter()
                        .zip(&line.ranges)
                        .filter(|((x, y), _)| *x > 0.0 && *y > 0.0)
                        .map(|(&(x, y), &(low, high))| {
                            let low = low.max(y_lo);
                            ErrorBar::new_vertical(
                                x.log2(),
                                low,
                                y,
                                high,
                                color.stroke_width(2),
                                12,
                            )
                        }),
                )
                .map_err(err)?;
            }
        }
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 16))
            .draw()
            .map_err(err)?;
        area.present().map_err(err)?;
        Ok(())
    }
}

/// Draws stacked bars into `dir/name.svg` and `dir/name.png`: a bar per category, a
/// coloured segment per series (`(name, a value per category)`). Returns whether it drew (a
/// missing font skips the figure with a note on stderr).
pub fn stacked_bars(
    title: &str,
    y_label: &str,
    categories: Vec<String>,
    series: Vec<(String, Vec<f64>)>,
    dir: &Path,
    name: &str,
) -> anyhow::Result<bool> {
    if !font_or_note() {
        return Ok(false);
    }
    let bars = Bars {
        title,
        y_label,
        categories,
        series,
        stacked: true,
        log: false,
    };
    write_figure(dir, name, &bars).map_err(|e| anyhow::anyhow!("draw {name}: {e}"))?;
    Ok(true)
}

/// Draws `lines` into `dir/name.svg` and `dir/name.png`; returns whether it did (a missing
/// font skips the figure with a note on stderr instead of failing the run).
pub fn line_figure(lines: &Lines, dir: &Path, name: &str) -> anyhow::Result<bool> {
    if !font_or_note() {
        return Ok(false);
    }
    write_figure(dir, name, lines).map_err(|e| anyhow::anyhow!("draw {name}: {e}"))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::tick_label;

    #[test]
    fn ticks_read_as_a_paper_would_print_them() {
        assert_eq!(tick_label(100_000.0), "100 K");
        assert_eq!(tick_label(2_500.0), "2.5 K");
        assert_eq!(tick_label(-20_000.0), "-20 K");
        assert_eq!(tick_label(45.0), "45");
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(-2.5), "-2.5");
        assert_eq!(tick_label(500.0), "500");
    }
}
