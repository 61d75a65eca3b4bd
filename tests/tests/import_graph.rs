//! Each crate's top-level modules depend one way: no module imports, through any chain of
//! `crate::` paths, a module that imports it back. Read from the source files themselves, so
//! the check cannot drift from the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose top-level modules must form no circle.
const CRATES: [&str; 4] = ["protocol", "broker", "client", "workshop"];

#[test]
fn no_crate_has_an_import_circle_between_its_top_level_modules() {
    let mut circles = Vec::new();
    for name in CRATES {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(name)
            .join("src");
        let graph = ImportGraph::read(&src);
        for circle in graph.circles() {
            circles.push(format!("{name}: {}", graph.describe(&circle)));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn a_circle_is_found_and_a_line_of_comment_is_no_import() {
    let mut graph = ImportGraph::default();
    graph.add_file(
        "a",
        "a.rs",
        "use crate::{b::One, c};\n// [`crate::d`] in a comment\n",
    );
    graph.add_file("b", "b/mod.rs", "fn f() { crate::c::g(); }\n");
    graph.add_file("c", "c.rs", "use crate::a::Two;\n");
    graph.add_file("d", "d.rs", "use crate::a;\n");
    let circles = graph.circles();
    assert_eq!(circles, vec![vec!["a", "b", "c"]]);
    assert_eq!(
        graph.describe(&circles[0]),
        "a -> b (a.rs), a -> c (a.rs), b -> c (b/mod.rs), c -> a (c.rs)"
    );
}

/// Top-level module -> the top-level modules it names, with the files that name them.
#[derive(Default)]
struct ImportGraph {
    edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl ImportGraph {
    fn read(src: &Path) -> Self {
        let mut graph = Self::default();
        let mut files = Vec::new();
        rust_files(src, &mut files);
        for file in files {
            let relative = file.strip_prefix(src).expect("under src");
            let first = relative.components().next().expect("a file");
            let module = first.as_os_str().to_string_lossy();
            let module = module.trim_end_matches(".rs");
            // The crate root (lib.rs, main.rs, bin/) declares and dispatches: it is above all.
            if matches!(module, "lib" | "main" | "bin") {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("a readable source file");
            graph.add_file(module, &relative.display().to_string(), &text);
        }
        graph
    }

    fn add_file(&mut self, module: &str, file: &str, text: &str) {
        let targets = self.edges.entry(module.to_string()).or_default();
        let code: Vec<&str> = text
            .lines()
            .map(|l| l.split_once("//").map_or(l, |(code, _comment)| code))
            .collect();
        for target in crate_paths(&code.join("\n")) {
            if target != module {
                targets.entry(target).or_default().insert(file.to_string());
            }
        }
    }

    /// Groups of two or more modules that reach each other (strongly connected components).
    fn circles(&self) -> Vec<Vec<String>> {
        let modules: Vec<&String> = self.edges.keys().collect();
        let reaches = |from: &String| -> BTreeSet<String> {
            let mut seen = BTreeSet::new();
            let mut stack = vec![from.clone()];
            while let Some(m) = stack.pop() {
                for next in self.edges.get(&m).into_iter().flat_map(|t| t.keys()) {
                    if seen.insert(next.clone()) {
                        stack.push(next.clone());
                    }
                }
            }
            seen
        };
        let reach: BTreeMap<&String, BTreeSet<String>> =
            modules.iter().map(|m| (*m, reaches(m))).collect();
        let mut circles: Vec<Vec<String>> = Vec::new();
        for m in &modules {
            let mut circle: Vec<String> = modules
                .iter()
                .filter(|o| reach[m].contains(**o) && reach[**o].contains(*m))
                .map(|o| o.to_string())
                .collect();
            circle.sort();
            if circle.len() > 1 && !circles.contains(&circle) {
                circles.push(circle);
            }
        }
        circles
    }

    /// The arrows inside a circle, each with the files that draw it.
    fn describe(&self, circle: &[String]) -> String {
        let mut arrows = Vec::new();
        for from in circle {
            for (to, files) in &self.edges[from] {
                if circle.contains(to) {
                    let files: Vec<&str> = files.iter().map(String::as_str).collect();
                    arrows.push(format!("{from} -> {to} ({})", files.join(", ")));
                }
            }
        }
        arrows.join(", ")
    }
}

/// The first segment after each `crate::` in the code: `crate::a::b` names `a`, and
/// `crate::{a, b::c}` names `a` and `b`, over as many lines as the group takes.
fn crate_paths(code: &str) -> Vec<String> {
    let name_char = |c: char| c.is_alphanumeric() || c == '_';
    let leading_name = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| name_char(*c))
            .collect()
    };
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        // `$crate::` and `my_crate::` are other paths.
        if before.is_some_and(|c| name_char(c) || c == '$') {
            continue;
        }
        let Some(group) = rest.strip_prefix('{') else {
            found.push(leading_name(rest));
            continue;
        };
        let mut depth = 0;
        let mut item = String::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => found.push(leading_name(&std::mem::take(&mut item))),
                c => item.push(c),
            }
        }
        found.push(leading_name(&item));
    }
    found.retain(|n| !n.is_empty() && n != "self");
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable source folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
