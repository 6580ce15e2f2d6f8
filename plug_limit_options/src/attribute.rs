//! The arguments of `#[rate_limit]`, named once: the macro parses these and no other, and the
//! docs that list them are held to this list by the workspace's tests.

/// The arguments `#[rate_limit(..)]` takes, in the order its docs list them.
pub const ATTRIBUTE_ARGUMENTS: [&str; 7] = [
    "limiter", "opts", "cost", "key", "scope", "settle", "count_if",
];

/// `ATTRIBUTE_ARGUMENTS` as an error lists them: `` `limiter`, `opts`, ... or `count_if` ``.
#[must_use]
pub fn attribute_arguments() -> String {
    let quoted: Vec<String> = ATTRIBUTE_ARGUMENTS
        .iter()
        .map(|name| format!("`{name}`"))
        .collect();
    match quoted.split_last() {
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}
