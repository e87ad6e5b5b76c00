//! The `{field}` syntax every load template shares (the key-value
//! workloads' `--command`, http's URL, header values and body): literal
//! bytes and fields named in braces, `{{` and `}}` for literal braces.
//! One parser, so the escapes and the messages are the same everywhere;
//! each caller says which fields it knows.

/// One piece of a template: literal bytes or a field of type `F`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece<F> {
    /// Bytes as written (escapes resolved).
    Lit(Vec<u8>),
    /// A field, filled per request.
    Field(F),
}

/// Why a template does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldError {
    /// `{name}` with a name not among the known fields.
    Unknown(String),
    /// A `{` at this byte offset that does not open a `{name}`.
    Unclosed(usize),
    /// A `}` at this byte offset that closes nothing.
    Stray(usize),
}

impl FieldError {
    /// The message, naming the known fields (`known`) for an unknown one.
    pub fn message<F>(&self, known: &[(&str, F)]) -> String {
        match self {
            Self::Unknown(name) => {
                format!("unknown field {{{name}}}: the fields are {}", list(known))
            }
            Self::Unclosed(at) => {
                format!("unclosed '{{' at byte {at} (write {{{{ for a literal brace)")
            }
            Self::Stray(at) => format!("stray '}}' at byte {at} (write }}}} for a literal brace)"),
        }
    }
}

/// `{a}`, `{a} and {b}`, `{a}, {b} and {c}`.
fn list<F>(known: &[(&str, F)]) -> String {
    let names: Vec<String> = known.iter().map(|(n, _)| format!("{{{n}}}")).collect();
    match names.split_last() {
        None => "none".into(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// A byte of a field name.
fn is_name(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The length of the `{name}` (name possibly empty) starting at `text[0]`,
/// which is `{`; None when no `}` ends a run of name bytes.
fn field_at(text: &[u8]) -> Option<usize> {
    let n = text[1..].iter().take_while(|&&b| is_name(b)).count();
    (text.get(1 + n) == Some(&b'}')).then_some(n + 2)
}

/// True when `text` holds something written as a field: `{` name `}` with
/// a name of at least one letter, digit or underscore. Text without one
/// (a JSON body, `{}`) can be sent as it is, braces and all.
pub fn has_field(text: &[u8]) -> bool {
    text.iter()
        .enumerate()
        .any(|(i, &b)| b == b'{' && field_at(&text[i..]).is_some_and(|n| n > 2))
}

/// Parses `text` into pieces: `{name}` is the field `known` maps `name`
/// to, `{{` and `}}` literal braces, any other brace an error. Adjacent
/// literal bytes make one piece; empty text is no piece.
pub fn parse<F: Clone>(text: &[u8], known: &[(&str, F)]) -> Result<Vec<Piece<F>>, FieldError> {
    let mut out = Vec::new();
    let mut lit = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if rest.starts_with(b"{{") || rest.starts_with(b"}}") {
            lit.push(rest[0]);
            i += 2;
        } else if rest[0] == b'{' {
            let n = field_at(rest).ok_or(FieldError::Unclosed(i))?;
            let name = std::str::from_utf8(&rest[1..n - 1]).unwrap_or_default();
            let Some((_, f)) = known.iter().find(|(k, _)| *k == name) else {
                return Err(FieldError::Unknown(name.to_string()));
            };
            if !lit.is_empty() {
                out.push(Piece::Lit(std::mem::take(&mut lit)));
            }
            out.push(Piece::Field(f.clone()));
            i += n;
        } else if rest[0] == b'}' {
            return Err(FieldError::Stray(i));
        } else {
            lit.push(rest[0]);
            i += 1;
        }
    }
    if !lit.is_empty() {
        out.push(Piece::Lit(lit));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[(&str, char)] = &[("key", 'k'), ("value", 'v'), ("seq", 's')];

    #[test]
    fn fields_and_escapes_parse() {
        assert_eq!(
            parse(b"/k/{key}?v={value}&n={seq}", KNOWN).unwrap(),
            [
                Piece::Lit(b"/k/".to_vec()),
                Piece::Field('k'),
                Piece::Lit(b"?v=".to_vec()),
                Piece::Field('v'),
                Piece::Lit(b"&n=".to_vec()),
                Piece::Field('s'),
            ]
        );
        assert_eq!(
            parse(b"{{\"k\":\"{key}\"}}", KNOWN).unwrap(),
            [
                Piece::Lit(b"{\"k\":\"".to_vec()),
                Piece::Field('k'),
                Piece::Lit(b"\"}".to_vec()),
            ]
        );
        assert_eq!(
            parse(b"{{key}}", KNOWN).unwrap(),
            [Piece::Lit(b"{key}".to_vec())]
        );
        assert_eq!(parse(b"", KNOWN).unwrap(), []);
        // Bytes that are not UTF-8 pass through.
        assert_eq!(
            parse(b"\xff{seq}", KNOWN).unwrap()[0],
            Piece::Lit(vec![0xff])
        );
    }

    #[test]
    fn bad_braces_and_unknown_fields_say_which() {
        assert_eq!(
            parse(b"a{foo}", KNOWN),
            Err(FieldError::Unknown("foo".into()))
        );
        assert_eq!(parse(b"{}", KNOWN), Err(FieldError::Unknown(String::new())));
        assert_eq!(parse(b"ab{key", KNOWN), Err(FieldError::Unclosed(2)));
        assert_eq!(parse(b"{\"a\":1}", KNOWN), Err(FieldError::Unclosed(0)));
        assert_eq!(parse(b"x}", KNOWN), Err(FieldError::Stray(1)));
        let m = FieldError::Unknown("foo".into()).message(KNOWN);
        assert_eq!(
            m,
            "unknown field {foo}: the fields are {key}, {value} and {seq}"
        );
        let m = FieldError::Unknown("x".into()).message(&KNOWN[..2]);
        assert!(m.ends_with("the fields are {key} and {value}"), "{m}");
        assert!(
            FieldError::Stray(3)
                .message(KNOWN)
                .contains("stray '}' at byte 3")
        );
    }

    #[test]
    fn only_a_named_field_makes_text_a_template() {
        assert!(has_field(b"/{key}"));
        assert!(has_field(b"{foo}"));
        assert!(has_field(b"{{key}}"));
        for plain in [&b"{\"a\":{\"b\":[]}}"[..], b"{}", b"{ key }", b"/a/b", b"{"] {
            assert!(!has_field(plain), "{}", String::from_utf8_lossy(plain));
        }
    }
}
