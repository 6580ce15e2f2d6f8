//! The decision span: one per check, named `plug_limit.decide`, with stable fields.
//!
//! A binary of its own, with a global subscriber: `tracing` caches whether a callsite is
//! enabled across threads, and a test binary whose other tests hit the span's callsite on
//! threads without a subscriber, at the moment this one installs its own, could see it cached
//! as disabled.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::{Router, routing::get};
use plug_limit::{FixedWindow, PlugLimit, RateLimited, Store, key};
use plug_limit_tests::{dead_url, get as send_get, pool};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// The client key of these requests: it may appear in no field.
const CLIENT: &str = "client-secret-1";

type Two = RateLimited<FixedWindow<2, 60>>;

async fn two(limited: Two) -> (Two, &'static str) {
    (limited, "ok")
}

type Stacked = RateLimited<(FixedWindow<1, 60>, FixedWindow<5, 60>)>;

async fn stacked(limited: Stacked) -> (Stacked, &'static str) {
    (limited, "ok")
}

fn app(limits: PlugLimit) -> Router {
    Router::new()
        .route("/items/{id}", get(two))
        .route("/stacked", get(stacked))
        .with_state(limits)
}

/// The closed spans of the library (target `plug_limit...`): target and name, and fields.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<(String, BTreeMap<String, String>)>>>);

/// The library's log lines (target `plug_limit`): each one's message, and the name of the span
/// it was recorded within.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<(String, Option<String>)>>>);

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Events {
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "plug_limit" {
            return;
        }
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        let within = ctx.event_span(event).map(|span| span.name().to_owned());
        let message = fields.0.remove("message").unwrap_or_default();
        self.0.lock().unwrap().push((message, within));
    }
}

struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !attrs.metadata().target().starts_with("plug_limit") {
            return;
        }
        let mut fields = Fields(BTreeMap::new());
        attrs.record(&mut fields);
        ctx.span(id).unwrap().extensions_mut().insert(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        if let Some(fields) = span.extensions_mut().get_mut::<Fields>() {
            values.record(fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let span = ctx.span(&id).unwrap();
        let Some(Fields(fields)) = span.extensions_mut().remove::<Fields>() else {
            return;
        };
        let name = format!("{} {}", span.metadata().target(), span.name());
        self.0.lock().unwrap().push((name, fields));
    }
}

#[tokio::test]
async fn every_decision_has_one_span_with_stable_fields() {
    let (spans, events) = (Spans::default(), Events::default());
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(spans.clone())
            .with(events.clone()),
    )
    .unwrap();
    let memory = PlugLimit::builder(Store::memory())
        .key(key::header("x-client"))
        .deny_cache(true)
        .build()
        .unwrap();
    let dead = PlugLimit::builder(pool(&dead_url()))
        .key(key::header("x-client"))
        .build()
        .unwrap();
    let memory = app(memory);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(send_get(&memory, "/items/1", CLIENT).await.status.as_u16());
    }
    assert_eq!(statuses, [200, 200, 429, 429]);
    assert_eq!(send_get(&app(dead), "/items/1", CLIENT).await.status, 200);
    let field = |pairs: &[(&str, &str)]| -> (String, BTreeMap<String, String>) {
        let mut fields: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        fields.insert("limiter".to_owned(), "fixed_window".to_owned());
        fields.insert("scope".to_owned(), "/items/{id}".to_owned());
        ("plug_limit::decide plug_limit.decide".to_owned(), fields)
    };
    let spans = spans.0.lock().unwrap().clone();
    assert_eq!(
        spans,
        [
            field(&[("decision", "allowed"), ("backend", "memory")]),
            field(&[("decision", "allowed"), ("backend", "memory")]),
            field(&[("decision", "denied"), ("backend", "memory")]),
            field(&[("decision", "denied"), ("backend", "deny_cache")]),
            field(&[
                ("decision", "failed"),
                ("backend", "redis"),
                ("cause", "pool")
            ]),
        ]
    );
    for (_, fields) in &spans {
        assert!(!fields.values().any(|v| v.contains(CLIENT)), "{fields:?}");
    }

    let mut stacked = Vec::new();
    for _ in 0..2 {
        stacked.push(send_get(&memory, "/stacked", CLIENT).await.status.as_u16());
    }
    assert_eq!(stacked, [200, 429]);

    // A check's log lines are recorded within its span, whether it waited on Redis or not.
    let decide = Some("plug_limit.decide".to_owned());
    let events = events.0.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            ("request denied".to_owned(), decide.clone()),
            (
                "request denied from the local deny cache".to_owned(),
                decide.clone()
            ),
            ("rate limit check failed".to_owned(), decide.clone()),
            ("request denied".to_owned(), decide),
        ]
    );
}
