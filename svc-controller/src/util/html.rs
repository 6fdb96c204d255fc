//! HTML escaping, shared by the run-time pages (the public directory's index) and the
//! build script that renders the documentation (`build.rs` includes this file).

/// Escapes the five characters that matter in HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            super::escape(r#"<b>&"x'.txt"#),
            "&lt;b&gt;&amp;&quot;x&#39;.txt"
        );
        assert_eq!(super::escape("plain"), "plain");
    }
}
