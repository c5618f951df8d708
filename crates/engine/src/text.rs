//! Text helpers every adapter needs for the CLI's words: quoting them shortened in a diagnosis.

/// `text` cut to at most `keep` bytes at a character boundary, saying how long it was.
pub fn shorten(text: &str, keep: usize) -> String {
    if text.len() <= keep {
        return text.to_string();
    }
    let mut end = keep;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes in all]", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortening_keeps_whole_characters_and_names_the_length() {
        assert_eq!(shorten("short", 10), "short");
        assert_eq!(shorten("ééé", 3), "é… [6 bytes in all]");
    }
}
