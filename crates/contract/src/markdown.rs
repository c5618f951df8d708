//! Small Markdown helpers shared by the prompt renderer, the sidecars and the corrective message.

/// `text` as an inline code span whose fence is longer than any backtick run inside it.
pub(crate) fn code(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for ch in text.chars() {
        if ch == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    if longest == 0 {
        return format!("`{text}`");
    }
    let fence = "`".repeat(longest + 1);
    format!("{fence} {text} {fence}")
}

/// A fenced code block whose fence is longer than any backtick run at a line start inside it.
pub(crate) fn fenced(language: &str, body: &str) -> String {
    let longest = body
        .lines()
        .map(|line| line.chars().take_while(|c| *c == '`').count())
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let newline = if body.ends_with('\n') { "" } else { "\n" };
    format!("{fence}{language}\n{body}{newline}{fence}\n")
}

/// `text` made safe for one table cell: pipes escaped, line breaks as `<br>`.
pub(crate) fn table_cell(text: &str) -> String {
    text.trim()
        .replace('|', "\\|")
        .replace("\r\n", "<br>")
        .replace(['\n', '\r'], "<br>")
}

#[cfg(test)]
mod tests {
    use super::{code, fenced, table_cell};

    #[test]
    fn code_spans_survive_backticks() {
        assert_eq!(code("a"), "`a`");
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(code("``x"), "``` ``x ```");
    }

    #[test]
    fn fences_outgrow_the_body() {
        assert_eq!(fenced("json", "{}"), "```json\n{}\n```\n");
        assert_eq!(fenced("", "````\n"), "`````\n````\n`````\n");
    }

    #[test]
    fn cells_escape_pipes_and_breaks() {
        assert_eq!(table_cell(" a|b\r\nc\nd "), "a\\|b<br>c<br>d");
    }
}
