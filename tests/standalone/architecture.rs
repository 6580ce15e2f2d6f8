//! The layering rule of `ARCHITECTURE.md`, enforced: every path into the crate (`crate::..`,
//! `super::..`) in `plug_limit/src` points to its own room or one listed before it, but for
//! the exceptions the map names, each of which must still be needed.
//!
//! The rooms and the exceptions are read from the map itself (its `rooms` and `exceptions`
//! blocks), so the map and the rule cannot drift apart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The map's rooms, bottom first, and the room of each top-level module.
struct Rooms {
    order: Vec<String>,
    of_module: BTreeMap<String, String>,
}

/// A path into the crate found in a file: where, and the module it names first.
#[derive(Debug)]
struct Import {
    file: String,
    line: usize,
    text: String,
    module: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of the fenced block whose info string is `info`.
fn block<'a>(map: &'a str, info: &str) -> Vec<&'a str> {
    let fence = format!("```{info}");
    let start = map
        .lines()
        .position(|line| line.trim() == fence)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no ```{info} block"));
    map.lines()
        .skip(start + 1)
        .take_while(|line| line.trim() != "```")
        .filter(|line| !line.trim().is_empty())
        .collect()
}

fn rooms(map: &str) -> Rooms {
    let mut order = Vec::new();
    let mut of_module = BTreeMap::new();
    for line in block(map, "rooms") {
        let (room, modules) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("a room is `name: module, module`: {line}"));
        let room = room.trim().to_owned();
        for module in modules.split(',') {
            let previous = of_module.insert(module.trim().to_owned(), room.clone());
            assert!(previous.is_none(), "module {module} is in two rooms");
        }
        order.push(room);
    }
    Rooms { order, of_module }
}

/// The allowed upward imports, `from -> to`, each with its reason.
fn exceptions(map: &str) -> BTreeSet<(String, String)> {
    block(map, "exceptions")
        .into_iter()
        .map(|line| {
            let (pair, reason) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("an exception is `from -> to: reason`: {line}"));
            assert!(
                reason.trim().len() > 20,
                "an exception needs its reason: {line}"
            );
            let (from, to) = pair
                .split_once("->")
                .unwrap_or_else(|| panic!("an exception is `from -> to: reason`: {line}"));
            (from.trim().to_owned(), to.trim().to_owned())
        })
        .collect()
}

/// Every `.rs` file below `dir`.
fn sources(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The module path of a source file: `a/b.rs` and `a/b/mod.rs` are `[a, b]`.
fn module_path(relative: &Path) -> Vec<String> {
    let mut path: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    path
}

/// The first identifier of `text`, and what follows it.
fn ident(text: &str) -> Option<(&str, &str)> {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| text.split_at(end))
}

/// The items of a `{a::b, c, d::{e, f}}` group whose `{` was just read: each one's first
/// identifier. Nested groups name their own first identifiers after a path, which the caller
/// reads from the outer identifier alone.
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut item_start = true;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if item_start && depth == 0 && (c.is_alphabetic() || c == '_') => {
                if let Some((head, after)) = ident(rest) {
                    heads.push(head.to_owned());
                    item_start = false;
                    rest = after;
                    continue;
                }
            }
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    heads
}

/// The code of a file without its comments and its unit tests.
fn code(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut previous = "";
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        // An inline module of unit tests ends the file by convention: nothing after it is part
        // of the design. (A `mod tests;` line only declares a file, read as its own.)
        if previous.trim() == "#[cfg(test)]"
            && trimmed.starts_with("mod ")
            && trimmed.ends_with('{')
        {
            lines.pop();
            break;
        }
        previous = line;
        if trimmed.starts_with("//") {
            continue;
        }
        lines.push((index + 1, line));
    }
    lines
}

/// Every path into the crate that `file` (at `module`) takes: the top-level module each names.
fn imports(
    file: &str,
    module: &[String],
    text: &str,
    reexports: &BTreeMap<String, String>,
) -> Vec<Import> {
    let mut found = Vec::new();
    for (line_no, line) in code(text) {
        let mut rest = line;
        while let Some(at) = rest.find(['c', 's']) {
            let before = &line[..line.len() - rest.len() + at];
            let candidate = &rest[at..];
            rest = &rest[at + 1..];
            // Inside a longer path (`super::super::`), or `$crate` of a macro.
            if before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$')
                || before.ends_with("::")
            {
                continue;
            }
            let (base, mut path): (Vec<String>, &str) =
                if let Some(path) = candidate.strip_prefix("crate::") {
                    (Vec::new(), path)
                } else if let Some(path) = candidate.strip_prefix("super::") {
                    (module[..module.len().saturating_sub(1)].to_vec(), path)
                } else {
                    continue;
                };
            let mut full = base;
            while let Some(after) = path.strip_prefix("super::") {
                full.pop();
                path = after;
            }
            let heads = match path.strip_prefix('{') {
                Some(group) if full.is_empty() => group_heads(group),
                Some(_) => Vec::new(),
                None => ident(path)
                    .map(|(head, _)| vec![head.to_owned()])
                    .unwrap_or_default(),
            };
            let targets: Vec<String> = if full.is_empty() {
                heads
            } else {
                vec![full[0].clone()]
            };
            for target in targets {
                let target = reexports.get(&target).cloned().unwrap_or(target);
                found.push(Import {
                    file: file.to_owned(),
                    line: line_no,
                    text: line.trim().to_owned(),
                    module: target,
                });
            }
        }
    }
    found
}

/// The root's re-exports: each name to the top-level module it comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let flat = lib.replace('\n', " ");
    for statement in flat.split(';') {
        let Some(at) = statement.find("pub use self::") else {
            continue;
        };
        let path = &statement[at + "pub use self::".len()..];
        let Some((module, rest)) = ident(path) else {
            continue;
        };
        let rest = rest.trim_start_matches("::");
        let items = match rest.strip_prefix('{') {
            Some(group) => group_heads(group),
            None => ident(rest)
                .map(|(name, _)| vec![name.to_owned()])
                .unwrap_or_default(),
        };
        for item in items {
            names.insert(item, module.to_owned());
        }
    }
    names
}

#[test]
fn every_import_of_the_crate_points_down_the_map() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let rooms = rooms(&map);
    let allowed = exceptions(&map);
    let src = root().join("plug_limit/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let reexports = reexports(&lib);
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();

    let mut wrong = Vec::new();
    let mut used = BTreeSet::new();
    let mut placed = BTreeSet::new();
    for path in &files {
        let relative = path.strip_prefix(&src).unwrap();
        let module = module_path(relative);
        let file = relative.display().to_string();
        // The root only declares the rooms and re-exports them; unit-test files test.
        if module == ["lib"] || module.last().is_some_and(|last| last == "tests") {
            continue;
        }
        let top = &module[0];
        let room = rooms
            .of_module
            .get(top)
            .unwrap_or_else(|| panic!("ARCHITECTURE.md places module `{top}` ({file}) in no room"));
        placed.insert(top.clone());
        let at = rooms.order.iter().position(|r| r == room).unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        for import in imports(&file, &module, &text, &reexports) {
            let Some(target) = rooms.of_module.get(&import.module) else {
                wrong.push(format!(
                    "{}:{}: `{}` names `{}`, in no room of ARCHITECTURE.md",
                    import.file, import.line, import.text, import.module
                ));
                continue;
            };
            let target_at = rooms.order.iter().position(|r| r == target).unwrap();
            if target_at <= at {
                continue;
            }
            let pair = (room.clone(), target.clone());
            if allowed.contains(&pair) {
                used.insert(pair);
                continue;
            }
            wrong.push(format!(
                "{}:{}: `{}`: room `{room}` imports `{target}`, which is above it",
                import.file, import.line, import.text
            ));
        }
    }
    for (from, to) in allowed.difference(&used) {
        wrong.push(format!(
            "the exception `{from} -> {to}` of ARCHITECTURE.md is no longer needed: remove it"
        ));
    }
    for module in rooms.of_module.keys() {
        if !placed.contains(module) {
            wrong.push(format!(
                "ARCHITECTURE.md names module `{module}`, which has no file"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "against the layering rule:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_finds_imports_of_every_form() {
    let named = BTreeMap::from([("PlugLimit".to_owned(), "handle".to_owned())]);
    let module = ["decide".to_owned(), "stack".to_owned()];
    let text = "use super::{Decided, refuse};\n\
                use crate::limit::{Charge, Opt};\n\
                use crate::{PlugLimit, outcome::Outcome};\n\
                // crate::commented::Out\n\
                let x = crate::backend::Backend::name(&b);\n\
                use super::super::key::Key;\n\
                macro_rules! m { () => { $crate::ignored::X } }\n\
                #[cfg(test)]\n\
                mod tests;\n\
                use crate::after_a_test_file::Y;\n\
                #[cfg(test)]\n\
                mod tests {\n\
                use crate::test_only::X;\n\
                }\n";
    let found: Vec<(usize, String)> = imports("f.rs", &module, text, &named)
        .into_iter()
        .map(|import| (import.line, import.module))
        .collect();
    let want = [
        (1, "decide"),
        (2, "limit"),
        (3, "handle"),
        (3, "outcome"),
        (5, "backend"),
        (6, "key"),
        (10, "after_a_test_file"),
    ];
    let want: Vec<(usize, String)> = want.iter().map(|(l, m)| (*l, (*m).to_owned())).collect();
    assert_eq!(found, want);
    let lib = "pub use self::config::{\n    Builder, Rules,\n};\npub use self::handle::PlugLimit;";
    let want = [
        ("Builder", "config"),
        ("PlugLimit", "handle"),
        ("Rules", "config"),
    ];
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(name, module)| ((*name).to_owned(), (*module).to_owned()))
        .collect();
    assert_eq!(reexports(lib), want);
}
