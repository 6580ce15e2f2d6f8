//! What each built-in limiter admits from the same bursty traffic: a chart to choose one by.
//!
//! Run with: `cargo run --example algorithm_chart --features chart`
//!
//! All allow 30 requests per 60 s and see the same 180 s: a burst of 60 in the first 2 s, one a
//! second until 70 s, a burst of 60 from 118 s to 122 s (across `fixed_window`'s window boundary
//! at 120 s), one a second from 150 s. It writes `plug_limit/docs/algorithms.svg`, one panel per
//! limiter with the others in grey behind it, and prints the same story as a table. The memory
//! backend on a manual clock decides as the Redis scripts do: no Redis, no waiting, and the same
//! bytes on every run.

use std::error::Error;
use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plug_limit::{ManualClock, Opt, PlugLimit, RuntimeLimit, Store};

const SECONDS: u64 = 180;
/// The offered traffic: (from s, to s, requests spread evenly between).
const TRAFFIC: [(u64, u64, u64); 4] = [(0, 2, 60), (2, 70, 68), (118, 122, 60), (150, 180, 30)];
const RATE: &[Opt] = &[Opt::Int(30), Opt::Int(60)];
const BURST: &[Opt] = &[Opt::Int(30), Opt::Int(60), Opt::Int(10)];
const WINDOWS: &[Opt] = &[Opt::Str("10/10"), Opt::Str("30/60")];
/// Okabe-Ito colours, told apart with colour-vision deficiencies too.
const LIMITERS: [(&str, &[Opt], RGBColor); 7] = [
    ("fixed_window", RATE, RGBColor(230, 159, 0)),
    ("sliding_window", RATE, RGBColor(213, 94, 0)),
    ("sliding_log", RATE, RGBColor(0, 114, 178)),
    ("multi_window", WINDOWS, RGBColor(0, 0, 0)),
    ("leaky_bucket", RATE, RGBColor(0, 158, 115)),
    ("token_bucket", BURST, RGBColor(86, 180, 233)),
    ("gcra", BURST, RGBColor(204, 121, 167)),
];
const FONT: &str = "sans-serif";
const GREY: RGBColor = RGBColor(120, 120, 120);
const CONTEXT: RGBColor = RGBColor(215, 215, 215);
const KEY: &str = "admitted, this limiter\nadmitted, the others\n\n\
    token_bucket, gcra: burst 10\nmulti_window: 10/10 s, 30/60 s";

/// Every request at its time through `limiter`: whether each one was admitted.
async fn decide(limiter: &str, opts: &[Opt], times: &[u64]) -> Result<Vec<bool>, Box<dyn Error>> {
    // Not on a minute: sliding_window's windows follow the epoch, a client's traffic does not.
    let start_ms = 1_700_000_000_000;
    let clock = ManualClock::new(start_ms);
    let limits = PlugLimit::builder(Store::memory())
        .clock(clock.clone())
        .build()?;
    let mut allowed = Vec::with_capacity(times.len());
    for &ms in times {
        clock.set(start_ms + i64::try_from(ms)?);
        allowed.push(
            limits
                .check(RuntimeLimit::new(limiter, opts.iter().cloned())?, "client")
                .await?
                .is_allowed(),
        );
    }
    Ok(allowed)
}

/// The running count at each second, less the seconds where its slope does not change: the
/// same picture at a panel's scale (about a pixel a second) from a fraction of the points.
fn line(times: &[u64]) -> Vec<(f64, f64)> {
    let n = |s: u64| times.partition_point(|&ms| ms <= s * 1000);
    let bend = |&s: &u64| s == 0 || s == SECONDS || 2 * n(s) != n(s - 1) + n(s + 1);
    let point = |s: u64| (s as f64, n(s) as f64);
    (0..=SECONDS).filter(bend).map(point).collect()
}

/// A grid line every 20 s, numbered only where a 60 s window may end.
fn every_minute(x: f64) -> String {
    if x % 60.0 == 0.0 {
        x.to_string()
    } else {
        String::new()
    }
}

fn draw(offered: &[u64], lines: &[(&str, RGBColor, Vec<u64>)]) -> Result<(), Box<dyn Error>> {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plug_limit/docs/algorithms.svg");
    std::fs::create_dir_all(out.parent().ok_or("no parent directory")?)?;
    let root = SVGBackend::new(&out, (900, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = "Requests admitted from the same bursty traffic, at 30 per 60 s each";
    let panels = root.titled(title, (FONT, 22))?.split_evenly((2, 4));
    let y_max = (offered.len() as f64 / 10.0).ceil() * 10.0;
    for (i, (panel, (name, colour, admitted))) in panels.iter().zip(lines).enumerate() {
        let (bottom, left) = (i >= 4, i % 4 == 0);
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{name}: {} admitted", admitted.len()), (FONT, 15))
            .margin(6)
            .margin_right(14)
            .x_label_area_size(if bottom { 34 } else { 20 })
            .y_label_area_size(if left { 44 } else { 28 })
            .build_cartesian_2d(0.0..SECONDS as f64, 0.0..y_max)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.08))
            .x_labels(10)
            .y_labels(5)
            .x_label_formatter(&|&x| every_minute(x))
            .y_label_formatter(&|y| y.to_string())
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .x_desc(if bottom { "seconds" } else { "" })
            .y_desc(if left { "requests" } else { "" })
            .draw()?;
        let others = lines.iter().filter(|other| other.0 != *name);
        chart.draw_series(others.map(|o| PathElement::new(line(&o.2), CONTEXT.stroke_width(1))))?;
        let dashed = GREY.stroke_width(1);
        chart.draw_series(DashedLineSeries::new(line(offered), 5, 4, dashed))?;
        chart.draw_series(LineSeries::new(line(admitted), colour.stroke_width(2)))?;
    }

    let key = panels[7].margin(36, 0, 24, 0);
    let dashed = DashedPathElement::new(vec![(0, 8), (28, 8)], 5, 4, GREY.stroke_width(1));
    key.draw(&dashed)?;
    for (y, colour) in [(28, BLACK), (48, CONTEXT)] {
        let solid = PathElement::new(vec![(0, y), (28, y)], colour.stroke_width(2));
        key.draw(&solid)?;
    }
    let font = (FONT, 13).into_font();
    let text = format!("offered: {} requests\n{KEY}", offered.len());
    for (row, text) in (0..).zip(text.lines()) {
        let (x, colour) = if row < 3 { (36, BLACK) } else { (0, GREY) };
        key.draw_text(text, &font.color(&colour), (x, 1 + 20 * row))?;
    }
    root.present()?;
    // The docs embed the SVG in Markdown, where a blank line would end the HTML block.
    let svg: String = std::fs::read_to_string(&out)?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&out, svg)?;
    println!("wrote {}", out.display());
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let phase = |&(from, to, n): &(u64, u64, u64)| {
        (0..n).map(move |i| (from * n + i * (to - from)) * 1000 / n)
    };
    let times: Vec<u64> = TRAFFIC.iter().flat_map(phase).collect();
    let early = |times: &[u64]| times.partition_point(|&ms| ms < 10_000);
    let (n, first) = (times.len(), early(&times));
    println!("limiter         admitted  in first 10 s  longest run of denials");
    println!("(offered)       {n:>8} {first:>14}");
    let mut lines = Vec::new();
    for (limiter, opts, colour) in LIMITERS {
        let allowed = decide(limiter, opts, &times).await?;
        let pairs: Vec<(u64, bool)> = times.iter().copied().zip(allowed).collect();
        let admitted: Vec<u64> = pairs.iter().filter(|p| p.1).map(|p| p.0).collect();
        let run = pairs.split(|p| p.1).max_by_key(|run| run.len());
        let run = run.unwrap_or_default();
        let secs = (run.last().map_or(0, |last| last.0 - run[0].0) + 500) / 1000;
        let (denied, n, first) = (run.len(), admitted.len(), early(&admitted));
        println!("{limiter:<15} {n:>8} {first:>14}  {denied} requests over {secs} s");
        lines.push((limiter, colour, admitted));
    }
    draw(&times, &lines)
}
