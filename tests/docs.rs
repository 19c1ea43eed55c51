//! The examples in README.md and docs/walkthrough.md are what the binary
//! prints: every `console` block line `$ handshakes …` (or `$ cargo run
//! --release -- …`) followed by output is run from the project's root and
//! its standard output compared line for line with the block. A change
//! that moves a figure or a column fails here until the docs show it.

use std::path::Path;
use std::process::Command;

/// One example: the arguments after the program, and the lines shown.
struct Example {
    /// Where its output begins in the file.
    line: usize,
    args: Vec<String>,
    output: Vec<String>,
}

/// The examples with output in `text` (a Markdown file). Arguments are
/// split at spaces; none of ours needs quotes.
fn examples(text: &str) -> Vec<Example> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut k = 0;
    let mut in_console = false;
    while k < lines.len() {
        let line = lines[k];
        if line.starts_with("```") {
            in_console = line == "```console" && !in_console;
            k += 1;
            continue;
        }
        let Some(command) = line.strip_prefix("$ ").filter(|_| in_console) else {
            k += 1;
            continue;
        };
        let mut command = command.to_string();
        k += 1;
        while command.ends_with('\\') && k < lines.len() {
            command.pop();
            command.push(' ');
            command.push_str(lines[k].trim());
            k += 1;
        }
        // The first output line, counted from 1.
        let start = k + 1;
        let mut output = Vec::new();
        while k < lines.len() && !lines[k].starts_with("$ ") && !lines[k].starts_with("```") {
            output.push(lines[k].to_string());
            k += 1;
        }
        let words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
        let args = match words.first().map(String::as_str) {
            Some("handshakes") => words[1..].to_vec(),
            Some("cargo")
                if words.get(1..4) == Some(&["run".into(), "--release".into(), "--".into()]) =>
            {
                words[4..].to_vec()
            }
            _ => continue,
        };
        if !output.is_empty() {
            found.push(Example {
                line: start,
                args,
                output,
            });
        }
    }
    found
}

#[test]
fn the_examples_in_the_docs_are_what_the_binary_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for doc in ["README.md", "docs/walkthrough.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for ex in examples(&text) {
            let out = Command::new(env!("CARGO_BIN_EXE_handshakes"))
                .args(&ex.args)
                .current_dir(root)
                .env_remove("NO_COLOR")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{doc}:{}: {:?} failed",
                ex.line,
                ex.args
            );
            let got = String::from_utf8(out.stdout).unwrap();
            let got: Vec<&str> = got.trim_end_matches('\n').lines().collect();
            for (n, (want, got)) in ex.output.iter().zip(&got).enumerate() {
                assert_eq!(
                    got,
                    want,
                    "{doc}:{}: `{}` prints otherwise",
                    ex.line + n,
                    ex.args.join(" ")
                );
            }
            assert_eq!(
                got.len(),
                ex.output.len(),
                "{doc}:{}: `{}` prints {} lines, the docs show {}",
                ex.line,
                ex.args.join(" "),
                got.len(),
                ex.output.len()
            );
            checked += 1;
        }
    }
    // The README's quick start and the walkthrough's two comparisons.
    assert!(checked >= 3, "only {checked} examples found");
}
