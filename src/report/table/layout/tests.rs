//! The table drawn a chunk at a time with widths from the shapes against
//! comfy-table drawing every row at once.

use super::*;
use crate::testutil::Xorshift;
use unicode_width::UnicodeWidthStr;

fn shapes_of(rows: &[Vec<String>]) -> Shapes {
    let mut shapes = Shapes::default();
    for cells in rows {
        for (column, cell) in cells.iter().enumerate() {
            shapes.note(column, cell);
        }
    }
    shapes
}

/// What comfy-table draws with every row at once (with the same lower
/// bounds on the columns' widths): the oracle.
fn whole(rows: &[Vec<String>], arrange: Arrange) -> String {
    let mut table = styled(arrange);
    table.set_header(HEADER.to_vec());
    for cells in rows {
        table.add_row(row(cells));
    }
    let constraints = shapes_of(rows).constraints(arrange, table.width());
    let note = hidden_note(table.width(), &constraints);
    table.set_constraints(constraints);
    let mut text = format!("{table}\n");
    if let Some(note) = note {
        text += &format!("{note}\n");
    }
    text
}

/// What the drawer writes for `rows`, `chunk_rows` at a time.
fn chunked(rows: &[Vec<String>], arrange: Arrange, chunk_rows: usize) -> String {
    let drawer = Drawer::new(&shapes_of(rows), arrange).unwrap();
    let mut out = Vec::new();
    let chunks: Vec<&[Vec<String>]> = rows.chunks(chunk_rows).collect();
    // No rows: the header alone, as comfy-table draws it.
    let chunks = if chunks.is_empty() {
        vec![rows]
    } else {
        chunks
    };
    for (c, part) in chunks.iter().enumerate() {
        let mut chunk = drawer.start();
        for cells in *part {
            chunk.add(cells);
        }
        drawer
            .write(chunk, c == 0, c + 1 == chunks.len(), &mut out)
            .unwrap();
    }
    if let Some(note) = drawer.note() {
        out.extend_from_slice(format!("{note}\n").as_bytes());
    }
    String::from_utf8(out).unwrap()
}

/// Content widths (padding included) to try: wide and narrow terminals, one
/// narrower than the header.
const WIDTHS: [u16; 6] = [30, 61, 80, 101, 160, 400];

fn arrangements() -> Vec<Arrange> {
    let mut all = vec![Arrange {
        dynamic: false,
        width: None,
    }];
    all.extend(WIDTHS.iter().map(|&w| Arrange {
        dynamic: true,
        width: Some(w),
    }));
    all
}

fn assert_same(rows: &[Vec<String>], what: &str) {
    for arrange in arrangements() {
        let want = whole(rows, arrange);
        for chunk_rows in [1, 2, 7, CHUNK_ROWS] {
            let got = chunked(rows, arrange, chunk_rows);
            assert!(
                got == want,
                "{what}, {arrange:?}, chunks of {chunk_rows}:\n{got}\nagainst\n{want}"
            );
        }
    }
}

#[test]
fn every_capture_draws_as_the_whole_table() {
    let mut tried = 0;
    for path in crate::testutil::every_capture() {
        let Some((_, mut records)) = crate::testutil::records_of(&path) else {
            continue;
        };
        records.sort_by_key(|r| r.id);
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|r| super::super::cells(r).to_vec())
            .collect();
        if !rows.is_empty() {
            assert_same(&rows, &path.display().to_string());
            assert_words_unbroken(&rows, &path.display().to_string());
            tried += 1;
        }
    }
    assert!(tried > 20, "only {tried} captures with connections");
}

/// However narrow the terminal, no address, time or count is broken:
/// each cell shown of a column that does not wrap, and each word of one
/// that does (but a long server name or protocol list), is whole on some
/// line of the table; and the table is no
/// wider than the terminal unless every column that may be hidden is.
fn assert_words_unbroken(rows: &[Vec<String>], what: &str) {
    for &width in &WIDTHS {
        let arrange = Arrange {
            dynamic: true,
            width: Some(width),
        };
        let text = chunked(rows, arrange, CHUNK_ROWS);
        let constraints = shapes_of(rows).constraints(arrange, Some(width));
        let shown: Vec<bool> = (0..COLUMNS)
            .map(|c| !matches!(constraints[c], ColumnConstraint::Hidden))
            .collect();
        let drawn = border_widths(text.lines().next().unwrap_or_default()).unwrap_or_default();
        assert_eq!(
            drawn.len(),
            shown.iter().filter(|s| **s).count(),
            "{what}, width {width}"
        );
        let segments: HashSet<&str> = text
            .lines()
            .flat_map(|l| l.split(['│', '┆']))
            .map(str::trim)
            .collect();
        let pieces: HashSet<&str> = segments.iter().flat_map(|s| s.split(' ')).collect();
        for cells in rows {
            for (c, cell) in cells.iter().enumerate().filter(|(c, _)| shown[*c]) {
                let (whole, set) = match WRAPS[c] {
                    true => (cell.split(' ').collect::<Vec<_>>(), &pieces),
                    false => (vec![cell.trim()], &segments),
                };
                for word in whole.into_iter().filter(|w| w.width() <= MAX_UNBROKEN) {
                    assert!(
                        set.contains(word),
                        "{what}, width {width}: {word:?} broken:\n{text}"
                    );
                }
            }
        }
        let table = text.lines().filter(|l| !l.starts_with('('));
        let widest = table.map(|l| l.width()).max().unwrap_or(0);
        if widest > usize::from(width) {
            assert!(
                HIDE_ORDER.iter().all(|&c| !shown[c]),
                "{what}, width {width}:\n{text}"
            );
        }
        assert_eq!(
            text.contains("columns hidden to fit"),
            shown.iter().any(|s| !s),
            "{what}, width {width}:\n{text}"
        );
    }
}

/// Cell texts that wrap in every way comfy-table knows: spaces, long
/// words, double-width and zero-width characters, an emoji sequence.
const PIECES: [&str; 16] = [
    "",
    "-",
    "x",
    "1.23 ms",
    "TLS 1.3 full",
    "a b c d e f g",
    "averyveryverylongwordwithoutanyspaces",
    "split  by  two  spaces",
    "中文字符 和 更多",
    "e\u{301}e\u{301}e\u{301}",
    "🙂\u{200d}↕\u{fe0f} ok",
    "1\u{fe0f}\u{20e3} keycap",
    "(h2,http/1.1)",
    "FIN by client",
    " leading and trailing ",
    "ñandú.example",
];

fn random_rows(rng: &mut Xorshift, count: usize) -> Vec<Vec<String>> {
    (0..count)
        .map(|_| {
            (0..COLUMNS)
                .map(|_| {
                    let parts = rng.next() % 3;
                    (0..=parts)
                        .map(|_| PIECES[(rng.next() % PIECES.len() as u64) as usize])
                        .collect::<Vec<_>>()
                        .join(if rng.next() % 2 == 0 { " " } else { "" })
                })
                .collect()
        })
        .collect()
}

#[test]
fn awkward_cells_draw_as_the_whole_table() {
    let mut rng = Xorshift(0x5eed_7ab1e);
    for count in [1, 2, 3, 9, 40] {
        for _ in 0..4 {
            let rows = random_rows(&mut rng, count);
            assert_same(&rows, &format!("{count} random rows"));
        }
    }
}

#[test]
fn a_column_of_too_many_shapes_keeps_its_widths() {
    // Two words of every pair of lengths, so that the server-name column
    // has more shapes than are kept.
    let rows: Vec<Vec<String>> = (0..MAX_SHAPES + 500)
        .map(|k| {
            let mut cells: Vec<String> = HEADER.iter().map(|h| h.to_string()).collect();
            cells[7] = format!("{} {}", "w".repeat(1 + k % 97), "w".repeat(1 + k / 97));
            cells[0] = k.to_string();
            cells
        })
        .collect();
    let shapes = shapes_of(&rows);
    assert!(matches!(shapes.columns[7], Shape::Widest(_)));
    assert!(matches!(shapes.columns[1], Shape::Exact(..)));
    // As wide as its content: the same table.
    let plain = arrangements()[0];
    assert_eq!(chunked(&rows, plain, 100), whole(&rows, plain));
    // Wrapped: every row there, every line as wide as the border.
    for &width in &WIDTHS {
        let arrange = Arrange {
            dynamic: true,
            width: Some(width),
        };
        let text = chunked(&rows, arrange, 100);
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('(')).collect();
        let border = lines[0].width();
        assert!(lines.iter().all(|l| l.width() == border), "width {width}");
        // Every row, in order: the id column's pieces spell the ids.
        let body = lines.iter().skip_while(|l| !l.starts_with('╞')).skip(1);
        let ids: String = body
            .filter_map(|l| l.strip_prefix('│')?.split('┆').next())
            .map(str::trim)
            .collect();
        let want: String = rows.iter().map(|r| r[0].as_str()).collect();
        assert!(ids == want, "width {width}: rows missing");
    }
}

#[test]
fn reads_the_widths_of_a_border() {
    let top = format!("┌{}┐", ["──"; COLUMNS].join("┬"));
    assert_eq!(border_widths(&top), Some(vec![2; COLUMNS]));
    assert_eq!(border_widths("┌──┬──┐"), Some(vec![2, 2]));
    assert_eq!(border_widths(&top.replace('┌', "+")), None);
    assert_eq!(border_widths(""), None);
}

#[test]
fn long_server_names_are_kept_within_the_byte_budget() {
    // Forty distinct 40 KiB names with spaces (a hostile capture's SNI):
    // more bytes than the shapes keep.
    let mut rng = Xorshift(9);
    let rows: Vec<Vec<String>> = (0..40)
        .map(|k| {
            let mut cells: Vec<String> = HEADER.iter().map(|h| h.to_string()).collect();
            cells[0] = k.to_string();
            cells[7] = (0..40 << 10)
                .map(|_| if rng.next() % 9 == 0 { ' ' } else { 'n' })
                .collect();
            cells
        })
        .collect();
    let shapes = shapes_of(&rows);
    assert!(matches!(shapes.columns[7], Shape::Widest(w) if w == 40 << 10));
    let plain = arrangements()[0];
    assert_eq!(chunked(&rows, plain, 7), whole(&rows, plain));
    let narrow = Arrange {
        dynamic: true,
        width: Some(100),
    };
    let text = chunked(&rows, narrow, 7);
    let border = text.lines().next().unwrap().width();
    assert!(text
        .lines()
        .filter(|l| !l.starts_with('('))
        .all(|l| l.width() == border));
}
