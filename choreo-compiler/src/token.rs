//! Tokens of tileflow (`__co__`) code (spec §2.2, Appendix A).
//!
//! A [`Token`] is a [`TokenKind`] plus the [`Span`] of the user's original text it came from
//! (already mapped back through the preprocessor's origin map). Reserved words, element-type
//! names, math built-ins, atomics and the dotted member keywords (`.at`, `.span`, …) are distinct
//! kinds, so the parser never compares identifier strings for them.

use crate::source::Span;
use std::fmt;

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// What the token is.
    pub kind: TokenKind,
    /// Where it came from in the original file.
    pub span: Span,
}

/// The kinds of tokens.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    /// An ordinary identifier (`[A-Za-z_][A-Za-z0-9_]*`, not reserved). `_` is an identifier.
    Ident(Box<str>),
    /// An identifier registered as an intrinsic by prefix or namespace (spec §17.2).
    IntrinsicIdent(Box<str>),
    /// A target-library hook `__lib_<name>` (spec §18; out of scope for CUDA, but lexed).
    LibIdent(Box<str>),
    /// A reserved word.
    Keyword(Keyword),
    /// An element-type name (aliases such as `float` already mapped to the canonical type).
    ElemType(ElemType),
    /// A math built-in such as `__sqrt` (spec §18).
    Math(MathFn),
    /// An atomic built-in such as `__atomic_add` (spec §18).
    Atomic(AtomicOp),
    /// A dotted member keyword such as `.at`; the dot is part of the token.
    Dotted(Dotted),
    /// Operators and punctuation.
    Punct(Punct),
    /// An integer literal with its value and C-like type (spec §2.2).
    Int(IntLit),
    /// A floating literal (`1.5` is f64, `1.5f` is f32).
    Float(FloatLit),
    /// A string literal, escapes processed (or raw).
    Str(StrLit),
    /// Text the lexer could not make a token of; it has already reported an error there, so the
    /// parser treats it as a silent syntax error.
    Error,
    /// End of the tileflow text.
    Eof,
}

/// An integer literal's value and type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntLit {
    /// The value. Literals are non-negative as lexed; the parser makes negative literals
    /// (`-5`), which is why the value is signed and wide enough for every `u64`.
    pub value: i128,
    /// The literal's type (s32, s64, u32 or u64).
    pub ty: IntLitType,
}

/// The type of an integer literal (spec §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IntLitType {
    /// `int`: fits in 32 bits signed and has no `ll`.
    S32,
    /// A signed literal too large for s32, or with `ll`.
    S64,
    /// `u`-suffixed, fits in 32 bits, no `ll`.
    U32,
    /// `u`-suffixed, too large for u32 or with `ll`.
    U64,
}

impl IntLitType {
    /// The spec's name of the type (`s32`, …).
    pub fn name(self) -> &'static str {
        match self {
            IntLitType::S32 => "s32",
            IntLitType::S64 => "s64",
            IntLitType::U32 => "u32",
            IntLitType::U64 => "u64",
        }
    }
}

/// A floating literal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloatLit {
    /// The value (infinite for `inf`).
    pub value: f64,
    /// `true` for an `f`/`F` suffix (f32) and for `inf`, `false` for f64.
    pub is_f32: bool,
}

/// A string literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrLit {
    /// The value: for `"…"` with `\n`, `\t`, `\"`, `\\` processed (other escapes kept as
    /// written, spec §2.2); for raw strings the text between the delimiters.
    pub value: String,
    /// Whether it was written as a raw string `R"d(…)d"`.
    pub raw: bool,
}

macro_rules! keywords {
    ($( $(#[$doc:meta])* $variant:ident = $text:literal, )*) => {
        /// Reserved words of tileflow code (Appendix A), except element-type names, math and
        /// atomic built-ins, which have kinds of their own.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Keyword {
            $( $(#[$doc])* #[doc = concat!("`", $text, "`")] $variant, )*
        }

        impl Keyword {
            /// The keyword as written.
            pub fn as_str(self) -> &'static str {
                match self { $( Keyword::$variant => $text, )* }
            }

            /// The keyword spelt `text`, if any (`group-4` is lexed separately).
            pub fn lookup(text: &str) -> Option<Keyword> {
                match text { $( $text => Some(Keyword::$variant), )* _ => None }
            }

            /// Every keyword with its spelling.
            pub const SPELLINGS: &'static [(&'static str, Keyword)] =
                &[ $( ($text, Keyword::$variant), )* ];
        }
    };
}

keywords! {
    Co = "__co__",
    Auto = "auto",
    Mdspan = "mdspan",
    Ituple = "ituple",
    Stream = "stream",
    Event = "event",
    Frag = "frag",
    Print = "print",
    Println = "println",
    Mutable = "mutable",
    Int = "int",
    Bool = "bool",
    Void = "void",
    True = "true",
    False = "false",
    Inf = "inf",
    Nullptr = "nullptr",
    Dma = "dma",
    Tma = "tma",
    Swap = "swap",
    Rotate = "rotate",
    Mma = "mma",
    Assert = "assert",
    Sync = "sync",
    Barrier = "barrier",
    Fence = "fence",
    Cooperative = "cooperative",
    Trigger = "trigger",
    If = "if",
    Else = "else",
    Inthreads = "inthreads",
    Parallel = "parallel",
    By = "by",
    With = "with",
    In = "in",
    Foreach = "foreach",
    Apply = "apply",
    ReduceMax = "reduce_max",
    ReduceSum = "reduce_sum",
    AllReduceSum = "all_reduce_sum",
    Copy = "copy",
    Wait = "wait",
    Call = "call",
    Select = "select",
    Return = "return",
    Where = "where",
    While = "while",
    Break = "break",
    Continue = "continue",
    Yield = "yield",
    Vectorize = "vectorize",
    Unroll = "unroll",
    UnderscoreAsm = "__asm__",
    Asm = "asm",
    Volatile = "volatile",
    Goto = "goto",
    Cdiv = "cdiv",
    After = "after",
    Local = "local",
    Shared = "shared",
    Global = "global",
    Term = "term",
    Device = "device",
    Cluster = "cluster",
    Block = "block",
    Group4 = "group-4",
    Group = "group",
    Thread = "thread",
    Cpp = "__cpp__",
    To = "__to",
    BarArrive = "__bar_arrive",
    BarSync = "__bar_sync",
    PragmaPrefix = "__pragma_croq_intrinsic_prefix",
    PragmaNamespace = "__pragma_croq_intrinsic_namespace",
}

macro_rules! name_enum {
    ($(#[$meta:meta])* $name:ident { $( $variant:ident = $text:literal $(| $alias:literal)*, )* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( #[doc = concat!("`", $text, "`")] $variant, )*
        }

        impl $name {
            /// The canonical spelling.
            pub fn as_str(self) -> &'static str {
                match self { $( $name::$variant => $text, )* }
            }

            /// The value spelt `text` (canonical name or alias), if any.
            pub fn lookup(text: &str) -> Option<$name> {
                match text { $( $text $(| $alias)* => Some($name::$variant), )* _ => None }
            }

            /// Every spelling (canonical names and aliases) with its value.
            pub const SPELLINGS: &'static [(&'static str, $name)] =
                &[ $( ($text, $name::$variant), $( ($alias, $name::$variant), )* )* ];
        }
    };
}

name_enum! {
    /// Element ("fundamental") types (spec §5.1). Aliases map to the canonical type:
    /// `double`→f64, `float`→f32, `half`→f16, `bfp16`→bf16, `f8`→f8_e4m3.
    ElemType {
        F64 = "f64" | "double",
        Tf32 = "tf32",
        F32 = "f32" | "float",
        F16 = "f16" | "half",
        Bf16 = "bf16" | "bfp16",
        F8E4m3 = "f8_e4m3" | "f8",
        F8E5m2 = "f8_e5m2",
        F8Ue4m3 = "f8_ue4m3",
        F8Ue8m0 = "f8_ue8m0",
        F6E2m3 = "f6_e2m3",
        F6E3m2 = "f6_e3m2",
        F4E2m1 = "f4_e2m1",
        S64 = "s64",
        U64 = "u64",
        S32 = "s32",
        U32 = "u32",
        S16 = "s16",
        U16 = "u16",
        S8 = "s8",
        U8 = "u8",
        S6 = "s6",
        U6 = "u6",
        S4 = "s4",
        U4 = "u4",
        S2 = "s2",
        U2 = "u2",
        U1 = "u1",
        Bin1 = "bin1",
    }
}

name_enum! {
    /// Math built-ins (spec §18).
    MathFn {
        Sqrt = "__sqrt",
        Rsqrt = "__rsqrt",
        Exp = "__exp",
        Exp2f = "__exp2f",
        Expm1 = "__expm1",
        Log = "__log",
        Log1p = "__log1p",
        Pow = "__pow",
        Sin = "__sin",
        Cos = "__cos",
        Tan = "__tan",
        Asin = "__asin",
        Acos = "__acos",
        Atan = "__atan",
        Atan2 = "__atan2",
        Sinh = "__sinh",
        Cosh = "__cosh",
        Tanh = "__tanh",
        Ceil = "__ceil",
        Floor = "__floor",
        Round = "__round",
        Fabs = "__fabs",
        Sign = "__sign",
        Isfinite = "__isfinite",
        Max = "__max",
        Min = "__min",
        Fmaf = "__fmaf",
        FrcpRn = "__frcp_rn",
        Gelu = "__gelu",
        Sigmoid = "__sigmoid",
        Softplus = "__softplus",
        Alignup = "__alignup",
        Aligndown = "__aligndown",
    }
}

/// The Choreo built-in that a C/C++/CUDA function name stands for (`fmaxf`, `max` → `__max`,
/// `sqrtf` → `__sqrt`, `abs` → `__fabs`, `atomicAdd` → `__atomic_add`), for the hint given
/// when such a name is called in tileflow code. `None` for other names.
pub fn choreo_spelling(name: &str) -> Option<&'static str> {
    let atomic = match name {
        "atomicAdd" => Some(AtomicOp::Add),
        "atomicSub" => Some(AtomicOp::Sub),
        "atomicExch" => Some(AtomicOp::Exch),
        "atomicMin" => Some(AtomicOp::Min),
        "atomicMax" => Some(AtomicOp::Max),
        "atomicAnd" => Some(AtomicOp::And),
        "atomicOr" => Some(AtomicOp::Or),
        "atomicXor" => Some(AtomicOp::Xor),
        "atomicCAS" => Some(AtomicOp::Cas),
        _ => None,
    };
    if let Some(op) = atomic {
        return Some(op.as_str());
    }
    let math = |n: &str| MathFn::lookup(&format!("__{n}"));
    let found = match name {
        _ if name.starts_with('_') => None,
        "abs" | "fabs" | "fabsf" => Some(MathFn::Fabs),
        "max" | "fmax" | "fmaxf" => Some(MathFn::Max),
        "min" | "fmin" | "fminf" => Some(MathFn::Min),
        "fma" => Some(MathFn::Fmaf),
        "exp2" => Some(MathFn::Exp2f),
        // `expf`, `sqrtf`, … (the float variants) and `exp`, `sqrt`, … themselves.
        _ => math(name).or_else(|| name.strip_suffix('f').and_then(math)),
    };
    found.map(MathFn::as_str)
}

name_enum! {
    /// Atomic built-ins (spec §18).
    AtomicOp {
        Add = "__atomic_add",
        Sub = "__atomic_sub",
        Exch = "__atomic_exch",
        Min = "__atomic_min",
        Max = "__atomic_max",
        And = "__atomic_and",
        Or = "__atomic_or",
        Xor = "__atomic_xor",
        Cas = "__atomic_cas",
    }
}

name_enum! {
    /// Dotted member keywords (spec §2.2): the token includes the leading dot.
    Dotted {
        At = ".at",
        Span = ".span",
        SpanAs = ".span_as",
        Data = ".data",
        Mdata = ".mdata",
        View = ".view",
        From = ".from",
        Chunkat = ".chunkat",
        Chunk = ".chunk",
        Subspan = ".subspan",
        Modspan = ".modspan",
        Step = ".step",
        Stride = ".stride",
        Sqz = ".sqz",
        Copy = ".copy",
        Load = ".load",
        Store = ".store",
        Pad = ".pad",
        Transp = ".transp",
        Swiz = ".swiz",
        Swizzle = ".swizzle",
        Sp = ".sp",
        Zfill = ".zfill",
        Promote = ".promote",
        Multicast = ".multicast",
        EvictFirst = ".evict_first",
        EvictLast = ".evict_last",
        Any = ".any",
        Async = ".async",
        Fill = ".fill",
        Row = ".row",
        Col = ".col",
        Scale = ".scale",
        Mask = ".mask",
        Map = ".map",
        Remap = ".remap",
    }
}

name_enum! {
    /// Operators and punctuation (spec §2.2). Compound assignments `+=` … `%=` are single tokens.
    Punct {
        Assign = "=",
        Plus = "+",
        Minus = "-",
        Star = "*",
        Slash = "/",
        Percent = "%",
        PlusPlus = "++",
        MinusMinus = "--",
        PlusAssign = "+=",
        MinusAssign = "-=",
        StarAssign = "*=",
        SlashAssign = "/=",
        PercentAssign = "%=",
        LParen = "(",
        RParen = ")",
        LBrace = "{",
        RBrace = "}",
        LBracket = "[",
        RBracket = "]",
        AttrOpen = "[[",
        Comma = ",",
        Semi = ";",
        Colon = ":",
        ColonColon = "::",
        Dot = ".",
        Lt = "<",
        Gt = ">",
        EqEq = "==",
        NotEq = "!=",
        Le = "<=",
        Ge = ">=",
        AndAnd = "&&",
        OrOr = "||",
        Bang = "!",
        Shl = "<<",
        Shr = ">>",
        Question = "?",
        QuestionQuestion = "??",
        FatArrow = "=>",
        SwapArrow = "<->",
        Pipe = "|",
        Amp = "&",
        Caret = "^",
        Tilde = "~",
        Hash = "#",
        HashPlus = "#+",
        HashMinus = "#-",
        HashStar = "#*",
        HashSlash = "#/",
        HashPercent = "#%",
    }
}

impl TokenKind {
    /// Whether this is the given punctuation.
    pub fn is_punct(&self, p: Punct) -> bool {
        matches!(self, TokenKind::Punct(q) if *q == p)
    }

    /// Whether this is the given keyword.
    pub fn is_keyword(&self, k: Keyword) -> bool {
        matches!(self, TokenKind::Keyword(q) if *q == k)
    }

    /// Whether this is the given dotted keyword.
    pub fn is_dotted(&self, d: Dotted) -> bool {
        matches!(self, TokenKind::Dotted(q) if *q == d)
    }
}

impl fmt::Display for TokenKind {
    /// A short description for diagnostics: `'x'`, `identifier 'foo'`, `end of input`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenKind::Ident(s) => write!(f, "identifier '{s}'"),
            TokenKind::IntrinsicIdent(s) => write!(f, "intrinsic '{s}'"),
            TokenKind::LibIdent(s) => write!(f, "library call '{s}'"),
            TokenKind::Keyword(k) => write!(f, "'{}'", k.as_str()),
            TokenKind::ElemType(t) => write!(f, "'{}'", t.as_str()),
            TokenKind::Math(m) => write!(f, "'{}'", m.as_str()),
            TokenKind::Atomic(a) => write!(f, "'{}'", a.as_str()),
            TokenKind::Dotted(d) => write!(f, "'{}'", d.as_str()),
            TokenKind::Punct(p) => write!(f, "'{}'", p.as_str()),
            TokenKind::Int(i) => write!(f, "integer literal {}", i.value),
            TokenKind::Float(_) => write!(f, "floating literal"),
            TokenKind::Str(_) => write!(f, "string literal"),
            TokenKind::Error => write!(f, "invalid token"),
            TokenKind::Eof => write!(f, "end of input"),
        }
    }
}
