//! Lexer tests (spec §2.2, Appendix A): every token class, literal typing and range errors,
//! strings, comments, error recovery, `line:col` locations, and spans mapped back through
//! macro expansion by the preprocessor.

use choreo_compiler::diagnostics::{Diagnostic, Diagnostics};
use choreo_compiler::dump::dump_tokens;
use choreo_compiler::lexer::{IntrinsicNames, expanded_verbatim, lex};
use choreo_compiler::preprocess::{PreprocessOptions, Region, preprocess};
use choreo_compiler::source::{SourceDb, Span};
use choreo_compiler::token::{
    AtomicOp, Dotted, ElemType, FloatLit, IntLit, IntLitType, Keyword, MathFn, Punct, StrLit,
    Token, TokenKind,
};

/// The result of lexing one text that was added to a fresh database as `t.co`.
struct Lexed {
    db: SourceDb,
    tokens: Vec<Token>,
    diags: Diagnostics,
}

impl Lexed {
    /// The token kinds without the final `Eof` (which is asserted to be there).
    fn kinds(&self) -> Vec<TokenKind> {
        let (last, rest) = self.tokens.split_last().expect("the lexer always returns Eof");
        assert_eq!(last.kind, TokenKind::Eof, "token list must end with Eof");
        assert!(
            rest.iter().all(|t| t.kind != TokenKind::Eof),
            "Eof only at the end: {:?}",
            self.tokens
        );
        rest.iter().map(|t| t.kind.clone()).collect()
    }

    /// The only token (besides Eof).
    fn single(&self) -> TokenKind {
        let kinds = self.kinds();
        assert_eq!(kinds.len(), 1, "expected one token, got {kinds:?}");
        kinds.into_iter().next().unwrap_or(TokenKind::Eof)
    }

    fn dump(&self) -> String {
        dump_tokens(&self.db, &self.tokens)
    }

    /// `(code, "t.co:L:C", message)` of every diagnostic, in order.
    fn errors(&self) -> Vec<(&'static str, String, String)> {
        self.diags
            .as_slice()
            .iter()
            .map(|d: &Diagnostic| (d.code, self.db.location(d.primary.span), d.message.clone()))
            .collect()
    }

    fn assert_clean(&self) {
        assert!(self.diags.is_empty(), "unexpected diagnostics: {:?}", self.errors());
    }

    /// The original text of each token (without Eof).
    fn snippets(&self) -> Vec<&str> {
        self.tokens[..self.tokens.len() - 1].iter().map(|t| self.db.snippet(t.span)).collect()
    }
}

fn lex_with(src: &str, intrinsics: &IntrinsicNames) -> Lexed {
    let mut db = SourceDb::new();
    let file = db.add("t.co", src);
    let text = expanded_verbatim(Span::new(file, 0..src.len()), src);
    let mut diags = Diagnostics::new();
    let tokens = lex(&text, intrinsics, &mut diags);
    Lexed { db, tokens, diags }
}

fn lex_text(src: &str) -> Lexed {
    lex_with(src, &IntrinsicNames::default())
}

fn int(value: i128, ty: IntLitType) -> TokenKind {
    TokenKind::Int(IntLit { value, ty })
}

fn float(value: f64, is_f32: bool) -> TokenKind {
    TokenKind::Float(FloatLit { value, is_f32 })
}

fn string(value: &str, raw: bool) -> TokenKind {
    TokenKind::Str(StrLit { value: value.to_string(), raw })
}

fn punct(p: Punct) -> TokenKind {
    TokenKind::Punct(p)
}

fn ident(name: &str) -> TokenKind {
    TokenKind::Ident(name.into())
}

#[test]
fn empty_input_is_just_eof() {
    for src in ["", "   \n\t\r\n", "// only a comment", "/* block */"] {
        let lexed = lex_text(src);
        lexed.assert_clean();
        assert_eq!(lexed.kinds(), Vec::<TokenKind>::new(), "{src:?}");
    }
}

/// Appendix A, minus the element-type aliases (`half bfp16 float double`, tested below).
#[test]
fn every_keyword_of_appendix_a_is_one_keyword_token() {
    let keywords = "__co__ auto mdspan ituple stream event frag print println mutable int bool void \
        true false inf nullptr dma tma swap rotate mma assert sync barrier fence cooperative \
        trigger if else inthreads parallel by with in foreach apply reduce_max reduce_sum \
        all_reduce_sum copy wait call select return where while break continue yield vectorize \
        unroll __asm__ asm volatile goto cdiv after local shared global term device cluster \
        block group-4 group thread __cpp__ __to __bar_arrive __bar_sync \
        __pragma_croq_intrinsic_prefix __pragma_croq_intrinsic_namespace";
    // The lexer's keyword table is exactly Appendix A (no keyword missing, none extra).
    let mut listed: Vec<&str> = keywords.split_whitespace().collect();
    let mut table: Vec<&str> = Keyword::SPELLINGS.iter().map(|(text, _)| *text).collect();
    listed.sort_unstable();
    table.sort_unstable();
    assert_eq!(table, listed);
    for word in keywords.split_whitespace() {
        let lexed = lex_text(word);
        lexed.assert_clean();
        match lexed.single() {
            TokenKind::Keyword(k) => assert_eq!(k.as_str(), word),
            other => panic!("{word:?} lexed as {other:?}, expected a keyword"),
        }
    }
    // Contextual identifiers stay identifiers.
    for word in ["ready", "schedule", "k_tiles", "launch_bounds", "maxnreg", "at", "span"] {
        assert_eq!(lex_text(word).single(), ident(word));
    }
}

#[test]
fn element_types_and_their_aliases() {
    let canonical = "f64 tf32 f32 f16 bf16 f8_e4m3 f8_e5m2 f8_ue4m3 f8_ue8m0 f6_e2m3 f6_e3m2 \
        f4_e2m1 s64 u64 s32 u32 s16 u16 s8 u8 s6 u6 s4 u4 s2 u2 u1 bin1";
    for name in canonical.split_whitespace() {
        match lex_text(name).single() {
            TokenKind::ElemType(t) => assert_eq!(t.as_str(), name),
            other => panic!("{name:?} lexed as {other:?}"),
        }
    }
    let aliases = [
        ("double", ElemType::F64),
        ("float", ElemType::F32),
        ("half", ElemType::F16),
        ("bfp16", ElemType::Bf16),
        ("f8", ElemType::F8E4m3),
    ];
    for (alias, ty) in aliases {
        assert_eq!(lex_text(alias).single(), TokenKind::ElemType(ty), "{alias}");
    }
    // Near misses are identifiers.
    for name in ["f31", "s33", "f32x", "u128", "bf", "f8_e4m2"] {
        assert_eq!(lex_text(name).single(), ident(name), "{name}");
    }
}

#[test]
fn math_atomic_and_library_builtins() {
    let math = "__sqrt __rsqrt __exp __exp2f __expm1 __log __log1p __pow __sin __cos __tan __asin \
        __acos __atan __atan2 __sinh __cosh __tanh __ceil __floor __round __fabs __sign \
        __isfinite __max __min __fmaf __frcp_rn __gelu __sigmoid __softplus __alignup __aligndown";
    for name in math.split_whitespace() {
        match lex_text(name).single() {
            TokenKind::Math(m) => assert_eq!(m.as_str(), name),
            other => panic!("{name:?} lexed as {other:?}"),
        }
    }
    assert_eq!(lex_text("__sqrt").single(), TokenKind::Math(MathFn::Sqrt));
    for op in ["add", "sub", "exch", "min", "max", "and", "or", "xor", "cas"] {
        let name = format!("__atomic_{op}");
        match lex_text(&name).single() {
            TokenKind::Atomic(a) => assert_eq!(a.as_str(), name),
            other => panic!("{name:?} lexed as {other:?}"),
        }
    }
    assert_eq!(lex_text("__atomic_cas").single(), TokenKind::Atomic(AtomicOp::Cas));
    assert_eq!(lex_text("__lib_gemm").single(), TokenKind::LibIdent("__lib_gemm".into()));
    // A name that is almost a built-in is an ordinary identifier.
    assert_eq!(lex_text("__sqrtf").single(), ident("__sqrtf"));

    let unknown = lex_text("x = __atomic_inc(a);");
    assert_eq!(unknown.kinds()[2], TokenKind::Error);
    assert_eq!(
        unknown.errors(),
        vec![(
            "E0208",
            "t.co:1:5".to_string(),
            "unknown atomic built-in '__atomic_inc'".to_string()
        )]
    );
}

#[test]
fn intrinsic_identifiers_by_prefix_namespace_and_scoped_pragma() {
    let names = IntrinsicNames {
        prefixes: vec!["cute_".to_string()],
        namespaces: vec!["cuda".to_string()],
    };
    let lexed = lex_with("cute_copy cuda :: sync cudax croq other cute", &names);
    lexed.assert_clean();
    assert_eq!(
        lexed.kinds(),
        vec![
            TokenKind::IntrinsicIdent("cute_copy".into()),
            TokenKind::IntrinsicIdent("cuda".into()),
            punct(Punct::ColonColon),
            TokenKind::Keyword(Keyword::Sync),
            ident("cudax"),
            // `croq` is always an intrinsic namespace.
            TokenKind::IntrinsicIdent("croq".into()),
            ident("other"),
            ident("cute"),
        ]
    );
    // Without registrations only `croq` is special.
    assert_eq!(lex_text("cute_copy").single(), ident("cute_copy"));

    // `__pragma_croq_intrinsic_prefix("my_")` inside a block registers the prefix until the
    // block closes.
    let scoped = lex_text(r#"{ my_a; __pragma_croq_intrinsic_prefix("my_"); my_b; } my_c"#);
    scoped.assert_clean();
    let kinds = scoped.kinds();
    assert_eq!(kinds[1], ident("my_a"));
    assert!(kinds.contains(&TokenKind::IntrinsicIdent("my_b".into())), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&ident("my_c")));
}

#[test]
fn identifiers_and_group_4() {
    let lexed = lex_text("_ _x1 a_B9 group-4 group - 4 group-42 groupx-4");
    lexed.assert_clean();
    assert_eq!(
        lexed.kinds(),
        vec![
            ident("_"),
            ident("_x1"),
            ident("a_B9"),
            TokenKind::Keyword(Keyword::Group4),
            TokenKind::Keyword(Keyword::Group),
            punct(Punct::Minus),
            int(4, IntLitType::S32),
            // `group-4` is a token only when no identifier character follows.
            TokenKind::Keyword(Keyword::Group),
            punct(Punct::Minus),
            int(42, IntLitType::S32),
            ident("groupx"),
            punct(Punct::Minus),
            int(4, IntLitType::S32),
        ]
    );
    assert_eq!(lexed.snippets()[3], "group-4");
    // `group-4x` is `group`, `-` and the malformed literal `4x`.
    let glued = lex_text("group-4x");
    assert_eq!(glued.kinds()[..2], [TokenKind::Keyword(Keyword::Group), punct(Punct::Minus)]);
    assert_eq!(glued.errors()[0].2, "invalid suffix 'x' on integer literal '4x'");
}

#[test]
fn dotted_keywords_include_the_dot() {
    let all = ".at .span .span_as .data .mdata .view .from .chunkat .chunk .subspan .modspan \
        .step .stride .sqz .copy .load .store .pad .transp .swiz .swizzle .sp .zfill .promote \
        .multicast .evict_first .evict_last .any .async .fill .row .col .scale .mask .map .remap";
    for text in all.split_whitespace() {
        match lex_text(text).single() {
            TokenKind::Dotted(d) => assert_eq!(d.as_str(), text),
            other => panic!("{text:?} lexed as {other:?}"),
        }
    }
    let lexed = lex_text("a.at(i) b . at x.foo y.span_asx");
    lexed.assert_clean();
    assert_eq!(
        lexed.kinds(),
        vec![
            ident("a"),
            TokenKind::Dotted(Dotted::At),
            punct(Punct::LParen),
            ident("i"),
            punct(Punct::RParen),
            // With spaces the dot is plain punctuation and `at` an identifier (spec §2.2).
            ident("b"),
            punct(Punct::Dot),
            ident("at"),
            ident("x"),
            punct(Punct::Dot),
            ident("foo"),
            ident("y"),
            punct(Punct::Dot),
            ident("span_asx"),
        ]
    );
}

#[test]
fn every_punctuation_token() {
    let all = [
        ("=", Punct::Assign),
        ("+", Punct::Plus),
        ("-", Punct::Minus),
        ("*", Punct::Star),
        ("/", Punct::Slash),
        ("%", Punct::Percent),
        ("++", Punct::PlusPlus),
        ("--", Punct::MinusMinus),
        ("+=", Punct::PlusAssign),
        ("-=", Punct::MinusAssign),
        ("*=", Punct::StarAssign),
        ("/=", Punct::SlashAssign),
        ("%=", Punct::PercentAssign),
        ("(", Punct::LParen),
        (")", Punct::RParen),
        ("{", Punct::LBrace),
        ("}", Punct::RBrace),
        ("[", Punct::LBracket),
        ("]", Punct::RBracket),
        ("[[", Punct::AttrOpen),
        (",", Punct::Comma),
        (";", Punct::Semi),
        (":", Punct::Colon),
        ("::", Punct::ColonColon),
        (".", Punct::Dot),
        ("<", Punct::Lt),
        (">", Punct::Gt),
        ("==", Punct::EqEq),
        ("!=", Punct::NotEq),
        ("<=", Punct::Le),
        (">=", Punct::Ge),
        ("&&", Punct::AndAnd),
        ("||", Punct::OrOr),
        ("!", Punct::Bang),
        ("<<", Punct::Shl),
        (">>", Punct::Shr),
        ("?", Punct::Question),
        ("??", Punct::QuestionQuestion),
        ("=>", Punct::FatArrow),
        ("<->", Punct::SwapArrow),
        ("|", Punct::Pipe),
        ("&", Punct::Amp),
        ("^", Punct::Caret),
        ("~", Punct::Tilde),
        ("#", Punct::Hash),
        ("#+", Punct::HashPlus),
        ("#-", Punct::HashMinus),
        ("#*", Punct::HashStar),
        ("#/", Punct::HashSlash),
        ("#%", Punct::HashPercent),
    ];
    for (text, p) in all {
        let lexed = lex_text(text);
        lexed.assert_clean();
        assert_eq!(lexed.single(), punct(p), "{text:?}");
    }
}

#[test]
fn punctuation_is_maximal_munch() {
    let cases: &[(&str, &[Punct])] = &[
        ("a<->b", &[Punct::SwapArrow]),
        ("x(::2)", &[Punct::LParen, Punct::ColonColon, Punct::RParen]),
        ("x(: :2)", &[Punct::LParen, Punct::Colon, Punct::Colon, Punct::RParen]),
        (
            "[[launch_bounds(1)]]",
            &[Punct::AttrOpen, Punct::LParen, Punct::RParen, Punct::RBracket, Punct::RBracket],
        ),
        ("[ [", &[Punct::LBracket, Punct::LBracket]),
        ("a=>b", &[Punct::FatArrow]),
        ("a==>b", &[Punct::EqEq, Punct::Gt]),
        ("??x", &[Punct::QuestionQuestion]),
        ("? ?x", &[Punct::Question, Punct::Question]),
        (
            "#+#-#*#/#%#x",
            &[
                Punct::HashPlus,
                Punct::HashMinus,
                Punct::HashStar,
                Punct::HashSlash,
                Punct::HashPercent,
                Punct::Hash,
            ],
        ),
        ("a<-b", &[Punct::Lt, Punct::Minus]),
        ("a<<=b", &[Punct::Shl, Punct::Assign]),
        ("a+++b", &[Punct::PlusPlus, Punct::Plus]),
        ("a---b", &[Punct::MinusMinus, Punct::Minus]),
        ("a&&&b", &[Punct::AndAnd, Punct::Amp]),
        ("a|||b", &[Punct::OrOr, Punct::Pipe]),
    ];
    for (src, expected) in cases {
        let lexed = lex_text(src);
        lexed.assert_clean();
        let puncts: Vec<Punct> = lexed
            .kinds()
            .into_iter()
            .filter_map(|k| if let TokenKind::Punct(p) = k { Some(p) } else { None })
            .collect();
        assert_eq!(&puncts, expected, "{src:?}");
    }
}

/// Spec §2.2: no `u` → signed 64-bit, s32 if it fits in `int` and has no `ll`; with `u` →
/// unsigned 64-bit, u32 if it fits and has no `ll`.
#[test]
fn integer_literal_typing() {
    use IntLitType::{S32, S64, U32, U64};
    let cases: &[(&str, i128, IntLitType)] = &[
        ("0", 0, S32),
        ("7", 7, S32),
        ("2147483647", 2_147_483_647, S32),
        ("2147483648", 2_147_483_648, S64),
        ("9223372036854775807", 9_223_372_036_854_775_807, S64),
        ("5l", 5, S32),
        ("5L", 5, S32),
        ("5ll", 5, S64),
        ("5LL", 5, S64),
        ("1u", 1, U32),
        ("1U", 1, U32),
        ("4294967295u", 4_294_967_295, U32),
        ("4294967296u", 4_294_967_296, U64),
        ("1ull", 1, U64),
        ("1ULL", 1, U64),
        ("1ul", 1, U32),
        ("18446744073709551615u", 18_446_744_073_709_551_615, U64),
        ("0x10", 16, S32),
        ("0XfF", 255, S32),
        ("0x7fffffff", 2_147_483_647, S32),
        ("0x80000000", 2_147_483_648, S64),
        ("0xFFFFFFFFu", 4_294_967_295, U32),
        ("0x7FFFFFFFFFFFFFFF", 9_223_372_036_854_775_807, S64),
        ("0xFFFFFFFFFFFFFFFFu", 18_446_744_073_709_551_615, U64),
        ("0x1ll", 1, S64),
    ];
    for &(src, value, ty) in cases {
        let lexed = lex_text(src);
        lexed.assert_clean();
        assert_eq!(lexed.single(), int(value, ty), "{src}");
    }
}

#[test]
fn integer_literals_out_of_range_report_the_spec_wording() {
    let lexed = lex_text("x = 1;\n  y = 9223372036854775808;\n z = 18446744073709551616u;");
    assert_eq!(
        lexed.errors(),
        vec![
            (
                "E0204",
                "t.co:2:7".to_string(),
                "signed integer literal '9223372036854775808' out of range [0, 9223372036854775807]"
                    .to_string()
            ),
            (
                "E0204",
                "t.co:3:6".to_string(),
                "unsigned integer literal '18446744073709551616u' out of range [0, 18446744073709551615]"
                    .to_string()
            ),
        ]
    );
    // Still one literal token each, so the parser sees a well-formed statement.
    let kinds = lexed.kinds();
    assert!(matches!(kinds[6], TokenKind::Int(IntLit { ty: IntLitType::S64, .. })), "{kinds:?}");
    assert!(matches!(kinds[10], TokenKind::Int(IntLit { ty: IntLitType::U64, .. })), "{kinds:?}");

    // Hex literals are range-checked as signed without `u`.
    let hex = lex_text("0x8000000000000000");
    assert_eq!(
        hex.errors(),
        vec![(
            "E0204",
            "t.co:1:1".to_string(),
            "signed integer literal '0x8000000000000000' out of range [0, 9223372036854775807]"
                .to_string()
        )]
    );
    // The magnitude is checked before the parser applies a minus (spec §2.2).
    let negative = lex_text("-9223372036854775808");
    assert_eq!(negative.kinds()[0], punct(Punct::Minus));
    assert_eq!(negative.errors().len(), 1);
    assert_eq!(negative.errors()[0].1, "t.co:1:2");
}

#[test]
fn malformed_numeric_literals() {
    let suffix = lex_text("12abc");
    assert_eq!(
        suffix.errors(),
        vec![(
            "E0205",
            "t.co:1:3".to_string(),
            "invalid suffix 'abc' on integer literal '12abc'".to_string()
        )]
    );
    assert_eq!(suffix.kinds().len(), 1, "one token for the whole literal");
    let octal = lex_text("017");
    assert_eq!(octal.errors().len(), 1);
    assert_eq!(octal.errors()[0].0, "E0205");
    assert!(octal.errors()[0].2.contains("octal"), "{:?}", octal.errors());
}

#[test]
fn minus_is_always_an_operator() {
    let lexed = lex_text("x-1.5f -1 - 2 x*-1");
    lexed.assert_clean();
    assert_eq!(
        lexed.kinds(),
        vec![
            ident("x"),
            punct(Punct::Minus),
            float(1.5, true),
            punct(Punct::Minus),
            int(1, IntLitType::S32),
            punct(Punct::Minus),
            int(2, IntLitType::S32),
            ident("x"),
            punct(Punct::Star),
            punct(Punct::Minus),
            int(1, IntLitType::S32),
        ]
    );
}

#[test]
fn float_literals_f32_f64_and_no_exponent() {
    let lexed = lex_text("1.5 1.5f 2.0F 0.125 10.25f inf");
    lexed.assert_clean();
    assert_eq!(
        lexed.kinds(),
        vec![
            float(1.5, false),
            float(1.5, true),
            float(2.0, true),
            float(0.125, false),
            float(10.25, true),
            // `inf` is a keyword; the parser makes it an f32 infinity.
            TokenKind::Keyword(Keyword::Inf),
        ]
    );
    // No `.5` or `5.` forms: they are a dot and an integer.
    let partial = lex_text(".5 5.");
    partial.assert_clean();
    assert_eq!(
        partial.kinds(),
        vec![
            punct(Punct::Dot),
            int(5, IntLitType::S32),
            int(5, IntLitType::S32),
            punct(Punct::Dot)
        ]
    );
    // No exponent form.
    let exponent = lex_text("1.5e3");
    assert_eq!(exponent.errors().len(), 1, "{:?}", exponent.errors());
    let (code, at, message) = &exponent.errors()[0];
    assert_eq!((*code, at.as_str()), ("E0205", "t.co:1:1"));
    assert_eq!(message, "invalid suffix 'e3' on floating literal '1.5e3'");
    assert!(
        exponent.diags.as_slice()[0].notes.iter().any(|n| n.contains("no exponent form")),
        "{:?}",
        exponent.diags.as_slice()[0]
    );
    let int_exponent = lex_text("1e-3");
    assert_eq!(int_exponent.errors().len(), 1, "{:?}", int_exponent.errors());
    assert_eq!(int_exponent.errors()[0].0, "E0205");
}

#[test]
fn strings_with_escapes() {
    let lexed = lex_text(r#"print("a\nb\t\"q\"\\ \x \0" "second");"#);
    lexed.assert_clean();
    let kinds = lexed.kinds();
    // Only \n \t \" \\ are processed; other escapes are kept as written (spec §2.2).
    assert_eq!(kinds[2], string("a\nb\t\"q\"\\ \\x \\0", false));
    // Adjacent strings are two tokens; the parser concatenates them.
    assert_eq!(kinds[3], string("second", false));
    assert_eq!(lexed.snippets()[2], r#""a\nb\t\"q\"\\ \x \0""#);
    // Non-ASCII text passes through.
    assert_eq!(lex_text("\"héllo ✓\"").single(), string("héllo ✓", false));
}

#[test]
fn raw_strings() {
    let lexed = lex_text("R\"(a\\nb \"q\")\" R\"xy(a)\" b)xy\" R\"(line1\nline2)\" R x");
    lexed.assert_clean();
    assert_eq!(
        lexed.kinds(),
        vec![
            string("a\\nb \"q\"", true),
            string("a)\" b", true),
            string("line1\nline2", true),
            ident("R"),
            ident("x"),
        ]
    );
    let after = lex_text("R\"(a\nb)\" y");
    assert_eq!(after.db.location(after.tokens[1].span), "t.co:2:5");
}

#[test]
fn raw_string_errors() {
    let unterminated = lex_text("x R\"abc(never closed)ab\"");
    assert_eq!(
        unterminated.errors(),
        vec![("E0202", "t.co:1:3".to_string(), "unterminated raw string literal".to_string())]
    );
    let too_long = lex_text("R\"abcdefghijklmnopq(x)abcdefghijklmnopq\"");
    assert_eq!(too_long.errors()[0].0, "E0207");
    assert_eq!(too_long.errors()[0].2, "invalid raw string delimiter");
    let no_paren = lex_text("R\"abc\" x");
    assert_eq!(no_paren.errors()[0].0, "E0207");
    assert_eq!(no_paren.errors()[0].1, "t.co:1:1");
}

#[test]
fn unterminated_strings_and_comments() {
    let string_at_eol = lex_text("a = \"abc\n  b;");
    assert_eq!(
        string_at_eol.errors(),
        vec![("E0202", "t.co:1:5".to_string(), "unterminated string literal".to_string())]
    );
    // Lexing resumes on the next line.
    let kinds = string_at_eol.kinds();
    assert_eq!(kinds[2], string("abc", false));
    assert_eq!(&kinds[3..], &[ident("b"), punct(Punct::Semi)]);
    assert_eq!(string_at_eol.db.location(string_at_eol.tokens[3].span), "t.co:2:3");

    let string_at_eof = lex_text("\"abc\\");
    assert_eq!(string_at_eof.errors()[0].0, "E0202");

    let comment = lex_text("x /* never\n closed");
    assert_eq!(
        comment.errors(),
        vec![("E0203", "t.co:1:3".to_string(), "unterminated block comment".to_string())]
    );
    assert_eq!(comment.kinds(), vec![ident("x")]);

    // Comments are skipped, including `/*` inside a line comment and `//` inside a block.
    let fine = lex_text("a // x /* y\n/* // */ b /**/ c");
    fine.assert_clean();
    assert_eq!(fine.kinds(), vec![ident("a"), ident("b"), ident("c")]);
}

/// Junk (e.g. a macro that expands to megabytes of it) is reported briefly: a long run shows its
/// start, and after 100 runs one more error says the rest is not reported.
#[test]
fn long_and_many_runs_of_bad_characters_are_reported_briefly() {
    let lexed = lex_text(&"@".repeat(40));
    assert_eq!(
        lexed.errors(),
        vec![(
            "E0201",
            "t.co:1:1".to_string(),
            format!("unexpected characters '{}…'", "@".repeat(16))
        )]
    );
    let lexed = lex_text(&"a @ ".repeat(500));
    let errors = lexed.errors();
    assert_eq!(errors.len(), 101, "{errors:?}");
    assert_eq!(errors[100].2, "more unexpected characters (after 100 reported)");
    assert_eq!(lexed.kinds().iter().filter(|k| **k == TokenKind::Error).count(), 500);
}

#[test]
fn bad_characters_are_reported_once_per_run() {
    let lexed = lex_text("a @ b $$ c `\n é d");
    assert_eq!(
        lexed.errors(),
        vec![
            ("E0201", "t.co:1:3".to_string(), "unexpected character '@'".to_string()),
            ("E0201", "t.co:1:7".to_string(), "unexpected characters '$$'".to_string()),
            ("E0201", "t.co:1:12".to_string(), "unexpected character '`'".to_string()),
            ("E0201", "t.co:2:2".to_string(), "unexpected character 'é'".to_string()),
        ]
    );
    assert_eq!(
        lexed.kinds(),
        vec![
            ident("a"),
            TokenKind::Error,
            ident("b"),
            TokenKind::Error,
            ident("c"),
            TokenKind::Error,
            TokenKind::Error,
            ident("d"),
        ]
    );
}

#[test]
fn character_literals_are_rejected_as_one_token() {
    let lexed = lex_text("x = 'a' + 1;\ny = ';");
    let errors = lexed.errors();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!((errors[0].0, errors[0].1.as_str()), ("E0201", "t.co:1:5"));
    assert!(errors[0].2.contains("character literal"), "{errors:?}");
    assert_eq!((errors[1].0, errors[1].1.as_str()), ("E0201", "t.co:2:5"));
    let kinds = lexed.kinds();
    assert_eq!(kinds[2], TokenKind::Error);
    assert_eq!(lexed.snippets()[2], "'a'");
    assert_eq!(kinds[3], punct(Punct::Plus), "lexing resumes after the closing quote");
    // An unclosed quote is one character; the rest of the line is lexed normally.
    assert_eq!(lexed.snippets()[8], "'");
    assert_eq!(kinds[9], punct(Punct::Semi));
}

#[test]
fn removed_stage_syntax_is_a_specific_error() {
    let lexed = lex_text("x = stage<2>(y);");
    assert_eq!(lexed.errors().len(), 1, "{:?}", lexed.errors());
    let (code, at, message) = &lexed.errors()[0];
    assert_eq!((*code, at.as_str()), ("E0206", "t.co:1:5"));
    assert!(message.contains("stage<N>"), "{message}");
    assert_eq!(lexed.kinds()[2], TokenKind::Error);
    assert_eq!(lexed.snippets()[2], "stage<2>");
    // Spaces do not hide it.
    assert_eq!(lex_text("stage < N > (y)").errors()[0].0, "E0206");
    // `stage` as a name, or compared, is fine.
    let plain = lex_text("stage = 1; stage < 2; stage<2> x");
    plain.assert_clean();
    assert!(plain.kinds().iter().filter(|k| **k == ident("stage")).count() == 3);
}

#[test]
fn locations_are_one_based_lines_and_character_columns() {
    let src = "__co__ void f() {\r\n\tparallel p by 4 {\n  /* é ✓ */ a.at(p) = 1.0f;\n}}";
    let lexed = lex_text(src);
    lexed.assert_clean();
    let expected = "\
1:1 keyword __co__
1:8 keyword void
1:13 ident f
1:14 punct (
1:15 punct )
1:17 punct {
2:2 keyword parallel
2:11 ident p
2:13 keyword by
2:16 int 4 s32
2:18 punct {
3:13 ident a
3:14 dotted .at
3:17 punct (
3:18 ident p
3:19 punct )
3:21 punct =
3:23 float 1.0 f32
3:27 punct ;
4:1 punct }
4:2 punct }
4:3 eof
";
    assert_eq!(lexed.dump(), expected);
    // Spans cover exactly the token text.
    assert_eq!(
        lexed.snippets(),
        vec![
            "__co__", "void", "f", "(", ")", "{", "parallel", "p", "by", "4", "{", "a", ".at", "(",
            "p", ")", "=", "1.0f", ";", "}", "}"
        ]
    );
}

#[test]
fn dump_shows_literal_values_and_types() {
    let lexed = lex_text("7u 1.5 \"a\\n\" R\"(r)\" inf @");
    let dump = lexed.dump();
    assert_eq!(
        dump,
        "1:1 int 7 u32\n1:4 float 1.5 f64\n1:8 str \"a\\n\"\n1:14 str raw \"r\"\n\
         1:21 keyword inf\n1:25 error \"@\"\n1:26 eof\n"
    );
}

fn preprocess_function(src: &str, defines: &[(&str, Option<&str>)]) -> Lexed {
    let mut db = SourceDb::new();
    let file = db.add("m.co", src);
    let mut diags = Diagnostics::new();
    let options = PreprocessOptions {
        defines: defines.iter().map(|(n, v)| (n.to_string(), v.map(str::to_string))).collect(),
    };
    let pre = preprocess(&db, file, &options, &mut diags);
    let names = IntrinsicNames::from_preprocessed(&pre);
    let mut functions = pre.regions.iter().filter_map(|r| match r {
        Region::CoFunction { text, .. } => Some(text),
        _ => None,
    });
    let text = functions.next().expect("one __co__ function");
    assert!(functions.next().is_none(), "exactly one __co__ function");
    let tokens = lex(text, &names, &mut diags);
    Lexed { db, tokens, diags }
}

#[test]
fn spans_map_through_macro_expansion() {
    let src = "\
#define TILE 16
#define HALF(x) ((x) / 2)
__co__ void k(f32 [TILE] a) {
#define LOCAL 3
  parallel t by HALF(TILE) : thread { a.at(t) = LOCAL; }
}
";
    let lexed = preprocess_function(src, &[]);
    lexed.assert_clean();
    let at = |i: usize| lexed.db.location(lexed.tokens[i].span);
    let kinds = lexed.kinds();
    // `f32 [TILE]`: the 16 came from `TILE` at 3:20.
    assert_eq!(kinds[6], int(16, IntLitType::S32));
    assert_eq!((at(6).as_str(), lexed.snippets()[6]), ("m.co:3:20", "TILE"));
    // Every token of `((16) / 2)` maps to the whole invocation `HALF(TILE)`.
    let by = kinds.iter().position(|k| *k == TokenKind::Keyword(Keyword::By)).unwrap_or(0);
    let expansion = &lexed.tokens[by + 1..by + 8];
    let texts: Vec<String> = expansion.iter().map(|t| format!("{:?}", t.kind)).collect();
    assert_eq!(expansion.len(), 7, "{texts:?}");
    assert_eq!(expansion[2].kind, int(16, IntLitType::S32));
    assert_eq!(expansion[5].kind, int(2, IntLitType::S32));
    for t in expansion {
        assert_eq!(lexed.db.location(t.span), "m.co:5:17");
        assert_eq!(lexed.db.snippet(t.span), "HALF(TILE)");
    }
    // Verbatim text after the expansion keeps its own columns; the local #define line is gone
    // but line numbers are preserved.
    assert_eq!(lexed.tokens[by + 8].kind, punct(Punct::Colon));
    assert_eq!(at(by + 8), "m.co:5:28");
    let local = kinds.iter().position(|k| *k == int(3, IntLitType::S32)).unwrap_or(0);
    assert_eq!((at(local).as_str(), lexed.snippets()[local]), ("m.co:5:49", "LOCAL"));
    assert_eq!(at(kinds.len()), "m.co:6:2", "Eof after the closing brace");
}

#[test]
fn command_line_defines_and_host_pragmas_reach_the_lexer() {
    let src = "#pragma croq intrinsic prefix cute_\n__co__ void k() { x = N; cute_f(); }\n";
    let lexed = preprocess_function(src, &[("N", Some("0x20u"))]);
    lexed.assert_clean();
    let kinds = lexed.kinds();
    assert!(kinds.contains(&int(32, IntLitType::U32)), "{kinds:?}");
    assert!(kinds.contains(&TokenKind::IntrinsicIdent("cute_f".into())), "{kinds:?}");

    // `-D N` without a value means 1 (spec §3).
    let one = preprocess_function("__co__ void k() { x = N; }", &[("N", None)]);
    assert!(one.kinds().contains(&int(1, IntLitType::S32)));

    // An in-function pragma becomes a registration statement for the lexer.
    let inner = preprocess_function(
        "__co__ void k() {\n#pragma croq intrinsic namespace ns\n  ns::f();\n}\n",
        &[],
    );
    inner.assert_clean();
    let kinds = inner.kinds();
    assert!(kinds.contains(&TokenKind::Keyword(Keyword::PragmaNamespace)), "{kinds:?}");
    assert!(kinds.contains(&TokenKind::IntrinsicIdent("ns".into())), "{kinds:?}");
}

/// A tiny xorshift generator: deterministic pseudo-random inputs without dependencies.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn arbitrary_text_never_panics_and_spans_stay_in_bounds() {
    let alphabet: Vec<char> =
        "ab_Rxu0159.\"\\()[]{}<>-+=*/%#?:;,!&|^~@$` \n\té✓\r".chars().collect();
    let pieces =
        ["R\"(", ")\"", "/*", "*/", "//", "0x", "group-4", ".at", "stage<2>(", "1.5f", "\\"];
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2000 {
        let len = (rng.next() % 60) as usize;
        let mut src = String::new();
        for _ in 0..len {
            if rng.next() % 5 == 0 {
                src.push_str(pieces[(rng.next() % pieces.len() as u64) as usize]);
            } else {
                src.push(alphabet[(rng.next() % alphabet.len() as u64) as usize]);
            }
        }
        let lexed = lex_text(&src);
        assert_eq!(lexed.tokens.last().map(|t| &t.kind), Some(&TokenKind::Eof), "{src:?}");
        let mut previous_start = 0;
        for t in &lexed.tokens {
            assert!(t.span.start <= t.span.end && t.span.end as usize <= src.len(), "{src:?}");
            assert!(src.is_char_boundary(t.span.start as usize), "{src:?}");
            assert!(t.span.start >= previous_start, "tokens in order: {src:?}");
            previous_start = t.span.start;
        }
        // Every error token comes with a diagnostic.
        let error_tokens = lexed.tokens.iter().filter(|t| t.kind == TokenKind::Error).count();
        assert!(lexed.diags.len() >= error_tokens, "{src:?}");
    }
}
