//! Text from an agent made inert before it lands where a terminal will show it (a commit
//! message, which `git log | cat` prints raw).
//!
//! An agent's `commit-message` signal could hold an escape sequence (ESC, OSC 52 sets the
//! reader's clipboard), a carriage return that hides what came before it on the line, or a bidi
//! override that shows the text in another order than it is (U+202E, "Trojan Source"). Those are
//! dropped: every C0 control but newline and tab, DEL, every C1 control, and the bidi embeddings,
//! overrides and isolates (U+202A to U+202E, U+2066 to U+2069).

/// `text` without the characters that would act on a terminal or reorder what it shows.
pub(crate) fn inert(text: &str) -> String {
    text.chars().filter(|&c| !acts(c)).collect()
}

/// Whether `c` acts instead of being shown (see the module's list).
fn acts(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_c1_controls_and_bidi_overrides_are_dropped_and_text_kept() {
        let hostile = "Fix\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}[2J it\r\n\nbody\tline \u{202e}txt.exe\u{202c} \u{2067}x\u{2069} \u{9b}31m né 日本";
        assert_eq!(
            inert(hostile),
            "Fix]52;c;cm0gLXJmIH4=[2J it\n\nbody\tline txt.exe x 31m né 日本"
        );
    }
}
