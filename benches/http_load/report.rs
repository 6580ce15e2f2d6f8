//! The report printed at the end: the tables, the comparisons and the targets.

use std::fmt::Write as _;
use std::time::Duration;

use crate::machine::{Machine, OTHERS_CPU, SERVER_CPU, cpu_model};
use crate::measurement::Measurement;
use crate::results::{Measured, Results};
use crate::settings::Settings;
use crate::variants::Variant;

fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.2}x"))
}

pub(crate) fn report(settings: &Settings, results: &Results, machine: &Machine) -> String {
    let rounds = if settings.rounds == 1 {
        "this run".to_owned()
    } else {
        format!(
            "the median of {} rounds, each against its own round",
            settings.rounds
        )
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| variant | req/s | p50 | p99 | server µs/req | ratio to bare | Redis cmds/req |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for Measured { best: m, .. } in &results.0 {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {} | {} | {} | {} |",
            m.variant.name(),
            m.rps(),
            millis(m.p50),
            millis(m.p99),
            m.micros(m.cpu.server),
            ratio(results.rps_ratio(m.variant, Variant::Bare)),
            m.redis_commands_per_request(),
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "req/s, latencies, CPU and commands: each variant's best pass. Ratios: {rounds}."
    );

    if results.get(Variant::BareHeaders).is_some() {
        let against: Vec<String> = [Variant::Memory, Variant::DenyFlood, Variant::TowerGovernor]
            .into_iter()
            .filter(|&variant| results.get(variant).is_some())
            .map(|variant| {
                format!(
                    "{} {}",
                    variant.name(),
                    ratio(results.rps_ratio(variant, Variant::BareHeaders))
                )
            })
            .collect();
        if !against.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "Against `bare_headers` (bare plus the three headers, the floor of any limiter \
                 that sends them), req/s: {}.",
                against.join(", ")
            );
        }
    }

    // The in-process pair with no header on either side: the fair comparison.
    let (quiet, peer) = (Variant::MemoryNoHeaders, Variant::TowerGovernorNoHeaders);
    if results.get(quiet).is_some() && results.get(peer).is_some() {
        let added = results
            .server_added(quiet, peer)
            .map_or_else(|| "n/a".to_owned(), |us| format!("{us:+.1}"));
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Without headers on either side: `{}` against `{}`: {} req/s, {added} µs server \
             CPU per request.",
            quiet.name(),
            peer.name(),
            ratio(results.rps_ratio(quiet, peer)),
        );
    }

    // Each line needs one of its partners: its own script's check or `evalsha_multiplexed`.
    let against_handwritten: Vec<String> = results
        .0
        .iter()
        .filter_map(|m| {
            let variant = m.best.variant;
            let handwritten = variant.handwritten()?;
            let seed = Variant::EvalshaMultiplexed;
            if results.get(handwritten).is_none() && results.get(seed).is_none() {
                return None;
            }
            let added = results
                .server_added(variant, handwritten)
                .map_or_else(|| "n/a".to_owned(), |us| format!("{us:+.1}"));
            let mut line = format!(
                "- {} against `{}`: {} req/s, {added} µs server CPU per request",
                variant.name(),
                handwritten.name(),
                ratio(results.rps_ratio(variant, handwritten)),
            );
            if handwritten != seed {
                let _ = write!(
                    line,
                    "; against `{}`: {} req/s",
                    seed.name(),
                    ratio(results.rps_ratio(variant, seed)),
                );
            }
            Some(line)
        })
        .collect();
    if !against_handwritten.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Against the hand-written check of the same script (`evalsha_multiplexed` runs \
             fixed_window.lua, `evalsha_token_bucket` token_bucket.lua, `evalsha_gcra` gcra.lua): \
             throughput ratio, and the server CPU the library adds per request. Then, for the \
             heavier scripts, throughput against `evalsha_multiplexed`: the library and its \
             script together against the cheapest decision on Redis."
        );
        let _ = writeln!(out);
        for line in against_handwritten {
            let _ = writeln!(out, "{line}");
        }
    }

    let checks = results.targets();
    if !checks.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "Targets:");
        let _ = writeln!(out);
        for (what, threshold, measured) in checks {
            let verdict = match measured {
                Some(r) if r >= threshold => "met",
                Some(_) => "NOT met",
                None => "n/a",
            };
            let _ = writeln!(
                out,
                "- {what} >= {threshold:.2}x: {} ({verdict})",
                ratio(measured),
            );
        }
        if let Some(Measured { best: flood, .. }) = results.get(Variant::DenyFlood) {
            let verdict = match flood.redis_commands {
                Some(0) => "met",
                Some(_) => "NOT met",
                None => "n/a",
            };
            let _ = writeln!(
                out,
                "- deny_flood Redis commands during the flood == 0: {} over {} answers ({verdict})",
                flood
                    .redis_commands
                    .map_or_else(|| "n/a".to_owned(), |c| c.to_string()),
                flood.served(),
            );
        }
    }

    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "CPU during the measured window (share of one core) and per served request. Throughput \
         swings with what else runs on the machine (`others`), CPU per request much less, so the \
         last column is the steadier ratio: bare's CPU per request (server + client + redis) \
         over the variant's."
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| variant | server | client | redis | others | server µs/req | client µs/req | \
         redis µs/req | CPU ratio to bare |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let bare_cost = results.get(Variant::Bare).and_then(|bare| bare.best.cost());
    for Measured { best: m, .. } in &results.0 {
        let cpu_ratio = bare_cost.zip(m.cost()).map(|(bare, cost)| bare / cost);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.variant.name(),
            percent(m.cpu.server),
            percent(m.cpu.client),
            percent(m.cpu.redis),
            percent(m.cpu.others),
            m.micros(m.cpu.server),
            m.micros(m.cpu.client),
            m.micros(m.cpu.redis),
            ratio(cpu_ratio),
        );
    }

    let problems: Vec<&Measurement> = results
        .0
        .iter()
        .map(|m| &m.best)
        .filter(|m| m.tally.unexpected_status + m.tally.missing_headers + m.tally.errors > 0)
        .collect();
    if !problems.is_empty() {
        let _ = writeln!(out);
        for m in problems {
            let _ = writeln!(
                out,
                "{}: not counted: {} with another status than {}, {} without rate headers, {} \
                 errors (first: {})",
                m.variant.name(),
                m.tally.unexpected_status,
                m.variant.expected(),
                m.tally.missing_headers,
                m.tally.errors,
                m.tally.first_problem.as_deref().unwrap_or("?"),
            );
        }
    }

    let _ = writeln!(out);
    let _ = write!(
        out,
        "machine: nproc {}, CPU {}, redis {}, load average {} at start and {} at end; {} \
         connections, {} client ids, {:?} warm-up + {:?} measured per variant, best of {} round(s)",
        machine.cpus,
        cpu_model(),
        machine.redis_version,
        machine.load_at_start,
        machine.load_at_end,
        settings.connections,
        settings.clients,
        settings.warmup,
        settings.measure,
        settings.rounds,
    );
    if let Some(rate) = settings.rate {
        let _ = write!(out, "; {rate} requests a second offered");
    }
    let features = if cfg!(feature = "metrics") {
        "default, cluster and metrics"
    } else {
        "default and cluster"
    };
    let _ = write!(out, "; library features: {features}");
    if settings.pin {
        let _ = write!(
            out,
            "; pinned: the server on CPU {SERVER_CPU}, the load generator and Redis on CPU \
             {OTHERS_CPU}"
        );
    }
    out
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "n/a".to_owned(), |s| format!("{:.0}%", s * 100.0))
}
