//! The docs' lists of the built-in limiters are held to the catalogue
//! (`plug_limit_options::Builtin::ALL`): each table names every built-in once, and nothing
//! else, so a built-in added to the catalogue fails here until every list names it.

use std::path::Path;

use plug_limit_options::Builtin;

/// The limiter names of the table in `text` whose header row starts `| limiter |`: the
/// first cell of each row, between backticks.
fn table_names(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.trim_start_matches("//!").trim())
        .skip_while(|line| !line.starts_with("| limiter |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| {
            let cell = line.split('|').nth(1)?.trim();
            Some(cell.strip_prefix('`')?.strip_suffix('`')?.to_owned())
        })
        .collect()
}

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|error| panic!("{path}: {error}"))
}

#[test]
fn every_table_of_built_ins_names_the_catalogue() {
    let catalogue: Vec<String> = Builtin::ALL.iter().map(|b| b.name().to_owned()).collect();
    for path in ["plug_limit/src/lib.rs", "plug_limit/docs/guide/limiters.md"] {
        assert_eq!(table_names(&read(path)), catalogue, "{path}");
    }
}
