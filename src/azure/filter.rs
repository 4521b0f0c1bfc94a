//! The Table service `$filter` language (PROTOCOL.md §7.3, an OData v3 subset).
//!
//! This module owns parsing filters into an [`Expr`] with precise, helpful errors,
//! printing an [`Expr`] back as a canonical filter the service accepts, classifying a
//! filter by how the service will execute it ([`QueryClass`]), and small builders
//! ([`quote_string`], [`point_filter`], ...) so callers never hand-escape literals.

use std::fmt;

/// The service rejects filters with more discrete comparisons than this.
pub const MAX_COMPARISONS: usize = 15;

/// Nesting of parentheses and `not`; bounds recursion so hostile input cannot overflow the stack.
pub const MAX_DEPTH: usize = 64;

/// A parse error: `position` is a 0-based char offset into the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    pub position: usize,
    pub message: String,
}

impl FilterError {
    fn new(position: usize, message: impl Into<String>) -> Self {
        FilterError {
            position,
            message: message.into(),
        }
    }

    /// 1-based column, as shown to users.
    pub fn column(&self) -> usize {
        self.position + 1
    }
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "filter: at column {}: {}", self.column(), self.message)
    }
}

impl std::error::Error for FilterError {}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
        }
    }

    /// The operator that keeps the meaning when the operands swap sides (`1 lt X` ≡ `X gt 1`).
    pub fn flipped(self) -> CmpOp {
        match self {
            CmpOp::Eq => CmpOp::Eq,
            CmpOp::Ne => CmpOp::Ne,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
        }
    }

    /// gt/ge/lt/le: the operators that bound a key range.
    pub fn is_range(self) -> bool {
        matches!(self, CmpOp::Gt | CmpOp::Ge | CmpOp::Lt | CmpOp::Le)
    }

    fn from_keyword(word: &str) -> Option<CmpOp> {
        Some(match word {
            "eq" => CmpOp::Eq,
            "ne" => CmpOp::Ne,
            "gt" => CmpOp::Gt,
            "ge" => CmpOp::Ge,
            "lt" => CmpOp::Lt,
            "le" => CmpOp::Le,
            _ => return None,
        })
    }
}

impl fmt::Display for CmpOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A typed constant. `DateTime` and `Guid` keep the text exactly as written (already validated).
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    String(String),
    Int32(i32),
    Int64(i64),
    Double(f64),
    Bool(bool),
    DateTime(String),
    Guid(String),
    Binary(Vec<u8>),
}

impl Literal {
    /// The EDM type name, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Literal::String(_) => "string",
            Literal::Int32(_) => "Int32",
            Literal::Int64(_) => "Int64",
            Literal::Double(_) => "Double",
            Literal::Bool(_) => "Boolean",
            Literal::DateTime(_) => "DateTime",
            Literal::Guid(_) => "Guid",
            Literal::Binary(_) => "Binary",
        }
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::String(s) => f.write_str(&quote_string(s)),
            Literal::Int32(n) => write!(f, "{n}"),
            Literal::Int64(n) => write!(f, "{n}L"),
            Literal::Double(x) => f.write_str(&format_double(*x)),
            Literal::Bool(b) => write!(f, "{b}"),
            Literal::DateTime(s) => write!(f, "datetime'{s}'"),
            Literal::Guid(s) => write!(f, "guid'{s}'"),
            Literal::Binary(bytes) => {
                f.write_str("X'")?;
                for b in bytes {
                    write!(f, "{b:02x}")?;
                }
                f.write_str("'")
            }
        }
    }
}

/// Shortest round-tripping form that still reads as a Double: always has a `.` in the
/// mantissa, because `2` would be an Int32 and OData's exponent form wants `1.0e16`.
/// NaN and infinities have no filter literal; they print as Rust does and will not re-parse.
fn format_double(x: f64) -> String {
    let s = format!("{x:?}");
    if !x.is_finite() || s.contains('.') {
        return s;
    }
    match s.find('e') {
        Some(at) => {
            let (mantissa, exponent) = s.split_at(at);
            format!("{mantissa}.0{exponent}")
        }
        None => format!("{s}.0"),
    }
}

/// A parsed filter. Comparisons are normalised to `property op literal`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Cmp {
        property: String,
        op: CmpOp,
        literal: Literal,
    },
}

impl Expr {
    fn precedence(&self) -> u8 {
        match self {
            Expr::Or(..) => 1,
            Expr::And(..) => 2,
            Expr::Not(_) | Expr::Cmp { .. } => 3,
        }
    }

    /// Number of comparisons, the quantity the service limits.
    pub fn comparison_count(&self) -> usize {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => a.comparison_count() + b.comparison_count(),
            Expr::Not(e) => e.comparison_count(),
            Expr::Cmp { .. } => 1,
        }
    }
}

/// Writes a child of a binary operator, parenthesised when needed so the parse is the same
/// tree: lower precedence always, equal precedence on the right (the parser is left-associative).
fn write_child(f: &mut fmt::Formatter<'_>, child: &Expr, parent: u8, right: bool) -> fmt::Result {
    let p = child.precedence();
    if p < parent || (right && p == parent) {
        write!(f, "({child})")
    } else {
        write!(f, "{child}")
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Or(a, b) => {
                write_child(f, a, 1, false)?;
                f.write_str(" or ")?;
                write_child(f, b, 1, true)
            }
            Expr::And(a, b) => {
                write_child(f, a, 2, false)?;
                f.write_str(" and ")?;
                write_child(f, b, 2, true)
            }
            // Always parenthesised: in full OData `not` binds tighter than `eq`, so
            // `not X eq 1` would mean `(not X) eq 1` to a strict parser.
            Expr::Not(e) => write!(f, "not ({e})"),
            Expr::Cmp {
                property,
                op,
                literal,
            } => write!(f, "{property} {op} {literal}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Builders

/// `'...'` with embedded `'` doubled, the only escape Table filters have.
pub fn quote_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// `PartitionKey eq '<pk>' and RowKey eq '<rk>'`.
pub fn point_filter(pk: &str, rk: &str) -> String {
    format!(
        "PartitionKey eq {} and RowKey eq {}",
        quote_string(pk),
        quote_string(rk)
    )
}

/// `PartitionKey eq '<pk>'`.
pub fn partition_filter(pk: &str) -> String {
    format!("PartitionKey eq {}", quote_string(pk))
}

/// `P ge 'abc' and P lt 'abd'`: the service has no `startswith`, so a prefix is a range.
/// None when there is no upper bound to build (empty prefix, or only `char::MAX`).
/// The bound increments the last char by code point; that matches the service's ordinal
/// ordering except across the UTF-16 surrogate range, which prefixes rarely straddle.
pub fn prefix_filter(property: &str, prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = u32::from(last) + 1;
        if (0xD800..=0xDFFF).contains(&next) {
            next = 0xE000;
        }
        if let Some(next) = char::from_u32(next) {
            chars.push(next);
            let upper: String = chars.into_iter().collect();
            return Some(format!(
                "{property} ge {} and {property} lt {}",
                quote_string(prefix),
                quote_string(&upper)
            ));
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Classification

/// How the service will execute a query, from cheapest to most expensive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueryClass {
    /// PartitionKey and RowKey both pinned.
    Point,
    /// One partition, no usable RowKey bound.
    PartitionScan,
    /// Within one partition, a RowKey range.
    RowRange,
    /// Several partitions: a PartitionKey range, or an `or` whose branches each pin partitions.
    PartitionRange,
    /// No PartitionKey constraint the service can use: every partition is read.
    TableScan,
}

impl QueryClass {
    pub fn label(&self) -> &'static str {
        match self {
            QueryClass::Point => "POINT",
            QueryClass::PartitionScan => "PARTITION",
            QueryClass::RowRange => "ROW RANGE",
            QueryClass::PartitionRange => "PARTITION RANGE",
            QueryClass::TableScan => "TABLE SCAN",
        }
    }
}

impl fmt::Display for QueryClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// What an expression says about the set of partitions it can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pin<'a> {
    /// Any partition may match.
    Unbounded,
    /// Exactly this partition.
    One(&'a str),
    /// A bounded set of partitions (a range, or several pinned branches).
    Many,
}

fn pin(expr: &Expr) -> Pin<'_> {
    match expr {
        Expr::Cmp {
            property,
            op,
            literal: Literal::String(value),
        } if property == "PartitionKey" => match op {
            CmpOp::Eq => Pin::One(value),
            op if op.is_range() => Pin::Many,
            _ => Pin::Unbounded,
        },
        // Negations are not used by the service to narrow partitions.
        Expr::Cmp { .. } | Expr::Not(_) => Pin::Unbounded,
        // A conjunction is as narrow as its narrowest side (contradictory pins keep the first).
        Expr::And(a, b) => match (pin(a), pin(b)) {
            (Pin::One(x), _) | (_, Pin::One(x)) => Pin::One(x),
            (Pin::Many, _) | (_, Pin::Many) => Pin::Many,
            _ => Pin::Unbounded,
        },
        // A disjunction needs every branch pinned; or-ing pinned branches is a multi-partition
        // lookup (PartitionRange), not a full scan, unless they all name the same partition.
        Expr::Or(a, b) => match (pin(a), pin(b)) {
            (Pin::One(x), Pin::One(y)) if x == y => Pin::One(x),
            (Pin::Unbounded, _) | (_, Pin::Unbounded) => Pin::Unbounded,
            _ => Pin::Many,
        },
    }
}

/// The top-level `and` chain, flattened.
fn conjuncts(expr: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match e {
            Expr::And(a, b) => {
                stack.push(b);
                stack.push(a);
            }
            other => out.push(other),
        }
    }
    out
}

fn is_key_cmp(e: &Expr, key: &str, pred: impl Fn(CmpOp) -> bool) -> bool {
    matches!(e, Expr::Cmp { property, op, literal: Literal::String(_) } if property == key && pred(*op))
}

/// Classifies a filter; `None` (no filter) reads the whole table.
pub fn classify(expr: Option<&Expr>) -> QueryClass {
    let Some(expr) = expr else {
        return QueryClass::TableScan;
    };
    match pin(expr) {
        Pin::Unbounded => QueryClass::TableScan,
        Pin::Many => QueryClass::PartitionRange,
        Pin::One(_) => {
            let terms = conjuncts(expr);
            if terms
                .iter()
                .any(|t| is_key_cmp(t, "RowKey", |op| op == CmpOp::Eq))
            {
                QueryClass::Point
            } else if terms
                .iter()
                .any(|t| is_key_cmp(t, "RowKey", CmpOp::is_range))
            {
                QueryClass::RowRange
            } else {
                QueryClass::PartitionScan
            }
        }
    }
}

/// The PartitionKey when the filter can only match that one partition (`PartitionKey eq 'x'`
/// and-ed with anything, or an `or` whose branches all pin the same partition).
pub fn single_partition(expr: &Expr) -> Option<&str> {
    match pin(expr) {
        Pin::One(pk) => Some(pk),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Tokenizer

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    LParen,
    RParen,
    /// Identifier-shaped: a property name or a keyword.
    Word(String),
    Literal(Literal),
    /// A lexical error; the tokenizer stops here so the parser reports the leftmost problem.
    Invalid(String),
    End,
}

#[derive(Debug, Clone, PartialEq)]
struct Token {
    tok: Tok,
    pos: usize,
}

const KEYWORDS: [&str; 11] = [
    "and", "or", "not", "eq", "ne", "gt", "ge", "lt", "le", "true", "false",
];

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

struct Lexer {
    chars: Vec<char>,
    i: usize,
    out: Vec<Token>,
}

impl Lexer {
    fn at(&self, i: usize) -> Option<char> {
        self.chars.get(i).copied()
    }

    fn push(&mut self, tok: Tok, pos: usize) {
        self.out.push(Token { tok, pos });
    }

    fn run(mut self) -> Vec<Token> {
        loop {
            while self.at(self.i).is_some_and(char::is_whitespace) {
                self.i += 1;
            }
            let start = self.i;
            let Some(c) = self.at(start) else {
                self.push(Tok::End, start);
                return self.out;
            };
            let next = self.at(start + 1);
            let tok = match c {
                '(' => {
                    self.i += 1;
                    Ok(Tok::LParen)
                }
                ')' => {
                    self.i += 1;
                    Ok(Tok::RParen)
                }
                '\'' => self.string().map(|s| Tok::Literal(Literal::String(s))),
                '"' => Err(self.double_quoted()),
                c if c.is_ascii_digit() => self.number(),
                '-' if next.is_some_and(|n| n.is_ascii_digit()) => self.number(),
                c if is_ident_start(c) => self.word(),
                '=' | '!' | '&' | '|' | '<' | '>' => Err(self.symbol(c, next)),
                c => Err(format!(
                    "expected a property name, literal, keyword or parenthesis, found unexpected character '{c}'"
                )),
            };
            match tok {
                Ok(tok) => self.push(tok, start),
                Err(message) => {
                    self.push(Tok::Invalid(message), start);
                    return self.out;
                }
            }
        }
    }

    /// Reads a `'...'` body starting at the opening quote; `''` is an embedded quote.
    fn string(&mut self) -> Result<String, String> {
        let open = self.i;
        self.i += 1;
        let mut s = String::new();
        loop {
            match self.at(self.i) {
                None => {
                    return Err(format!(
                        "unterminated string: expected a closing ' for the string opened at column {}, found end of input (write '' for a quote inside a string)",
                        open + 1
                    ))
                }
                Some('\'') if self.at(self.i + 1) == Some('\'') => {
                    s.push('\'');
                    self.i += 2;
                }
                Some('\'') => {
                    self.i += 1;
                    return Ok(s);
                }
                Some(c) => {
                    s.push(c);
                    self.i += 1;
                }
            }
        }
    }

    fn double_quoted(&self) -> String {
        let body: Option<String> = {
            let rest = self.chars.get(self.i + 1..).unwrap_or(&[]);
            rest.iter()
                .position(|&c| c == '"')
                .and_then(|end| rest.get(..end))
                .map(|b| b.iter().collect())
        };
        match body {
            Some(b) => format!(
                "expected a literal, found a double-quoted string: strings in filters use single quotes, write {} instead of \"{b}\"",
                quote_string(&b)
            ),
            None => "expected a literal, found '\"': strings in filters use single quotes, e.g. Name eq 'x'".to_string(),
        }
    }

    fn symbol(&self, c: char, next: Option<char>) -> String {
        let (found, use_) = match (c, next) {
            ('=', Some('=')) => ("==", "eq"),
            ('!', Some('=')) => ("!=", "ne"),
            ('&', Some('&')) => ("&&", "and"),
            ('|', Some('|')) => ("||", "or"),
            ('<', Some('=')) => ("<=", "le"),
            ('>', Some('=')) => (">=", "ge"),
            ('<', Some('>')) => ("<>", "ne"),
            ('=', _) => ("=", "eq"),
            ('!', _) => ("!", "not"),
            ('&', _) => ("&", "and"),
            ('|', _) => ("|", "or"),
            ('<', _) => ("<", "lt"),
            _ => (">", "gt"),
        };
        format!("expected a keyword operator, found '{found}': Table filters spell it '{use_}'")
    }

    fn digits(&mut self) {
        while self.at(self.i).is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn number(&mut self) -> Result<Tok, String> {
        let start = self.i;
        if self.at(self.i) == Some('-') {
            self.i += 1;
        }
        self.digits();
        let mut is_double = false;
        if self.at(self.i) == Some('.') {
            if !self.at(self.i + 1).is_some_and(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "expected a digit after '.' in number '{}', found {}",
                    self.text(start, self.i + 1),
                    self.describe_char(self.i + 1)
                ));
            }
            self.i += 1;
            self.digits();
            is_double = true;
        }
        if matches!(self.at(self.i), Some('e' | 'E')) {
            let sign = usize::from(matches!(self.at(self.i + 1), Some('+' | '-')));
            if self
                .at(self.i + 1 + sign)
                .is_some_and(|c| c.is_ascii_digit())
            {
                self.i += 1 + sign;
                self.digits();
                is_double = true;
            }
        }
        let text = self.text(start, self.i);
        let int64 = self.at(self.i) == Some('L');
        if int64 {
            if is_double {
                return Err(format!(
                    "expected a whole number before the Int64 suffix L, found '{text}L' (Doubles take no suffix)"
                ));
            }
            self.i += 1;
        }
        if let Some(c) = self.at(self.i).filter(|&c| is_ident_char(c) || c == '.') {
            let hint = if c == 'l' {
                " (the Int64 suffix is an upper-case L)"
            } else {
                ""
            };
            return Err(format!(
                "expected a space or operator after number '{text}', found '{c}'{hint}"
            ));
        }
        if is_double {
            return match text.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(Tok::Literal(Literal::Double(x))),
                _ => Err(format!(
                    "expected a Double within ±1.7e308, found '{text}', which is out of range"
                )),
            };
        }
        if int64 {
            return text
                .parse::<i64>()
                .map(|n| Tok::Literal(Literal::Int64(n)))
                .map_err(|_| {
                    format!(
                        "expected an Int64 between {} and {}, found {text}L, which is out of range",
                        i64::MIN,
                        i64::MAX
                    )
                });
        }
        match (text.parse::<i32>(), text.parse::<i64>()) {
            (Ok(n), _) => Ok(Tok::Literal(Literal::Int32(n))),
            (Err(_), Ok(_)) => Err(format!(
                "expected an Int32 between {} and {}, found {text}, which is out of range: add the L suffix for an Int64 ({text}L)",
                i32::MIN,
                i32::MAX
            )),
            (Err(_), Err(_)) => Err(format!(
                "expected a number within Int64 range, found {text}, which is too large even for an Int64 (use a Double, e.g. {text}.0)"
            )),
        }
    }

    fn text(&self, from: usize, to: usize) -> String {
        self.chars
            .get(from..to.min(self.chars.len()))
            .unwrap_or(&[])
            .iter()
            .collect()
    }

    fn describe_char(&self, i: usize) -> String {
        match self.at(i) {
            Some(c) => format!("'{c}'"),
            None => "end of input".to_string(),
        }
    }

    fn word(&mut self) -> Result<Tok, String> {
        let start = self.i;
        while self.at(self.i).is_some_and(is_ident_char) {
            self.i += 1;
        }
        let word = self.text(start, self.i);
        if self.at(self.i) != Some('\'') {
            return Ok(Tok::Word(word));
        }
        let canonical = match word.as_str() {
            "datetime" | "guid" | "X" | "binary" => None,
            w => match w.to_ascii_lowercase().as_str() {
                "datetime" => Some("datetime"),
                "guid" => Some("guid"),
                "x" => Some("X"),
                "binary" => Some("binary"),
                // Not a literal prefix: a word followed by a string; the parser explains.
                _ => return Ok(Tok::Word(word)),
            },
        };
        if let Some(canonical) = canonical {
            return Err(format!(
                "expected a typed literal prefix, found {word}'...': prefixes are case-sensitive, write {canonical}'...'"
            ));
        }
        let body = self.string()?;
        match word.as_str() {
            "datetime" => validate_datetime(&body)
                .map(|()| Tok::Literal(Literal::DateTime(body.clone())))
                .map_err(|why| {
                    format!(
                        "expected a datetime like datetime'2024-01-01T00:00:00Z' (yyyy-mm-ddThh:mm:ss[.fffffff][Z]), found datetime'{body}': {why}"
                    )
                }),
            "guid" => {
                if is_guid(&body) {
                    Ok(Tok::Literal(Literal::Guid(body)))
                } else {
                    Err(format!(
                        "expected a guid of 8-4-4-4-12 hex digits like guid'4185404a-5818-48c3-b9be-f217df0dba6f', found guid'{body}'"
                    ))
                }
            }
            _ => decode_hex(&body)
                .map(|bytes| Tok::Literal(Literal::Binary(bytes)))
                .ok_or_else(|| {
                    format!(
                        "expected an even number of hex digits in a binary literal like X'0a1b', found {word}'{body}'"
                    )
                }),
        }
    }
}

/// Reads exactly `n` ASCII digits at `*at`.
fn fixed_digits(b: &[u8], at: &mut usize, n: usize) -> Option<u32> {
    let slice = b.get(*at..*at + n)?;
    let mut v = 0u32;
    for &d in slice {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(d - b'0');
    }
    *at += n;
    Some(v)
}

fn expect_byte(b: &[u8], at: &mut usize, want: u8) -> Option<()> {
    (b.get(*at) == Some(&want)).then(|| *at += 1)
}

/// `yyyy-mm-ddThh:mm:ss[.f{1,7}][Z]`; the Table service keeps 100 ns precision.
fn validate_datetime(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut at = 0;
    let shape = "it does not have the shape yyyy-mm-ddThh:mm:ss";
    let year = fixed_digits(b, &mut at, 4).ok_or(shape)?;
    expect_byte(b, &mut at, b'-').ok_or(shape)?;
    let month = fixed_digits(b, &mut at, 2).ok_or(shape)?;
    expect_byte(b, &mut at, b'-').ok_or(shape)?;
    let day = fixed_digits(b, &mut at, 2).ok_or(shape)?;
    expect_byte(b, &mut at, b'T').ok_or(shape)?;
    let hour = fixed_digits(b, &mut at, 2).ok_or(shape)?;
    expect_byte(b, &mut at, b':').ok_or(shape)?;
    let minute = fixed_digits(b, &mut at, 2).ok_or(shape)?;
    expect_byte(b, &mut at, b':').ok_or(shape)?;
    let second = fixed_digits(b, &mut at, 2).ok_or(shape)?;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let digits = b
            .get(at..)
            .unwrap_or(&[])
            .iter()
            .take_while(|d| d.is_ascii_digit())
            .count();
        if !(1..=7).contains(&digits) {
            return Err(format!(
                "fractional seconds need 1 to 7 digits, found {digits}"
            ));
        }
        at += digits;
    }
    if b.get(at) == Some(&b'Z') {
        at += 1;
    }
    if at != b.len() {
        return Err("unexpected text after the time (only a trailing Z is allowed)".to_string());
    }
    if year == 0 || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return Err("the date is out of range".to_string());
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err("the time is out of range".to_string());
    }
    Ok(())
}

fn is_guid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|c| c.is_ascii_hexdigit()))
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    b.chunks(2)
        .map(|pair| {
            let hi = char::from(*pair.first()?).to_digit(16)?;
            let lo = char::from(*pair.get(1)?).to_digit(16)?;
            u8::try_from(hi * 16 + lo).ok()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Parser

enum Operand {
    Property(String),
    Literal(Literal),
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
    end: Token,
    comparisons: usize,
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::LParen => "'('".to_string(),
        Tok::RParen => "')'".to_string(),
        Tok::Word(w) if KEYWORDS.contains(&w.as_str()) => format!("keyword '{w}'"),
        Tok::Word(w) => format!("'{w}'"),
        Tok::Literal(l) => format!("{} {l}", l.type_name()),
        Tok::Invalid(_) => "invalid input".to_string(),
        Tok::End => "end of input".to_string(),
    }
}

impl Parser {
    fn new(toks: Vec<Token>, len: usize) -> Self {
        Parser {
            toks,
            i: 0,
            end: Token {
                tok: Tok::End,
                pos: len,
            },
            comparisons: 0,
        }
    }

    fn peek_at(&self, i: usize) -> &Token {
        self.toks.get(i).unwrap_or(&self.end)
    }

    /// The current token, surfacing a lexical error once the parser reaches it.
    fn cur(&self) -> Result<&Token, FilterError> {
        let t = self.peek_at(self.i);
        match &t.tok {
            Tok::Invalid(message) => Err(FilterError::new(t.pos, message.clone())),
            _ => Ok(t),
        }
    }

    fn advance(&mut self) {
        if self.i < self.toks.len() {
            self.i += 1;
        }
    }

    fn at_word(&self, word: &str) -> Result<bool, FilterError> {
        Ok(matches!(&self.cur()?.tok, Tok::Word(w) if w == word))
    }

    fn parse_or(&mut self, depth: usize) -> Result<Expr, FilterError> {
        let mut left = self.parse_and(depth)?;
        while self.at_word("or")? {
            self.advance();
            let right = self.parse_and(depth)?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn parse_and(&mut self, depth: usize) -> Result<Expr, FilterError> {
        let mut left = self.parse_unary(depth)?;
        while self.at_word("and")? {
            self.advance();
            let right = self.parse_unary(depth)?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn parse_unary(&mut self, depth: usize) -> Result<Expr, FilterError> {
        let t = self.cur()?;
        if depth > MAX_DEPTH {
            return Err(FilterError::new(
                t.pos,
                format!("expected at most {MAX_DEPTH} levels of parentheses and 'not', found deeper nesting: simplify the filter"),
            ));
        }
        match &t.tok {
            Tok::Word(w) if w == "not" => {
                self.advance();
                Ok(Expr::Not(Box::new(self.parse_unary(depth + 1)?)))
            }
            Tok::LParen => {
                let open = t.pos;
                self.advance();
                let inner = self.parse_or(depth + 1)?;
                let t = self.cur()?;
                match &t.tok {
                    Tok::RParen => {
                        self.advance();
                        Ok(inner)
                    }
                    other => Err(FilterError::new(
                        t.pos,
                        format!(
                            "expected ')' to close the '(' at column {}, or 'and'/'or', found {}{}",
                            open + 1,
                            describe(other),
                            lowercase_hint(other)
                        ),
                    )),
                }
            }
            _ => self.parse_comparison(),
        }
    }

    fn parse_comparison(&mut self) -> Result<Expr, FilterError> {
        let start = self.cur()?.pos;
        let left = self.operand(None)?;
        let t = self.cur()?;
        let op = match &t.tok {
            Tok::Word(w) => CmpOp::from_keyword(w),
            _ => None,
        };
        let Some(op) = op else {
            return Err(self.missing_operator(&left));
        };
        self.advance();
        let right_pos = self.cur()?.pos;
        let right = self.operand(Some((op, matches!(left, Operand::Property(_)))))?;
        let expr = match (left, right) {
            (Operand::Property(property), Operand::Literal(literal)) => Expr::Cmp {
                property,
                op,
                literal,
            },
            (Operand::Literal(literal), Operand::Property(property)) => Expr::Cmp {
                property,
                op: op.flipped(),
                literal,
            },
            (Operand::Property(a), Operand::Property(b)) => {
                let hint = match b.to_ascii_lowercase().as_str() {
                    "true" | "false" => format!(
                        ": literals are lower-case, write {}",
                        b.to_ascii_lowercase()
                    ),
                    "null" => ": Table filters have no null literal".to_string(),
                    _ => format!(": if '{b}' is a value, quote it as {}", quote_string(&b)),
                };
                return Err(FilterError::new(
                    right_pos,
                    format!("expected a literal after '{op}', found property '{b}': comparing two properties ('{a}' and '{b}') is not supported{hint}"),
                ));
            }
            (Operand::Literal(_), Operand::Literal(b)) => {
                return Err(FilterError::new(
                    start,
                    format!("expected a property name on one side of '{op}', found two constants (the right is {} {b}): one side must be a property", b.type_name()),
                ));
            }
        };
        self.comparisons += 1;
        if self.comparisons > MAX_COMPARISONS {
            // Fail fast so hostile inputs cannot build huge trees; count the rest cheaply.
            let total = self
                .toks
                .iter()
                .filter(|t| matches!(&t.tok, Tok::Word(w) if CmpOp::from_keyword(w).is_some()))
                .count()
                .max(self.comparisons);
            return Err(FilterError::new(
                start,
                format!("expected at most {MAX_COMPARISONS} comparisons per filter (the service limit), found {total}: split the query or narrow it by PartitionKey"),
            ));
        }
        Ok(expr)
    }

    /// Reads a property name or literal. `after` is the operator already read and whether the
    /// left side was a property, which decides what the message says was expected.
    fn operand(&mut self, after: Option<(CmpOp, bool)>) -> Result<Operand, FilterError> {
        let expected = match after {
            None => "a property name or literal".to_string(),
            Some((op, true)) => format!("a literal after '{op}'"),
            Some((op, false)) => format!("a property name after '{op}'"),
        };
        let t = self.cur()?;
        let pos = t.pos;
        let err = |found: String| {
            Err(FilterError::new(
                pos,
                format!("expected {expected}, found {found}"),
            ))
        };
        let operand = match &t.tok {
            Tok::Literal(l) => Operand::Literal(l.clone()),
            Tok::Word(w) if w == "true" => Operand::Literal(Literal::Bool(true)),
            Tok::Word(w) if w == "false" => Operand::Literal(Literal::Bool(false)),
            Tok::Word(w) if w == "null" => {
                return err("'null': Table filters have no null literal (an entity without the property never matches a comparison)".to_string());
            }
            Tok::Word(w) if KEYWORDS.contains(&w.as_str()) => return err(format!("keyword '{w}'")),
            Tok::Word(w) if w.eq_ignore_ascii_case("not") => {
                return err(format!("'{w}': keywords are lower-case, write 'not'"));
            }
            Tok::Word(w) if matches!(self.peek_at(self.i + 1).tok, Tok::LParen) => {
                return err(format!(
                    "a call to '{w}(': Table filters support no functions; for a prefix match write e.g. Name ge 'A' and Name lt 'B'"
                ));
            }
            Tok::Word(w) => Operand::Property(w.clone()),
            other => return err(describe(other)),
        };
        self.advance();
        Ok(operand)
    }

    fn missing_operator(&self, left: &Operand) -> FilterError {
        let t = self.peek_at(self.i);
        let found = describe(&t.tok);
        let ops = "a comparison operator (eq, ne, gt, ge, lt, le)";
        let message = match (&t.tok, left) {
            (Tok::Word(w), _) if CmpOp::from_keyword(&w.to_ascii_lowercase()).is_some() => format!(
                "expected {ops}, found '{w}': keywords are lower-case, write '{}'",
                w.to_ascii_lowercase()
            ),
            (Tok::End | Tok::RParen | Tok::Word(_), Operand::Property(p))
                if matches!(&t.tok, Tok::End | Tok::RParen)
                    || matches!(&t.tok, Tok::Word(w) if matches!(w.to_ascii_lowercase().as_str(), "and" | "or")) =>
            {
                format!("expected {ops} after '{p}', found {found}: a bare property is not a condition in Table filters, write {p} eq true")
            }
            (Tok::Literal(Literal::String(_)), Operand::Property(p)) => format!(
                "expected {ops} after '{p}', found {found} (property names are not quoted and literals need an operator before them)"
            ),
            (_, Operand::Property(p)) => format!("expected {ops} after '{p}', found {found}"),
            (_, Operand::Literal(l)) => format!("expected {ops} after {} {l}, found {found}", l.type_name()),
        };
        FilterError::new(t.pos, message)
    }
}

/// A hint when an upper/mixed-case keyword sits where a lower-case one was probably meant.
fn lowercase_hint(tok: &Tok) -> String {
    match tok {
        Tok::Word(w)
            if !KEYWORDS.contains(&w.as_str())
                && KEYWORDS.contains(&w.to_ascii_lowercase().as_str()) =>
        {
            format!(
                ": keywords are lower-case, write '{}'",
                w.to_ascii_lowercase()
            )
        }
        _ => String::new(),
    }
}

/// Parses a `$filter` expression (PROTOCOL.md §7.3). Never panics.
pub fn parse(input: &str) -> Result<Expr, FilterError> {
    let chars: Vec<char> = input.chars().collect();
    let len = chars.len();
    let toks = Lexer {
        chars,
        i: 0,
        out: Vec::new(),
    }
    .run();
    let mut p = Parser::new(toks, len);
    if let Tok::End = p.cur()?.tok {
        return Err(FilterError::new(
            len,
            "expected a comparison such as PartitionKey eq 'p', found an empty filter",
        ));
    }
    let expr = p.parse_or(0)?;
    let t = p.cur()?;
    match &t.tok {
        Tok::End => Ok(expr),
        Tok::RParen => Err(FilterError::new(
            t.pos,
            "expected 'and', 'or' or end of input, found ')' with no matching '('",
        )),
        other => Err(FilterError::new(
            t.pos,
            format!(
                "expected 'and', 'or' or end of input, found {}{}",
                describe(other),
                lowercase_hint(other)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(property: &str, op: CmpOp, literal: Literal) -> Expr {
        Expr::Cmp {
            property: property.to_string(),
            op,
            literal,
        }
    }

    fn s(v: &str) -> Literal {
        Literal::String(v.to_string())
    }

    fn lit(input: &str) -> Literal {
        match parse(&format!("P eq {input}")) {
            Ok(Expr::Cmp { literal, .. }) => literal,
            other => panic!("{input}: {other:?}"),
        }
    }

    fn err(input: &str) -> FilterError {
        match parse(input) {
            Err(e) => e,
            Ok(e) => panic!("{input} parsed as {e:?}"),
        }
    }

    fn class(input: &str) -> QueryClass {
        classify(Some(&parse(input).unwrap()))
    }

    #[test]
    fn parses_a_simple_string_comparison() {
        assert_eq!(
            parse("PartitionKey eq 'abc'").unwrap(),
            cmp("PartitionKey", CmpOp::Eq, s("abc"))
        );
    }

    #[test]
    fn parses_every_operator() {
        for (word, op) in [
            ("eq", CmpOp::Eq),
            ("ne", CmpOp::Ne),
            ("gt", CmpOp::Gt),
            ("ge", CmpOp::Ge),
            ("lt", CmpOp::Lt),
            ("le", CmpOp::Le),
        ] {
            assert_eq!(
                parse(&format!("A {word} 1")).unwrap(),
                cmp("A", op, Literal::Int32(1))
            );
        }
    }

    #[test]
    fn parses_string_literals_with_doubled_quotes() {
        assert_eq!(lit("'it''s'"), s("it's"));
        assert_eq!(lit("''''"), s("'"));
        assert_eq!(lit("''"), s(""));
        assert_eq!(lit("'héllo wörld ✓'"), s("héllo wörld ✓"));
        assert_eq!(lit("'a and b eq 1'"), s("a and b eq 1"));
    }

    #[test]
    fn parses_int32_including_bounds() {
        assert_eq!(lit("123"), Literal::Int32(123));
        assert_eq!(lit("-5"), Literal::Int32(-5));
        assert_eq!(lit("2147483647"), Literal::Int32(i32::MAX));
        assert_eq!(lit("-2147483648"), Literal::Int32(i32::MIN));
    }

    #[test]
    fn rejects_int32_overflow_suggesting_the_l_suffix() {
        let e = err("Count gt 2147483648");
        assert_eq!(e.position, 9);
        assert!(e.message.contains("Int32"), "{e}");
        assert!(e.message.contains("2147483648L"), "{e}");
        let e = err("Count gt 99999999999999999999");
        assert!(e.message.contains("too large even for an Int64"), "{e}");
    }

    #[test]
    fn parses_int64_with_l_suffix() {
        assert_eq!(lit("123L"), Literal::Int64(123));
        assert_eq!(lit("-9223372036854775808L"), Literal::Int64(i64::MIN));
        assert!(err("A eq 9223372036854775808L").message.contains("Int64"));
        assert!(err("A eq 5l").message.contains("upper-case L"));
        assert!(err("A eq 1.5L").message.contains("whole number"));
    }

    #[test]
    fn parses_doubles_in_decimal_and_exponent_form() {
        assert_eq!(lit("1.5"), Literal::Double(1.5));
        assert_eq!(lit("2.0"), Literal::Double(2.0));
        assert_eq!(lit("1e10"), Literal::Double(1e10));
        assert_eq!(lit("-0.5"), Literal::Double(-0.5));
        assert_eq!(lit("1.5E-3"), Literal::Double(1.5e-3));
        assert_eq!(lit("2e+3"), Literal::Double(2000.0));
        assert!(err("A eq 1e999").message.contains("out of range"));
        assert!(err("A eq 1.").message.contains("digit after '.'"));
        assert!(err("A eq 12abc").message.contains("after number '12'"));
    }

    #[test]
    fn parses_booleans() {
        assert_eq!(lit("true"), Literal::Bool(true));
        assert_eq!(lit("false"), Literal::Bool(false));
    }

    #[test]
    fn parses_and_validates_datetimes() {
        for ok in [
            "2024-01-01T00:00:00Z",
            "2024-01-01T00:00:00",
            "2013-08-02T17:37:43.9004348Z",
            "2013-08-02T17:37:43.9Z",
        ] {
            assert_eq!(
                lit(&format!("datetime'{ok}'")),
                Literal::DateTime(ok.into())
            );
        }
        for bad in [
            "2024-01-01",
            "2024-01-01 00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00.12345678Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00Zjunk",
            "2024-1-01T00:00:00Z",
            "",
        ] {
            let e = err(&format!("When gt datetime'{bad}'"));
            assert_eq!(e.position, 8, "{bad}");
            assert!(e.message.contains("expected a datetime"), "{e}");
        }
        assert!(err("W gt DateTime'2024-01-01T00:00:00Z'")
            .message
            .contains("write datetime'...'"));
    }

    #[test]
    fn parses_and_validates_guids() {
        let g = "4185404a-5818-48C3-b9be-f217df0dba6f";
        assert_eq!(lit(&format!("guid'{g}'")), Literal::Guid(g.into()));
        for bad in [
            "4185404a-5818-48c3-b9be-f217df0dba6",
            "4185404a581848c3b9bef217df0dba6f",
            "4185404g-5818-48c3-b9be-f217df0dba6f",
        ] {
            assert!(err(&format!("Id eq guid'{bad}'"))
                .message
                .contains("8-4-4-4-12"));
        }
    }

    #[test]
    fn parses_binary_in_both_spellings_and_rejects_odd_hex() {
        assert_eq!(lit("X'0a1B'"), Literal::Binary(vec![0x0a, 0x1b]));
        assert_eq!(lit("binary'ff00'"), Literal::Binary(vec![0xff, 0x00]));
        assert_eq!(lit("X''"), Literal::Binary(vec![]));
        assert!(err("B eq X'abc'").message.contains("even number"));
        assert!(err("B eq X'zz'").message.contains("hex"));
        assert!(err("B eq x'00'").message.contains("write X'...'"));
    }

    #[test]
    fn gives_and_higher_precedence_than_or() {
        let a = cmp("a", CmpOp::Eq, Literal::Int32(1));
        let b = cmp("b", CmpOp::Eq, Literal::Int32(2));
        let c = cmp("c", CmpOp::Eq, Literal::Int32(3));
        assert_eq!(
            parse("a eq 1 or b eq 2 and c eq 3").unwrap(),
            Expr::Or(
                Box::new(a.clone()),
                Box::new(Expr::And(Box::new(b.clone()), Box::new(c.clone())))
            )
        );
        assert_eq!(
            parse("(a eq 1 or b eq 2) and c eq 3").unwrap(),
            Expr::And(
                Box::new(Expr::Or(Box::new(a.clone()), Box::new(b.clone()))),
                Box::new(c.clone())
            )
        );
        assert_eq!(
            parse("a eq 1 or b eq 2 or c eq 3").unwrap(),
            Expr::Or(
                Box::new(Expr::Or(Box::new(a.clone()), Box::new(b.clone()))),
                Box::new(c)
            )
        );
        assert_eq!(
            parse("not a eq 1 and b eq 2").unwrap(),
            Expr::And(
                Box::new(Expr::Not(Box::new(a.clone()))),
                Box::new(b.clone())
            )
        );
        assert_eq!(
            parse("not (a eq 1 and b eq 2)").unwrap(),
            Expr::Not(Box::new(Expr::And(Box::new(a), Box::new(b))))
        );
    }

    #[test]
    fn normalises_a_constant_on_the_left_by_flipping_the_operator() {
        assert_eq!(
            parse("'1' eq RowKey").unwrap(),
            cmp("RowKey", CmpOp::Eq, s("1"))
        );
        assert_eq!(
            parse("5 lt Count").unwrap(),
            cmp("Count", CmpOp::Gt, Literal::Int32(5))
        );
        assert_eq!(
            parse("5 ge Count").unwrap(),
            cmp("Count", CmpOp::Le, Literal::Int32(5))
        );
    }

    #[test]
    fn rejects_comparing_two_constants_or_two_properties() {
        let e = err("1 eq 1");
        assert_eq!(e.position, 0);
        assert!(e.message.contains("two constants"), "{e}");
        let e = err("A eq B");
        assert_eq!(e.position, 5);
        assert!(e.message.contains("two properties"), "{e}");
        assert!(e.message.contains("'B'"), "{e}");
        assert!(err("A eq True").message.contains("write true"));
    }

    #[test]
    fn reports_a_missing_literal_with_column_and_found_end_of_input() {
        assert_eq!(
            err("PartitionKey eq ").to_string(),
            "filter: at column 17: expected a literal after 'eq', found end of input"
        );
        assert_eq!(
            err("'x' eq ").message,
            "expected a property name after 'eq', found end of input"
        );
    }

    #[test]
    fn rejects_double_quoted_strings_with_a_hint() {
        let e = err("Name eq \"x\"");
        assert_eq!(e.position, 8);
        assert!(e.message.contains("single quotes"), "{e}");
        assert!(e.message.contains("'x'"), "{e}");
        assert!(err("Name eq \"x").message.contains("single quotes"));
    }

    #[test]
    fn rejects_c_style_operators_suggesting_keywords() {
        for (input, word) in [
            ("A == 1", "'eq'"),
            ("A = 1", "'eq'"),
            ("A != 1", "'ne'"),
            ("A eq 1 && B eq 2", "'and'"),
            ("A eq 1 || B eq 2", "'or'"),
            ("A >= 1", "'ge'"),
            ("A < 1", "'lt'"),
            ("!(A eq 1)", "'not'"),
        ] {
            let e = err(input);
            assert!(e.message.contains(word), "{input}: {e}");
        }
        assert_eq!(err("A == 1").position, 2);
    }

    #[test]
    fn rejects_upper_case_keywords_saying_they_are_lower_case() {
        for (input, pos, word) in [
            ("A eq 1 AND B eq 2", 7, "'and'"),
            ("A EQ 1", 2, "'eq'"),
            ("A eq 1 Or B eq 2", 7, "'or'"),
            ("NOT (A eq 1)", 0, "'not'"),
            ("(A eq 1 AND B eq 2)", 8, "'and'"),
        ] {
            let e = err(input);
            assert_eq!(e.position, pos, "{input}");
            assert!(e.message.contains("lower-case"), "{input}: {e}");
            assert!(e.message.contains(word), "{input}: {e}");
        }
    }

    #[test]
    fn rejects_unterminated_strings_pointing_at_the_opening_quote() {
        let e = err("A eq 1 and Name eq 'abc");
        assert_eq!(e.position, 19);
        assert!(e.message.contains("unterminated string"), "{e}");
        assert!(e.message.contains("column 20"), "{e}");
    }

    #[test]
    fn rejects_null_explaining_there_is_no_null_literal() {
        let e = err("Name eq null");
        assert_eq!(e.position, 8);
        assert!(e.message.contains("no null literal"), "{e}");
        assert!(err("Name ne NULL").message.contains("no null literal"));
    }

    #[test]
    fn rejects_function_calls_suggesting_a_prefix_range() {
        let e = err("startswith(Name, 'A')");
        assert_eq!(e.position, 0);
        assert!(e.message.contains("no functions"), "{e}");
        assert!(e.message.contains("Name ge 'A' and Name lt 'B'"), "{e}");
        assert!(err("A eq 1 and substringof('x', B) eq true")
            .message
            .contains("no functions"));
    }

    #[test]
    fn rejects_bare_boolean_properties_suggesting_eq_true() {
        for input in [
            "IsActive",
            "not IsActive",
            "IsActive and A eq 1",
            "(IsActive)",
        ] {
            let e = err(input);
            assert!(e.message.contains("IsActive eq true"), "{input}: {e}");
        }
    }

    #[test]
    fn allows_fifteen_comparisons_and_rejects_sixteen_naming_the_count() {
        let terms = |n: usize| {
            (0..n)
                .map(|i| format!("A{i} eq {i}"))
                .collect::<Vec<_>>()
                .join(" and ")
        };
        assert_eq!(parse(&terms(15)).unwrap().comparison_count(), 15);
        let e = err(&terms(16));
        assert!(e.message.contains("found 16"), "{e}");
        assert!(e.message.contains("at most 15"), "{e}");
        assert!(err(&terms(40)).message.contains("found 40"));
    }

    #[test]
    fn rejects_nesting_deeper_than_the_limit() {
        let nested = |n: usize| format!("{}A eq 1{}", "(".repeat(n), ")".repeat(n));
        assert!(parse(&nested(MAX_DEPTH)).is_ok());
        assert!(err(&nested(MAX_DEPTH + 1)).message.contains("levels"));
        assert!(err(&nested(100_000)).message.contains("levels"));
        assert!(err(&format!("{}A eq 1", "not ".repeat(100_000)))
            .message
            .contains("levels"));
    }

    #[test]
    fn reports_unbalanced_parentheses() {
        let e = err("(A eq 1");
        assert_eq!(e.position, 7);
        assert!(e.message.contains("expected ')'"), "{e}");
        assert!(e.message.contains("column 1"), "{e}");
        let e = err("A eq 1)");
        assert!(e.message.contains("no matching '('"), "{e}");
        assert!(err("()").message.contains("found ')'"));
    }

    #[test]
    fn reports_empty_and_blank_filters() {
        assert!(err("").message.contains("empty filter"));
        assert_eq!(err("   ").position, 3);
    }

    #[test]
    fn reports_positions_in_chars_not_bytes() {
        let e = err("Nämé eq 'ü' and ");
        assert_eq!(e.position, 16);
    }

    #[test]
    fn accepts_unicode_property_names_and_underscores() {
        assert_eq!(
            parse("_Näme2 eq 1").unwrap(),
            cmp("_Näme2", CmpOp::Eq, Literal::Int32(1))
        );
    }

    #[test]
    fn display_prints_canonical_filters() {
        let e = parse("(A eq 'it''s')and(not B gt 1.0e3 or C le 5L)").unwrap();
        assert_eq!(
            e.to_string(),
            "A eq 'it''s' and (not (B gt 1000.0) or C le 5L)"
        );
        assert_eq!(parse("1 lt A").unwrap().to_string(), "A gt 1");
        assert_eq!(lit("X'0A1b'").to_string(), "X'0a1b'");
        assert_eq!(lit("1e16").to_string(), "1.0e16");
        assert_eq!(lit("-0.0").to_string(), "-0.0");
    }

    #[test]
    fn display_round_trips_through_parse() {
        for input in [
            "PartitionKey eq 'p' and RowKey eq 'r'",
            "a eq 1 or b eq 2 and c eq 3",
            "(a eq 1 or b eq 2) and (c eq 3 or d eq 4)",
            "not (a eq 1 and b eq 2) or not c eq 'x'''",
            "A eq 2147483647 and B eq -9223372036854775808L and C eq 1e-7 and D eq 1.7976931348623157e308",
            "A eq true and B ne false and C lt datetime'2024-01-01T00:00:00.1234567Z'",
            "A eq guid'4185404a-5818-48c3-b9be-f217df0dba6f' or B eq binary'00ff'",
            "'x' ge Name and 3 gt N",
        ] {
            let e = parse(input).unwrap();
            assert_eq!(parse(&e.to_string()).unwrap(), e, "{input} -> {e}");
        }
        // Right-nested trees (not produced by the parser) still round-trip.
        let a = cmp("a", CmpOp::Eq, Literal::Int32(1));
        let right_nested = Expr::Or(
            Box::new(a.clone()),
            Box::new(Expr::Or(Box::new(a.clone()), Box::new(a))),
        );
        assert_eq!(right_nested.to_string(), "a eq 1 or (a eq 1 or a eq 1)");
        assert_eq!(parse(&right_nested.to_string()).unwrap(), right_nested);
    }

    #[test]
    fn classifies_point_queries() {
        assert_eq!(
            class("PartitionKey eq 'p' and RowKey eq 'r'"),
            QueryClass::Point
        );
        assert_eq!(
            class("RowKey eq 'r' and PartitionKey eq 'p'"),
            QueryClass::Point
        );
        assert_eq!(
            class("PartitionKey eq 'p' and Age gt 3 and RowKey eq 'r'"),
            QueryClass::Point
        );
        assert_eq!(class(&point_filter("a'b", "c")), QueryClass::Point);
    }

    #[test]
    fn classifies_row_ranges_within_a_partition() {
        assert_eq!(
            class("PartitionKey eq 'p' and RowKey ge '1' and RowKey lt '5'"),
            QueryClass::RowRange
        );
        assert_eq!(
            class("'p' eq PartitionKey and '5' gt RowKey"),
            QueryClass::RowRange
        );
    }

    #[test]
    fn classifies_partition_scans() {
        assert_eq!(class("PartitionKey eq 'p'"), QueryClass::PartitionScan);
        assert_eq!(
            class("PartitionKey eq 'p' and Name eq 'x'"),
            QueryClass::PartitionScan
        );
        assert_eq!(
            class("PartitionKey eq 'p' and RowKey ne 'x'"),
            QueryClass::PartitionScan
        );
        assert_eq!(
            class("PartitionKey eq 'p' and (RowKey eq '1' or RowKey eq '2')"),
            QueryClass::PartitionScan
        );
        assert_eq!(
            class("(PartitionKey eq 'p' and RowKey eq '1') or (PartitionKey eq 'p' and RowKey eq '2')"),
            QueryClass::PartitionScan
        );
    }

    #[test]
    fn classifies_partition_ranges() {
        assert_eq!(
            class("PartitionKey ge 'a' and PartitionKey lt 'b'"),
            QueryClass::PartitionRange
        );
        assert_eq!(
            class("PartitionKey gt 'a' and RowKey eq 'r'"),
            QueryClass::PartitionRange
        );
        assert_eq!(
            class("(PartitionKey eq 'a' and RowKey eq '1') or (PartitionKey eq 'b' and RowKey eq '2')"),
            QueryClass::PartitionRange
        );
    }

    #[test]
    fn classifies_table_scans() {
        assert_eq!(classify(None), QueryClass::TableScan);
        assert_eq!(class("RowKey eq 'r'"), QueryClass::TableScan);
        assert_eq!(class("Name eq 'x'"), QueryClass::TableScan);
        assert_eq!(class("PartitionKey ne 'p'"), QueryClass::TableScan);
        assert_eq!(class("not (PartitionKey eq 'p')"), QueryClass::TableScan);
        assert_eq!(
            class("PartitionKey eq 'p' or Name eq 'x'"),
            QueryClass::TableScan
        );
        assert_eq!(class("PartitionKey eq 5"), QueryClass::TableScan);
    }

    #[test]
    fn labels_each_class_for_the_status_bar() {
        assert_eq!(QueryClass::Point.label(), "POINT");
        assert_eq!(QueryClass::PartitionScan.label(), "PARTITION");
        assert_eq!(QueryClass::RowRange.label(), "ROW RANGE");
        assert_eq!(QueryClass::PartitionRange.label(), "PARTITION RANGE");
        assert_eq!(QueryClass::TableScan.to_string(), "TABLE SCAN");
    }

    #[test]
    fn single_partition_finds_the_pinned_partition_key() {
        let sp = |input: &str| single_partition(&parse(input).unwrap()).map(str::to_string);
        assert_eq!(sp("PartitionKey eq 'p'"), Some("p".into()));
        assert_eq!(
            sp("A eq 1 and (PartitionKey eq 'it''s' and RowKey gt 'x')"),
            Some("it's".into())
        );
        assert_eq!(
            sp("PartitionKey eq 'p' or PartitionKey eq 'p'"),
            Some("p".into())
        );
        assert_eq!(sp("PartitionKey eq 'p' or PartitionKey eq 'q'"), None);
        assert_eq!(sp("PartitionKey ge 'p'"), None);
        assert_eq!(sp("not (PartitionKey eq 'p')"), None);
        assert_eq!(sp("RowKey eq 'p'"), None);
    }

    #[test]
    fn quote_string_doubles_single_quotes() {
        assert_eq!(quote_string("abc"), "'abc'");
        assert_eq!(quote_string("it's"), "'it''s'");
        assert_eq!(quote_string(""), "''");
        assert_eq!(quote_string("''"), "''''''");
    }

    #[test]
    fn builders_produce_filters_that_parse_back() {
        assert_eq!(
            point_filter("p'1", "r"),
            "PartitionKey eq 'p''1' and RowKey eq 'r'"
        );
        assert_eq!(partition_filter("a'b"), "PartitionKey eq 'a''b'");
        let e = parse(&point_filter("p'1", "r")).unwrap();
        assert_eq!(single_partition(&e), Some("p'1"));
    }

    #[test]
    fn prefix_filter_builds_a_half_open_range() {
        assert_eq!(
            prefix_filter("Name", "ab").as_deref(),
            Some("Name ge 'ab' and Name lt 'ac'")
        );
        assert_eq!(
            prefix_filter("RowKey", "a'").as_deref(),
            Some("RowKey ge 'a''' and RowKey lt 'a('")
        );
        assert_eq!(
            prefix_filter("N", "a\u{D7FF}").as_deref(),
            Some("N ge 'a\u{D7FF}' and N lt 'a\u{E000}'")
        );
        assert_eq!(
            prefix_filter("N", "a\u{10FFFF}").as_deref(),
            Some("N ge 'a\u{10FFFF}' and N lt 'b'")
        );
        assert_eq!(prefix_filter("N", ""), None);
        assert_eq!(prefix_filter("N", "\u{10FFFF}"), None);
        assert!(parse(&prefix_filter("Name", "x").unwrap()).is_ok());
    }

    #[test]
    fn never_panics_on_odd_input() {
        let odd = [
            "",
            " ",
            "\t\n",
            "(",
            ")",
            "((",
            "))",
            "(()",
            "'",
            "''",
            "'''",
            "\"",
            "-",
            "--1",
            "- 1",
            "1",
            "1L",
            "L",
            ".",
            "1.",
            ".5",
            "1e",
            "1e+",
            "A eq 1e",
            "A eq",
            "eq",
            "eq eq eq",
            "and",
            "or or",
            "not",
            "not not",
            "A eq 1 and",
            "A eq 1 or (",
            "datetime'",
            "datetime'2024",
            "guid''",
            "X'",
            "binary'0'",
            "A eq datetime'２０２４-01-01T00:00:00Z'",
            "A eq X'ü0'",
            "🦀 eq 1",
            "A eq '🦀'",
            "Ａ eq 1",
            "A eq 1 🦀",
            "\u{0}",
            "A\u{0}eq 1",
            "A eq ١٢٣",
            "=",
            "==",
            "!",
            "&",
            "|",
            "<>",
            "A eq -",
            "A eq -x",
            "A eq 1 and B eq 'x' or not (C eq 2L and D gt 1.5",
        ];
        for input in odd {
            let _ = parse(input);
        }
        // Random mixes of meaningful fragments; whatever parses must round-trip.
        let fragments = [
            "A",
            "PartitionKey",
            "RowKey",
            " eq ",
            " gt ",
            " and ",
            " or ",
            "not ",
            "(",
            ")",
            "'x'",
            "''",
            "'",
            "1",
            "-",
            "L",
            "2.5",
            "e",
            "true",
            "null",
            " ",
            "datetime'",
            "2024-01-01T00:00:00Z'",
            "X'0a'",
            "\"",
            "==",
            "é",
            "🦀",
            "startswith(",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..20_000 {
            let n = rng.usize(0..12);
            let input: String = (0..n)
                .map(|_| fragments[rng.usize(0..fragments.len())])
                .collect();
            if let Ok(e) = parse(&input) {
                let again = parse(&e.to_string());
                assert_eq!(again.as_ref(), Ok(&e), "{input:?} -> {e}");
                let _ = classify(Some(&e));
                let _ = single_partition(&e);
            }
        }
    }

    fn random_literal(rng: &mut fastrand::Rng) -> Literal {
        match rng.u8(0..8) {
            0 => Literal::String(
                ["", "a", "it's", "''", "é 🦀", "x and y"][rng.usize(0..6)].to_string(),
            ),
            1 => Literal::Int32(rng.i32(..)),
            2 => Literal::Int64(rng.i64(..)),
            3 => Literal::Double(f64::from_bits(rng.u64(..))),
            4 => Literal::Bool(rng.bool()),
            5 => Literal::DateTime("2024-02-29T23:59:59.1234567Z".to_string()),
            6 => Literal::Guid("4185404a-5818-48c3-b9be-f217df0dba6f".to_string()),
            _ => Literal::Binary((0..rng.usize(0..4)).map(|_| rng.u8(..)).collect()),
        }
    }

    fn random_expr(rng: &mut fastrand::Rng, budget: usize) -> Expr {
        let ops = [
            CmpOp::Eq,
            CmpOp::Ne,
            CmpOp::Gt,
            CmpOp::Ge,
            CmpOp::Lt,
            CmpOp::Le,
        ];
        match rng.u8(0..4) {
            0 if budget >= 2 => Expr::Or(
                Box::new(random_expr(rng, budget / 2)),
                Box::new(random_expr(rng, budget - budget / 2)),
            ),
            1 if budget >= 2 => Expr::And(
                Box::new(random_expr(rng, budget / 2)),
                Box::new(random_expr(rng, budget - budget / 2)),
            ),
            2 => Expr::Not(Box::new(random_expr(rng, budget))),
            _ => cmp(
                ["PartitionKey", "RowKey", "A", "_b1"][rng.usize(0..4)],
                ops[rng.usize(0..ops.len())],
                random_literal(rng),
            ),
        }
    }

    #[test]
    fn random_valid_filters_round_trip_and_their_mutations_never_panic() {
        let mut rng = fastrand::Rng::with_seed(11);
        let junk = ['(', ')', '\'', '"', ' ', '-', '.', 'L', 'e', '=', 'é', '🦀'];
        for _ in 0..5_000 {
            let budget = rng.usize(1..=MAX_COMPARISONS);
            let expr = random_expr(&mut rng, budget);
            let text = expr.to_string();
            let finite = !text.contains("NaN") && !text.contains("inf");
            if finite {
                assert_eq!(parse(&text).as_ref(), Ok(&expr), "{text}");
            }
            let mut chars: Vec<char> = text.chars().collect();
            for _ in 0..rng.usize(1..4) {
                let at = rng.usize(0..=chars.len());
                if rng.bool() && at < chars.len() {
                    chars.remove(at);
                } else {
                    chars.insert(at, junk[rng.usize(0..junk.len())]);
                }
            }
            let mutated: String = chars.into_iter().collect();
            if let Ok(e) = parse(&mutated) {
                assert_eq!(parse(&e.to_string()).as_ref(), Ok(&e), "{mutated}");
            }
        }
    }
}
