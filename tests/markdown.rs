//! `compare -T markdown`, read back by a CommonMark parser with GitHub's
//! tables (pulldown-cmark): on real captures its tables are the terminal
//! table's cells, figures aligned right; its verdicts are the JSON's
//! clause by clause; its counts over time the terminal's block; and a
//! hostile label stays one cell, as text.

use pulldown_cmark::{Alignment, Event, Options, Parser, Tag, TagEnd};

use crate::h2_sizes::capture;
use crate::support::{bin, stderr, stdout};

/// What the Markdown says, as a reader of the rendered page sees it.
#[derive(Debug, Default)]
struct Read {
    /// Each table: its columns' alignment and its rows, the header first.
    tables: Vec<(Vec<Alignment>, Vec<Vec<String>>)>,
    paragraphs: Vec<String>,
    items: Vec<String>,
    code: Vec<String>,
    /// Raw HTML the parser found (none may reach the page).
    html: Vec<String>,
}

fn read(text: &str) -> Read {
    let mut r = Read::default();
    let (mut buf, mut row, mut rows, mut align) = (String::new(), vec![], vec![], vec![]);
    let mut in_item = false;
    for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Table(a)) => align = a,
            Event::Start(Tag::Item) => {
                in_item = true;
                buf.clear();
            }
            Event::Start(Tag::Paragraph | Tag::TableCell | Tag::CodeBlock(_)) => buf.clear(),
            Event::Text(t) | Event::Code(t) => buf.push_str(&t),
            Event::SoftBreak | Event::HardBreak => buf.push(' '),
            Event::Html(h) | Event::InlineHtml(h) => r.html.push(h.to_string()),
            Event::End(TagEnd::TableCell) => row.push(std::mem::take(&mut buf)),
            Event::End(TagEnd::TableHead | TagEnd::TableRow) => rows.push(std::mem::take(&mut row)),
            Event::End(TagEnd::Table) => {
                r.tables
                    .push((std::mem::take(&mut align), std::mem::take(&mut rows)));
            }
            Event::End(TagEnd::Paragraph) if !in_item => r.paragraphs.push(buf.clone()),
            Event::End(TagEnd::Item) => {
                in_item = false;
                r.items.push(buf.clone());
            }
            Event::End(TagEnd::CodeBlock) => r.code.push(buf.clone()),
            _ => {}
        }
    }
    r
}

/// The terminal tables' rows (header first), a table each.
fn terminal_tables(text: &str) -> Vec<Vec<Vec<String>>> {
    let mut tables: Vec<Vec<Vec<String>>> = Vec::new();
    for line in text.lines() {
        if line.starts_with('┌') {
            tables.push(Vec::new());
        } else if line.starts_with('│') {
            let cells = line.trim_matches('│').split('┆');
            let row = cells.map(|c| c.trim().to_owned()).collect();
            tables.last_mut().expect("a table").push(row);
        }
    }
    tables
}

fn compare(args: &[&str], format: &str) -> String {
    let out = bin()
        .args(["compare", "-q", "-T", format])
        .args(args)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

/// Two and three real captures, one pair with a servers table.
#[test]
fn markdown_is_the_terminal_table_and_the_json_verdict() {
    let files = |names: &[&str]| -> Vec<String> {
        let path = |n: &&str| capture(n).to_string_lossy().into_owned();
        names.iter().map(path).collect()
    };
    for names in [
        &[
            "java-urlconnection-post-429-10x10.pcap",
            "okhttp-post-429-10x10.pcap",
        ][..],
        &["multi-server-requests.pcap", "multi-server-curl.pcap"],
        &[
            "java-urlconnection-post-429-10x10.pcap",
            "okhttp-post-429-10x10.pcap",
            "apache-httpclient5-post-429-10x10.pcap",
        ],
    ] {
        let args = files(names);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let markdown = compare(&args, "markdown");
        let table = compare(&args, "table");
        let json: serde_json::Value = serde_json::from_str(&compare(&args, "json")).expect("JSON");
        let md = read(&markdown);
        assert!(md.html.is_empty(), "{names:?}: {:?}", md.html);

        let terminal = terminal_tables(&table);
        let tables: Vec<&Vec<Vec<String>>> = md.tables.iter().map(|(_, rows)| rows).collect();
        assert_eq!(tables, terminal.iter().collect::<Vec<_>>(), "{names:?}");
        let servers = names[0].starts_with("multi-server");
        assert_eq!(md.tables.len(), 1 + usize::from(servers), "{names:?}");
        for (align, _) in &md.tables {
            let (first, rest) = align.split_first().expect("columns");
            assert_eq!(*first, Alignment::Left, "{names:?}");
            assert!(rest.iter().all(|a| *a == Alignment::Right), "{names:?}");
        }

        // The JSON's verdicts, clause by clause: each headline a paragraph,
        // its other clauses the list items after it.
        let verdicts: Vec<String> = match json.get("verdicts") {
            Some(v) => serde_json::from_value(v.clone()).expect("strings"),
            None => vec![json["verdict"].as_str().expect("verdict").to_owned()],
        };
        let heads: Vec<&String> = md
            .paragraphs
            .iter()
            .filter(|p| p.starts_with("Verdict"))
            .collect();
        assert_eq!(heads.len(), verdicts.len(), "{names:?}");
        let mut items = md.items.iter().skip(names.len());
        for (i, (head, verdict)) in heads.iter().zip(&verdicts).enumerate() {
            let letter = char::from(b'B' + i as u8);
            let prefix = format!("Verdict (figures {letter} vs A): ");
            let head = head.strip_prefix(&prefix).expect("the prefix");
            let clauses = verdict.trim_end_matches('.').split("; ");
            let mut clauses = clauses.map(str::to_owned);
            assert_eq!(clauses.next().as_deref(), Some(head), "{names:?}");
            for clause in clauses {
                assert_eq!(items.next(), Some(&clause), "{names:?}");
            }
        }
        // The captures named first, by their letters.
        for (i, name) in names.iter().enumerate() {
            let letter = char::from(b'A' + i as u8);
            assert_eq!(md.items[i], format!("{letter}: {name}"), "{names:?}");
        }

        // The counts over time: the terminal's block, in a code block.
        let over_time = table.find("over time").map(|at| &table[at..]);
        let code: Vec<&str> = md.code.iter().map(String::as_str).collect();
        assert_eq!(code, over_time.into_iter().collect::<Vec<_>>(), "{names:?}");
    }
}

/// A label that would make a cell, a tag or emphasis stays one cell of
/// text, as written.
#[test]
fn a_hostile_label_stays_text() {
    // Short enough to head its column too.
    let label = "a|b *c* <i>d</i> `e`";
    let a = capture("http-curl-5-keepalive.pcap");
    let b = capture("http-curl-5-new-connections.pcap");
    let out = bin()
        .args(["compare", "-q", "-T", "markdown", "--label"])
        .arg(format!("A={label}"))
        .args([&a, &b])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let md = read(&stdout(&out));
    assert!(md.html.is_empty(), "{:?}", md.html);
    assert_eq!(
        md.items.first().map(String::as_str),
        Some(&*format!("A: {label}"))
    );
    let (align, rows) = md.tables.first().expect("a table");
    assert_eq!(align.len(), 4);
    assert!(rows.iter().all(|r| r.len() == 4), "{rows:?}");
    assert_eq!(rows[0][..2], ["metric".to_owned(), format!("A: {label}")]);
}

/// The walkthrough's excerpt of `-T markdown` (its ```markdown block):
/// each of its lines is a line the command prints, in the same order.
#[test]
fn the_walkthrough_excerpt_is_what_the_command_prints() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/walkthrough.md")).expect("the walkthrough");
    let block = doc.split("```markdown\n").nth(1).expect("a markdown block");
    let block = block.split("```\n").next().expect("its end");
    let out = compare(
        &[
            &capture("java-urlconnection-keepalive-off-10.pcap").to_string_lossy(),
            &capture("java-httpclient-pooled-10.pcap").to_string_lossy(),
            "--label",
            "A=HttpURLConnection",
            "--label",
            "B=HttpClient",
        ],
        "markdown",
    );
    let mut printed = out.lines();
    for line in block.lines() {
        assert!(
            printed.any(|p| p == line),
            "not printed (in this order): {line}\n{out}"
        );
    }
}
