//! A curve as an SVG: one panel per unit, the machine under the title, the growth statements
//! under the panels.

use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::BoxError;
use crate::curve::{Curve, Scale, count};

const FONT: &str = "sans-serif";
const GREY: RGBColor = RGBColor(90, 90, 90);
const PANEL_WIDTH: u32 = 400;
const PANEL_HEIGHT: u32 = 340;
const HEAD: u32 = 58;
const NOTE_LINE: u32 = 17;
/// About how many characters of 12-pixel text fit in a pixel.
const CHARS_PER_PIXEL: f64 = 1.0 / 6.4;

impl Scale {
    fn forward(self, x: f64) -> f64 {
        match self {
            Self::Log10 => x.log10(),
            Self::Log2 => x.log2(),
            Self::Linear => x,
        }
    }

    fn back(self, t: f64) -> f64 {
        match self {
            Self::Log10 => 10f64.powf(t),
            Self::Log2 => 2f64.powf(t),
            Self::Linear => t,
        }
    }
}

pub(crate) fn draw(curve: &Curve, machine: &str, path: &Path) -> Result<(), BoxError> {
    let panels = u32::try_from(curve.panels.len().max(1))?;
    let width = PANEL_WIDTH * panels + 20;
    let columns = (f64::from(width - 24) * CHARS_PER_PIXEL) as usize;
    let notes: Vec<String> = curve.notes.iter().flat_map(|n| wrap(n, columns)).collect();
    let foot = NOTE_LINE * u32::try_from(notes.len())? + 14;
    let height = HEAD + PANEL_HEIGHT + foot;
    {
        let root = SVGBackend::new(path, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let (head, rest) = root.split_vertically(HEAD);
        let (body, foot) = rest.split_vertically(PANEL_HEIGHT);
        head.draw_text(
            &curve.title,
            &(FONT, 20).into_font().color(&BLACK),
            (12, 10),
        )?;
        head.draw_text(machine, &(FONT, 13).into_font().color(&GREY), (12, 36))?;
        for (area, panel) in body
            .split_evenly((1, curve.panels.len()))
            .iter()
            .zip(&curve.panels)
        {
            draw_panel(area, curve, panel)?;
        }
        let font = (FONT, 12).into_font().color(&BLACK);
        for (row, note) in (0i32..).zip(&notes) {
            foot.draw_text(note, &font, (12, 6 + row * NOTE_LINE as i32))?;
        }
        root.present()?;
    }
    // Markdown ends an HTML block at a blank line: none, so the file can be inlined too.
    let svg: String = std::fs::read_to_string(path)?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(path, svg)?;
    Ok(())
}

fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    curve: &Curve,
    panel: &crate::curve::Panel,
) -> Result<(), BoxError> {
    let scale = curve.scale;
    let points = || panel.series.iter().flat_map(|s| s.points.iter());
    let (lo, hi) = points().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        let t = scale.forward(p.0);
        (lo.min(t), hi.max(t))
    });
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.04).max(0.1);
    let y_max = points().map(|p| p.1).fold(0.0, f64::max);
    // Room above the highest point for the legend.
    let y_top = if y_max > 0.0 { y_max * 1.45 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(panel.caption, (FONT, 15))
        .margin(8)
        .margin_right(18)
        .x_label_area_size(38)
        .y_label_area_size(58)
        .build_cartesian_2d((lo - pad)..(hi + pad), 0.0..y_top)?;
    let ticks = (hi - lo).round() as usize + 1;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(BLACK.mix(0.08))
        .x_labels(ticks.clamp(2, 10))
        .y_labels(6)
        .x_label_formatter(&|&t| {
            if (t - t.round()).abs() < 1e-6 {
                count(scale.back(t.round()))
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|&y| axis(y))
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .x_desc(curve.x_desc)
        .y_desc(panel.y_desc)
        .draw()?;
    for series in &panel.series {
        let line: Vec<(f64, f64)> = series
            .points
            .iter()
            .map(|&(x, y)| (scale.forward(x), y))
            .collect();
        let style = series.colour.stroke_width(2);
        let colour = series.colour;
        if series.dashed {
            chart
                .draw_series(DashedLineSeries::new(line.clone(), 6, 4, style))?
                .label(series.label.as_str())
                .legend(move |(x, y)| {
                    DashedPathElement::new(vec![(x, y), (x + 20, y)], 6, 4, colour.stroke_width(2))
                });
        } else {
            chart
                .draw_series(LineSeries::new(line.clone(), style))?
                .label(series.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        chart.draw_series(line.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.2))
        .label_font((FONT, 12))
        .draw()?;
    Ok(())
}

/// A value axis label: whole numbers from 10 up, at most two decimals below.
fn axis(y: f64) -> String {
    if y >= 10.0 || y == 0.0 {
        format!("{y:.0}")
    } else {
        let text = format!("{y:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// `text` cut at spaces into lines of at most `columns` characters, bulleted, the later ones
/// indented (with no-break spaces, which SVG text keeps).
fn wrap(text: &str, columns: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = "•".to_owned();
    for word in text.split(' ') {
        if line.chars().count() + 1 + word.chars().count() > columns && line.len() > 4 {
            lines.push(std::mem::replace(&mut line, "\u{a0}\u{a0}".to_owned()));
        }
        line.push(' ');
        line.push_str(word);
    }
    lines.push(line);
    lines
}
