//! The cache digest of generated C++ (`.cu`, `.cpp`): comments do not count.
//!
//! A `.co` file's host code — everything outside `__co__` functions, comments included — is
//! copied verbatim into the generated `.cu` and `.cpp` (after a `#line` directive, so compiler
//! messages point at `.co` lines). A comment-only edit of a `.co` file therefore changes the
//! generated text; hashing it with every comment replaced by one space (as the C++
//! preprocessor does, translation phase 3) keeps the object cache valid across such edits.
//! Comments inside `__co__` functions do not reach the generated text at all.
//!
//! The newlines inside a comment are kept, so an edit that adds or removes lines still changes
//! the digest: the `#line` directives after it (and `__LINE__`, the line table of `-lineinfo`)
//! change with it, and the object must be rebuilt.
//!
//! Soundness comes first: two texts may only get the same digest when a C++ compiler sees the
//! same tokens on the same lines. The scanner knows string and character literals (with
//! encoding prefixes), raw strings, pp-numbers with digit separators (`1'000`) and header
//! names (`#include <a//b.h>`); anything it is not sure about — a line splice (`\` + newline)
//! that could join or end a comment, an unterminated block comment or raw string — makes it
//! give up, and the digest is then that of the whole text (comments count again).

use crate::hash::{Digest, Hasher};

/// The digest of C++ source `text` with its comments replaced by a space (see the module
/// docs); of the whole text where that is not certain to be the same program.
pub(crate) fn code_digest(text: &str) -> Digest {
    match without_comments(text) {
        Some(code) => Hasher::new().field("code without comments").field(code).finish(),
        None => Hasher::new().field("whole text").field(text).finish(),
    }
}

/// `text` with every comment replaced by one space and the newlines it contained; `None` when
/// the scanner cannot be sure where a comment begins or ends.
pub(crate) fn without_comments(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    // Only whitespace since the last newline (a `#` there starts a directive).
    let mut line_start = true;
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        match c {
            b'/' if next == Some(b'/') => {
                // A line comment, to the newline; a splice at its end would continue it.
                let end =
                    bytes[i..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| i + p);
                let body = &bytes[i..end];
                let trimmed = body.iter().rposition(|b| !b" \t\r".contains(b));
                if trimmed.is_some_and(|last| body[last] == b'\\') {
                    return None;
                }
                out.push(b' ');
                i = end;
            }
            b'/' if next == Some(b'*') => {
                let rest = &bytes[i + 2..];
                let close = rest.windows(2).position(|w| w == b"*/")?;
                let body = &rest[..close];
                // `*\` + newline + `/` would end the comment earlier, after splicing.
                if body.contains(&b'\\') {
                    return None;
                }
                out.push(b' ');
                out.extend(body.iter().filter(|&&b| b == b'\n'));
                i += 2 + close + 2;
            }
            // A splice right after `/` could make `//` or `/*` of two lines.
            b'/' if next == Some(b'\\') => return None,
            b'"' => i = copy_quoted(bytes, i, b'"', &mut out),
            b'\'' => i = copy_quoted(bytes, i, b'\'', &mut out),
            b'#' if line_start => {
                // A directive: a header name in `<…>` is not scanned for comments.
                let mut j = i + 1;
                while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\t') {
                    j += 1;
                }
                let word_end = j + bytes[j..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                    .count();
                let word = &bytes[j..word_end];
                out.extend_from_slice(&bytes[i..word_end]);
                i = word_end;
                if matches!(word, b"include" | b"include_next" | b"import") {
                    while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
                        out.push(bytes[i]);
                        i += 1;
                    }
                    if bytes.get(i) == Some(&b'<') {
                        let end = bytes[i..]
                            .iter()
                            .position(|&b| b == b'>' || b == b'\n')
                            .map_or(bytes.len(), |p| i + p + usize::from(bytes[i + p] == b'>'));
                        out.extend_from_slice(&bytes[i..end]);
                        i = end;
                    }
                }
                line_start = false;
                continue;
            }
            c if ident_byte(c) && !c.is_ascii_digit() => {
                let end = i + bytes[i..].iter().take_while(|b| ident_byte(**b)).count();
                let word = &bytes[i..end];
                out.extend_from_slice(word);
                i = end;
                let quote = bytes.get(i).copied();
                let prefix = |p: &[u8]| matches!(p, b"L" | b"u" | b"U" | b"u8");
                match (word.split_last(), quote) {
                    // A raw string: verbatim up to `)delimiter"`.
                    (Some((b'R', before)), Some(b'"')) if before.is_empty() || prefix(before) => {
                        let open = bytes[i + 1..].iter().position(|&b| b == b'(')?;
                        let delimiter = &bytes[i + 1..i + 1 + open];
                        if delimiter.len() > 16
                            || delimiter.iter().any(|b| b" ()\\\t\n\r\"".contains(b))
                        {
                            return None;
                        }
                        let mut closing = vec![b')'];
                        closing.extend_from_slice(delimiter);
                        closing.push(b'"');
                        let body = i + 2 + open;
                        let close =
                            bytes[body..].windows(closing.len()).position(|w| w == closing)?;
                        let end = body + close + closing.len();
                        out.extend_from_slice(&bytes[i..end]);
                        i = end;
                    }
                    _ if prefix(word) && quote == Some(b'"') => {
                        i = copy_quoted(bytes, i, b'"', &mut out);
                    }
                    _ if prefix(word) && quote == Some(b'\'') => {
                        i = copy_quoted(bytes, i, b'\'', &mut out);
                    }
                    _ => {}
                }
                line_start = false;
                continue;
            }
            c if c.is_ascii_digit() || (c == b'.' && next.is_some_and(|n| n.is_ascii_digit())) => {
                // A pp-number: its `'` are digit separators, not character literals.
                let mut j = i + 1;
                while j < bytes.len() {
                    let b = bytes[j];
                    let exponent_sign = (b == b'+' || b == b'-') && b"eEpP".contains(&bytes[j - 1]);
                    let separator = b == b'\''
                        && bytes
                            .get(j + 1)
                            .is_some_and(|n| n.is_ascii_alphanumeric() || *n == b'_');
                    if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || exponent_sign {
                        j += 1;
                    } else if separator {
                        j += 2;
                    } else {
                        break;
                    }
                }
                out.extend_from_slice(&bytes[i..j]);
                i = j;
                line_start = false;
                continue;
            }
            // A splice that could join the parts of a token (or a token and a literal): the
            // tokens are no longer certain. Multi-line macros put a space before theirs.
            b'\\'
                if matches!(next, Some(b'\n' | b'\r'))
                    && i > 0
                    && (ident_byte(bytes[i - 1]) || b"/*'\"".contains(&bytes[i - 1])) =>
            {
                return None;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
        match c {
            b'\n' => line_start = true,
            b' ' | b'\t' | b'\r' | b'\x0c' | b'\x0b' => {}
            // After a comment the line may still be at its start (`/* x */ #define`): the
            // preprocessor treats a comment as whitespace.
            b'/' if matches!(next, Some(b'/' | b'*')) => {}
            _ => line_start = false,
        }
    }
    // The input was UTF-8 and only ASCII comments' bytes were replaced by ASCII bytes.
    String::from_utf8(out).ok()
}

/// A byte of an identifier (or of a pp-number); bytes of non-ASCII characters count, as in
/// the compilers' extended identifiers.
fn ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Copies the literal opening with `quote` at `start` up to its closing quote (escapes
/// respected) or, unterminated, up to the end of the line (where the compiler ends it too);
/// returns the index after it.
fn copy_quoted(bytes: &[u8], start: usize, quote: u8, out: &mut Vec<u8>) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => break,
            b if b == quote => {
                i += 1;
                break;
            }
            _ => i += 1,
        }
    }
    let end = i.min(bytes.len());
    out.extend_from_slice(&bytes[start..end]);
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(text: &str) -> String {
        without_comments(text).unwrap_or_else(|| panic!("gave up on {text:?}"))
    }

    #[test]
    fn comments_become_a_space_and_keep_their_newlines() {
        assert_eq!(strip("int a; // note\nint b;\n"), "int a;  \nint b;\n");
        assert_eq!(strip("int /* x */ a;"), "int   a;");
        assert_eq!(strip("a /* one\ntwo\nthree */ b"), "a  \n\n b");
        assert_eq!(strip("// only\n"), " \n");
        // Another comment text, same code: the same digest; another line count: not.
        assert_eq!(code_digest("f(); // one\n"), code_digest("f(); // two words\n"));
        assert_eq!(code_digest("/* a */ f();"), code_digest("/* bb */ f();"));
        assert_ne!(code_digest("/* a */ f();"), code_digest("/* a\n */ f();"));
        assert_ne!(code_digest("f(); // x\n"), code_digest("g(); // x\n"));
    }

    #[test]
    fn literals_are_not_comments() {
        for text in [
            r#"const char* s = "a // b";"#,
            r#"const char* s = "a /* b */ c";"#,
            r#"const char* s = "esc \" // still string";"#,
            "char c = '\"'; const char* s = \"// in string\";",
            "char c = '/'; char d = '*';",
            r#"auto s = u8"x // y"; auto w = L"/* z */";"#,
            r#"auto r = R"(// not " /* no */)";"#,
            r#"auto r = R"xy(a )" // b )xy";"#,
            r#"auto r = LR"(/* c */)";"#,
        ] {
            assert_eq!(strip(text), text, "{text}");
        }
        // A raw string ends at its first `)"`: what follows is code again.
        assert_eq!(strip(r#"R"(a)" /* c */ ")""#), r#"R"(a)"   ")""#);
        // After a literal, a comment is one again.
        assert_eq!(strip(r#"f("//"); // c"#), r#"f("//");  "#);
        // Digit separators do not open character literals: the string after one stays whole.
        let text = r#"int n = 1'000; const char* s = "it's // not a comment";"#;
        assert_eq!(strip(text), text);
        assert_ne!(code_digest(text), code_digest(&text.replace("not a", "no")));
        assert_eq!(strip("double d = 1.5e+3; // x"), "double d = 1.5e+3;  ");
    }

    #[test]
    fn header_names_are_not_comments() {
        let text = "#include <a//b.h>\n#  include <c/*d*/e.h>\n";
        assert_eq!(strip(text), text);
        assert_eq!(strip("#include \"x.h\" // why\n"), "#include \"x.h\"  \n");
    }

    #[test]
    fn uncertain_splices_and_unterminated_comments_keep_every_comment() {
        for text in [
            "// a comment \\\n continued\nint x;",
            "// trailing space after the splice \\  \nint x;",
            "/* a \\\n b */ int x;",
            "/* *\\\n/ int x; */",
            "a = b /\\\n/ c;\n",
            "/* never closed",
            "int ab\\\ncd;",
            "f(\"x\"\\\n);",
            r#"auto r = R"(never closed"#,
        ] {
            assert_eq!(without_comments(text), None, "{text:?}");
        }
        // Then the digest is the whole text's: a change in the comment changes it.
        assert_ne!(code_digest("/* a \\\n b */ x"), code_digest("/* a \\\n c */ x"));
        // A splice in code (a multi-line macro) is fine.
        assert_eq!(strip("#define M(x) \\\n  (x) // m\n"), "#define M(x) \\\n  (x)  \n");
    }

    #[test]
    fn non_ascii_text_survives() {
        assert_eq!(
            strip("// ünïcode\nconst char* s = \"é\"; /* ñ */\n"),
            " \nconst char* s = \"é\";  \n"
        );
    }
}
