// SPDX-License-Identifier: GPL-2.0-only
//! Text from outside (a report, a stats server, a command line) made safe to print.

/// `s` for a terminal or a file: at most `max` characters, each control character (ESC,
/// CR, LF, DEL, C1, ...) replaced by '?'. Strings from a report or a stats server are
/// printed through this: an escape sequence in them is not the terminal's to run.
pub fn printable(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if s.chars().nth(max).is_some() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn printable_cuts_and_masks() {
        assert_eq!(printable(&"x".repeat(10), 4), "xxxx...");
        assert_eq!(printable("a\u{1b}[2Jb\r\n", 80), "a?[2Jb??");
        assert_eq!(printable("abcd", 4), "abcd");
    }
}
